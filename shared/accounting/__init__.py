"""Privacy accounting: the mechanisms' dp-accounting events and their per-user composition.

* `dp`: dp-accounting's event types, imported on first use (a node that never states a
  privacy claim starts without dp-accounting's 1.9 s of imports).
* `events`: how a mechanism describes one release (`binary_rr_event`,
  `pure_dp_dominating_event`) and under which neighbouring relation
  (`mechanism_accounting_relation`, a mechanism's `accounting_relation` name).
* `accountant`: the pre-run gate (`check_mechanism`, `check_supported`, `supports`), the ε of
  events and compositions (`compose_epsilon`, `event_epsilon`, `naive_epsilon`,
  `pure_epsilon`), and the per-user `PrivacyLedger` behind report.json's privacy block. It needs
  the whole of dp-accounting, so its names are imported from here on first use.

The mechanisms import `dp` and `events`; nothing here imports a mechanism at run time.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from privrec.shared.accounting.events import (
    binary_rr_event,
    mechanism_accounting_relation,
    pure_dp_dominating_event,
)

if TYPE_CHECKING:
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

_ACCOUNTANT = (
    "LedgerEntry",
    "PrivacyLedger",
    "check_mechanism",
    "check_supported",
    "compose_epsilon",
    "event_epsilon",
    "naive_epsilon",
    "pure_epsilon",
    "supports",
)


def __getattr__(name: str) -> Any:
    """The accountant's names, importing `accountant` (and dp-accounting) the first time."""
    if name in _ACCOUNTANT:
        return getattr(importlib.import_module("privrec.shared.accounting.accountant"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_ACCOUNTANT])


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
