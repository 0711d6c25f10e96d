"""`privrec reproduce`: published tables and figures, run through the protocol's own classes.

`REPRODUCTIONS` lists every entry by name (`privrec reproduce --list`); an entry is one module
with a `Reproduction` subclass (`sim.reproduce.base`) registered here.
"""

from __future__ import annotations

from privrec.shared.registry import Registry
from privrec.sim.reproduce.balu_mf import BaluDPMF, BaluTable42
from privrec.sim.reproduce.balu_mi import BaluMI
from privrec.sim.reproduce.balu_reconstruction import BaluFig32, BaluFig33, BaluFig3435
from privrec.sim.reproduce.base import Claim, Published, Reproduction, RunContext, ordered
from privrec.sim.reproduce.bilge_bkm import BilgeTable71, BilgeTable72, BilgeTable73, BilgeTable75
from privrec.sim.reproduce.bilge_ch4 import BilgeCh4
from privrec.sim.reproduce.bilge_ch8 import BilgeCh8
from privrec.sim.reproduce.bilge_clustering import BilgeTable63, BilgeTable64, BilgeTable65
from privrec.sim.reproduce.bilge_ppcf import BilgePPCF
from privrec.sim.reproduce.bilge_ppdwt import BilgePPDWT
from privrec.sim.reproduce.runner import ReproductionResult, reproduce
from privrec.sim.reproduce.wang_tang import WangTang
from privrec.sim.reproduce.xin_fig2 import XinFig2
from privrec.sim.reproduce.zhu_pncf import ZhuEps, ZhuPNCF

REPRODUCTIONS: Registry[Reproduction] = Registry("reproduction", "reproduce", Reproduction)
REPRODUCTIONS.register(BilgePPCF)
REPRODUCTIONS.register(BilgePPDWT)  # Bilge Ch. 5, 4, 8
REPRODUCTIONS.register(BilgeCh4)
REPRODUCTIONS.register(BilgeCh8)
REPRODUCTIONS.register(BilgeTable63)  # Bilge Ch. 6 and 7
REPRODUCTIONS.register(BilgeTable64)
REPRODUCTIONS.register(BilgeTable65)
REPRODUCTIONS.register(BilgeTable71)
REPRODUCTIONS.register(BilgeTable72)
REPRODUCTIONS.register(BilgeTable73)
REPRODUCTIONS.register(BilgeTable75)
REPRODUCTIONS.register(ZhuPNCF)  # Zhu; Wang & Tang
REPRODUCTIONS.register(ZhuEps)
REPRODUCTIONS.register(WangTang)
REPRODUCTIONS.register(BaluTable42)  # Balu Ch. 4
REPRODUCTIONS.register(BaluDPMF)
REPRODUCTIONS.register(XinFig2)  # Xin & Jaakkola
REPRODUCTIONS.register(BaluMI)  # Balu Ch. 3
REPRODUCTIONS.register(BaluFig32)
REPRODUCTIONS.register(BaluFig33)
REPRODUCTIONS.register(BaluFig3435)


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
