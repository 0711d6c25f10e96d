"""Balu's chapter-4 recommenders: regular SGD MF, count-sketch MF, feature hashing, and the
data-clipped "differentially private" count-sketch MF (trusted curator).

Each is a `Recommender` over the shared core `server.models.count_sketch`: fitted on the users'
raw ratings (the `raw` mechanism: Balu's server is a trusted curator, extraction §0), answering
Predict/Recommend on the server with ratings (`ScoreKind.RATING`).

Serving a query. A query carries the user's (training) ratings, not an id the model knows, so
the model folds her in (`Factorization.fold_in`: her bias and the exact minimiser of the same
objective (2.7) in p_u with the item side fixed) and scores the targets with µ + b_u + b_i +
p_uᵀq̃_i. Cross-validation in one protocol run (docs/decisions/protocol.md, "5-fold CV"): with groups
at `fit`, one factorization is trained per group on every row outside it, and a query of
group g is answered by the model that never saw group g (her released profile included her
held-out ratings); a query without a group is answered by a model of every row (trained when
first needed). `n_neighbours` of an answer is the number of training ratings of the item in
the model that answered (0: no training rating, the score is the baseline plus an untrained
q̃_i).

Output privacy (`output_privacy`). Regular MF, count sketch and feature hashing make no claim.
The clipped model carries Balu's claim (§4.2.2) as what it is: the thesis argues ε-DP at rating
level (Def. 2.4.4) by analogy with posterior sampling [WFS15, LWS15], but says itself that the
clipped function "no longer defines a valid conditional probability" and that the sketch noise
is not SGLD's (not Gaussian, variance ∝ η² not η, the observed rating's factors not perturbed);
and by its own §2.4.6.3 a bound B = ε/2 would give 2ε, not ε. No ε is certified, so the
statement's kind is "none", with the thesis's claimed ε in its notes and flags, and the fit
event is `UnsupportedDpEvent` (the accountant cannot compose a heuristic). The guarantee, were
it proved, would hold against other users and observers of the predictions, never against the
aggregator, which holds every raw rating.

References:
    R. Balu, PhD thesis, Université Rennes 1, 2016, ch. 4 (§4.1, §4.2.1–4.2.2, Table 4.2).
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar, Self

import numpy as np
import scipy.sparse as sp

from privrec.server.models.base import OutputPrivacy, Recommender, UInt32Array
from privrec.server.models.count_sketch import Factorization, SGDConfig, fit_factorization
from privrec.shared.accounting import dp
from privrec.shared.capabilities import ModelCapabilities, ModelInput, ScoreKind, Serving
from privrec.shared.mechanisms.base import PrivacyStatement
from privrec.shared.seeding import rng_for
from privrec.shared.types import BoolArray, FloatArray, IntArray

_NO_CLAIM = PrivacyStatement(
    kind="none",
    epsilon=None,
    delta=None,
    neighbouring="n/a",
    notes=(
        "no output-privacy claim: the model is fitted on raw ratings and its predictions may "
        "reveal them (Balu ch. 4 makes a claim only for the data-clipped count sketch)"
    ),
)


class SGDFactorizationModel(Recommender):
    """The shared recommender of Balu's chapter 4 (see the module docstring).

    Subclasses fix the storage (dense or a sketch of `depth` rows) and whether a clipping
    threshold applies.

    Args:
        k: d, the number of latent factors (the model's size, `[model].k`).
        eta: η, the initial learning rate.
        reg: λ, the per-rating Tikhonov weight.
        epochs: T.
        decay: b of η_t = η/(1 + b t/T).
        init_scale: σ₀ of the initial reads.
        random_state: the model's seed (hashes, initial factors, epoch orders).
    """

    capabilities: ClassVar[ModelCapabilities] = ModelCapabilities(
        ModelInput.RELEASES, Serving.QUERIES, ScoreKind.RATING
    )

    def __init__(
        self,
        k: int = 32,
        *,
        eta: float = 0.02,
        reg: float = 0.05,
        epochs: int = 20,
        decay: float = 1.0,
        init_scale: float = 0.1,
        random_state: int = 0,
    ) -> None:
        self.k, self.eta, self.reg, self.epochs = k, eta, reg, epochs
        self.decay, self.init_scale, self.random_state = decay, init_scale, random_state
        if (
            isinstance(random_state, bool)
            or not isinstance(random_state, int | np.integer)
            or random_state < 0
        ):
            raise ValueError(f"`random_state` must be an int >= 0, got {random_state!r}")
        self.sgd_config()  # validates every hyper-parameter, naming it
        self._models: dict[int | None, Factorization] = {}
        self._counts: dict[int | None, IntArray] = {}
        self._fit_groups: IntArray | None = None

    # ------------------------------------------------------------------ configuration
    def sgd_config(self) -> SGDConfig:
        """The core's hyper-parameters (`count_sketch.SGDConfig`)."""
        return SGDConfig(
            d=self.k,
            storage="dense",
            eta=self.eta,
            reg=self.reg,
            epochs=self.epochs,
            decay=self.decay,
            init_scale=self.init_scale,
        )

    def output_privacy(self) -> OutputPrivacy:
        """No output-privacy claim: fitted on raw ratings, its predictions may reveal them."""
        return OutputPrivacy(_NO_CLAIM, fit_event=dp.NonPrivateDpEvent())

    # ------------------------------------------------------------------ fitting
    def fit(
        self, train: sp.spmatrix | sp.sparray, *, exclude_groups: IntArray | None = None
    ) -> Self:
        """`Recommender.fit`; with groups, one factorization per group is trained on the rows
        outside it (see the module docstring)."""
        self._fit_groups = None if exclude_groups is None else np.asarray(exclude_groups)
        return super().fit(train, exclude_groups=exclude_groups)

    def _fit(self, train: sp.csr_matrix) -> None:
        self._train_csr = train
        self._models, self._counts = {}, {}
        groups = self._fit_groups
        if groups is None or groups.shape != (train.shape[0],):
            self._train_one(None)
            return
        for g in np.unique(groups).tolist():
            self._train_one(int(g))

    def _train_one(self, left_out: int | None) -> Factorization:
        """The factorization of every row outside group `left_out` (None: every row)."""
        coo = self._train_csr.tocoo()
        keep = np.ones(coo.nnz, dtype=bool)
        if left_out is not None and self._fit_groups is not None:
            keep = self._fit_groups[coo.row] != left_out
        users, items = coo.row[keep].astype(np.int64), coo.col[keep].astype(np.int64)
        rng = rng_for(
            self.random_state, "sgd-mf", "all" if left_out is None else f"left-out-{left_out}"
        )
        model = fit_factorization(
            users,
            items,
            coo.data[keep],
            self._train_csr.shape[0],
            self._train_csr.shape[1],
            self.sgd_config(),
            rng,
        )
        self._models[left_out] = model
        self._counts[left_out] = np.bincount(items, minlength=self._train_csr.shape[1])
        return model

    # ------------------------------------------------------------------ answering
    def _model_for(self, allowed: BoolArray) -> int | None:
        if self.groups_ is None or bool(allowed.all()):
            return None
        excluded = np.unique(self.groups_[~allowed])
        return int(excluded[0])

    def _predict(
        self, query_indices: IntArray, query_values: FloatArray, items: IntArray, allowed: BoolArray
    ) -> tuple[FloatArray, UInt32Array]:
        key = self._model_for(allowed)
        model = self._models[key] if key in self._models else self._train_one(key)
        scores = model.predict_new_user(query_indices, query_values, items)
        return scores, self._counts[key][items].astype(np.uint32)


class RegularMF(SGDFactorizationModel):
    """Regular online SGD matrix factorization (Balu §2.2.5, the chapter-4 baseline)."""

    name: ClassVar[str] = "sgd_mf"


class CountSketchMF(SGDFactorizationModel):
    """Count-sketch MF (Balu §4.1): one shared sketch of `depth` rows, mean read.

    Args:
        k: d, the latent factors.
        depth: Balu's k, the sketch's rows (4 in Table 4.2).
        gamma: γ, the space gain (width by Eq. (4.9)).
        eta, reg, epochs, decay, init_scale, random_state: as `SGDFactorizationModel`.
    """

    name: ClassVar[str] = "count_sketch_mf"
    default_depth: ClassVar[int] = 4

    def __init__(
        self,
        k: int = 32,
        *,
        depth: int | None = None,
        gamma: float = 1.0,
        eta: float = 0.02,
        reg: float = 0.05,
        epochs: int = 20,
        decay: float = 1.0,
        init_scale: float = 0.1,
        random_state: int = 0,
    ) -> None:
        self.depth = self.default_depth if depth is None else depth
        self.gamma = gamma
        super().__init__(
            k,
            eta=eta,
            reg=reg,
            epochs=epochs,
            decay=decay,
            init_scale=init_scale,
            random_state=random_state,
        )

    def sgd_config(self) -> SGDConfig:
        """The core's hyper-parameters, factors in a sketch of `depth` rows (width by Eq. (4.9))."""
        return SGDConfig(
            d=self.k,
            storage="sketch",
            depth=self.depth,
            gamma=self.gamma,
            eta=self.eta,
            reg=self.reg,
            epochs=self.epochs,
            decay=self.decay,
            init_scale=self.init_scale,
        )


class FeatureHashingMF(CountSketchMF):
    """Feature-hashing MF [KWS10]: the count sketch with one row (Balu §4.1.1: k = 1)."""

    name: ClassVar[str] = "feature_hashing_mf"
    depth: ClassVar[int] = 1  # type: ignore[misc]

    def __init__(
        self,
        k: int = 32,
        *,
        gamma: float = 1.0,
        eta: float = 0.02,
        reg: float = 0.05,
        epochs: int = 20,
        decay: float = 1.0,
        init_scale: float = 0.1,
        random_state: int = 0,
    ) -> None:
        self.gamma = gamma
        SGDFactorizationModel.__init__(
            self,
            k,
            eta=eta,
            reg=reg,
            epochs=epochs,
            decay=decay,
            init_scale=init_scale,
            random_state=random_state,
        )


class ClippedCountSketchMF(CountSketchMF):
    """Balu's data-clipped "differentially private" count-sketch MF (§4.2.1–4.2.2).

    A training rating whose loss ½(r − r̂)² exceeds `epsilon` is skipped for that epoch (the
    module docstring of `count_sketch`); the output-privacy claim is stated, not certified
    (this module's docstring).

    Args:
        epsilon: the clipping threshold ε (the thesis's privacy parameter; inf = no clipping).
        k, depth, gamma, eta, reg, epochs, decay, init_scale, random_state: as `CountSketchMF`;
            the thesis's privacy runs use T = 100 epochs.
    """

    name: ClassVar[str] = "dp_count_sketch_mf"

    def __init__(
        self,
        k: int = 32,
        *,
        epsilon: float = 4.0,
        depth: int | None = None,
        gamma: float = 1.0,
        eta: float = 0.02,
        reg: float = 0.05,
        epochs: int = 100,
        decay: float = 1.0,
        init_scale: float = 0.1,
        random_state: int = 0,
    ) -> None:
        self.epsilon = epsilon
        super().__init__(
            k,
            depth=depth,
            gamma=gamma,
            eta=eta,
            reg=reg,
            epochs=epochs,
            decay=decay,
            init_scale=init_scale,
            random_state=random_state,
        )

    def sgd_config(self) -> SGDConfig:
        """The sketch's SGD, skipping ratings whose loss exceeds ε (Balu §4.2.1); ε a number."""
        c = super().sgd_config()
        if isinstance(self.epsilon, bool) or not isinstance(self.epsilon, int | float):
            raise ValueError(f"`epsilon` must be a number > 0, got {self.epsilon!r}")
        return dataclasses.replace(c, clip=float(self.epsilon))

    def output_privacy(self) -> OutputPrivacy:
        """Balu §4.2.2's rating-level ε as a flagged claim, not certified; the base's if ε = ∞."""
        eps = float(self.epsilon)
        if math.isinf(eps):
            return super().output_privacy()
        statement = PrivacyStatement(
            kind="none",
            epsilon=None,
            delta=None,
            neighbouring="one rating added (Balu Def. 2.4.4), per fitted model",
            notes=(
                f"Balu §4.2.2 claims eps = {eps:g} DP at rating level for the predictions of "
                "the data-clipped count-sketch factorization (ratings with loss > eps skipped "
                "per epoch), by analogy with posterior sampling; the thesis itself notes the "
                "clipped likelihood is not a valid probability and the sketch noise is not "
                f"SGLD's, and its own Sec. 2.4.6.3 would give {2 * eps:g}, not {eps:g}. Not "
                "certified: no epsilon is stated. With cross-validation each user's ratings "
                "train every model but her own fold's. Against other users and observers "
                "only: the aggregator holds every raw rating."
            ),
            flags=(
                "heuristic-claim-not-certified",
                f"claimed-rating-level-epsilon={eps:g}",
            ),
        )
        return OutputPrivacy(statement, fit_event=dp.UnsupportedDpEvent())


__all__ = [
    "ClippedCountSketchMF",
    "CountSketchMF",
    "FeatureHashingMF",
    "RegularMF",
    "SGDFactorizationModel",
]
