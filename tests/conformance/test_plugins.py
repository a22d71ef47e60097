"""The plug-ins tracecheck reaches an implementation through (tracecheck.plugins): registered
by entry point, each giving its implementation's event schema and simulator; a missing
implementation makes its plug-in unavailable (validation goes on without its schema), a broken
one is an error, never skipped."""

from __future__ import annotations

import sys
import types
from importlib.metadata import entry_points

import pytest

from protoref.rref.trace import EVENT_ADAPTER
from tracecheck import plugins
from tracecheck.errors import TracecheckError
from tracecheck.plugins import GROUP, Plugin, PluginUnavailableError, event_schema, load_plugin


def test_the_projects_plugins_are_registered_by_entry_point() -> None:
    registered = {ep.name: ep.value for ep in entry_points(group=GROUP)}
    assert registered == plugins.BUILTIN
    for name in ("rref", "rendezvous", "autograd"):
        plugin = load_plugin(name)
        assert plugin.protocol == name
        assert plugin.implementation == "protoref"
        assert plugin.simulate is not None
    assert event_schema("rref") is EVENT_ADAPTER


def test_a_protocol_without_a_plugin_has_no_schema() -> None:
    assert event_schema("ledger") is None
    with pytest.raises(TracecheckError, match=r"no plug-in 'ledger'.*installed: autograd"):
        load_plugin("ledger")


@pytest.mark.parametrize(
    ("ref", "error", "problem"),
    [
        ("not_installed_anywhere.plugin:PLUGIN", PluginUnavailableError, "cannot be loaded"),
        ("tracecheck.no_such_module:PLUGIN", TracecheckError, "is broken"),
        ("tracecheck.errors:TracecheckError", TracecheckError, "is not a tracecheck.plugins"),
    ],
)
def test_a_plugin_that_cannot_be_loaded_says_why(
    monkeypatch: pytest.MonkeyPatch, ref: str, error: type[Exception], problem: str
) -> None:
    monkeypatch.setattr(plugins, "plugin_refs", lambda: {"other": ref})
    with pytest.raises(error, match=problem) as caught:
        load_plugin("other")
    if error is PluginUnavailableError:
        assert event_schema("other") is None  # the trace is checked without it
    else:
        assert type(caught.value) is TracecheckError  # not "unavailable": never skipped
        with pytest.raises(TracecheckError, match=problem):
            event_schema("other")


def test_another_implementation_registers_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    mine = Plugin(protocol="rref", implementation="a port", event_schema=lambda: EVENT_ADAPTER)
    monkeypatch.setattr(plugins, "BUILTIN", {"rref": "tests_mine:PLUGIN"})
    module = types.ModuleType("tests_mine")
    module.PLUGIN = mine  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tests_mine", module)
    monkeypatch.setattr(plugins, "entry_points", lambda group: [])
    assert load_plugin("rref") is mine
