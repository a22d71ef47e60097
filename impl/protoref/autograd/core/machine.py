"""The autograd core: one pure function per DistAutograd.tla action (Reference variant).

``(container, parameters) -> Step``: no I/O, clocks, randomness or logging; an input the spec
does not enable raises :class:`~protoref.errors.ProtocolError` (:class:`NotYetError` when it will be
enabled later) and the container, immutable, is unchanged. The functions live in
:mod:`protoref.autograd.core.forward` (contexts, forward pass, cleanup, crash),
:mod:`protoref.autograd.core.echo` (the Echo backward) and :mod:`protoref.autograd.core.network`
(steps on messages in flight); this module names them all and holds the crosswalk
(:data:`ACTION_TABLE`: spec action -> Python function), which docs/autograd.md shows and a test
holds to the spec's list of actions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, NamedTuple

from protoref.autograd.core.echo import (
    backward_error,
    cleanup_backward_pass,
    complete,
    dist_engine_execute,
    process_backward_ack,
    process_backward_autograd_req,
    process_backward_autograd_resp,
    process_backward_start,
    ready_recv,
    ready_recvs,
    recv_rpc_backward_apply,
)
from protoref.autograd.core.forward import (
    crash,
    deserialize_forward_autograd_resp,
    deserialize_response,
    fetch_stored_value,
    finish_forward_autograd_req,
    nested_send_message_with_autograd,
    new_context,
    new_context_refused,
    peer_died,
    poll_timeout_rpcs,
    process_cleanup_autograd_context_req,
    process_forward_autograd_req,
    release_context,
    release_orphaned_context,
    retrieve_context,
    send_message_with_autograd,
    udf_raises,
)
from protoref.autograd.core.network import crash_network, discard, retry_cleanup
from protoref.autograd.core.transition import NotYetError, Step
from protoref.autograd.trace.args import ACTION_NAMES

__all__ = [
    "ACTION_TABLE",
    "NotYetError",
    "Row",
    "Step",
    "backward_error",
    "cleanup_backward_pass",
    "complete",
    "crash",
    "crash_network",
    "deserialize_forward_autograd_resp",
    "deserialize_response",
    "discard",
    "dist_engine_execute",
    "fetch_stored_value",
    "finish_forward_autograd_req",
    "nested_send_message_with_autograd",
    "new_context",
    "new_context_refused",
    "peer_died",
    "poll_timeout_rpcs",
    "process_backward_ack",
    "process_backward_autograd_req",
    "process_backward_autograd_resp",
    "process_backward_start",
    "process_cleanup_autograd_context_req",
    "process_forward_autograd_req",
    "ready_recv",
    "ready_recvs",
    "recv_rpc_backward_apply",
    "release_context",
    "release_orphaned_context",
    "retrieve_context",
    "retry_cleanup",
    "send_message_with_autograd",
    "udf_raises",
]


class Row(NamedTuple):
    """One crosswalk row: the spec action, the Python function (None: not the Reference's)."""

    action: str
    function: Callable[..., Any] | None
    note: str = ""


#: Spec action -> the function implementing it, in the spec's order.
ACTION_TABLE: Final[tuple[Row, ...]] = tuple(
    Row(name, fn, note)
    for name, fn, note in (
        ("NewContext", new_context, ""),
        ("SendMessageWithAutograd", send_message_with_autograd, ""),
        ("NestedSendMessageWithAutograd", nested_send_message_with_autograd, ""),
        ("ReleaseContext", release_context, ""),
        ("DistEngineExecute", dist_engine_execute, ""),
        ("RetrieveContext", retrieve_context, "the API's backward/get_gradients after release"),
        ("FetchStoredValue", fetch_stored_value, "a UDF returns a value a request stored"),
        ("UdfRaises", udf_raises, "the UDF raised by itself"),
        ("RetryCleanup", retry_cleanup, "the network's (a driver applies it)"),
        ("LoseCleanupMsg", None, "PyTorch only: the Reference retries until acknowledged"),
        ("Crash", crash, "with crash_network for the messages in flight"),
        ("PeerDied", peer_died, "a survivor's failure detector (AutogradNode.peer_died)"),
        ("BackwardError", backward_error, "a backward function raised"),
        ("ProcessForwardAutogradReq", process_forward_autograd_req, ""),
        ("FinishForwardAutogradReq", finish_forward_autograd_req, ""),
        ("DeserializeForwardAutogradResp", deserialize_forward_autograd_resp, ""),
        ("DeserializeResponse", deserialize_response, ""),
        ("PollTimeoutRpcs", poll_timeout_rpcs, "the agent's timeout poller"),
        ("ProcessCleanupAutogradContextReq", process_cleanup_autograd_context_req, ""),
        ("ReleaseOrphanedContext", release_orphaned_context, ""),
        ("Discard", discard, "the agent (a driver applies it)"),
        ("RecvRpcBackwardApply", recv_rpc_backward_apply, ""),
        ("ProcessBackwardAutogradReq", process_backward_autograd_req, ""),
        ("ProcessBackwardAutogradResp", process_backward_autograd_resp, ""),
        ("CleanupBackwardPass", cleanup_backward_pass, ""),
        ("ProcessBackwardStart", process_backward_start, ""),
        ("ProcessBackwardAck", process_backward_ack, ""),
        ("NewContextRefused", new_context_refused, "stuttering: the refusal is traced"),
    )
)

if tuple(r.action for r in ACTION_TABLE) != ACTION_NAMES:  # pragma: no cover - import-time check
    raise ImportError("ACTION_TABLE and the trace's args models name different actions")
