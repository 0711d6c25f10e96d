"""Blocked query answering for the user-kNN models: many queries in one compiled pass.

`server.models.knn` answers one query at a time: the weight of every training row is a sparse
matrix-vector product (w′ = Z′·Z′_a / m, Bilge Eq 2.4; the three sums of Pearson's Eq 2.1), and
the k neighbours of each target item come from one `np.lexsort` of every eligible entry
(`knn.neighbour_average`, Eq 2.2 / Eq 2.6). At 100,000 users that is ~10 ms per query and N
queries, i.e. N² overall. `answer_block` answers a *block* of queries in one compiled call and
computes exactly the same numbers, bit for bit (`tests/unit/server/models/test_knn_block.py`):

* the weights of query b against all N rows are the row b of the sparse block product Q·Zᵀ
  (Q the block's query matrix, B × m), computed as a scatter over only the columns of Z that
  the query fills (Σ_j |column j| multiply-adds, ~20× fewer than a pass over all of Z). Each
  weight accumulates z_uj·q_bj over j in increasing item order: the same additions, in the same
  order, as the reference's CSR mat-vec over u's row (whose extra terms are products with the
  query's empty cells, exact zeros, which leave a sum unchanged). Pearson's three sums are
  fused into the same pass, their accumulators interleaved (N × K, one cache line per row
  rather than K: 1.3× on Pearson at 100,000 users). The accumulators are one reused N × K
  array, never a B × N one.
* or, for PPCF's one product, when the queries fill enough of the columns
  (`Columns.dense_is_cheaper`: on RPT releases, whose fake cells make them ≈ 17 % full), the
  weights of `DENSE_QUERIES` queries at once by one pass over the rows of Z: row u's cells
  in increasing item order, each multiplied by every query's value at its item (0 where the
  query is empty). Each weight is again the reference's sum, in its order; the products with
  empty cells are exact zeros, which leave it unchanged. A cell is read once for 64 queries
  instead of one scattered read-modify-write per query that fills its item: at 100,000 users
  1.55× less time per query on one thread, 1.44× on two (`SCATTER_NS`, `dense_ns`;
  `bench/neighbourhood.py` measures both passes). The rows go in tiles of
  `DENSE_ROWS`, whose raters are offered to each target's heap before the next tile, so the
  heaps see the raters in the same order as the scatter's pass over the column.
* the k neighbours of each target item come from one pass over its raters (rows increasing)
  keeping a heap of the k best so far instead of a full sort: a rater enters only when its
  weight beats the worst kept, so a tie with it loses, as the reference's sort (weight
  descending, row ascending) ranks it after the smaller rows. Once the heap is full that one
  comparison, rarely true, is all a rater costs: no per-rater store and no branch on the sign
  of its weight (2× less than collecting the positive weights and `np.partition`-ing them).
  The chosen k are then summed in the reference's order (weight descending, row ascending),
  so the averages are the reference's bit for bit.

Why float64 and not float32: fewer bytes would not make the scatter faster (reading a third
fewer bytes per cell, or cutting the rows into tiles whose accumulators stay in cache, each
changed nothing measurable: it is bound by the scattered read-modify-writes, ≈ 1.3 ns each),
and float32 weights would reorder near-ties of the neighbour ranking (the published MAE would
move in its last digits). Exactness is kept; see docs/decisions/knn.md, "Neighbourhood models at
100,000 users".
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import TypeVar

import numba
import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from privrec.server.models.base import UInt32Array
from privrec.shared.types import BoolArray, FloatArray, IntArray

T = TypeVar("T")

BLOCK_BYTES = 32 * 1024 * 1024
"""Memory of one block's neighbour pools (B × N bools): B is chosen so that the block stays
under it."""

MAX_BLOCK = 1024
"""At most this many queries in one block."""

DENSE_QUERIES = 64
"""Queries whose weights `_answer_dense` makes in one pass over the rows: the pass reads each
cell once for all of them (their values at its item are one row of 64 floats, 512 bytes)."""

DENSE_ROWS = 4096
"""Rows per tile of `_answer_dense`: the tile's weights (4096 × 64 floats, 2 MiB) stay in cache
while its raters are offered to the targets' heaps."""

