"""Server-side models and their registry.

`MODELS` lists every model once, by its `name`; `make_model(name, params)` builds the one a
run's config names. A new model is one module with a `Model` subclass (`server.models.base`)
plus one line here (or ``MODELS.register(MyModel)`` from anywhere).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from privrec.server.models.base import (
    MatrixModel,
    Model,
    OutputPrivacy,
    Recommender,
    TwoTierModel,
    UInt32Array,
)
from privrec.server.models.bisecting_knn import BisectingCF, BisectingPPCF
from privrec.server.models.cluster_knn import ClusterCF, ClusterPPCF
from privrec.server.models.dp_mf import DPPSMF, DPSGDMF
from privrec.server.models.dwt import PPDWT
from privrec.server.models.features import ItemFeatureModel, supply_item_features
from privrec.server.models.frequency import ItemFrequency
from privrec.server.models.full_em import TwoTierFullEM
from privrec.server.models.knn import PPCF, PearsonKNN, neighbour_average
from privrec.server.models.nbc import PPNBC
from privrec.server.models.pnbm import DPPSPNBM, DPSGDPNBM
from privrec.server.models.pncf import PNCF, CoRatedKNN
from privrec.server.models.sketch_knn import SketchKNN
from privrec.server.models.sketch_mf import (
    ClippedCountSketchMF,
    CountSketchMF,
    FeatureHashingMF,
    RegularMF,
)
from privrec.server.models.target_item import TargetItemCF, TargetItemPPCF
from privrec.server.models.two_tier import TwoTierLowRank
from privrec.shared.registry import Registry

MODELS: Registry[Model] = Registry("model", "model.name", Model)
MODELS.register(PPCF)
MODELS.register(PearsonKNN)
MODELS.register(SketchKNN)
MODELS.register(TwoTierLowRank)
MODELS.register(TargetItemPPCF)  # Bilge Ch. 4, 5, 8
MODELS.register(TargetItemCF)
MODELS.register(PPDWT)
MODELS.register(PPNBC)
MODELS.register(ClusterCF)  # Bilge Ch. 6 and 7
MODELS.register(ClusterPPCF)
MODELS.register(BisectingCF)
MODELS.register(BisectingPPCF)
MODELS.register(CoRatedKNN)  # Zhu; Wang & Tang
MODELS.register(PNCF)
MODELS.register(DPSGDPNBM)
MODELS.register(DPPSPNBM)
MODELS.register(DPSGDMF)
MODELS.register(DPPSMF)
MODELS.register(RegularMF)  # Balu Ch. 4
MODELS.register(CountSketchMF)
MODELS.register(FeatureHashingMF)
MODELS.register(ClippedCountSketchMF)
MODELS.register(TwoTierFullEM)  # Xin & Jaakkola
MODELS.register(ItemFrequency)  # Wang et al. 2017 (OUE frequency oracle)


def make_model(name: str, params: Mapping[str, Any] | None = None) -> Model:
    """Build model `name` with keyword `params` (ConfigError names a bad name or value)."""
    return MODELS.build(name, params)


__all__ = [
    "DPPSMF",
    "DPPSPNBM",
    "DPSGDMF",
    "DPSGDPNBM",
    "MODELS",
    "PNCF",
    "PPCF",
    "PPDWT",
    "PPNBC",
    "BisectingCF",
    "BisectingPPCF",
    "ClippedCountSketchMF",
    "ClusterCF",
    "ClusterPPCF",
    "CoRatedKNN",
    "CountSketchMF",
    "FeatureHashingMF",
    "ItemFeatureModel",
    "ItemFrequency",
    "MatrixModel",
    "Model",
    "OutputPrivacy",
    "PearsonKNN",
    "Recommender",
    "RegularMF",
    "SketchKNN",
    "TargetItemCF",
    "TargetItemPPCF",
    "TwoTierFullEM",
    "TwoTierLowRank",
    "TwoTierModel",
    "UInt32Array",
    "make_model",
    "neighbour_average",
    "supply_item_features",
]
