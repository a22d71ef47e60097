"""The shape of pytorch/examples' distributed/rpc/rl, tiny, on the CPU: an agent (worker0)
with a policy, observers on worker1 and worker2 (rpc.remote) that step an environment whose
states are numpy arrays; an observer calls the agent's ``select_action`` through the agent's
RRef (``rpc_sync`` of a helper with the method passed as a value) with the numpy state, and
reports rewards; the agent runs episodes with ``rref.rpc_async().run_episode(...)`` and
finishes each with local autograd (REINFORCE) and torch.optim.Adam.

    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python rl.py RANK   # RANK 0, 1, 2

The import line of rpc is the only text that differs on torch. Worker 0 prints one JSON line.
"""

import json
import sys

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 - torch's spelling
from torch import nn, optim
from torch.distributions import Categorical

import protoref.rpc as rpc

STEPS = 5


def call_method(method, rref, *args, **kwargs):
    return method(rref.local_value(), *args, **kwargs)


def remote_method(method, rref, *args, **kwargs):
    return rpc.rpc_sync(rref.owner(), call_method, args=[method, rref, *args], kwargs=kwargs)


class Env:
    """A tiny deterministic environment: numpy float32 states of 4 values."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.state = np.zeros(4, dtype=np.float32)

    def reset(self):
        self.state = self.rng.standard_normal(4).astype(np.float32)
        return self.state

    def step(self, action):
        self.state = (self.state * 0.9 + (0.5 if action else -0.5)).astype(np.float32)
        return self.state, float(1.0 - abs(self.state.sum()) / 10)


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.affine = nn.Linear(4, 8)
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        return F.softmax(self.head(F.relu(self.affine(x))), dim=1)


class Observer:
    def __init__(self):
        self.id = rpc.get_worker_info().id
        self.env = Env(self.id)

    def run_episode(self, agent_rref, n_steps):
        state = self.env.reset()
        for _ in range(n_steps):
            action = remote_method(Agent.select_action, agent_rref, self.id, state)
            state, reward = self.env.step(action)
            remote_method(Agent.report_reward, agent_rref, self.id, reward)
        return type(state).__name__


class Agent:
    def __init__(self):
        self.ob_rrefs = [rpc.remote(f"worker{r}", Observer) for r in (1, 2)]
        self.agent_rref = rpc.RRef(self)
        self.policy = Policy()
        self.optimizer = optim.Adam(self.policy.parameters(), lr=1e-2)
        self.saved_log_probs = {r: [] for r in (1, 2)}
        self.rewards = {r: [] for r in (1, 2)}
        torch.manual_seed(1)

    def select_action(self, ob_id, state):
        state = torch.from_numpy(state).float().unsqueeze(0)
        m = Categorical(self.policy(state))
        action = m.sample()
        self.saved_log_probs[ob_id].append(m.log_prob(action))
        return action.item()

    def report_reward(self, ob_id, reward):
        self.rewards[ob_id].append(reward)

    def run_episode(self):
        kinds = []
        for ob_rref in self.ob_rrefs:  # one after the other: the samples' order is fixed
            fut = ob_rref.rpc_async().run_episode(self.agent_rref, STEPS)
            kinds.append(torch.futures.wait_all([fut])[0])
        return kinds

    def finish_episode(self):
        returns, log_probs = [], []
        for r in (1, 2):
            ret, rs = 0.0, []
            for reward in reversed(self.rewards[r]):
                ret = reward + 0.9 * ret
                rs.insert(0, ret)
            returns.extend(rs)
            log_probs.extend(self.saved_log_probs[r])
        returns = torch.tensor(returns)
        loss = -(torch.cat(log_probs) * (returns - returns.mean())).sum()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        total = sum(sum(v) for v in self.rewards.values())
        self.saved_log_probs = {r: [] for r in (1, 2)}
        self.rewards = {r: [] for r in (1, 2)}
        return round(total, 4), round(loss.item(), 4)


def main(rank):
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=3)
    out = {}
    if rank == 0:
        agent = Agent()
        episodes = []
        for _ in range(3):
            kinds = agent.run_episode()
            episodes.append([*agent.finish_episode(), kinds])
        out["episodes"] = episodes
        out["head"] = [round(v, 4) for v in agent.policy.head.weight.reshape(-1)[:4].tolist()]
    rpc.shutdown()
    if rank == 0:
        print(json.dumps(out, sort_keys=True), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]))
