"""The model family: one typed interface for every recommender the aggregator trains.

Every model is a `Model` subclass with class attributes readable without building one:
`name` (its registry and config name), `capabilities` (`shared.capabilities.ModelCapabilities`:
what it consumes, how it serves, what a score means) and `accepts` (which release scales it
reads, derived from `capabilities` by `default_accepts` unless set). The aggregator dispatches
on `capabilities`, never on names. Three sub-families, one per kind of input:

* `Recommender` (`ModelInput.RELEASES`): fitted on the sparse matrix of profile releases;
  answers blocks of queries on the server (`predict_block`, `recommend_block`; `predict` and
  `recommend` are blocks of one). PPCF, the Pearson baseline.
* `MatrixModel` (`ModelInput.ESTIMATES` or `RELEASES`): fitted on one matrix, publishes its
  result (`public_arrays`). The sketch kNN graph.
* `TwoTierModel` (`ModelInput.TWO_TIER`): fitted on the public tier's ratings, then folds in
  the private users' second-order releases round by round, publishing (µ, V) for local
  prediction. Xin & Jaakkola's low-rank model.

Every fitted model can save and restore its state (`state_arrays`, `restore`; see
`server.models.persistence`), so a restarted aggregator can serve again without refitting.
Hyper-parameters go in the constructor (validated there) and are read back by `get_params`
(scikit-learn's estimator contract); data comes through the methods.

The model never sees a user's true data or her private statistics (mean, std): it sees releases
(a disguised value may be any real number, including an explicit 0.0, so *stored* entries are
the filled cells) and, per query, the sparse vector the querying user sent.

Cross-validation in one protocol run: `fit` receives a group label per training row (the fold
of a 5-fold split over users). When a test user of fold f queries, `exclude_group=f` removes
the rows of fold f from the neighbour pool, so she is served only by users outside her fold.

Usage::

    model = PPCF(k=100).fit(train, exclude_groups=folds)
    scores, n_neighbours = model.predict(q_idx, q_val, items, exclude_group=folds[u])
    answers = model.predict_block([(q_idx, q_val), ...], [items, ...], exclude_groups=[...])
"""

from __future__ import annotations

import abc
import dataclasses
import inspect
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal, Self

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from privrec.server.models.inputs import check_index_array, check_train
from privrec.shared.accounting import dp
from privrec.shared.capabilities import (
    ModelCapabilities,
    ModelInput,
    ReleaseScale,
    ScoreKind,
)
from privrec.shared.errors import NotFittedError
from privrec.shared.mechanisms.base import PrivacyStatement
from privrec.shared.types import Arrays, BoolArray, FloatArray, IntArray, SparseMatrix

UInt32Array = npt.NDArray[np.uint32]


def default_accepts(caps: ModelCapabilities, private_release: str = "") -> frozenset[ReleaseScale]:
    """The release scales a model reads, from what it declares it consumes and answers.

    * a model fitted on the releases themselves reads them on the scale it answers on: a
      z-score model (PPCF, Bilge Eq 2.3) reads disguised z-scores, a rating model ratings, a
      classifier of likes (PPNBC, Eq 8.1) binary likes;
    * a model fitted on de-biased estimates (`Mechanism.estimate`, e.g. the sketch kNN graph)
      reads any release but a second-order one (bound to a public model it has not got);
    * an item-frequency model (the sum of the estimates) needs an estimate per item: the
      unary encodings of OUE;
    * a two-tier model reads what its private tier sends: second-order vectors, or ratings
      (`private_release = "ratings"`, Xin & Jaakkola's Full EM reference).
    """
    if caps.consumes is ModelInput.RELEASES:
        return frozenset({_READS[caps.scores]})
    if caps.consumes is ModelInput.ESTIMATES:
        return frozenset(ReleaseScale) - {ReleaseScale.SECOND_ORDER}
    if caps.consumes is ModelInput.ESTIMATE_SUM:
        return frozenset({ReleaseScale.ITEM_BITS})
    if private_release == "ratings":
        return frozenset({ReleaseScale.RATING})
    return frozenset({ReleaseScale.SECOND_ORDER})


_READS = {
    ScoreKind.ZSCORE: ReleaseScale.ZSCORE,
    ScoreKind.RATING: ReleaseScale.RATING,
    ScoreKind.PROBABILITY: ReleaseScale.BINARY,
}


