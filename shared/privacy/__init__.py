"""Privacy accounting, the papers' privacy measures, and black-box audits.

* `accountant`: `PrivacyLedger` (per-user releases composed with dp-accounting PLD/RDP) and
  `compose_epsilon`, `check_supported`.
* `measures`: Bilge (2013) ch. 3 measures (bits) and Balu (2016) ch. 3 mutual informations (nats).
* `audit`: `shared.privacy.audit.audit(mechanism)` → `AuditResult` with a Clopper–Pearson lower
  bound ε_lcb (`shared.privacy.audit` is the submodule; the function is not re-exported here to
  keep the two apart).

The audit names are imported lazily (they pull in every mechanism), so `shared.mechanisms` may
import from `shared.privacy.accountant` without an import cycle.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from privrec.shared.privacy.accountant import (
    LedgerEntry,
    PrivacyLedger,
    check_mechanism,
    check_supported,
    compose_epsilon,
    naive_epsilon,
    pure_epsilon,
    supports,
)

if TYPE_CHECKING:
    from privrec.shared.privacy.audit import AuditResult, NeighbourPair, audit_by_name

_LAZY = {"AuditResult", "NeighbourPair", "audit_by_name"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module("privrec.shared.privacy.audit"), name)
    raise AttributeError(f"module 'privrec.shared.privacy' has no attribute {name!r}")


__all__ = [
    "AuditResult",
    "LedgerEntry",
    "NeighbourPair",
    "PrivacyLedger",
    "audit_by_name",
    "check_mechanism",
    "check_supported",
    "compose_epsilon",
    "naive_epsilon",
    "pure_epsilon",
    "supports",
]
