"""User-based k-nearest-neighbour CF: the non-private baseline and PPCF on RPT data.

Two models share one neighbourhood step (`neighbour_average`): given a weight w_u per training
user and a "deviation" d_uq per filled cell, the score of item q is

    Σ_{u∈N_q} d_uq·w_u / Σ_{u∈N_q} w_u,   N_q = the k largest-w users among the eligible ones,

and they differ only in w, d and the offset added:

* `PearsonKNN` (Bilge Eq 2.1, Eq 2.2; Herlocker et al. 1999) on TRUE ratings: w = Pearson
  correlation over co-rated items, d_uq = v_uq − v̄_u, offset v̄_a. Run by the referee only.
* `PPCF` (Bilge Eq 2.4, Eq 2.6; Polat & Du 2005a) on the disguised matrix U′: w′ = Z′_a·Z′_u / m
  with empty cells as 0, d_uq = z′_uq, offset 0. The server returns P′_aq; the client alone
  de-normalises it with her private mean and deviation (`shared.zscores.denormalise`, Bilge Eq 2.5).

Choices where the thesis is silent (Bilge extraction §3.0, §7.4; recorded in docs/decisions/knn.md):

* **Eligible neighbours.** For item q, a neighbour must have a filled cell at q (on U′ a fake
  cell counts: the server cannot tell fakes apart) and must not be in the excluded group. The
  top k are taken among those ("weighted average of those neighbours having a rating on q",
  Bilge §6.2), not chosen first and filtered after, which would leave few raters per item.
* **Only positive weights.** Users with w ≤ 0 are not neighbours. The thesis's denominators are
  Σ w (Eqs 2.2, 2.5; no absolute value), and with negative weights allowed that sum can be near 0
  or negative, which makes the average explode or flip sign; "most similar" users are the
  positively correlated ones. Consequently every denominator is > 0 when a neighbour exists.
* **No neighbour.** When no eligible user has w > 0 the score falls back to the offset (P′ = 0 for
  PPCF, i.e. the user's own mean after de-normalising; v̄_a for PearsonKNN), and the returned
  neighbour count is 0 so that callers can tell.
* **Means.** v̄_u and v̄_a are each user's mean over ALL her ratings (the training row, or the
  query), both inside Eq 2.1 and in Eq 2.2 (Resnick/Herlocker convention; the v̄_u of Eq 2.2
  must be an overall mean since q is not co-rated). Pearson with no co-rated variation is 0.
* **No significance weighting, no minimum overlap.** Neither is in the thesis; a pair with one
  co-rated item can have |w| = 1.
* **Ties** in w are broken by the smaller training-row index, so results are deterministic.
* **Clipping** of the final rating to the scale is not in the thesis (Eq 2.5 is unbounded). It
  never increases an absolute error when the true rating lies on the scale; `denormalise` and
  `PearsonKNN` take an optional `clip=(lo, hi)`, and the recommended protocol setting is the
  dataset's rating scale (the bench reports both).

References:
    Bilge, A. "Improving Performance of Privacy-Preserving Collaborative Filtering Schemes",
    PhD thesis, Anadolu University, 2013, §2.1 and §2.3.
    Polat, H., Du, W. "Privacy-preserving collaborative filtering", IJEC 9(4), 2005.
    Herlocker, J. et al. "An algorithmic framework for performing collaborative filtering",
    SIGIR 1999.
"""

from __future__ import annotations

import abc
from typing import ClassVar, Self

import numpy as np
import scipy.sparse as sp

from privrec.server.models import knn_block
from privrec.server.models.base import QueryBlock, Recommender, UInt32Array
from privrec.shared.capabilities import ModelCapabilities, ModelInput, ScoreKind, Serving
from privrec.shared.types import BoolArray, FloatArray, IndexArray, IntArray


