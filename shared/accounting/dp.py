"""dp-accounting's event types and helpers, imported on first use.

`import dp_accounting` imports the whole package: its PLD and RDP accountants and its mechanism
calibration, hence scipy.optimize, scipy.signal and scipy.stats, about 1.9 s of the 3 s a
`privrec server` or `privrec clients` process took to start on this machine. A mechanism or a
model needs the event types only when it states its privacy, which a shard perturbing releases
or a server storing them never does. So the mechanisms and models name them through this module
(``dp.LaplaceDpEvent(...)``): type checkers see dp-accounting's own classes, and at run time the
package is imported when a name is first looked up (PEP 562 module ``__getattr__``). The
accountant (`shared.accounting.accountant`), which needs the whole package, imports it directly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from privrec.shared.lazy import deferred_names

if TYPE_CHECKING:
    from dp_accounting import (
        ComposedDpEvent,
        DpEvent,
        GaussianDpEvent,
        LaplaceDpEvent,
        NeighboringRelation,
        NonPrivateDpEvent,
        NoOpDpEvent,
        RandomizedResponseDpEvent,
        SelfComposedDpEvent,
        UnsupportedDpEvent,
        get_epsilon_gaussian,
    )

__all__ = [
    "ComposedDpEvent",
    "DpEvent",
    "GaussianDpEvent",
    "LaplaceDpEvent",
    "NeighboringRelation",
    "NoOpDpEvent",
    "NonPrivateDpEvent",
    "RandomizedResponseDpEvent",
    "SelfComposedDpEvent",
    "UnsupportedDpEvent",
    "get_epsilon_gaussian",
]


__getattr__, __dir__ = deferred_names(__name__, dict.fromkeys(__all__, "dp_accounting"))
