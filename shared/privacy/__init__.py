"""The papers' privacy measures and black-box audits (accounting is `shared.accounting`).

* `measures`: Bilge (2013) ch. 3 measures of RPT (bits).
* `sketch_information`: Balu (2016) §3.3.3 information of BLIP and JLT releases (nats).
* `membership`: Balu's KL membership measure (4.15).
* `audit`: `shared.privacy.audit.audit(mechanism)` → `AuditResult` with a Clopper–Pearson lower
  bound ε_lcb (`shared.privacy.audit` is the submodule; the function is not re-exported here to
  keep the two apart).

The audit names are imported lazily: the audit pulls in every mechanism and its statistics, which
importing the package should not.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from privrec.shared.privacy.audit import AuditResult, NeighbourPair, audit_by_name

_LAZY = {"AuditResult", "NeighbourPair", "audit_by_name"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module("privrec.shared.privacy.audit"), name)
    raise AttributeError(f"module 'privrec.shared.privacy' has no attribute {name!r}")


__all__ = ["AuditResult", "NeighbourPair", "audit_by_name"]