def neighbour_average(
    dev: sp.csc_matrix, weights: FloatArray, items: IntArray, k: int, allowed: BoolArray
) -> tuple[FloatArray, UInt32Array]:
    """Top-k weighted average of deviations per item (the shared step of Bilge Eq 2.2 / 2.6).

    For each requested item q, the eligible users are the rows with a stored entry in column q
    of `dev`, `allowed[u]` true and `weights[u] > 0`; the k with the largest weight (ties: smaller
    row first) are the neighbours N_q, and the result is Σ_{N_q} dev_uq·w_u / Σ_{N_q} w_u, or 0
    when N_q is empty. Vectorised over all entries of the requested columns (one sort).

    Args:
        dev: CSC matrix (n_users, n_items) of deviations; stored entries are filled cells.
        weights: float array of shape (n_users,), the similarity of each row to the query, or
            (n_users, t): one column per requested item (target-item similarities, Bilge Eq 4.3).
        items: int array of shape (t,), columns to score (repeats allowed).
        k: the neighbourhood size, >= 1.
        allowed: bool array of shape (n_users,), rows that may be neighbours.

    Returns:
        (averages, counts): float64 array of shape (t,) and uint32 array of shape (t,) = |N_q|.
    """
    t = items.size
    pos, slot = _column_positions(dev.indptr, items)
    rows = dev.indices[pos]
    w = weights[rows] if weights.ndim == 1 else weights[rows, slot]
    keep = (w > 0.0) & allowed[rows]
    pos, slot, rows, w = pos[keep], slot[keep], rows[keep], w[keep]
    # One sort: by slot, then weight descending, then row ascending (np.lexsort: last key first).
    order = np.lexsort((rows, -w, slot))
    slot_sorted = slot[order]
    rank = np.arange(order.size) - np.searchsorted(slot_sorted, slot_sorted, side="left")
    chosen = order[rank < k]
    s, ws = slot[chosen], w[chosen]
    num = np.bincount(s, weights=ws * dev.data[pos[chosen]], minlength=t)
    den = np.bincount(s, weights=ws, minlength=t)
    counts = np.bincount(s, minlength=t).astype(np.uint32)
    out = np.zeros(t, dtype=np.float64)
    np.divide(num, den, out=out, where=counts > 0)
    return out, counts


def _column_positions(indptr: IndexArray, items: IntArray) -> tuple[IntArray, IntArray]:
    """Positions in a CSC `data`/`indices` of all entries of columns `items`, and for each the
    index of its column in `items` (its "slot")."""
    starts = indptr[items].astype(np.int64)
    lengths = indptr[items + 1].astype(np.int64) - starts
    slot = np.repeat(np.arange(items.size, dtype=np.int64), lengths)
    # position = start of its column + offset within the column
    first = np.cumsum(lengths) - lengths
    pos = np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(first - starts, lengths)
    return pos, slot


column_positions = _column_positions
"""Public name of `_column_positions` (shared with `server.models.corated`)."""


class _UserKNN(Recommender):
    """Shared user-based kNN: subclasses give the weights, the deviations and the offset."""

    def __init__(self, k: int = 100) -> None:
        if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
            raise ValueError(f"`k` must be an int >= 1, got {k!r}")
        self.k = int(k)

    def _fit(self, train: sp.csr_matrix) -> None:
        self._dev_csc = self._deviations(train).tocsc()
        self._dev_csc.sort_indices()

    def _predict(
        self, query_indices: IntArray, query_values: FloatArray, items: IntArray, allowed: BoolArray
    ) -> tuple[FloatArray, UInt32Array]:
        w = self._weights(query_indices, query_values)
        avg, counts = neighbour_average(self._dev_csc, w, items, self.k, allowed)
        return self._finish(avg, query_values), counts

    @abc.abstractmethod
    def _deviations(self, train: sp.csr_matrix) -> sp.csr_matrix:
        """The d_uq matrix, same sparsity structure as `train`; also caches what `_weights`
        needs."""

    @abc.abstractmethod
    def _weights(self, query_indices: IntArray, query_values: FloatArray) -> FloatArray:
        """w_u for every training row, shape (n_users,)."""

    @abc.abstractmethod
    def _finish(self, avg: FloatArray, query_values: FloatArray) -> FloatArray:
        """Turn the neighbourhood averages into the returned scores."""


