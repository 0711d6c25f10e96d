"""Server-side models and their registry.

`MODELS` lists every model once, by its `name`; `make_model(name, params)` builds the one a
run's config names. A new model is one module with a `Model` subclass (`server.models.base`)
plus one line here (or ``MODELS.register(MyModel)`` from anywhere).

The models are registered by where they live and imported when first looked up (their kernels
bring numba and scipy.linalg: ≈ 0.45 s of a server's start-up that a run of one other model
never needs). The classes are importable from here all the same, also on first use.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from privrec.server.models.base import (
    MatrixModel,
    Model,
    OutputPrivacy,
    Recommender,
    TwoTierModel,
    UInt32Array,
)
from privrec.shared.lazy import deferred_names
from privrec.shared.registry import Registry

if TYPE_CHECKING:
    from privrec.server.models.biased_mf import BiasedMF
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

_MODELS = (  # (config name, module under privrec.server.models, class)
    ("ppcf", "knn", "PPCF"),
    ("pearson_knn", "knn", "PearsonKNN"),
    ("sketch_knn", "sketch_knn", "SketchKNN"),
    ("two_tier_lowrank", "two_tier", "TwoTierLowRank"),
    ("ppcf_plus", "target_item", "TargetItemPPCF"),  # Bilge Ch. 4, 5, 8
    ("cf_plus", "target_item", "TargetItemCF"),
    ("ppdwt", "dwt", "PPDWT"),
    ("ppnbc", "nbc", "PPNBC"),
    ("cluster_cf", "cluster_knn", "ClusterCF"),  # Bilge Ch. 6 and 7
    ("cluster_ppcf", "cluster_knn", "ClusterPPCF"),
    ("bkm_cf", "bisecting_knn", "BisectingCF"),
    ("bkm_ppcf", "bisecting_knn", "BisectingPPCF"),
    ("corated_knn", "pncf", "CoRatedKNN"),  # Zhu; Wang & Tang
    ("pncf", "pncf", "PNCF"),
    ("dpsgd_pnbm", "pnbm", "DPSGDPNBM"),
    ("dpps_pnbm", "pnbm", "DPPSPNBM"),
    ("dpsgd_mf", "dp_mf", "DPSGDMF"),
    ("dpps_mf", "dp_mf", "DPPSMF"),
    ("biased_mf", "biased_mf", "BiasedMF"),  # the strong non-private MF baseline
    ("sgd_mf", "sketch_mf", "RegularMF"),  # Balu Ch. 4
    ("count_sketch_mf", "sketch_mf", "CountSketchMF"),
    ("feature_hashing_mf", "sketch_mf", "FeatureHashingMF"),
    ("dp_count_sketch_mf", "sketch_mf", "ClippedCountSketchMF"),
    ("two_tier_full_em", "full_em", "TwoTierFullEM"),  # Xin & Jaakkola
    ("item_frequency", "frequency", "ItemFrequency"),  # Wang et al. 2017 (OUE frequency oracle)
)
_HELPERS = {  # other names importable from here: name → module
    "ItemFeatureModel": "features",
    "supply_item_features": "features",
    "neighbour_average": "knn",
}

MODELS: Registry[Model] = Registry(
    "model", "model.name", Model, declares=("capabilities", "answers_queries")
)
for _name, _module, _cls in _MODELS:
    MODELS.register_lazy(_name, f"{__name__}.{_module}", _cls)


def make_model(name: str, params: Mapping[str, Any] | None = None) -> Model:
    """Build model `name` with keyword `params` (ConfigError names a bad name or value)."""
    return MODELS.build(name, params)


_MODULE_OF = {cls: module for _, module, cls in _MODELS} | _HELPERS
__getattr__, __dir__ = deferred_names(
    __name__, {name: f"{__name__}.{module}" for name, module in _MODULE_OF.items()}
)

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
    "BiasedMF",
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
