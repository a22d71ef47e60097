"""Messages and inputs: one discriminated union, the spec's record shape, NoId as []."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from protoref.ids import GloballyUniqueId as G
from protoref.rref.core import events as ev


def test_message_json_is_the_spec_record() -> None:
    m = ev.PythonCall(
        src="w0", dst="w2", rref=G("w0", 1), owner="w1", fork=G("w0", 3), parent=G("w0", 2)
    )
    data = json.loads(m.model_dump_json())
    assert data == {
        "type": "PYTHON_CALL", "src": "w0", "dst": "w2", "rref": ["w0", 1], "owner": "w1",
        "fork": ["w0", 3], "parent": ["w0", 2], "dup": 0,
    }  # fmt: skip
    assert ev.MESSAGE_ADAPTER.validate_json(m.model_dump_json()) == m


def test_no_parent_is_the_empty_tuple() -> None:
    m = ev.UserDelete(src="w0", dst="w1", rref=G("w0", 1), owner="w1", fork=G("w0", 2))
    assert json.loads(m.model_dump_json())["parent"] == []
    assert ev.MESSAGE_ADAPTER.validate_json(m.model_dump_json()).parent is None


def test_union_covers_spec_message_types() -> None:
    names = {
        ev.MESSAGE_ADAPTER.validate_python(
            {"type": t, "src": "a", "dst": "b", "rref": ["a", 1], "owner": "b", "fork": ["a", 2]}
        ).type
        for t in ev.MSG_TYPES
    }
    assert names == ev.MSG_TYPES
    assert ev.RETRIED < ev.MSG_TYPES


@pytest.mark.parametrize(
    "bad",
    [
        {
            "type": "RREF_ACK",
            "src": "a",
            "dst": "b",
            "rref": ["a", 1],
            "owner": "b",
            "fork": ["a", 2],
            "dup": 3,
        },
        {"type": "NOPE", "src": "a", "dst": "b", "rref": ["a", 1], "owner": "b", "fork": ["a", 2]},
        {
            "type": "RREF_ACK",
            "src": "a",
            "dst": "b",
            "rref": ["a", 1],
            "owner": "b",
            "fork": ["a", 2],
            "x": 1,
        },
    ],
)
def test_bad_messages_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        ev.MESSAGE_ADAPTER.validate_python(bad)


def test_inputs_are_one_union_and_frozen() -> None:
    inp = ev.INPUT_ADAPTER.validate_python({"type": "TO_HERE", "f": ["w0", 2]})
    assert inp == ev.ToHere(f=G("w0", 2))
    with pytest.raises(ValidationError):
        inp.f = G("w0", 3)  # type: ignore[misc]


def test_shutdown_inputs_parse_and_refuse_bad_counts() -> None:
    barrier = ev.INPUT_ADAPTER.validate_python({"type": "WAIT_ALL_WORKERS"})
    assert barrier == ev.WaitAllWorkers(user_calls_in_flight=0)
    destroy = ev.INPUT_ADAPTER.validate_json(
        '{"type": "DESTROY_INSTANCE", "active_calls": 2, "peers_swept": false}'
    )
    assert destroy == ev.DestroyInstance(active_calls=2, peers_swept=False)
    sweep = ev.INPUT_ADAPTER.validate_python({"type": "DEL_ALL_USERS_AND_UNFORKED_OWNERS"})
    assert sweep == ev.DelAllUsersAndUnforkedOwners(force=False)
    for bad in (
        {"type": "WAIT_ALL_WORKERS", "user_calls_in_flight": -1},
        {"type": "DESTROY_INSTANCE", "active_calls": -3},
        {"type": "DEL_ALL_USERS_AND_UNFORKED_OWNERS", "force": True, "extra": 1},
    ):
        with pytest.raises(ValidationError):
            ev.INPUT_ADAPTER.validate_python(bad)


def test_user_call_types_are_the_spec_user_calls() -> None:
    # RRef.tla UserCallTypes: every message type that is not a retried control message or the
    # fork request's RREF_ACK.
    assert ev.MSG_TYPES - ev.RETRIED - {"RREF_ACK"} == ev.USER_CALL_TYPES
