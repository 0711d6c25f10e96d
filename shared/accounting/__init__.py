"""Privacy accounting: the mechanisms' dp-accounting events and their per-user composition.

* `events`: how a mechanism describes one release (`binary_rr_event`,
  `pure_dp_dominating_event`) and under which neighbouring relation
  (`mechanism_accounting_relation`, `NeighboringRelation`).
* `accountant`: the pre-run gate (`check_mechanism`, `check_supported`, `supports`), the ε of
  events and compositions (`compose_epsilon`, `event_epsilon`, `naive_epsilon`,
  `pure_epsilon`), and the per-user `PrivacyLedger` behind report.json's privacy block.

The mechanisms import `events`; nothing here imports a mechanism at run time.
"""

from privrec.shared.accounting.accountant import (
    LedgerEntry,
    PrivacyLedger,
    check_mechanism,
    check_supported,
    compose_epsilon,
    event_epsilon,
    naive_epsilon,
    pure_epsilon,
    supports,
)
from privrec.shared.accounting.events import (
    NeighboringRelation,
    binary_rr_event,
    mechanism_accounting_relation,
    pure_dp_dominating_event,
)

__all__ = [
    "LedgerEntry",
    "NeighboringRelation",
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
