"""The Ledger mapping on LedgerAudit.tla: the Ledger with an invariant its actions do not keep."""

from __future__ import annotations

from support.ledger import LEDGER

LEDGER_AUDIT = LEDGER.model_copy(update={"module": "LedgerAudit"})

#: LedgerAudit with unlogged deposits (at most one in a row): the trace spec then explores
#: branches the implementation did not take, some of which break the invariant.
LEDGER_AUDIT_HIDDEN = LEDGER_AUDIT.model_copy(
    update={
        "hidden_steps": ("\\E n \\in Nodes, a \\in 1..Max : Deposit(n, a)",),
        "max_hidden": 1,
    }
)