class Model(abc.ABC):
    """Every server-side model (see the module docstring).

    Class attributes:
        name: registry and config name.
        capabilities: the model's declaration.
        answers_queries: `capabilities.answers_queries`, set for each subclass.
        accepts: the release scales the model reads (`ReleaseScale`); unless a class sets it,
            `default_accepts` derives it from `capabilities` when the class is defined.
    """

    name: ClassVar[str]
    capabilities: ClassVar[ModelCapabilities]
    answers_queries: ClassVar[bool]
    accepts: ClassVar[frozenset[ReleaseScale]] = frozenset()
    mechanism_params: ClassVar[tuple[str, ...]] = ()
    """Constructor parameters the server fills from the run mechanism's public parameters of
    the same name, unless `[model.params]` sets them (e.g. PPCF+'s `sigma_max`, PPNBC's
    `theta`): public facts the aggregator knows anyway (`server.spec.model_params`)."""
    counterpart: ClassVar[str | None] = None
    """The registered model the referee fits, with its defaults, on the true ratings as this
    model's non-private counterpart (e.g. `biased_mf` beside the DP factorisation models that
    run its trainer); None: the Pearson kNN of Bilge Eq 2.1/2.2, or a classifier's unmasked
    self (`sim.referee_reference.reference_of`)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        caps = cls.__dict__.get("capabilities")
        if caps is not None:
            cls.answers_queries = caps.answers_queries
            if "accepts" not in cls.__dict__:
                cls.accepts = default_accepts(caps, getattr(cls, "private_release", ""))

    # ------------------------------------------------------------------ parameters
    def get_params(self) -> dict[str, Any]:
        """The constructor's parameters as set (each is stored under its own name)."""
        names = [
            p.name
            for p in inspect.signature(type(self).__init__).parameters.values()
            if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
        return {n: getattr(self, n) for n in names}

    # ------------------------------------------------------------------ output privacy
    def output_privacy(self) -> OutputPrivacy | None:
        """What the model's outputs guarantee to the users whose data trained it (against
        other users and observers of the outputs, never against the aggregator), or None when
        the model makes no such claim (the default). Trusted-curator models (Zhu's PNCF,
        Wang & Tang, Balu's DP factorisation) override it; the report composes its events
        into the per-user ledger."""
        return None

    # ------------------------------------------------------------------ what is published
    def public_arrays(self) -> Arrays:
        """What GetModel publishes besides the run's metadata (default: nothing).

        Raises:
            NotFittedError: the model has something to publish but is not fitted.
        """
        return {}

    # ------------------------------------------------------------------ persistence
    @abc.abstractmethod
    def state_arrays(self) -> Arrays:
        """The fitted state, as named arrays (what `restore` reads back).

        Raises:
            NotFittedError: before the model is fitted.
        """

    @abc.abstractmethod
    def restore(self, state: Mapping[str, np.ndarray]) -> Self:
        """Set the fitted state from `state_arrays()` of a model with the same parameters."""

    def _require(self, *attrs: str) -> None:
        if any(getattr(self, a, None) is None for a in attrs):
            raise NotFittedError(f"{type(self).__name__} is not fitted; call fit() first")


@dataclasses.dataclass(frozen=True)
class OutputPrivacy:
    """A model's output-privacy claim (see `Model.output_privacy`).

    Attributes:
        statement: the guarantee of the model's outputs, stated as for a mechanism.
        fit_event: what fitting spends of each training user's privacy (e.g. DP-SGD), or None.
        answer_event: what each answered query (Predict or Recommend) spends of every training
            user's privacy, or None. Charged to every training user, since an answer may draw
            on anyone's data (conservative for models whose answers touch few users).
        answer_scope: who pays `answer_event`: "all" (every training user, once per answered
            query; the default) or "raters" (once per predicted item, only the training users
            outside the querier's fold who rated that item — for models whose prediction of
            item i reads nobody else's data, e.g. Zhu's PNCF; a Recommend answer predicts
            every item absent from the query).
        fit_per_fold: the model fits one state per cross-validation fold
            (`server.models.foldwise`), so `fit_event` is charged once per fold state a user
            is in (every fold but her own) rather than once.
    """

    statement: PrivacyStatement
    fit_event: dp.DpEvent | None = None
    answer_event: dp.DpEvent | None = None
    answer_scope: str = "all"
    fit_per_fold: bool = False

    def __post_init__(self) -> None:
        if self.answer_scope not in ("all", "raters"):
            raise ValueError(f"`answer_scope` must be 'all' or 'raters', got {self.answer_scope!r}")


class MatrixModel(Model):
    """A model fitted once on one matrix of the releases (or of their estimates)."""

    @abc.abstractmethod
    def fit(self, train: Any, *, exclude_groups: IntArray | None = None) -> Self:
        """Train on `train` (rows in the canonical user-id order); `exclude_groups` gives each
        row's fold (see the module docstring)."""


class TwoTierModel(Model):
    """A model of Xin & Jaakkola's two tiers: a public model first, then private releases.

    Attributes (after `fit_public`):
        mu_: float array of shape (m,), the published item means µ.
        V_: float array of shape (m, k), the published factor V.
    """

    mu_: FloatArray | None
    V_: FloatArray | None
    ridge: float
    n_public_: int
    n_private_: int
    private_release: ClassVar[str] = "second-order"
    """What the private tier sends: "second-order" (one release of a mechanism bound to the
    public model, `Mechanism.binds_public_model`, de-biased by `Mechanism.estimate`) or
    "ratings" (raw training ratings through the `raw` mechanism: Xin & Jaakkola's non-private
    "Full EM" reference)."""

    @property
    @abc.abstractmethod
    def min_public_users(self) -> int:
        """How many public users the public model needs at least."""

    @abc.abstractmethod
    def fit_public(self, public_ratings: SparseMatrix) -> Self:
        """Stage 1: the public model from the public users' ratings (canonical row order)."""

    @abc.abstractmethod
    def add_private(
        self, second_order: Any, *, diagonal: FloatArray | Literal["outer"] | None = "outer"
    ) -> Self:
        """Stage 2, a collect round: fold more private users' releases in.

        Args:
            second_order: for `private_release` "second-order", the de-biased vectors u,
                float array of shape (n, m); for "ratings", their ratings, sparse (n, m).
            diagonal: what the vectors say about (r_i − µ_i)², the diagonal of each user's
                second moment: per-user estimates of shape (n, m), None when they say nothing
                (the model then fills it from the public users), or "outer" for u² itself.
        """

    def public_arrays(self) -> Arrays:
        """What GetModel publishes: µ, V and λ′ (each user completes herself, Eq. (4))."""
        if self.mu_ is None or self.V_ is None:
            raise NotFittedError(f"{type(self).__name__} is not fitted")
        return {
            "mu": self.mu_,
            "V": self.V_,
            "ridge": np.array(self.ridge),
            "n_public": np.array(self.n_public_),
            "n_private": np.array(self.n_private_),
        }

    def _restore_public(self, state: Mapping[str, np.ndarray]) -> FloatArray:
        """µ, V and the tiers' sizes from `state_arrays()`'s arrays; returns µ."""
        mu: FloatArray = np.asarray(state["mu"], dtype=np.float64)
        self.mu_, self.V_ = mu, np.asarray(state["V"], dtype=np.float64)
        self.n_public_, self.n_private_ = int(state["n_public"]), int(state["n_private"])
        return mu


class Recommender(MatrixModel):
    """A model trained on a sparse user × item matrix that answers queries in blocks.

    Subclasses set `name` and `capabilities`, take their hyper-parameters in `__init__`
    (validated there) and implement `_fit` and `_predict` (or `_predict_block` when they can
    answer many queries at once). The public methods validate their inputs once, here, so the
    subclasses can trust them.

    Attributes (after `fit`):
        n_users_: number of training rows.
        n_items_: m, the number of items (columns).
        groups_: int64 array of shape (n_users_,) with each row's group, or None.
    """

    n_users_: int
    n_items_: int
    groups_: IntArray | None

    # ---------------------------------------------------------------- fitting
    def fit(self, train: SparseMatrix, *, exclude_groups: IntArray | None = None) -> Self:
        """Train on `train`.

        Args:
            train: scipy sparse matrix of shape (n_users, n_items); a stored entry (explicit zeros
                included) is a filled cell, an absent entry an empty cell. Converted to a
                canonical float64 CSR copy; the caller's matrix is not modified.
            exclude_groups: int array of shape (n_users,): each row's group label (e.g. its
                fold), used by `predict(..., exclude_group=g)`; None when no row is ever
                excluded.

        Returns:
            self.

        Raises:
            ValueError: `train` is not a 2-D sparse matrix with finite values and no duplicate
                entries, or `exclude_groups` has the wrong shape.
        """
        csr = check_train(train)
        groups = None
        if exclude_groups is not None:
            groups = np.asarray(exclude_groups)
            if groups.shape != (csr.shape[0],) or not np.issubdtype(groups.dtype, np.integer):
                raise ValueError(
                    f"`exclude_groups` must be an int array of shape ({csr.shape[0]},), got "
                    f"dtype {groups.dtype} shape {groups.shape}"
                )
            groups = groups.astype(np.int64)
        self._fit(csr)
        self.n_users_, self.n_items_ = int(csr.shape[0]), int(csr.shape[1])
        self.groups_ = groups
        self._train = csr
        return self

    # ---------------------------------------------------------------- queries, in blocks
    def predict_block(
        self,
        queries: Sequence[tuple[IntArray, FloatArray]],
        items: Sequence[IntArray],
        *,
        exclude_groups: Sequence[int | None] | None = None,
    ) -> list[tuple[FloatArray, UInt32Array]]:
        """Score each query's target items; query i is answered independently of the others.

        Args:
            queries: per query, (indices, values): int array of shape (g,), g >= 1 distinct
                items the user filled, and her (possibly disguised) values there.
            items: per query, int array of shape (t,), the items to score (repeats allowed).
            exclude_groups: per query, a group label given to `fit` whose rows are removed from
                her neighbour pool, or None; None altogether keeps every row for everyone.

        Returns:
            per query, (scores, n_neighbours): float64 array of shape (t,) — what a score means
            is `capabilities.scores` — and uint32 array of shape (t,), the training rows that
            contributed to each score (0: the model fell back to its default).

        Raises:
            NotFittedError: before `fit`.
            ValueError: a malformed query or item list (naming its position in the block), or
                `exclude_groups` without groups at `fit`.
        """
        block = self._check_block(queries, exclude_groups)
        if len(items) != len(block.indices):
            raise ValueError(f"got {len(block.indices)} queries but {len(items)} item lists")
        targets = [
            check_index_array(_at("items", i, len(items)), it, self.n_items_)
            for i, it in enumerate(items)
        ]
        return self._predict_block(block, targets)

    def recommend_block(
        self,
        queries: Sequence[tuple[IntArray, FloatArray]],
        n: int,
        *,
        exclude_groups: Sequence[int | None] | None = None,
    ) -> list[tuple[IntArray, FloatArray]]:
        """The `n` best-scored items each querying user did not send, best first.

        Candidates are the items absent from her query with at least one contributing neighbour
        (an item nobody in the pool filled has no evidence behind its score). Ties go to the
        smaller item index. Fewer than `n` items come back when fewer candidates exist. The
        query's cells include any fake cells of a disguised profile, which the server cannot
        tell apart; a client drops whatever else she wants locally.

        Returns:
            per query, (items, scores): int64 array of shape (≤ n,) and their float64 scores.
        """
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
            raise ValueError(f"`n` must be an int >= 1, got {n!r}")
        block = self._check_block(queries, exclude_groups)
        candidates = []
        for idx in block.indices:
            unseen = np.ones(self.n_items_, dtype=bool)
            unseen[idx] = False
            candidates.append(np.flatnonzero(unseen))
        out = []
        for cand, (scores, counts) in zip(
            candidates, self._predict_block(block, candidates), strict=True
        ):
            keep = counts > 0
            chosen, kept = cand[keep], scores[keep]
            # lexsort: last key is primary -> score descending, then item index ascending.
            order = np.lexsort((chosen, -kept))[: int(n)]
            out.append((chosen[order], kept[order]))
        return out

    def predict(
        self,
        query_indices: IntArray,
        query_values: FloatArray,
        items: IntArray,
        *,
        exclude_group: int | None = None,
    ) -> tuple[FloatArray, UInt32Array]:
        """`predict_block` for one query (see there)."""
        return self.predict_block(
            [(query_indices, query_values)], [items], exclude_groups=[exclude_group]
        )[0]

    def recommend(
        self,
        query_indices: IntArray,
        query_values: FloatArray,
        n: int,
        *,
        exclude_group: int | None = None,
    ) -> tuple[IntArray, FloatArray]:
        """`recommend_block` for one query (see there)."""
        return self.recommend_block(
            [(query_indices, query_values)], n, exclude_groups=[exclude_group]
        )[0]

    # ---------------------------------------------------------------- persistence
    def state_arrays(self) -> Arrays:
        """The training matrix and groups: a recommender's state is rebuilt from them by the
        same deterministic `_fit`."""
        self._check_fitted()
        csr = self._train
        state = {
            "data": csr.data,
            "indices": csr.indices,  # as fitted (int32 below 2**31 cells): no copy to save
            "indptr": csr.indptr,
            "shape": np.array(csr.shape, dtype=np.int64),
        }
        if self.groups_ is not None:
            state["groups"] = self.groups_
        return state

    def restore(self, state: Mapping[str, np.ndarray]) -> Self:
        """Rebuild the fitted model from `state_arrays()`'s arrays."""
        n_rows, n_cols = (int(x) for x in state["shape"])
        train = sp.csr_matrix(
            (state["data"], state["indices"], state["indptr"]), shape=(n_rows, n_cols)
        )
        return self.fit(train, exclude_groups=state.get("groups"))

    # ---------------------------------------------------------------- subclass hooks
    @abc.abstractmethod
    def _fit(self, train: sp.csr_matrix) -> None:
        """Train on a validated canonical float64 CSR matrix."""

    def _predict_block(
        self, block: QueryBlock, items: list[IntArray]
    ) -> list[tuple[FloatArray, UInt32Array]]:
        """Score a validated block (default: one query at a time with `_predict`)."""
        return [
            self._predict(idx, val, it, allowed)
            for idx, val, it, allowed in zip(
                block.indices, block.values, items, block.allowed, strict=True
            )
        ]

    @abc.abstractmethod
    def _predict(
        self, query_indices: IntArray, query_values: FloatArray, items: IntArray, allowed: BoolArray
    ) -> tuple[FloatArray, UInt32Array]:
        """Score `items`; `allowed` (n_users_,) marks the rows that may serve as neighbours."""

    # ---------------------------------------------------------------- validation helpers
    def _check_fitted(self) -> None:
        if not hasattr(self, "n_items_"):
            raise NotFittedError(f"{type(self).__name__} is not fitted; call fit() first")

    def _check_block(
        self,
        queries: Sequence[tuple[IntArray, FloatArray]],
        exclude_groups: Sequence[int | None] | None,
    ) -> QueryBlock:
        self._check_fitted()
        n = len(queries)
        if n == 0:
            raise ValueError("a query block must hold at least one query")
        groups = list(exclude_groups) if exclude_groups is not None else [None] * n
        if len(groups) != n:
            raise ValueError(f"got {n} queries but {len(groups)} exclude_groups")
        indices, values = [], []
        for i, query in enumerate(queries):
            try:
                idx, val = query
            except (TypeError, ValueError):
                raise ValueError(
                    f"`{_at('queries', i, n)}` must be an (indices, values) pair"
                ) from None
            idx, val = self._check_query(idx, val, _at("query", i, n))
            indices.append(idx)
            values.append(val)
        # one mask per distinct group, shared by its queries (N bools each: a mask per query
        # would take N² bytes for a referee's block of every user)
        masks = {g: self._allowed(g) for g in dict.fromkeys(groups)}
        return QueryBlock(indices, values, [masks[g] for g in groups])

    def _check_query(
        self, query_indices: IntArray, query_values: FloatArray, where: str = "query"
    ) -> tuple[IntArray, FloatArray]:
        prefix = "" if where == "query" else f"{where}."
        idx = check_index_array(f"{prefix}query_indices", query_indices, self.n_items_)
        val = np.asarray(query_values, dtype=np.float64)
        if val.shape != idx.shape:
            raise ValueError(
                f"`{prefix}query_values` must have the shape of `query_indices` "
                f"{idx.shape}, got {val.shape}"
            )
        if idx.size == 0:
            raise ValueError(f"`{prefix}query_indices` must name at least one filled cell")
        if np.unique(idx).size != idx.size:
            raise ValueError(f"`{prefix}query_indices` must not repeat an item")
        if not np.all(np.isfinite(val)):
            raise ValueError(f"`{prefix}query_values` must be finite")
        return idx, val

    def _allowed(self, exclude_group: int | None) -> BoolArray:
        if exclude_group is None:
            return np.ones(self.n_users_, dtype=bool)
        if self.groups_ is None:
            raise ValueError(
                f"`exclude_group`={exclude_group!r} given but the model was fitted "
                "without `exclude_groups`"
            )
        return np.asarray(self.groups_ != int(exclude_group))


@dataclasses.dataclass(frozen=True)
class QueryBlock:
    """A validated block of queries: query i is (indices[i], values[i]); `allowed[i]` marks the
    training rows that may serve her (read-only: queries of one exclusion group share it)."""

    indices: list[IntArray]
    values: list[FloatArray]
    allowed: list[BoolArray]


def _at(name: str, i: int, n: int) -> str:
    """`name` for a single query, `name[i]` inside a block (error messages)."""
    return name if n == 1 else f"{name}[{i}]"


__all__ = [
    "Arrays",
    "MatrixModel",
    "Model",
    "OutputPrivacy",
    "QueryBlock",
    "Recommender",
    "TwoTierModel",
    "UInt32Array",
    "default_accepts",
]
