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
from privrec.server.models.full_em import TwoTierFullEM
from privrec.server.models.knn import PPCF, PearsonKNN, neighbour_average
from privrec.server.models.sketch_knn import SketchKNN
from privrec.server.models.sketch_mf import (
    ClippedCountSketchMF,
    CountSketchMF,
    FeatureHashingMF,
    RegularMF,
)
from privrec.server.models.two_tier import TwoTierLowRank
from privrec.shared.registry import Registry

MODELS: Registry[Model] = Registry("model", "model.name", Model)
for _cls in (PPCF, PearsonKNN, SketchKNN, TwoTierLowRank):
    MODELS.register(_cls)
for _cls in (RegularMF, CountSketchMF, FeatureHashingMF, ClippedCountSketchMF):
    MODELS.register(_cls)
MODELS.register(TwoTierFullEM)


def make_model(name: str, params: Mapping[str, Any] | None = None) -> Model:
    """Build model `name` with keyword `params` (ConfigError names a bad name or value)."""
    return MODELS.build(name, params)


__all__ = [
    "MODELS",
    "PPCF",
    "ClippedCountSketchMF",
    "CountSketchMF",
    "FeatureHashingMF",
    "MatrixModel",
    "Model",
    "OutputPrivacy",
    "PearsonKNN",
    "Recommender",
    "RegularMF",
    "SketchKNN",
    "TwoTierFullEM",
    "TwoTierLowRank",
    "TwoTierModel",
    "UInt32Array",
    "make_model",
    "neighbour_average",
]
