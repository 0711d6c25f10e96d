"""Feature-based profiles (FBPs) of users from the catalogue's public item features (Bilge §6.3.1).

An FBP maps a user's sparse row over m items onto d item features (the 19 genre flags of
MovieLens-100K): a dense, small profile two users can be compared on even when they share no
rated item (Bilge's Alice/Bob example, Tables 6.1–6.2, Fig. 6.1).

* **PBP** (purchase-based profile): every filled cell adds 1 to each feature of its item.
* **RBP** (rating-based profile): every filled cell adds its value to each feature of its item.

Both are then normalised by dividing every entry by the profile's sum (Bilge §6.3.1: "dividing
each profile value by the sum of profile").

On the disguised matrix U′ the server cannot tell a genuine cell from a fake one, so every
filled cell, genuine or fake, adds 1 to a PBP (Bilge §6.5.1, §7.3.3), and an RBP adds the
disguised value z′ (the thesis does not say which values RBP uses on U′; z′ is the only value
the server has). Because z′ can be negative, an RBP's sum can be ≤ 0: we still divide by the sum
when it is non-zero (a negative sum flips the profile, which is part of why RBP "is not able to
produce accurate referrals" under RPT, Table 6.4) and leave a zero-sum profile unnormalised.
Both choices are recorded in docs/decisions/clustering.md.

The features are public catalogue facts: the aggregator reads them from the catalogue it is
started with (`server.spec.run_spec`, `RunSpec.item_features`) and hands them to every model
that declares it needs them by being an `ItemFeatureModel` (`supply_item_features`).

References:
    Bilge, A. "Improving Performance of Privacy-Preserving Collaborative Filtering Schemes",
    PhD thesis, Anadolu University, 2013, §6.3.1 and §7.3.3.
    Bilge, A., Polat, H. "Improving privacy-preserving NBC-based recommendations by
    preprocessing", WI-IAT 2011 (the FBP idea).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any, Self

import numpy as np
import scipy.sparse as sp

from privrec.server.models.base import Arrays, Model
from privrec.shared.errors import NotFittedError
from privrec.shared.types import FloatArray, IntArray

PROFILES = ("pbp", "rbp")
"""The two FBP kinds of Bilge §6.3.1."""


def check_features(features: Any, n_items: int | None = None) -> FloatArray:
    """`features` as a float64 (m, d) array of finite, non-negative feature weights.

    Args:
        features: array-like of shape (n_items, n_features), e.g. `RatingData.genres` (bool).
        n_items: the catalogue size the rows must match, or None to skip that check.

    Raises:
        ValueError: not 2-D, no feature column, wrong number of rows, or a negative or
            non-finite weight (the message names `item_features`).
    """
    if features is None:
        raise ValueError(
            "`item_features` are not set: this model needs the catalogue's item features "
            "(e.g. genres); the aggregator supplies them, or call set_item_features()"
        )
    arr = np.asarray(features)
    if arr.ndim != 2 or arr.shape[1] == 0:
        raise ValueError(
            f"`item_features` must be a 2-D array (n_items, n_features), got shape {arr.shape}"
        )
    if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        raise ValueError(f"`item_features` must be numeric or bool, got dtype {arr.dtype}")
    out = np.asarray(arr, dtype=np.float64)
    if not np.all(np.isfinite(out)) or np.any(out < 0):
        raise ValueError("`item_features` must hold finite, non-negative weights")
    if n_items is not None and out.shape[0] != n_items:
        raise ValueError(
            f"`item_features` must have one row per item ({n_items}), got {out.shape[0]}"
        )
    return out


def _normalise(raw: FloatArray) -> FloatArray:
    """Divide each profile (row) by its sum where the sum is non-zero (Bilge §6.3.1)."""
    sums = raw.sum(axis=-1, keepdims=True)
    out: FloatArray = np.divide(raw, sums, out=raw.copy(), where=sums != 0)
    return out


def feature_profiles(matrix: sp.csr_matrix, features: FloatArray, kind: str) -> FloatArray:
    """The normalised FBP of every row of `matrix` (Bilge §6.3.1, Fig. 6.1).

    Args:
        matrix: CSR of shape (n, m); a stored entry is a filled cell (explicit zeros included).
        features: float array of shape (m, d), the items' feature weights (0/1 genre flags).
        kind: "pbp" (each filled cell counts 1) or "rbp" (each counts its value).

    Returns:
        float64 array of shape (n, d); a row with no filled featured cell is all zeros.
    """
    if kind not in PROFILES:
        raise ValueError(f"`profile` must be one of {PROFILES}, got {kind!r}")
    weights = matrix.copy().astype(np.float64)
    if kind == "pbp":
        weights.data = np.ones_like(weights.data)
    return _normalise(np.asarray(weights @ features, dtype=np.float64))


def query_profile(
    indices: IntArray, values: FloatArray, features: FloatArray, kind: str
) -> FloatArray:
    """The normalised FBP of one sparse vector (the active user's query), shape (d,)."""
    if kind not in PROFILES:
        raise ValueError(f"`profile` must be one of {PROFILES}, got {kind!r}")
    weights = np.ones(indices.size) if kind == "pbp" else np.asarray(values, dtype=np.float64)
    return _normalise(weights @ features[indices])


class ItemFeatureModel(Model):
    """A model whose fit needs the catalogue's public item features (genre flags).

    The features are not a hyper-parameter (they are data, and large): the aggregator sets them
    from its catalogue with `supply_item_features` before `fit`, and they are part of the
    fitted state (`state_arrays`), so a saved model restores without the catalogue.

    Attributes:
        item_features_: float array of shape (n_items, n_features), or None until set.
    """

    item_features_: FloatArray | None = None

    def set_item_features(self, features: Any) -> Self:
        """Use `features` (shape (n_items, n_features), e.g. `RatingData.genres`) from now on.

        Raises:
            ValueError: malformed features (see `check_features`).
        """
        self.item_features_ = check_features(features)
        return self

    def state_arrays(self) -> Arrays:
        """The model's arrays plus the item features it was fitted with."""
        state = self._feature_model_state()
        if self.item_features_ is None:
            raise NotFittedError(f"{type(self).__name__} is not fitted; call fit() first")
        state["item_features"] = self.item_features_
        return state

    def restore(self, state: Mapping[str, np.ndarray]) -> Self:
        """Rebuild the model and its item features from `state_arrays()`'s arrays."""
        self.set_item_features(state["item_features"])
        rest = {k: v for k, v in state.items() if k != "item_features"}
        return self._restore_feature_model(rest)

    @abc.abstractmethod
    def _feature_model_state(self) -> Arrays:
        """The rest of the fitted state (raises NotFittedError before fit)."""

    @abc.abstractmethod
    def _restore_feature_model(self, state: Mapping[str, np.ndarray]) -> Self:
        """Restore the rest of the state (the features are already set)."""


def supply_item_features(model: Model, features: Any) -> None:
    """Give `model` the catalogue's item features if it is an `ItemFeatureModel`.

    The one place where the aggregator (and `sim.reproduce`'s direct runs) hand the public
    catalogue to a model; other models are left alone.

    Raises:
        ValueError: the model needs features and `features` is None or malformed.
    """
    if isinstance(model, ItemFeatureModel):
        model.set_item_features(features)


def needs_item_features(model_cls: type[Model]) -> bool:
    """Whether models of `model_cls` need the catalogue's item features."""
    return issubclass(model_cls, ItemFeatureModel)


__all__ = [
    "PROFILES",
    "ItemFeatureModel",
    "check_features",
    "feature_profiles",
    "needs_item_features",
    "query_profile",
    "supply_item_features",
]
