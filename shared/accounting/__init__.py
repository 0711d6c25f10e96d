"""Privacy accounting: the mechanisms' dp-accounting events and their per-user composition.

* `dp`: dp-accounting's event types, imported on first use (a node that never states a
  privacy claim starts without dp-accounting's 1.9 s of imports).
* `events`: how a mechanism describes one release (`binary_rr_event`,
  `pure_dp_dominating_event`) and under which neighbouring relation
  (`mechanism_accounting_relation`, a mechanism's `accounting_relation` name).
* `accountant`: the pre-run gate (`check_mechanism`, `check_supported`, `supports`) and the ε
  of events and compositions (`compose_epsilon`, `event_epsilon`, `naive_epsilon`,
  `pure_epsilon`); `ledger`: the per-user `PrivacyLedger` behind report.json's privacy block.
  Both need the whole of dp-accounting, so their names are imported from here on first use.

The mechanisms import `dp` and `events`; nothing here imports a mechanism at run time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from privrec.shared.accounting.events import (
    binary_rr_event,
    mechanism_accounting_relation,
    pure_dp_dominating_event,
)
from privrec.shared.lazy import deferred_names

if TYPE_CHECKING:
    from privrec.shared.accounting.accountant import (
        check_mechanism,
        check_supported,
        compose_epsilon,
        event_epsilon,
        naive_epsilon,
        pure_epsilon,
        supports,
    )
    from privrec.shared.accounting.ledger import LedgerEntry, PrivacyLedger

__getattr__, __dir__ = deferred_names(
    __name__,
    {
        **dict.fromkeys(["LedgerEntry", "PrivacyLedger"], "privrec.shared.accounting.ledger"),
        **dict.fromkeys(
            [
                "check_mechanism",
                "check_supported",
                "compose_epsilon",
                "event_epsilon",
                "naive_epsilon",
                "pure_epsilon",
                "supports",
            ],
            "privrec.shared.accounting.accountant",
        ),
    },
)

__all__ = [
    "LedgerEntry",
    "PrivacyLedger",
    "binary_rr_event",
    "check_mechanism",
    "check_supported",
    "compose_epsilon",
    "event_epsilon",
    "mechanism_accounting_relation",
    "naive_epsilon",
    "pure_dp_dominating_event",
    "pure_epsilon",
    "supports",
]
