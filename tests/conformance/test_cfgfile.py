"""The cfg reader used to attribute temporal violations."""

from __future__ import annotations

from tracecheck.tla.cfgfile import properties, with_only_property

CFG = """\\* header comment
CONSTANTS Limit = 10  Name = "a b"  Nodes = {n1, n2}
(* a block
   comment PROPERTY Hidden *)
SPECIFICATION Spec
INVARIANTS TypeOK SafeInv
PROPERTIES LiveProp
  OtherProp \\* trailing
PROPERTY ThirdProp
SYMMETRY Perms
"""


def test_lists_properties_in_order_ignoring_comments() -> None:
    assert properties(CFG) == ["LiveProp", "OtherProp", "ThirdProp"]


def test_single_property_cfg_keeps_everything_else() -> None:
    one = with_only_property(CFG, "OtherProp")
    assert properties(one) == ["OtherProp"]
    assert 'CONSTANTS Limit = 10 Name = "a b" Nodes = { n1 , n2 }' in one
    assert "INVARIANTS TypeOK SafeInv" in one
    assert "SYMMETRY Perms" in one
    assert "Hidden" not in one
