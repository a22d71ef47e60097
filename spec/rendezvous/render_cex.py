#!/usr/bin/env python3
"""Render a TLC 2.15 counterexample of DynamicRendezvous as a markdown step table.

Used for the counterexample tables in docs/rendezvous.md.  Standard library only.

    cd spec/rendezvous
    java -cp <tla2tools.jar> tlc2.TLC -workers 1 -deadlock -metadir /tmp/md-$RANDOM \
         -config MCDynamicRendezvous_lost_update.cfg MCDynamicRendezvous.tla > /tmp/cex.log
    python3 render_cex.py /tmp/cex.log

One row per state: the action (TLC's label; for specs whose steps TLC labels only
"Action", such as DynamicRendezvousBootstrap, the action is recovered from the state
change), the acting node, the store after the step, and the acting node's pc, op,
ticks to its op deadline, dirty flag, token-current flag and local copy.
"""
import re, sys

def tokenize(s):
    return re.findall(r'<<|>>|\|->|:>|@@|"[^"]*"|-?\d+|[A-Za-z_][A-Za-z0-9_]*|[\[\]{}(),]', s)

class P:
    def __init__(self, s): self.t = tokenize(s); self.i = 0
    def peek(self): return self.t[self.i] if self.i < len(self.t) else None
    def take(self, e=None):
        x = self.t[self.i]; self.i += 1
        assert e is None or x == e, (e, x, self.t[self.i-5:self.i+5]); return x
    def val(self):
        v = self.atom()
        if self.peek() == ':>':
            d = {}
            self.take(); d[v] = self.val_noat()
            while self.peek() == '@@':
                self.take(); k = self.atom(); self.take(':>'); d[k] = self.val_noat()
            return d
        return v
    def val_noat(self):
        return self.atom()
    def atom(self):
        x = self.take()
        if x == '<<':
            items = []
            while self.peek() != '>>':
                items.append(self.val())
                if self.peek() == ',': self.take()
            self.take('>>'); return {i + 1: v for i, v in enumerate(items)}
        if x == '{':
            items = []
            while self.peek() != '}':
                items.append(self.val())
                if self.peek() == ',': self.take()
            self.take('}'); return frozenset(items)
        if x == '[':
            r = {}
            while self.peek() != ']':
                k = self.take(); self.take('|->'); r[k] = self.val()
                if self.peek() == ',': self.take()
            self.take(']'); return ('rec', tuple(sorted(r.items(), key=lambda kv: kv[0])))
        if x == '(':
            v = self.val(); self.take(')'); return v
        if x.startswith('"'): return x.strip('"')
        if re.fullmatch(r'-?\d+', x): return int(x)
        if x in ('TRUE', 'FALSE'): return x == 'TRUE'
        return x

def rec(v): return dict(v[1]) if isinstance(v, tuple) and v and v[0] == 'rec' else v

def parse_trace(text):
    states = []
    for m in re.finditer(r'^State (\d+): <(\w+)[^\n]*\n(.*?)(?=^State \d+:|^Back to state|\n\n|\Z)', text, re.S | re.M):
        body = m.group(3)
        vars_ = {}
        for vm in re.finditer(r'^/\\ (\w+) = (.*?)(?=^/\\ |\Z)', body, re.S | re.M):
            vars_[vm.group(1)] = P(vm.group(2)).val()
        states.append((int(m.group(1)), m.group(2), vars_))
    back = re.search(r'^Back to state (\d+): <(\w+)', text, re.M)
    return states, (back.group(1), back.group(2)) if back else None

def fmt_state(s):
    if s == 'NoState': return 'NoState'
    s = rec(s)
    parts = s['participants']
    p = ','.join(f"{k}:{v}" for k, v in sorted(parts.items())) if isinstance(parts, dict) else str(parts)
    hb = s['lastHeartbeats']
    h = ','.join(f"{k}:{v}" for k, v in sorted(hb.items())) if isinstance(hb, dict) else str(hb)
    dl = s['deadline']; dl = 'None' if dl == 'NoDeadline' else dl
    flags = ('complete' if s['complete'] else 'open') + (' closed' if s['closed'] else '')
    w = ','.join(map(str, sorted(s['waitList']))); r = ','.join(map(str, sorted(s['redundancyList'])))
    return f"r{s['round']} {flags} P{{{p}}} W{{{w}}} R{{{r}}} dl={dl} hb{{{h}}}"


