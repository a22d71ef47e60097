"""A rejected post field says what differs, not two whole values (tracecheck.tla.diff)."""

from __future__ import annotations

from tracecheck.replay.explanation import FrontierState, PostCheck
from tracecheck.tla.diff import difference
from tracecheck.tla.parser import parse_value


def _diff(logged: str, allowed: str) -> str:
    return difference(parse_value(logged), parse_value(allowed))


def test_sets_name_the_elements_that_differ_whatever_the_order() -> None:
    many = ", ".join(f'<<"w0", {i}>>' for i in range(30))
    assert _diff("{" + many + ', <<"w1", 1>>}', "{" + many + ', <<"w2", 9>>}') == (
        'logged but not in the spec\'s: <<"w1", 1>>; in the spec\'s but not logged: <<"w2", 9>>'
    )
    assert _diff("{1, 2}", "{2, 1}") == ""
    assert _diff("{1}", "{1, 2, 3, 4, 5, 6, 7, 8, 9}") == (
        "in the spec's but not logged: 2, 3, 4, 5, 6, 7 and 2 more"
    )


def test_records_and_functions_name_the_changed_fields_down_to_the_change() -> None:
    logged = '[round |-> 0, complete |-> FALSE, p |-> ("a" :> 1 @@ "b" :> 2)]'
    allowed = '[round |-> 1, complete |-> FALSE, p |-> ("a" :> 2 @@ "b" :> 2)]'
    assert _diff(logged, allowed) == (
        ".round: logged 0, the spec's 1; .p: [\"a\"]: logged 1, the spec's 2"
    )
    assert _diff('("a" :> 1)', '("a" :> 1 @@ "b" :> 2)') == (
        'keys in the spec\'s but not logged: ["b"]'
    )
    assert _diff("<<1, {2}>>", "<<1, {3}>>") == (
        "[2]: logged but not in the spec's: 2; in the spec's but not logged: 3"
    )
    assert _diff("3", "<<3>>") == "logged 3, the spec's <<3>>"


def test_a_frontier_state_reports_the_difference_of_a_single_allowed_value() -> None:
    check = PostCheck(
        field="forks",
        expression="forks'[@]",
        logged="{1, 2}",
        possible=False,
        allowed=["{1}"],
        difference=_diff("{1, 2}", "{1}"),
    )
    state = FrontierState(state={}, enabled=True, post=[check])
    assert state.reason() == "post.forks: logged but not in the spec's: 2"
    two = check.model_copy(update={"allowed": ["{1}", "{3}"]})
    assert FrontierState(state={}, enabled=True, post=[two]).reason() == (
        "post.forks: logged {1, 2}, the spec allows {1} or {3}"
    )
