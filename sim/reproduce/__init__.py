"""`privrec reproduce`: published tables and figures, run through the protocol's own classes.

`REPRODUCTIONS` lists every entry by name (`privrec reproduce --list`); an entry is one module
with a `Reproduction` subclass (`sim.reproduce.base`) registered here.
"""

from __future__ import annotations

from privrec.shared.registry import Registry
from privrec.sim.reproduce.balu_mf import BaluDPMF, BaluTable42
from privrec.sim.reproduce.base import Claim, Published, Reproduction, RunContext, ordered
from privrec.sim.reproduce.bilge_ppcf import BilgePPCF
from privrec.sim.reproduce.runner import ReproductionResult, reproduce
from privrec.sim.reproduce.xin_fig2 import XinFig2

REPRODUCTIONS: Registry[Reproduction] = Registry("reproduction", "reproduce", Reproduction)
for _cls in (BilgePPCF,):
    REPRODUCTIONS.register(_cls)
for _cls in (BaluTable42, BaluDPMF, XinFig2):
    REPRODUCTIONS.register(_cls)


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