def infer(p, v, n):
    """Name the DynamicRendezvous action of a step TLC labels only 'Action'."""
    pc0, pc1 = p['pc'][n], v['pc'][n]
    l0, l1 = rec(p['local'][n]), rec(v['local'][n])
    if pc1 == 'crashed': return 'Crash'
    if pc0 == 'idle' and pc1 == 'sync':
        return {'exit': 'NextRendezvous', 'keepalive': 'KeepAliveTimer', 'close': 'SetClosed'}[v['op'][n]]
    if pc1 == 'decide' and pc0 in ('sync', 'sleep'):
        if p['dirty'][n]:
            return 'SyncWriteWon' if v['store'] != p['store'] or p['tokenCurrent'][n] else 'SyncWriteLost'
        return 'SyncCached' if p['fresh'][n] and pc0 == 'sync' and l0 == l1 else 'SyncRead'
    if pc0 == 'decide':
        if pc1 == 'sleep': return 'Delay'
        if pc1 == 'stopped': return 'GracefulExit' if v['result'][n] == 'gracefulExit' else 'ErrorClosed'
        if v['dirty'][n]:
            P0, P1 = set(l0['participants']), set(l1['participants'])
            if n in P1 - P0: return 'AddToParticipants'
            if n in P0 - P1: return 'RemoveFromParticipants'
            if n in l1['waitList'] - l0['waitList']: return 'AddToWaitList'
            if n in l0['waitList'] - l1['waitList']: return 'RemoveFromWaitList'
            if n in l1['redundancyList'] - l0['redundancyList']: return 'AddToRedundancyList'
            if n in l0['redundancyList'] - l1['redundancyList']: return 'RemoveFromRedundancyList'
            if l1['closed'] and not l0['closed']: return 'MarkRendezvousClosed'
            if l1['complete'] and not l0['complete']: return 'MarkRendezvousComplete'
            return 'KeepAlive'
        if v['result'][n] == 'timeout' or (pc1 == 'idle' and p['op'][n] in ('close', 'keepalive') and v['opDl'][n] == 0 and False):
            return 'ErrorTimeout'
        return 'Finish'
    return 'Action'

def main():
    text = open(sys.argv[1]).read()
    states, back = parse_trace(text)
    print("| # | action | node | store after | acting node after (pc, op, opDl, dirty, token current, local copy) |")
    print("|---|---|---|---|---|")
    prev = None
    for num, act, v in states:
        nodes = sorted(v['pc'].keys())
        actor = ''
        if prev is not None and act not in ('Tick', 'FastTick'):
            ch = [n for n in nodes if any(v[x][n] != prev[x][n] for x in ('pc', 'op', 'local', 'dirty', 'opDl', 'result', 'view', 'fresh'))]
            actor = ','.join(map(str, ch))
        node_desc = ''
        if actor and ',' not in actor:
            n = int(actor)
            node_desc = f"{v['pc'][n]}, {v['op'][n]}, {v['opDl'][n]}, {'dirty' if v['dirty'][n] else 'clean'}, {v['tokenCurrent'][n]}, {fmt_state(v['local'][n])}"
            if v['result'][n] != (prev['result'][n] if prev else None) and prev is not None:
                node_desc += f"; result={v['result'][n]}"
        if act == "Action" and prev is not None and all(
                v[x][k] == prev[x][k] for x in ('pc', 'op', 'dirty') for k in nodes):
            act, actor, node_desc = "FastTick", "", ""
        if act == "Action" and prev is not None:
            act = infer(prev, v, int(actor)) if actor and ',' not in actor else "FastTick"
        print(f"| {num} | {act} | {actor} | {fmt_state(v['store'])} | {node_desc} |")
        prev = v
    if back: print(f"\nThen back to state {back[0]} ({back[1]}): the loop repeats forever.")

main()
