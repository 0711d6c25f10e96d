"""Building the public run configuration of a test scenario without a server."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from privrec.server.models import MODELS
from privrec.shared.run_config import PublicRunConfig


def make_run_config(
    mechanism: str,
    public_params: Mapping[str, Any],
    n_items: int,
    *,
    rating_scale: tuple[float, float] = (1.0, 5.0),
    model: str = "ppcf",
    model_params: Mapping[str, Any] | None = None,
    run_id: str = "test-run",
) -> PublicRunConfig:
    """The `PublicRunConfig` a server of this mechanism and model would publish."""
    caps = MODELS[model].capabilities
    return PublicRunConfig(
        run_id=run_id,
        mechanism_name=mechanism,
        public_params=public_params,
        model_name=model,
        model_params=model_params or {},
        capabilities=caps,
        n_items=n_items,
        dataset="test",
        rating_scale=rating_scale,
        n_folds=5,
        fold_seed=0,
        withheld=5,
        max_release_bytes=1 << 22,
        tiers=("private", "public") if caps.public_tier else ("private",),
    )
