"""`privrec reproduce`: published tables and figures, run through the protocol's own classes.

`REPRODUCTIONS` lists every entry by name (`privrec reproduce --list`); an entry is one module
with a `Reproduction` subclass (`sim.reproduce.base`) registered here.
"""

from __future__ import annotations

from privrec.shared.registry import Registry
from privrec.sim.reproduce.balu_mi import BaluMI
from privrec.sim.reproduce.balu_reconstruction import BaluFig32, BaluFig33, BaluFig3435
from privrec.sim.reproduce.base import Claim, Published, Reproduction, RunContext, ordered
from privrec.sim.reproduce.bilge_ppcf import BilgePPCF
from privrec.sim.reproduce.runner import ReproductionResult, reproduce

REPRODUCTIONS: Registry[Reproduction] = Registry("reproduction", "reproduce", Reproduction)
for _cls in (BilgePPCF,):
    REPRODUCTIONS.register(_cls)
for _balu in (BaluMI, BaluFig32, BaluFig33, BaluFig3435):
    REPRODUCTIONS.register(_balu)


__all__ = [
    "REPRODUCTIONS",
    "Claim",
    "Published",
    "Reproduction",
    "ReproductionResult",
    "RunContext",
    "ordered",
    "reproduce",
]
