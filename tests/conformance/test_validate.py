"""Trace validation end to end on the Ledger toy protocol: accept, reject at the right event,
explain why, and batch many traces in one TLC run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from support.ledger import GOOD, LEDGER, SPEC_ROOT, event, header, trace
from tracecheck.replay import batches
from tracecheck.replay.batches import chunk_shares, chunks
from tracecheck.replay.validate import validate_files, validate_traces
from tracecheck.traces.load import TraceFormatError, load_trace, peek_trace


def test_good_trace_is_accepted_with_coverage() -> None:
    report = validate_traces([trace(GOOD)], LEDGER, SPEC_ROOT)
    (verdict,) = report.verdicts
    assert verdict.accepted
    assert verdict.matched == 3
    assert report.coverage == {"Deposit": 1, "Receive": 1, "Transfer": 1}
    assert report.uncovered == []
    assert report.tlc_runs == 1


def test_wrong_post_state_is_explained_with_the_allowed_value() -> None:
    bad = trace([*GOOD[:2], event("Receive", "b", 1, 3, a=2)])
    (verdict,) = validate_traces([bad], LEDGER, SPEC_ROOT).verdicts
    assert not verdict.accepted
    assert verdict.rejection is not None
    assert (verdict.rejection.index, verdict.rejection.line) == (3, 4)
    explanation = verdict.explanation
    assert explanation is not None
    (state,) = explanation.frontier
    assert state.enabled
    assert state.state == {"balance": "[a |-> 1, b |-> 0]", "inbox": '{<<"b", 2>>}'}
    (post,) = state.post
    assert (post.field, post.logged, post.possible, post.allowed) == ("balance", "3", False, ["2"])
    assert "post.balance: logged 3, the spec's 2" in explanation.summary


def test_disabled_action_names_the_false_conjunct() -> None:
    # b receives a message nobody sent: the first conjunct of Receive is false.
    bad = trace([GOOD[0], event("Receive", "b", 1, 2, a=2)])
    (verdict,) = validate_traces([bad], LEDGER, SPEC_ROOT).verdicts
    assert verdict.rejection is not None
    assert verdict.rejection.index == 2
    assert verdict.explanation is not None
    (state,) = verdict.explanation.frontier
    assert not state.enabled
    assert state.failed_guard_at == "1"
    assert state.failed_guard == "<<n, a>> \\in inbox"


def test_second_guard_is_found_when_the_first_holds() -> None:
    # Max is 3: depositing 3 twice breaks the second conjunct of Deposit.
    bad = trace([event("Deposit", "a", 1, 3, a=3), event("Deposit", "a", 2, 6, a=3)])
    (verdict,) = validate_traces([bad], LEDGER, SPEC_ROOT).verdicts
    assert verdict.explanation is not None
    (state,) = verdict.explanation.frontier
    assert (state.failed_guard_at, state.failed_guard) == ("2", "balance[n] + a <= Max")


@pytest.mark.parametrize(
    ("events", "index"),
    [
        pytest.param([GOOD[0], GOOD[2]], 2, id="drop-transfer"),
        pytest.param([GOOD[0], GOOD[1], GOOD[1] | {"seq": 3}, GOOD[2]], 3, id="duplicate"),
        pytest.param([GOOD[0], GOOD[2] | {"seq": 1}, GOOD[1] | {"seq": 2}], 2, id="swap-causal"),
        pytest.param(
            [GOOD[0], GOOD[1] | {"args": {"to": "b", "a": 3}}, GOOD[2]], 2, id="change-arg"
        ),
        pytest.param([GOOD[0] | {"post": {"balance": 2}}, GOOD[1], GOOD[2]], 1, id="change-post"),
        pytest.param([GOOD[0], GOOD[1], GOOD[2] | {"args": {"a": 1}}], 3, id="change-recv"),
    ],
)
def test_mutations_are_rejected_at_the_expected_event(
    events: list[dict[str, object]], index: int
) -> None:
    (verdict,) = validate_traces([trace(events)], LEDGER, SPEC_ROOT, explain=False).verdicts
    assert not verdict.accepted
    assert verdict.rejection is not None
    assert verdict.rejection.index == index


def test_independent_events_may_be_reordered() -> None:
    deposits = [event("Deposit", "a", 1, 1, a=1), event("Deposit", "b", 1, 2, a=2)]
    swapped = [deposits[1], deposits[0]]
    report = validate_traces([trace(deposits), trace(swapped)], LEDGER, SPEC_ROOT)
    assert [v.accepted for v in report.verdicts] == [True, True]


def test_batch_runs_one_tlc_for_many_traces_and_explains_only_rejections() -> None:
    bad = trace([GOOD[0], event("Receive", "b", 1, 2, a=2)], source="bad")
    traces = [trace(GOOD, source=f"good{i}") for i in range(5)] + [bad]
    report = validate_traces(traces, LEDGER, SPEC_ROOT)
    assert [v.accepted for v in report.verdicts] == [True] * 5 + [False]
    # simulation accepts the five good traces and stops at the bad one; breadth-first search
    # decides the bad one; one explain run
    assert report.tlc_runs == 3
    assert report.simulated == 5
    assert report.verdicts[-1].explanation is not None
    assert report.verdicts[0].explanation is None
    bfs = validate_traces(traces, LEDGER, SPEC_ROOT, simulate=False)
    assert [v.accepted for v in bfs.verdicts] == [True] * 5 + [False]
    assert (bfs.tlc_runs, bfs.simulated) == (2, 0)  # one batch run, one explain run
    assert bfs.verdicts[-1].rejection == report.verdicts[-1].rejection


def test_traces_after_one_the_simulation_cannot_finish_go_to_breadth_first_search() -> None:
    bad = trace([GOOD[0], event("Receive", "b", 1, 2, a=2)], source="bad")
    late_bad = trace(
        [GOOD[0], GOOD[1], GOOD[1] | {"seq": 3, "lamport": 3}, GOOD[2]], source="late-bad"
    )
    traces = [trace(GOOD, source="good1"), bad, trace(GOOD, source="good2"), late_bad]
    report = validate_traces(traces, LEDGER, SPEC_ROOT, explain=False)
    assert [v.accepted for v in report.verdicts] == [True, False, True, False]
    assert report.simulated == 1  # the walk stops at the first trace it cannot finish
    assert report.tlc_runs == 2
    assert [v.rejection.index for v in report.verdicts if v.rejection] == [2, 3]


def test_a_batch_of_good_traces_needs_only_the_simulation_run() -> None:
    traces = [trace(GOOD, source=f"good{i}") for i in range(3)]
    report = validate_traces(traces, LEDGER, SPEC_ROOT)
    assert report.all_accepted
    assert (report.tlc_runs, report.simulated) == (1, 3)


def test_traces_with_other_constants_get_their_own_batch() -> None:
    small = trace(GOOD, source="max3")
    large = trace(GOOD, source="max5", maximum=5)
    report = validate_traces([small, large], LEDGER, SPEC_ROOT, explain=False)
    assert report.all_accepted
    assert report.tlc_runs == 2


def test_unknown_event_and_missing_args_are_format_errors() -> None:
    with pytest.raises(TraceFormatError, match="'Withdraw' maps to no spec action"):
        validate_traces([trace([event("Withdraw", "a", 1, 0, a=1)])], LEDGER, SPEC_ROOT)
    with pytest.raises(TraceFormatError, match=r"missing \['to'\]"):
        validate_traces([trace([GOOD[0], event("Transfer", "a", 2, 1, a=2)])], LEDGER, SPEC_ROOT)
    with pytest.raises(TraceFormatError, match="float has no TLA"):
        validate_traces([trace([event("Deposit", "a", 1, 1, a=1.5)])], LEDGER, SPEC_ROOT)


# --- compact rendering: logged sets as differences (tracecheck.traces.postdelta) ----------------

#: Ledger with the whole inbox logged after every transfer and receive: a set that grows and
#: shrinks, and that other nodes' steps change between two of a node's events.
INBOX = LEDGER.model_copy(
    update={
        "actions": tuple(
            a
            if a.event == "Deposit"
            else a.model_copy(update={"post": {**a.post, "inbox": "inbox'"}})
            for a in LEDGER.actions
        )
    }
)


def _inbox(*pairs: tuple[str, int]) -> dict[str, object]:
    return {"#set": [list(p) for p in pairs]}


def _inbox_events() -> list[dict[str, object]]:
    """a deposits 10, sends 1, 2, 3, 4 to b; b receives 1, 2, 3 (inbox logged each time)."""
    out = [event("Deposit", "a", 1, 10, a=10)]
    sent: list[tuple[str, int]] = []
    for i, amount in enumerate((1, 2, 3, 4), start=2):
        sent.append(("b", amount))
        step = event("Transfer", "a", i, 10 - sum(a for _, a in sent), to="b", a=amount)
        out.append(step | {"post": step["post"] | {"inbox": _inbox(*sent)}})  # type: ignore[operator]
    got = 0
    for i, amount in enumerate((1, 2, 3), start=1):
        got += amount
        sent.remove(("b", amount))
        step = event("Receive", "b", i, got, a=amount)
        out.append(step | {"post": step["post"] | {"inbox": _inbox(*sent)}})  # type: ignore[operator]
    return out


def test_compact_rendering_logs_growing_sets_as_differences() -> None:
    from tracecheck.replay.tracespec import render_batch  # noqa: PLC0415

    rendered = render_batch([trace(_inbox_events(), maximum=10)], INBOX, compact=True)
    # which post expressions are logged as differences: the data module's TVDelta
    (delta,) = [x for x in rendered.data_module.splitlines() if x.startswith("TVDelta ==")]
    assert "TRUE" in delta
    # the fourth transfer adds one element and removes none
    assert '<<{}, {<<"b", 4>>}>>' in rendered.data_module
    literal = render_batch([trace(_inbox_events(), maximum=10)], INBOX)
    (delta,) = [x for x in literal.data_module.splitlines() if x.startswith("TVDelta ==")]
    assert "TRUE" not in delta
    report = validate_traces([trace(_inbox_events(), maximum=10)], INBOX, SPEC_ROOT)
    assert report.all_accepted


@pytest.mark.parametrize(
    ("index", "inbox"),
    [
        pytest.param(4, _inbox(("b", 1), ("b", 3)), id="element-missing"),
        pytest.param(4, _inbox(("b", 1), ("b", 2), ("b", 3), ("a", 9)), id="element-extra"),
        pytest.param(7, _inbox(("b", 3)), id="receiver-keeps-a-stale-element"),
    ],
)
def test_a_wrong_set_is_rejected_at_its_event_under_compact_rendering(
    index: int, inbox: dict[str, object]
) -> None:
    events = _inbox_events()
    events[index - 1] = events[index - 1] | {
        "post": events[index - 1]["post"] | {"inbox": inbox}  # type: ignore[operator]
    }
    (verdict,) = validate_traces(
        [trace(events, maximum=10)], INBOX, SPEC_ROOT, explain=False
    ).verdicts
    assert verdict.rejection is not None
    assert verdict.rejection.index == index


def _as_deltas(events: list[dict[str, Any]], field: str = "inbox") -> list[dict[str, Any]]:
    """The events with ``field`` logged as a delta from the node's last logged value (schema
    3), as an implementation writes it."""
    last: dict[str, list[Any]] = {}
    out = []
    for e in events:
        post = e["post"]
        if field not in post:
            out.append(e)
            continue
        now, then = post[field]["#set"], last.get(e["node"], [])
        last[e["node"]] = now
        delta = {
            "#add": [x for x in now if x not in then],
            "#del": [x for x in then if x not in now],
        }
        out.append(e | {"post": post | {field: delta}})
    return out


def test_sets_logged_as_deltas_are_checked_as_the_whole_sets_they_stand_for() -> None:
    events = _as_deltas(_inbox_events())
    # b's first receive removes ("b", 1) from the inbox b never logged: the delta from {} says
    # what b's slice is after it, the remaining three
    assert events[5]["post"]["inbox"] == {"#add": [["b", 2], ["b", 3], ["b", 4]], "#del": []}
    assert events[6]["post"]["inbox"] == {"#add": [], "#del": [["b", 2]]}
    report = validate_traces([trace(events, maximum=10)], INBOX, SPEC_ROOT)
    assert report.all_accepted
    from tracecheck.replay.tracespec import render_batch  # noqa: PLC0415

    rendered = render_batch([trace(events, maximum=10)], INBOX, compact=True)
    assert '<<{<<"b", 2>>}, {}>>' in rendered.data_module  # b's second receive, as logged
    # the literal rendering (the explain pass's) writes the rebuilt whole sets
    literal = render_batch([trace(events, maximum=10)], INBOX).data_module
    assert literal == render_batch([trace(_inbox_events(), maximum=10)], INBOX).data_module


@pytest.mark.parametrize(
    ("index", "delta", "logged"),
    [
        pytest.param(4, {"#add": [], "#del": []}, '{<<"b", 1>>, <<"b", 2>>}', id="add-missing"),
        pytest.param(4, {"#add": [["b", 3], ["a", 9]], "#del": []}, None, id="add-extra"),
        pytest.param(
            7, {"#add": [], "#del": []}, '{<<"b", 2>>, <<"b", 3>>, <<"b", 4>>}', id="del-missing"
        ),
    ],
)
def test_a_wrong_delta_is_rejected_at_its_event_and_reported_whole(
    index: int, delta: dict[str, Any], logged: str | None
) -> None:
    events = _as_deltas(_inbox_events())
    events[index - 1] = events[index - 1] | {"post": events[index - 1]["post"] | {"inbox": delta}}
    (verdict,) = validate_traces([trace(events, maximum=10)], INBOX, SPEC_ROOT).verdicts
    assert verdict.rejection is not None
    assert verdict.rejection.index == index
    explanation = verdict.explanation
    assert explanation is not None
    (wrong,) = [p for s in explanation.frontier for p in s.post if not p.possible]
    assert wrong.field == "inbox"
    if logged is not None:  # the logged value as the checker rebuilt it from the deltas
        assert wrong.logged == logged


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        pytest.param({"#add": [{"#set": [1]}], "#del": []}, "must be tag-free", id="tagged"),
        pytest.param(5, "also as a value that is no tag-free set", id="mixed"),
    ],
)
def test_a_delta_that_cannot_be_applied_is_a_format_error(value: object, problem: str) -> None:
    events = _as_deltas(_inbox_events())
    events[2] = events[2] | {"post": events[2]["post"] | {"inbox": value}}
    with pytest.raises(TraceFormatError, match=problem) as caught:
        validate_traces([trace(events, maximum=10)], INBOX, SPEC_ROOT)
    assert caught.value.line == 4  # the header is line 1
    assert "field post.inbox" in str(caught.value)


def test_plan_deltas_refuses_non_sets_and_tagged_elements() -> None:
    from tracecheck.traces.postdelta import plan_deltas  # noqa: PLC0415

    grow = [("n", [("s", {"#set": list(range(k))})]) for k in range(1, 6)]
    assert plan_deltas([grow]).keys == {"s": 1}
    tagged = [("n", [("s", {"#set": [{"#set": list(range(k))}]})]) for k in range(1, 6)]
    assert plan_deltas([tagged]).keys == {}
    mixed = [*grow, ("n", [("s", 3)])]
    assert plan_deltas([mixed]).keys == {}
    one = [("n", [("s", {"#set": [k]})]) for k in range(5)]  # like `delivered`: no gain
    assert plan_deltas([one]).keys == {}


def test_chunks_keep_order_cover_every_trace_and_follow_their_shares() -> None:
    lengths = [5, 1, 1, 3, 2, 2, 6, 1, 4, 2, 3, 1, 5, 2]
    indices = list(range(len(lengths)))
    assert chunks(indices, lengths, size=1000) == [indices]  # fewer events than one chunk
    for size in (6, 8, 12, 19):
        cut = chunks(indices, lengths, size=size)
        assert [i for chunk in cut for i in chunk] == indices
        assert len(cut) == round(sum(lengths) / size)
        sizes = [sum(lengths[i] for i in chunk) for chunk in cut]
        shares = chunk_shares(len(cut))
        assert sum(shares) == pytest.approx(len(cut))
        average = sum(lengths) / len(cut)
        for got, share in zip(sizes, shares, strict=True):
            assert abs(got - share * average) <= 2 * max(lengths), (size, sizes, shares)
    assert chunks([3, 7], lengths, size=1) == [[3], [7]]  # never more chunks than traces
    assert chunk_shares(5) == pytest.approx([0.6, 1.2, 1.2, 1.2, 0.8])


def test_a_batch_cut_into_chunks_gets_the_same_verdicts(monkeypatch: pytest.MonkeyPatch) -> None:
    bad = trace([GOOD[0], event("Receive", "b", 1, 2, a=2)], source="bad")
    late_bad = trace(
        [GOOD[0], GOOD[1], GOOD[1] | {"seq": 3, "lamport": 3}, GOOD[2]], source="late-bad"
    )
    traces = [trace(GOOD, source=f"good{i}") for i in range(4)] + [bad, late_bad]
    whole = validate_traces(traces, LEDGER, SPEC_ROOT, explain=False)
    monkeypatch.setattr(batches, "CHUNK_EVENTS", 6)  # three chunks, the middle one larger
    assert chunks(range(6), [len(t.events) for t in traces]) == [[0, 1], [2, 3, 4], [5]]
    cut = validate_traces(traces, LEDGER, SPEC_ROOT, explain=False)
    assert [v.accepted for v in cut.verdicts] == [True] * 4 + [False, False]
    assert [v.rejection for v in cut.verdicts] == [v.rejection for v in whole.verdicts]
    # each chunk: a simulation run, and breadth-first search for the ones with a bad trace
    # (the walk of the middle chunk stops at its third trace, the last chunk's at its only one)
    assert (cut.tlc_runs, cut.simulated) == (5, 4)


# --- validate_files: each file read when its chunk comes ------------------------------------


def _write(folder: Path, name: str, events: list[dict[str, Any]]) -> Path:
    path = folder / name
    lines = [json.dumps(header()), *(json.dumps(e) for e in events)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_files_get_the_verdicts_of_the_loaded_traces(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    bad = [GOOD[0], event("Receive", "b", 1, 2, a=2)]
    files = [_write(tmp_path, f"good{i}.ndjson", GOOD) for i in range(4)]
    files.insert(2, _write(tmp_path, "bad.ndjson", bad))
    monkeypatch.setattr(batches, "CHUNK_EVENTS", 6)  # several chunks, read one by one
    traces, report = validate_files(files, LEDGER, SPEC_ROOT)
    assert [t.source for t in traces] == [str(f) for f in files]
    assert traces == [load_trace(f) for f in files]
    eager = validate_traces(traces, LEDGER, SPEC_ROOT)
    assert report.verdicts == eager.verdicts
    assert [v.accepted for v in report.verdicts] == [True, True, False, True, True]
    assert report.verdicts[2].explanation is not None


def test_a_malformed_file_in_a_later_chunk_is_the_loaders_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    files = [_write(tmp_path, f"good{i}.ndjson", GOOD) for i in range(4)]
    broken = tmp_path / "broken.ndjson"
    broken.write_text(files[0].read_text(encoding="utf-8") + "{not json\n", encoding="utf-8")
    monkeypatch.setattr(batches, "CHUNK_EVENTS", 6)
    with pytest.raises(TraceFormatError) as caught:
        validate_files([*files, broken], LEDGER, SPEC_ROOT)
    with pytest.raises(TraceFormatError) as loading:
        load_trace(broken)
    assert str(caught.value) == str(loading.value)
    assert (caught.value.source, caught.value.line) == (str(broken), 5)


def test_peek_reads_the_header_as_the_loader_does(tmp_path: Path) -> None:
    path = _write(tmp_path, "t.ndjson", GOOD)
    peek = peek_trace(path)
    assert peek.header == load_trace(path).header
    assert peek.lines == len(GOOD)
    wrong = tmp_path / "v5.ndjson"
    wrong.write_text(json.dumps(header(schema_version=5)) + "\n", encoding="utf-8")
    with pytest.raises(TraceFormatError, match="schema_version: 5 is not supported"):
        peek_trace(wrong)
    with pytest.raises(TraceFormatError, match="cannot read"):
        peek_trace(tmp_path / "missing.ndjson")
    empty = tmp_path / "empty.ndjson"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(TraceFormatError, match="empty trace"):
        peek_trace(empty)
