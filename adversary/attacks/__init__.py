"""Attacks on what the untrusted aggregator observes, and their registry.

`make_attack(name, **params)` builds the attack a run's `[adversary]` section names; every attack
is listed once in `ATTACKS`. Usage: ``make_attack("rpt_spectral").fit(observations).output()``.

The attacks are registered by where they live and imported when first looked up, like the
models (`server.models`): an adversary imports the kernels of the attacks it runs only (all of
them took ≈ 1.2 s of its start-up). The classes are importable from here all the same.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from privrec.adversary.attacks.base import Attack, AttackOutput, UserEstimate
from privrec.shared.lazy import deferred_names
from privrec.shared.registry import Registry

if TYPE_CHECKING:
    from privrec.adversary.attacks.balu_mcmc import FlatJointDecoder, JointDecoder
    from privrec.adversary.attacks.balu_popularity import PopularityBaseline
    from privrec.adversary.attacks.balu_single import SingleDecoder
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

_ATTACKS = (  # (config name, module under privrec.adversary.attacks, class)
    ("rpt_spectral", "rpt_spectral", "SpectralFiltering"),
    ("rpt_bayes", "rpt_bayes", "BayesReconstruction"),
    ("rpt_fake_detection", "fake_detection", "FakeDetection"),
    ("second_order_reconstruction", "second_order", "SecondOrderReconstruction"),
    ("balu_single", "balu_single", "SingleDecoder"),  # Balu Ch. 3 on BLIP/JLT
    ("balu_popularity", "balu_popularity", "PopularityBaseline"),
    ("balu_mcmc", "balu_mcmc", "JointDecoder"),
    ("balu_mcmc_flat", "balu_mcmc", "FlatJointDecoder"),
    ("rpt_rating_recovery", "rpt_ratings", "RptRatingRecovery"),  # inference attacks
    ("rrt_flip_inference", "rrt_flips", "RrtFlipInference"),
    ("second_order_signs", "second_order_signs", "SecondOrderSigns"),
    ("knn_sybil", "knn_sybil", "KnnSybilAttack"),
    ("membership_inference", "membership", "MembershipInference"),
    ("oue_decoder", "oue_decoder", "OueDecoder"),  # OUE item sets (linear in users)
)

ATTACKS: Registry[Attack] = Registry(
    "attack", "adversary.attacks", Attack, declares=("knowledge", "applies_to")
)
for _name, _module, _cls in _ATTACKS:
    ATTACKS.register_lazy(_name, f"{__name__}.{_module}", _cls)


def make_attack(name: str, **params: Any) -> Attack:
    """Build attack `name` with keyword `params` (ConfigError names a bad name or value)."""
    return ATTACKS.build(name, params)


def check_attack_names(names: Iterable[str]) -> None:
    """Every one of `names` is an attack: checked before a run starts, not after it collected
    and served (ConfigError naming `adversary.attacks`, the unknown name and the known ones)."""
    for name in names:
        ATTACKS.lookup(name)


__getattr__, __dir__ = deferred_names(
    __name__, {cls: f"{__name__}.{module}" for _, module, cls in _ATTACKS}
)

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
    "OueDecoder",
    "PopularityBaseline",
    "RptRatingRecovery",
    "RrtFlipInference",
    "SecondOrderReconstruction",
    "SecondOrderSigns",
    "SingleDecoder",
    "SpectralFiltering",
    "UserEstimate",
    "check_attack_names",
    "make_attack",
]