class _BlockedUserKNN(_UserKNN):
    """A user kNN whose weights are sparse products with the query: answers a block of queries
    in blocked sparse products (`knn_block`), equal bit for bit to one query at a time.

    Attributes:
        method: "block" (the default), "scatter" (blocks without the pass over the rows) or
            "reference" (`_predict` per query); set it with `set_method`.
    """

    method: str = "block"

    def set_method(self, method: str) -> Self:
        """Answer with `method` (one of `knn_block.KNN_METHODS`)."""
        self.method = knn_block.check_method(method)
        return self

    def _predict_block(
        self, block: QueryBlock, items: list[IntArray]
    ) -> list[tuple[FloatArray, UInt32Array]]:
        """Cut into blocks of `knn_block.block_size` queries, answered on numba's threads
        (`knn_block.answer_blocks`); each query's answer does not depend on the cut."""
        if self.method == "reference":
            return super()._predict_block(block, items)
        if self._columns is None:
            self._columns = knn_block.Columns.of(
                self._dev_csc, self._column_products(), self._products_by_row()
            )
        columns = self._columns
        step = knn_block.block_size(self.n_users_, len(block.indices))
        rows = None if self.method == "block" else False  # "scatter": never by rows
        if columns.by_row is not None and rows is None:  # the row pass is cheaper 64 wide
            step = max(step, min(knn_block.DENSE_QUERIES, len(block.indices)))

        def answer(s: int) -> list[tuple[FloatArray, UInt32Array]]:
            val = block.values[s : s + step]
            queries = knn_block.query_matrix(block.indices[s : s + step], val, self.n_items_)
            answers = knn_block.answer_block(
                columns,
                queries,
                self._query_products(queries, val),
                items[s : s + step],
                self.k,
                np.stack(block.allowed[s : s + step]),
                pearson=isinstance(self, PearsonKNN),
                scale=float(self.n_items_),
                dense=rows,
            )
            return [
                (self._finish(avg, v), counts)
                for (avg, counts), v in zip(answers, val, strict=True)
            ]

        return knn_block.answer_blocks(answer, range(0, len(block.indices), step))

    _columns: knn_block.Columns | None = None

    def _fit(self, train: sp.csr_matrix) -> None:
        super()._fit(train)
        self._columns = None  # converted at the first block

    @abc.abstractmethod
    def _column_products(self) -> FloatArray:
        """The values of the matrices Z_k (K × nnz of `_dev_csc`, its structure) whose
        products with the queries' Q_k give the weights (`knn_block.answer_block`)."""

    @abc.abstractmethod
    def _query_products(self, queries: sp.csr_matrix, values: list[FloatArray]) -> FloatArray:
        """The values of the queries' Q_k (K × nnz of `queries`, each row's items
        increasing; `values` are the queries' values in their original order)."""

    def _products_by_row(self) -> sp.csr_matrix | None:
        """The one product's matrix by rows, when the model keeps it (`knn_block.Columns`):
        None, so blocks are answered by the scatter alone."""
        return None


class PPCF(_BlockedUserKNN):
    """Privacy-preserving user kNN on disguised z-scores (Bilge §2.3, Polat & Du 2005a).

    Fitted on U′, the matrix of RPT releases (`shared.mechanisms.rpt`): a stored entry is a
    genuine z-score plus noise or a fake (pure noise) cell; empty cells are absent. Queried with
    the active user's own fresh release Z′_a. For each item q:

        w′_au = Z′_a·Z′_u / m                       (Bilge Eq 2.4; empty cells count as 0, over
                                                     all m items)
        P′_aq = Σ_{u∈N_q} z′_uq·w′_au / Σ_{u∈N_q} w′_au      (Bilge Eq 2.6)

    with N_q the k users of largest w′ among those with a filled cell at q and w′ > 0 (see the
    module docstring for this and the other open choices). `predict` returns P′_aq, a normalised
    score: the server never sees v̄_a or σ_a; the client computes p = v̄_a + σ_a·P′_aq with
    `shared.zscores.denormalise` (Bilge Eq 2.5). With no neighbour P′ = 0, her mean.

    Args:
        k: number of neighbours (Bilge Ch. 6 uses k = 100 on ML-100K).
    """

    name: ClassVar[str] = "ppcf"
    capabilities: ClassVar[ModelCapabilities] = ModelCapabilities(
        ModelInput.RELEASES, Serving.QUERIES, ScoreKind.ZSCORE
    )

    def _deviations(self, train: sp.csr_matrix) -> sp.csr_matrix:
        self._z = train
        return train

    def _weights(self, query_indices: IntArray, query_values: FloatArray) -> FloatArray:
        m = self._z.shape[1]
        za = np.zeros(m)  # Z′_a with empty cells as 0 (Bilge Eq 2.4)
        za[query_indices] = query_values
        return np.asarray(self._z @ za) / m

    def _column_products(self) -> FloatArray:
        # Bilge Eq 2.4 for a block: W′ = Q′·Z′ᵀ, divided by m in `knn_block.answer_block`
        return self._dev_csc.data[None, :]

    def _query_products(self, queries: sp.csr_matrix, values: list[FloatArray]) -> FloatArray:
        return queries.data[None, :]

    def _products_by_row(self) -> sp.csr_matrix:
        return self._z  # U′ itself, kept for `_weights`

    def _finish(self, avg: FloatArray, query_values: FloatArray) -> FloatArray:
        return avg