KNN_METHODS = ("block", "scatter", "reference")
"""How `PPCF` / `PearsonKNN` answer a block: "block" (this module, each block's weights by
the cheaper pass), "scatter" (this module, the scatter only: what "block" was before the pass
over the rows, kept to measure it against) or "reference" (one query at a time,
`knn.neighbour_average`)."""


def check_method(method: str) -> str:
    """`method` if it names a kNN answering method, else ValueError naming `method`."""
    if method not in KNN_METHODS:
        raise ValueError(f"`method` must be one of {KNN_METHODS}, got {method!r}")
    return method


def block_size(n_rows: int, n_queries: int | None = None) -> int:
    """Queries per block so that the block's neighbour pools take at most `BLOCK_BYTES` and,
    given the `n_queries` to answer, so that they make a block for each of numba's threads:
    a referee's 256 queries or a shard's batch were one block, answered on one core while
    the other idled (each query's answer does not depend on the cut)."""
    size = max(1, min(MAX_BLOCK, BLOCK_BYTES // max(1, n_rows)))
    if n_queries is not None and n_queries > 0:
        threads = numba.get_num_threads()
        parts = -(-math.ceil(n_queries / size) // threads) * threads  # a multiple of threads
        size = max(1, math.ceil(n_queries / parts))
    return int(size)


def query_matrix(
    indices: Sequence[IntArray], values: Sequence[FloatArray], n_items: int
) -> sp.csr_matrix:
    """The block's queries as one CSR matrix (B × m) with each row's items in increasing order
    (the order the weights are summed in)."""
    lengths = np.array([idx.size for idx in indices], dtype=np.int64)
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    order = [np.argsort(idx, kind="stable") for idx in indices]
    cols = np.concatenate([idx[o] for idx, o in zip(indices, order, strict=True)])
    data = np.concatenate(
        [np.asarray(val, dtype=np.float64)[o] for val, o in zip(values, order, strict=True)]
    )
    return sp.csr_matrix((data, cols, indptr), shape=(len(indices), n_items))


@numba.njit(cache=True, nogil=True, inline="always")
def _worse(w_a: float, r_a: int, w_b: float, r_b: int) -> bool:  # pragma: no cover - compiled
    """Whether neighbour a ranks after b: a smaller weight, or the same and a later position
    in the column (rows increase along it)."""
    return w_a < w_b or (w_a == w_b and r_a > r_b)


@numba.njit(cache=True, nogil=True)
def _heap_push(
    heap_w: np.ndarray, heap_r: np.ndarray, size: int, w: float, r: int
) -> None:  # pragma: no cover - compiled
    """Add (w, r) to the heap of `size` entries whose top is the worst kept neighbour."""
    i = size
    while i > 0:
        parent = (i - 1) // 2
        if not _worse(w, r, heap_w[parent], heap_r[parent]):
            break
        heap_w[i], heap_r[i] = heap_w[parent], heap_r[parent]
        i = parent
    heap_w[i], heap_r[i] = w, r


@numba.njit(cache=True, nogil=True)
def _heap_replace_top(
    heap_w: np.ndarray, heap_r: np.ndarray, size: int, w: float, r: int
) -> None:  # pragma: no cover - compiled
    """Put (w, r) in place of the heap's worst entry and restore the heap."""
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and _worse(
            heap_w[child + 1], heap_r[child + 1], heap_w[child], heap_r[child]
        ):
            child += 1
        if not _worse(heap_w[child], heap_r[child], w, r):
            break
        heap_w[i], heap_r[i] = heap_w[child], heap_r[child]
        i = child
    heap_w[i], heap_r[i] = w, r


@numba.njit(cache=True, nogil=True, inline="always")
def _enters(m: int, k: int, w: float, worst: float) -> bool:  # pragma: no cover - compiled
    """Whether a rater of weight w enters the heap of the k best of `m` kept so far, whose
    worst is `worst` when full: then only a weight above it (a tie loses: the rater's row is
    larger, and the worst kept is > 0); not yet full, any w > 0. Scalars only: a call that
    takes the heap's arrays costs ≈ 25 ns per rater, 20× the rest of the pass."""
    return w > worst if m == k else w > 0.0


@numba.njit(cache=True, nogil=True)
def _keep(
    heap_w: np.ndarray, heap_r: np.ndarray, m: int, k: int, w: float, r: int
) -> int:  # pragma: no cover - compiled
    """Keep rater r (its position in the target's column) of weight w, which `_enters`: in
    place of the worst when the heap is full, else added; the new count."""
    if m == k:
        _heap_replace_top(heap_w, heap_r, m, w, r)
        return m
    _heap_push(heap_w, heap_r, m, w, r)
    return m + 1


@numba.njit(cache=True, nogil=True)
def _heap_average(
    heap_w: np.ndarray, heap_r: np.ndarray, m: int, dev_values: np.ndarray
) -> float:  # pragma: no cover - compiled
    """Σ d·w / Σ w over the `m` kept neighbours, summed in the reference's order (weight
    descending, row ascending), or 0 with none (Bilge Eq 2.2 / Eq 2.6)."""
    if m == 0:
        return 0.0
    by_row = np.argsort(heap_r[:m])
    order = by_row[np.argsort(-heap_w[by_row], kind="mergesort")]
    num = 0.0
    tot = 0.0
    for i in order:
        w = heap_w[i]
        num += w * dev_values[heap_r[i]]
        tot += w
    return float(num / tot)


@numba.njit(cache=True, nogil=True, inline="always")
def _weight(acc: np.ndarray, u: int, pearson: bool, scale: float) -> float:  # pragma: no cover
    """Row u's weight from its accumulated products: Pearson's num / (√Σc_u² · √Σc_a²) as
    num / sqrt(ss_u·ss_a), 0 where that root is 0 (Bilge Eq 2.1), or PPCF's Z′_a·Z′_u / m
    (Bilge Eq 2.4)."""
    if pearson:
        den = math.sqrt(acc[u, 1] * acc[u, 2])
        return float(acc[u, 0] / den) if den > 0.0 else 0.0
    return float(acc[u, 0] / scale)


@numba.njit(cache=True, nogil=True)  # nogil: the server's worker threads answer blocks in parallel
def _answer_block(
    q_indptr: np.ndarray,
    q_items: np.ndarray,
    q_values: np.ndarray,
    z_indptr: np.ndarray,
    z_rows: np.ndarray,
    z_values: np.ndarray,
    dev_values: np.ndarray,
    pearson: bool,
    scale: float,
    t_indptr: np.ndarray,
    t_items: np.ndarray,
    allowed: np.ndarray,
    k: int,
    out_avg: np.ndarray,
    out_count: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """Every query of a block: its weights by one scatter, then each target item's top-k
    average (see `answer_block`)."""
    n_products = z_values.shape[1]
    n_rows = allowed.shape[1]
    acc = np.zeros((n_rows, n_products))
    weight = np.empty(n_rows)
    heap_w = np.empty(k)
    heap_r = np.empty(k, dtype=np.int64)
    for b in range(q_indptr.size - 1):
        # 1. the sparse product: acc[u, k] = Σ_j z_k[u, j]·q_k[b, j], j increasing
        for p in range(q_indptr[b], q_indptr[b + 1]):
            j = q_items[p]
            if n_products == 1:
                v = q_values[0, p]
                for r in range(z_indptr[j], z_indptr[j + 1]):
                    acc[z_rows[r], 0] += z_values[r, 0] * v
            else:  # three, written out: a loop over them is 3x slower
                v0, v1, v2 = q_values[0, p], q_values[1, p], q_values[2, p]
                for r in range(z_indptr[j], z_indptr[j + 1]):
                    u = z_rows[r]
                    acc[u, 0] += z_values[r, 0] * v0
                    acc[u, 1] += z_values[r, 1] * v1
                    acc[u, 2] += z_values[r, 2] * v2
        # 2. every row's weight once, when the target items' raters outnumber the rows (a
        # ranking's hundred candidates); else each rater's weight where it is read
        visits = 0
        for t in range(t_indptr[b], t_indptr[b + 1]):
            visits += z_indptr[t_items[t] + 1] - z_indptr[t_items[t]]
        once = visits > n_rows
        if once:
            for u in range(n_rows):
                weight[u] = _weight(acc, u, pearson, scale)
        # 3. per target item q: the k best eligible raters (weight descending, row ascending)
        for t in range(t_indptr[b], t_indptr[b + 1]):
            q = t_items[t]
            m = 0
            for r in range(z_indptr[q], z_indptr[q + 1]):  # rows increase along the column
                u = z_rows[r]
                w = weight[u] if once else _weight(acc, u, pearson, scale)
                if _enters(m, k, w, heap_w[0]) and allowed[b, u]:
                    m = _keep(heap_w, heap_r, m, k, w, r)
            # 4. summed in the reference's order: weight descending, row ascending
            out_avg[t] = _heap_average(heap_w, heap_r, m, dev_values)
            out_count[t] = m
        acc[:] = 0.0


@numba.njit(cache=True, nogil=True)
def _answer_dense(
    q_indptr: np.ndarray,
    q_items: np.ndarray,
    q_values: np.ndarray,
    r_indptr: np.ndarray,
    r_cols: np.ndarray,
    r_values: np.ndarray,
    z_indptr: np.ndarray,
    z_rows: np.ndarray,
    dev_values: np.ndarray,
    scale: float,
    t_indptr: np.ndarray,
    t_items: np.ndarray,
    allowed: np.ndarray,
    k: int,
    per_pass: int,
    tile_rows: int,
    out_avg: np.ndarray,
    out_count: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """Every query of a block of one product (PPCF), `per_pass` at a time: their weights by
    one pass over the rows (see `answer_block`), `tile_rows` rows at a time, each tile's
    raters then offered to every target's heap, kept from tile to tile."""
    n_rows = r_indptr.size - 1
    n_items = z_indptr.size - 1
    for b0 in range(0, q_indptr.size - 1, per_pass):
        b1 = min(b0 + per_pass, q_indptr.size - 1)
        width = b1 - b0
        dense = np.zeros((n_items, width))  # the queries as columns, 0 off their cells
        for b in range(b0, b1):
            for p in range(q_indptr[b], q_indptr[b + 1]):
                dense[q_items[p], b - b0] = q_values[p]
        t0, t1 = t_indptr[b0], t_indptr[b1]
        heap_w = np.empty((t1 - t0, k))
        heap_r = np.empty((t1 - t0, k), dtype=np.int64)
        kept = np.zeros(t1 - t0, dtype=np.int64)
        cursor = np.empty(t1 - t0, dtype=np.int64)  # each target's next rater in its column
        for t in range(t0, t1):
            cursor[t - t0] = z_indptr[t_items[t]]
        acc = np.empty(width)
        tile = np.empty((width, tile_rows))  # by query: one query's raters read one row
        for u0 in range(0, n_rows, tile_rows):
            u1 = min(u0 + tile_rows, n_rows)
            # 1. acc[b] = Σ_j z[u, j]·q[b, j] over u's cells, j increasing
            for u in range(u0, u1):
                acc[:] = 0.0
                for p in range(r_indptr[u], r_indptr[u + 1]):
                    v = r_values[p]
                    j = r_cols[p]
                    for d in range(width):
                        acc[d] += v * dense[j, d]
                for d in range(width):
                    tile[d, u - u0] = acc[d] / scale
            # 2. the tile's raters of every target, rows increasing, offered to its heap
            for b in range(b0, b1):
                weight = tile[b - b0]
                for t in range(t_indptr[b], t_indptr[b + 1]):
                    s = t - t0
                    hw, hr = heap_w[s], heap_r[s]
                    r, m = cursor[s], kept[s]
                    end = z_indptr[t_items[t] + 1]
                    while r < end and z_rows[r] < u1:
                        u = z_rows[r]
                        w = weight[u - u0]
                        if _enters(m, k, w, hw[0]) and allowed[b, u]:
                            m = _keep(hw, hr, m, k, w, r)
                        r += 1
                    cursor[s], kept[s] = r, m
        for t in range(t0, t1):
            out_avg[t] = _heap_average(heap_w[t - t0], heap_r[t - t0], kept[t - t0], dev_values)
            out_count[t] = kept[t - t0]


@dataclasses.dataclass(frozen=True)
class Columns:
    """The fitted side of `answer_block`, converted once per fitted model: the deviations'
    CSC structure (int64 `indptr`, int32 row `indices`, half the bytes to stream per cell),
    the values of the products' matrices Z_k interleaved (nnz × K, a cell's K values side by
    side, as the kernel reads them) and the deviations (nnz,). K is 1 (PPCF) or 3 (Pearson).
    With one product, `by_row` may hold the same Z_0 by rows (a CSR with sorted items: the
    matrix the model was fitted on, not a copy), for the dense pass of `answer_block`."""

    indptr: IntArray
    rows: npt.NDArray[np.int32]
    products: FloatArray
    dev: FloatArray
    by_row: sp.csr_matrix | None = None

    @classmethod
    def of(
        cls, dev: sp.csc_matrix, products: FloatArray, by_row: sp.csr_matrix | None = None
    ) -> Columns:
        """From a CSC (N × m) of deviations with sorted indices, whose structure is that of
        every Z_k, the values of the Z_k (K × nnz(dev)) and, with K = 1, optionally Z_0 as a
        CSR (`by_row`)."""
        products = np.atleast_2d(products)
        if products.shape[0] not in (1, 3) or products.shape[1] != dev.nnz:
            raise ValueError(
                f"`products` must have shape (1 or 3, {dev.nnz}), got {products.shape}"
            )
        if by_row is not None:
            if products.shape[0] != 1 or by_row.shape != dev.shape or by_row.nnz != dev.nnz:
                raise ValueError(
                    f"`by_row` must be the one product's {dev.shape} matrix with {dev.nnz} "
                    f"cells, got {by_row.shape} with {by_row.nnz} for {products.shape[0]} "
                    "products"
                )
            by_row.sort_indices()
        return cls(
            np.ascontiguousarray(dev.indptr, dtype=np.int64),
            np.ascontiguousarray(dev.indices, dtype=np.int32),
            np.ascontiguousarray(products.T, dtype=np.float64),
            np.ascontiguousarray(dev.data, dtype=np.float64),
            by_row,
        )

    def dense_is_cheaper(self, queries: sp.csr_matrix) -> bool:
        """Whether one pass over every row per `DENSE_QUERIES` queries costs less than the
        scatter over the columns the queries fill, by the measured cost of a cell in each
        (`SCATTER_NS`, `dense_ns`): it is when the queries fill a large enough share of the
        columns weighted by their raters (PPCF on RPT releases, ≈ 17 % at density 0.05)."""
        if self.by_row is None:
            return False
        visits = float(np.diff(self.indptr)[queries.indices].sum())
        width = min(DENSE_QUERIES, queries.shape[0])
        passes = -(-queries.shape[0] // DENSE_QUERIES)
        return passes * self.by_row.nnz * dense_ns(width) < visits * SCATTER_NS


SCATTER_NS = 1.75
"""Cost of one scattered multiply-add of `_answer_block` (one product), ns: PPCF on 100,000
users' RPT releases (1,000 items, 17.4 M cells), one thread, an idle machine."""


def dense_ns(width: int) -> float:
    """Cost of one cell of `_answer_dense`'s pass for `width` queries, ns, measured as
    `SCATTER_NS` (4.6, 7.4, 12.5 and 25 ns at 16, 32, 64 and 128 queries): each cell reads
    and writes every query's sum, so it grows with the width."""
    return 1.5 + 0.18 * width


def answer_block(
    columns: Columns,
    queries: sp.csr_matrix,
    query_values: FloatArray,
    items: Sequence[IntArray],
    k: int,
    allowed: BoolArray,
    *,
    pearson: bool = False,
    scale: float = 1.0,
    dense: bool | None = None,
) -> list[tuple[FloatArray, UInt32Array]]:
    """`knn.neighbour_average` of a block of queries, with their weights, bit for bit.

    For each query b (one compiled pass, no B × N array):

    1. the weights' sparse products W_k[b, u] = Σ_j Z_k[u, j]·Q_k[b, j], a scatter over the
       columns j the query fills, summed over j in increasing order (module docstring);
    2. per target item q, the weight of each eligible rater u of q (allowed, w > 0): PPCF's
       w = W_0[b, u] / `scale` (Bilge Eq 2.4, scale = m), or Pearson's
       w = W_0 / sqrt(W_1·W_2) (Eq 2.1; 0 where the root is 0);
    3. the k largest by one pass keeping a heap of the k best (module docstring); at a tie
       on the k-th weight the smaller training rows are kept, as the reference's sort keeps
       them;
    4. Σ d·w / Σ w over them, summed in the reference's order (weight descending, row
       ascending), or 0 with count 0 when no rater is eligible.

    Args:
        columns: the deviations and the values of each product's matrix Z_k (K = 1 for PPCF,
            3 for Pearson: c, c², 1), `Columns.of`.
        queries: CSR (B × m), the block's query cells, each row's items increasing.
        query_values: float array of shape (K, nnz(queries)), the values of each Q_k.
        items: per query, the items to score (repeats allowed).
        k: the neighbourhood size, >= 1.
        allowed: bool array of shape (B, N), the rows that may serve query b.
        pearson: combine three products as Pearson's correlation (else one product / scale).
        scale: PPCF's divisor m.
        dense: make the weights by the pass over the rows (True; `columns.by_row` needed) or
            by the scatter (False); None: whichever `Columns.dense_is_cheaper` says.

    Returns:
        per query, (averages, counts) as `knn.neighbour_average` returns them.
    """
    sizes = np.array([it.size for it in items], dtype=np.int64)
    t_indptr = np.concatenate([[0], np.cumsum(sizes)])
    t_items = np.concatenate(items).astype(np.int64) if items else np.zeros(0, dtype=np.int64)
    avg = np.zeros(t_items.size, dtype=np.float64)
    counts = np.zeros(t_items.size, dtype=np.uint32)
    q_indptr = queries.indptr.astype(np.int64)
    q_items = queries.indices.astype(np.int64)
    q_values = np.ascontiguousarray(query_values, dtype=np.float64)
    allowed = np.ascontiguousarray(allowed, dtype=np.bool_)
    if columns.dense_is_cheaper(queries) if dense is None else dense:
        z = columns.by_row
        if z is None:
            raise ValueError("`dense=True` needs `columns.by_row` (one product, by rows)")
        _answer_dense(
            q_indptr, q_items, q_values[0], z.indptr.astype(np.int64), z.indices, z.data,
            columns.indptr, columns.rows, columns.dev, float(scale), t_indptr, t_items,
            allowed, int(k), DENSE_QUERIES, DENSE_ROWS, avg, counts,
        )  # fmt: skip
    else:
        _answer_block(
            q_indptr, q_items, q_values, columns.indptr, columns.rows, columns.products,
            columns.dev, bool(pearson), float(scale), t_indptr, t_items, allowed, int(k), avg,
            counts,
        )  # fmt: skip
    return list(zip(np.split(avg, t_indptr[1:-1]), np.split(counts, t_indptr[1:-1]), strict=True))


def compile_kernels() -> None:
    """Compile both weight passes (or load them from numba's on-disk cache) with the argument
    types of a served block, so that no node compiles them during a run: which pass a block
    takes depends on its size (`sim.kernel_cache`)."""
    z = sp.csr_matrix(np.array([[1.0, 0.0, 2.0], [0.5, 1.0, 0.0]]))
    dev = z.tocsc()
    dev.sort_indices()
    columns = Columns.of(dev, dev.data[None, :], z)
    queries = query_matrix([np.array([0, 2])], [np.array([1.0, -1.0])], 3)
    for dense in (True, False):
        answer_block(
            columns, queries, queries.data[None, :], [np.array([0])], 1, np.ones((1, 2), bool),
            scale=3.0, dense=dense,
        )  # fmt: skip


def answer_blocks(answer: Callable[[int], list[T]], starts: Sequence[int]) -> list[T]:
    """``answer(s)`` for every block start `s`, concatenated in the order of `starts`. The
    blocks run on up to ``numba.get_num_threads()`` threads (`_answer_block` releases the GIL),
    so the referee's baseline over every user uses every core; a single block runs in the
    caller's thread. Each query's answer is computed alone, so the result does not depend on
    the number of threads."""
    if len(starts) <= 1:
        return [a for s in starts for a in answer(s)]
    with concurrent.futures.ThreadPoolExecutor(
        max_workers=min(len(starts), numba.get_num_threads()),
        thread_name_prefix="privrec[knn]",
    ) as pool:
        return [a for part in pool.map(answer, starts) for a in part]


__all__ = [
    "BLOCK_BYTES",
    "KNN_METHODS",
    "Columns",
    "answer_block",
    "answer_blocks",
    "block_size",
    "check_method",
    "compile_kernels",
    "query_matrix",
]
