"""Server-side recommenders and their registry.

`make_model(name, params)` builds the model a run's config names; every model is listed once in
`MODELS`. `denormalise` is the client-side half of PPCF (Bilge Eq 2.5), kept beside the model it
inverts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from privrec.server.models.base import Recommender, UInt32Array
from privrec.server.models.knn import PPCF, PearsonKNN, denormalise, neighbour_average
from privrec.server.models.sketch_knn import SketchKNN
from privrec.server.models.two_tier import TwoTierLowRank
from privrec.shared.registry import build

MODELS: dict[str, type[Any]] = {
    PPCF.name: PPCF,
    PearsonKNN.name: PearsonKNN,
    SketchKNN.name: SketchKNN,
    TwoTierLowRank.name: TwoTierLowRank,
}


def make_model(name: str, params: Mapping[str, Any] | None = None) -> Any:
    """Build model `name` with keyword `params` (ConfigError names a bad name or value)."""
    return build(MODELS, "model.name", "model", name, params)


__all__ = [
    "MODELS",
    "PPCF",
    "PearsonKNN",
    "Recommender",
    "SketchKNN",
    "TwoTierLowRank",
    "UInt32Array",
    "denormalise",
    "make_model",
    "neighbour_average",
]