class PearsonKNN(_BlockedUserKNN):
    """The non-private baseline: Pearson user kNN on true ratings (Bilge §2.1, Eq 2.1, Eq 2.2).

        w_au = Σ_{i∈co}(v_ai − v̄_a)(v_ui − v̄_u)
               / (√Σ_{i∈co}(v_ai − v̄_a)² · √Σ_{i∈co}(v_ui − v̄_u)²)     (Bilge Eq 2.1)
        p_aq = v̄_a + Σ_{u∈N_q}(v_uq − v̄_u)·w_au / Σ_{u∈N_q} w_au        (Bilge Eq 2.2)

    co = the items both rated; v̄ = a user's mean over all her ratings; N_q = the k users of
    largest w among those who rated q with w > 0 (module docstring). `predict` returns ratings
    p_aq (v̄_a when no neighbour). Only the referee runs it, on TRUE ratings.

    Args:
        k: number of neighbours.
        clip: (lo, hi) rating scale to clip predictions to, or None for raw Eq 2.2 values.
    """

    name: ClassVar[str] = "pearson_knn"
    capabilities: ClassVar[ModelCapabilities] = ModelCapabilities(
        ModelInput.RELEASES, Serving.QUERIES, ScoreKind.RATING
    )

    def __init__(self, k: int = 100, *, clip: tuple[float, float] | None = None) -> None:
        super().__init__(k)
        if clip is not None and not float(clip[0]) <= float(clip[1]):
            raise ValueError(f"`clip` must be (lo, hi) with lo <= hi, got {clip!r}")
        self.clip = None if clip is None else (float(clip[0]), float(clip[1]))

    def _deviations(self, train: sp.csr_matrix) -> sp.csr_matrix:
        counts = np.diff(train.indptr)
        sums = np.asarray(train.sum(axis=1)).ravel()
        means = np.divide(sums, counts, out=np.zeros(counts.size), where=counts > 0)
        self.user_means_ = means
        self._sums = None  # the reference path's matrices, made when it first runs
        # the centred values on the training matrix's own structure (no copy of its indices)
        return sp.csr_matrix(
            (train.data - np.repeat(means, counts), train.indices, train.indptr), shape=train.shape
        )

    _sums: tuple[sp.csr_matrix, sp.csr_matrix, sp.csr_matrix] | None = None

    def _reference_sums(self) -> tuple[sp.csr_matrix, sp.csr_matrix, sp.csr_matrix]:
        """The three matrices of `_weights` (c_ui, c_ui², 1 at u's items) as CSR, made from
        the deviations at the reference path's first query: the block path never needs them,
        and at 100,000 users they were 3 × 12 bytes per rating held for nothing."""
        if self._sums is None:
            centred = self._dev_csc.tocsr()  # rows with sorted items: the same matrix
            shape, idx, ptr = centred.shape, centred.indices, centred.indptr
            squares = sp.csr_matrix((centred.data**2, idx, ptr), shape=shape)
            rated = sp.csr_matrix((np.ones_like(centred.data), idx, ptr), shape=shape)
            self._sums = (centred, squares, rated)
        return self._sums

    def _weights(self, query_indices: IntArray, query_values: FloatArray) -> FloatArray:
        centred, squares, rated = self._reference_sums()
        m = centred.shape[1]
        ca = np.zeros(m)
        ca[query_indices] = query_values - query_values.mean()
        rated_a = np.zeros(m)
        rated_a[query_indices] = 1.0
        num = centred @ ca  # Σ_co c_ai c_ui (c_ui = 0 off u's items)
        ss_u = squares @ rated_a  # Σ_co c_ui²
        ss_a = rated @ (ca * ca)  # Σ_co c_ai²
        den = np.sqrt(ss_u * ss_a)
        return np.asarray(
            np.divide(num, den, out=np.zeros_like(num), where=den > 0), dtype=np.float64
        )

    def _column_products(self) -> FloatArray:
        # Bilge Eq 2.1 for a block: the three sums of `_weights` (numerator, Σ_co c_ui²,
        # Σ_co c_ai²) as products over the same cells, fused in `knn_block.answer_block`
        d = self._dev_csc.data
        cells = np.empty((d.size, 3))  # laid out as `knn_block.Columns` keeps them (no copy)
        cells[:, 0], cells[:, 1], cells[:, 2] = d, d**2, 1.0
        return cells.T

    def _query_products(self, queries: sp.csr_matrix, values: list[FloatArray]) -> FloatArray:
        means = np.repeat([float(v.mean()) for v in values], np.diff(queries.indptr))
        ca = queries.data - means  # each row's mean, broadcast over its cells
        return np.stack([ca, np.ones_like(ca), ca * ca])

    def _finish(self, avg: FloatArray, query_values: FloatArray) -> FloatArray:
        p = float(query_values.mean()) + avg
        if self.clip is not None:
            p = np.clip(p, *self.clip)
        return p


__all__ = ["PPCF", "PearsonKNN", "column_positions", "neighbour_average"]
