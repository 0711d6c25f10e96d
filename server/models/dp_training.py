"""The trusted-curator models trained with differential privacy (Wang & Tang and baselines).

`DPTrainedRecommender` is what DPSGD-PNBM, DPPS-PNBM, DPSGD-MF and DPPS-MF share:

* one state per cross-validation fold (`server.models.foldwise`), each trained on the other
  folds' raw ratings (the users release them with the `raw` mechanism: the aggregator is the
  curator, and the guarantee is about what the model's *answers* reveal);
* preprocessing by privacy unit: rating level (Wang & Tang §3: keep the users with more than
  `min_ratings − 1` ratings), user level (§4.3: cap every user at τ ratings by random removal, so
  that one user's log-likelihood is bounded by B = φ²τ);
* item means r̄_i, which every predictor here is centred on (Wang & Tang Eq (2)), released with
  a share `mean_fraction` of ε (`dp_neighbourhood.dp_item_means`) — the paper uses exact means
  and counts nothing for them, which would leave the released predictions without a guarantee;
* predictions that read only the released parameters and the querying user's own ratings
  (post-processing: answers cost nothing more), so `output_privacy` has a fit event only,
  charged once per fold state a user is in (`fit_per_fold`).

Subclasses implement `_train` (the DP training of one fold on centred ratings) and
`_predict_params` (scores from the trained parameters), and state their privacy in
`_fit_events` and `_statement`.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from privrec.server.models.base import OutputPrivacy, UInt32Array
from privrec.server.models.dp_neighbourhood import NoisyMeans, dp_item_means, pure_dp_event
from privrec.server.models.foldwise import FoldKey, FoldwiseRecommender, fold_seed_key
from privrec.server.models.langevin import TemperedChain, effective_scale
from privrec.shared.accounting import dp
from privrec.shared.capabilities import ModelCapabilities, ModelInput, ScoreKind, Serving
from privrec.shared.mechanisms.base import PrivacyStatement
from privrec.shared.seeding import rng_for
from privrec.shared.types import FloatArray, IntArray


def check_number(
    name: str, value: object, *, low: float = 0.0, inclusive: bool = False, high: float = math.inf
) -> float:
    """`value` as a float in (low, high] (or [low, high] with `inclusive`).

    Raises:
        ValueError: naming the parameter and echoing the value.
    """
    if isinstance(value, bool) or not isinstance(value, int | float | np.number):
        raise ValueError(f"`{name}` must be a number, got {value!r}")
    v = float(value)
    ok = math.isfinite(v) and (v >= low if inclusive else v > low) and v <= high
    if not ok:
        bound = f"{'>=' if inclusive else '>'} {low:g}" + (
            f" and <= {high:g}" if math.isfinite(high) else ""
        )
        raise ValueError(f"`{name}` must be {bound}, got {value!r}")
    return v


def check_int(name: str, value: object, *, low: int = 1) -> int:
    """`value` as an int >= low.

    Raises:
        ValueError: naming the parameter and echoing the value.
    """
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
        raise ValueError(f"`{name}` must be an int >= {low}, got {value!r}")
    return int(value)


def check_scale(rating_scale: object) -> tuple[float, float]:
    """(r_min, r_max) with r_min < r_max.

    Raises:
        ValueError: naming `rating_scale`.
    """
    try:
        lo, hi = (float(x) for x in rating_scale)  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        raise ValueError(f"`rating_scale` must be (r_min, r_max), got {rating_scale!r}") from None
    if not lo < hi:
        raise ValueError(f"`rating_scale` must have r_min < r_max, got {rating_scale!r}")
    return (lo, hi)


@dataclasses.dataclass(frozen=True)
class DPFold:
    """One fold's trained state: the released item means and the model's parameters."""

    means: NoisyMeans
    params: Any


class DPTrainedRecommender(FoldwiseRecommender):
    """A model trained with DP on each fold (module docstring).

    Subclasses set `privacy_unit` ("rating" or "user") and, in their constructor, call
    `_set_privacy` with the shared parameters.
    """

    capabilities: ClassVar[ModelCapabilities] = ModelCapabilities(
        ModelInput.RELEASES, Serving.QUERIES, ScoreKind.RATING
    )
    privacy_unit: ClassVar[str]

    epsilon: float
    mean_fraction: float
    rating_scale: tuple[float, float]
    random_state: int

    def _set_privacy(
        self, epsilon: float, mean_fraction: float, rating_scale: object, random_state: int
    ) -> None:
        self.epsilon = check_number("epsilon", epsilon)
        self.mean_fraction = check_number("mean_fraction", mean_fraction, inclusive=True, high=1.0)
        if not self.mean_fraction < 1.0:
            raise ValueError(f"`mean_fraction` must be < 1, got {mean_fraction!r}")
        self.rating_scale = check_scale(rating_scale)
        self.random_state = check_int("random_state", random_state, low=0)

    # ------------------------------------------------------------------ budget
    @property
    def mean_epsilon(self) -> float:
        """ε spent on the item means."""
        return self.mean_fraction * self.epsilon

    @property
    def model_epsilon(self) -> float:
        """ε left for the model's own training (the paper's ε)."""
        return (1.0 - self.mean_fraction) * self.epsilon

    @property
    def phi(self) -> float:
        """φ = r_max − r_min."""
        return self.rating_scale[1] - self.rating_scale[0]

    # ------------------------------------------------------------------ folds
    def _preprocess(self, train: sp.csr_matrix, rng: np.random.Generator) -> sp.csr_matrix:
        """Rating level: unchanged (subclasses may filter); user level: τ cap (`_cap_users`)."""
        return train

    def _fit_fold(self, train: sp.csr_matrix, key: FoldKey) -> DPFold:
        seed = fold_seed_key(key)
        train = self._preprocess(train, rng_for(self.random_state, self.name, *seed, "prep"))
        cap = getattr(self, "tau", None) if self.privacy_unit == "user" else None
        if self.mean_fraction > 0:
            means = dp_item_means(
                train,
                self.mean_epsilon,
                self.rating_scale,
                rng_for(self.random_state, self.name, *seed, "means"),
                user_level_cap=cap,
            )
        else:
            means = exact_item_means(train, self.rating_scale)
        centred = train.copy()
        centred.data = train.data - means.item_means[train.indices]
        params = self._train_fold(
            centred, train, means, rng_for(self.random_state, self.name, *seed, "train")
        )
        return DPFold(means, params)

    def _predict_fold(
        self, state: Any, key: FoldKey, indices: IntArray, values: FloatArray, items: IntArray
    ) -> tuple[FloatArray, UInt32Array]:
        means = state.means.item_means
        return self._predict_params(state.params, means, indices, values - means[indices], items)

    @abc.abstractmethod
    def _train_fold(
        self,
        centred: sp.csr_matrix,
        raw: sp.csr_matrix,
        means: NoisyMeans,
        rng: np.random.Generator,
    ) -> Any:
        """The DP training of one fold: `centred` holds r − r̄_i, `raw` the ratings."""

    @abc.abstractmethod
    def _predict_params(
        self,
        params: Any,
        item_means: FloatArray,
        query_indices: IntArray,
        query_centred: FloatArray,
        items: IntArray,
    ) -> tuple[FloatArray, UInt32Array]:
        """Scores of `items` from the parameters, the means and the query (centred)."""

    # ------------------------------------------------------------------ privacy
    def mean_event(self) -> dp.DpEvent:
        """The item means' release: Laplace with scale = sensitivity/ε_mean; exact means
        (`mean_fraction` 0, the paper's) are a non-private release."""
        if self.mean_fraction == 0:
            return dp.NonPrivateDpEvent()
        return dp.LaplaceDpEvent(1.0 / self.mean_epsilon)

    @abc.abstractmethod
    def _fit_events(self) -> list[dp.DpEvent]:
        """The model's own training events (the means' event is added by `output_privacy`)."""

    @abc.abstractmethod
    def _statement(self) -> PrivacyStatement:
        """The model's statement (ε of one fold state, neighbouring, notes, flags)."""

    def output_privacy(self) -> OutputPrivacy:
        """The model's privacy statement, flagged when the item means are not private."""
        statement = self._statement()
        if self.mean_fraction == 0:
            statement = dataclasses.replace(
                statement, flags=(*statement.flags, "item-means-not-private")
            )
        return OutputPrivacy(
            statement,
            fit_event=dp.ComposedDpEvent([*self._fit_events(), self.mean_event()]),
            fit_per_fold=True,
        )

    def _mean_note(self) -> str:
        if self.mean_fraction == 0:
            return (
                " Item means: exact, as the paper uses them — a non-private release, so the "
                "answers carry no guarantee (the ε above covers the model's training only)."
            )
        return (
            f" Item means: Laplace with ε = {self.mean_epsilon:g} "
            f"({self.mean_fraction:g} of ε; the paper releases exact means at no cost)."
        )


class PosteriorSampledRecommender(DPTrainedRecommender):
    """What DPPS-PNBM and DPPS-MF share (Wang & Tang §4.3 after Liu, Wang & Smola 2015): one
    SGLD sample of the posterior scaled by c = ε/(4B), every user capped at τ ratings so that
    her log-likelihood is bounded by B = φ²·τ. With temperature ϱ the chain samples the
    posterior scaled by c/ϱ, so one sample is ε/(2ϱ)-DP per user (`server.models.pnbm`'s
    module docstring), assuming the chain has converged.

    The chain (`chain`) runs Algorithm 2 with its step stated in drift units
    (`langevin.TemperedChain`): δ_t = δ₁·t^(−ξ) after `hold` steps, whatever ε, and noise
    N(0, 2δ_t/κ) that vanishes as ε grows, so that the chain ends at the MAP as ε → ∞.

    Subclasses set `tau`, `temperature`, `step`, `decay` and `hold` in `__init__` and say what
    they sample in `_sample_notes`.
    """

    tau: int
    temperature: float
    step: float
    decay: float
    hold: int

    @property
    def bound(self) -> float:
        """B = φ²·τ, the bound on one user's Σ e² (Wang & Tang §4.3)."""
        return self.phi**2 * self.tau

    @property
    def drift_scale(self) -> float:
        """c = ε/(4B) (Wang & Tang Algorithm 2 line 5)."""
        return self.model_epsilon / (4.0 * self.bound)

    @property
    def chain(self) -> TemperedChain:
        """The SGLD chain: drift step δ_t, noise N(0, 2δ_t/κ), κ = c/ϱ."""
        return TemperedChain(self.step, self.decay, self.hold, self.drift_scale, self.temperature)

    def effective_epsilon(self) -> float:
        """ε of the sample the chain draws: 4·(c/ϱ)·B/2 = ε/(2ϱ)."""
        return 4.0 * effective_scale(self.drift_scale, self.temperature) * self.bound / 2.0

    def _preprocess(self, train: sp.csr_matrix, rng: np.random.Generator) -> sp.csr_matrix:
        return cap_users(train, self.tau, rng)

    def _fit_events(self) -> list[dp.DpEvent]:
        return [pure_dp_event(self.effective_epsilon())]

    @abc.abstractmethod
    def _sample_notes(self, effective: float) -> str:
        """What the model samples and what its ε means (`effective` = ε/(2ϱ))."""

    def _statement(self) -> PrivacyStatement:
        eff = self.effective_epsilon()
        flags = ["assumes-mcmc-convergence"]
        if self.temperature < 1.0:
            flags.append("temperature-weakens-epsilon")
        return PrivacyStatement(
            kind="pure",
            epsilon=eff + self.mean_epsilon,
            delta=0.0,
            neighbouring="one user's ratings (capped at τ) replaced",
            notes=self._sample_notes(eff) + self._mean_note(),
            flags=tuple(flags),
        )


def exact_item_means(train: sp.csr_matrix, rating_scale: tuple[float, float]) -> NoisyMeans:
    """The exact item means (Wang & Tang's, not private; `mean_fraction` 0): r̄_i over the
    fold's ratings, the global mean for an unrated item."""
    m = train.shape[1]
    counts = np.bincount(train.indices, minlength=m)
    sums = np.bincount(train.indices, weights=train.data, minlength=m)
    mu = float(train.data.mean()) if train.nnz else sum(rating_scale) / 2.0
    means = np.divide(sums, counts, out=np.full(m, mu), where=counts > 0)
    return NoisyMeans(means, mu, 0.0, 0.0)


def cap_users(train: sp.csr_matrix, tau: int, rng: np.random.Generator) -> sp.csr_matrix:
    """Every user keeps at most τ of her ratings, the others removed uniformly at random
    (Wang & Tang §4.3); the result is a canonical CSR of the same shape."""
    counts = np.diff(train.indptr)
    if counts.size == 0 or counts.max() <= tau:
        return train.copy()
    keep = np.ones(train.nnz, dtype=bool)
    for u in np.flatnonzero(counts > tau):
        lo, hi = train.indptr[u], train.indptr[u + 1]
        drop = rng.choice(hi - lo, size=hi - lo - tau, replace=False)
        keep[lo + drop] = False
    coo = train.tocoo()
    out = sp.csr_matrix((coo.data[keep], (coo.row[keep], coo.col[keep])), shape=train.shape)
    out.sort_indices()
    return out


def keep_active_users(train: sp.csr_matrix, min_ratings: int) -> sp.csr_matrix:
    """Only the users with at least `min_ratings` ratings keep their row (others emptied),
    Wang & Tang §3 ("users who have more than 20 ratings": min_ratings = 21)."""
    counts = np.diff(train.indptr)
    if counts.size == 0 or counts.min() >= min_ratings:
        return train.copy()
    keep = np.repeat(counts >= min_ratings, counts)
    coo = train.tocoo()
    out = sp.csr_matrix((coo.data[keep], (coo.row[keep], coo.col[keep])), shape=train.shape)
    out.sort_indices()
    return out


__all__ = [
    "DPFold",
    "DPTrainedRecommender",
    "cap_users",
    "check_int",
    "check_number",
    "check_scale",
    "exact_item_means",
    "keep_active_users",
]
