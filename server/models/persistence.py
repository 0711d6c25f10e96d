"""Saving a fitted model and loading it back, so that a restarted aggregator serves again.

One `.npz` archive per model: its registry name, its constructor parameters (JSON) and its
fitted state (`Model.state_arrays`, each array under ``state/<key>``). Loading builds the model
from the registry with the same parameters and `restore`s the state; a recommender's restored
answers are bit-identical to the saved one's (the model contract suite checks it).
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from privrec.server.models.base import Model
from privrec.shared.errors import DataError
from privrec.shared.registry import Registry
from privrec.shared.serde import write_npz

_STATE = "state/"


def save_model(model: Model, target: str | Path | BinaryIO) -> None:
    """Write `model`'s name, parameters and fitted state to `target` (a path or a binary file).

    Raises:
        NotFittedError: the model is not fitted.
    """
    arrays = {_STATE + k: np.asarray(v) for k, v in model.state_arrays().items()}
    arrays["name"] = np.array(model.name)
    arrays["params"] = np.array(json.dumps(model.get_params(), sort_keys=True))
    write_npz(target, arrays)


def load_model(source: str | Path | BinaryIO | bytes, registry: Registry[Model]) -> Model:
    """Rebuild the model `save_model` wrote, through `registry` (normally `MODELS`).

    Raises:
        DataError: the archive is not a saved model.
        ConfigError: the model it names is not registered, or its parameters are refused.
    """
    return restore_model(read_model(source), registry)


SavedModel = tuple[str, dict[str, Any], dict[str, np.ndarray]]
"""What `save_model` wrote: the model's name, its parameters and its fitted state's arrays."""


def read_model(source: str | Path | BinaryIO | bytes) -> SavedModel:
    """The name, parameters and state arrays of a saved model, read from the archive, so that
    a caller holding the archive's bytes can let them go before the model is refitted from
    its state (the referee's restored PPCF: 16 bytes per released cell).

    Raises:
        DataError: the archive is not a saved model.
    """
    if isinstance(source, bytes):
        source = io.BytesIO(source)
    try:
        with np.load(source) as z:
            name, params = str(z["name"]), json.loads(str(z["params"]))
            state = {k[len(_STATE) :]: z[k] for k in z.files if k.startswith(_STATE)}
    except (OSError, ValueError, KeyError) as exc:
        raise DataError(f"not a saved privrec model: {exc}") from exc
    return name, params, state


def restore_model(saved: SavedModel, registry: Registry[Model]) -> Model:
    """The model `read_model` read, rebuilt from its state through `registry`.

    Raises:
        ConfigError: the model it names is not registered, or its parameters are refused.
    """
    name, params, state = saved
    return registry.build(name, params).restore(state)


__all__ = ["SavedModel", "load_model", "read_model", "restore_model", "save_model"]
