"""Attacks on what the untrusted aggregator observes, and their registry.

`make_attack(name, **params)` builds the attack a run's `[adversary]` section names; every attack
is listed once in `ATTACKS`. Usage: ``make_attack("rpt_spectral").fit(observations).output()``.
"""

from __future__ import annotations

from typing import Any

from privrec.adversary.attacks.balu_mcmc import FlatJointDecoder, JointDecoder
from privrec.adversary.attacks.balu_popularity import PopularityBaseline
from privrec.adversary.attacks.balu_single import SingleDecoder
from privrec.adversary.attacks.base import Attack, AttackOutput, UserEstimate
from privrec.adversary.attacks.fake_detection import FakeDetection
from privrec.adversary.attacks.knn_sybil import KnnSybilAttack
from privrec.adversary.attacks.membership import MembershipInference
from privrec.adversary.attacks.oue_decoder import OueDecoder
from privrec.adversary.attacks.rpt_bayes import BayesReconstruction
from privrec.adversary.attacks.rpt_ratings import RptRatingRecovery
from privrec.adversary.attacks.rpt_spectral import SpectralFiltering
from privrec.adversary.attacks.rrt_flips import RrtFlipInference
from privrec.adversary.attacks.second_order import SecondOrderReconstruction
from privrec.adversary.attacks.second_order_signs import SecondOrderSigns
from privrec.shared.registry import Registry

ATTACKS: Registry[Attack] = Registry("attack", "adversary.attacks", Attack)
ATTACKS.register(SpectralFiltering)
ATTACKS.register(BayesReconstruction)
ATTACKS.register(FakeDetection)
ATTACKS.register(SecondOrderReconstruction)
ATTACKS.register(SingleDecoder)  # Balu Ch. 3 on BLIP/JLT
ATTACKS.register(PopularityBaseline)
ATTACKS.register(JointDecoder)
ATTACKS.register(FlatJointDecoder)
ATTACKS.register(RptRatingRecovery)  # inference attacks
ATTACKS.register(RrtFlipInference)
ATTACKS.register(SecondOrderSigns)
ATTACKS.register(KnnSybilAttack)
ATTACKS.register(MembershipInference)
ATTACKS.register(OueDecoder)  # OUE item sets (linear in users)


def make_attack(name: str, **params: Any) -> Attack:
    """Build attack `name` with keyword `params` (ConfigError names a bad name or value)."""
    return ATTACKS.build(name, params)


__all__ = [
    "ATTACKS",
    "Attack",
    "AttackOutput",
    "BayesReconstruction",
    "FakeDetection",
    "FlatJointDecoder",
    "JointDecoder",
    "KnnSybilAttack",
    "MembershipInference",
    "PopularityBaseline",
    "RptRatingRecovery",
    "RrtFlipInference",
    "SecondOrderReconstruction",
    "SecondOrderSigns",
    "SingleDecoder",
    "SpectralFiltering",
    "UserEstimate",
    "make_attack",
]
