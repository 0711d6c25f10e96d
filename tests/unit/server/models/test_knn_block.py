"""The blocked kNN answering path (`server.models.knn_block`) equals the per-query reference
bit for bit: weights, neighbour choice (ties included) and the summation order."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.sparse as sp

from privrec.server.models import knn_block
from privrec.server.models.knn import PPCF, PearsonKNN, neighbour_average


def _data(
    n: int, m: int, density: float, seed: int, *, integer: bool
) -> tuple[sp.csr_matrix, list[tuple[np.ndarray, np.ndarray]], list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    train = sp.random(n, m, density=density, format="csr", random_state=seed)
    train.data = (
        rng.integers(1, 6, train.data.size).astype(float)
        if integer
        else rng.standard_normal(train.data.size)
    )
    queries, items = [], []
    for _ in range(37):
        idx = rng.choice(m, size=int(rng.integers(1, m // 3)), replace=False)  # unsorted
        val = rng.integers(1, 6, idx.size).astype(float) if integer else rng.normal(size=idx.size)
        queries.append((idx, val))
        items.append(rng.integers(0, m, size=int(rng.integers(1, 8))))  # repeats allowed
    return train, queries, items


@pytest.mark.parametrize("model_cls", [PPCF, PearsonKNN])
@pytest.mark.parametrize("integer", [False, True])  # integer ratings: many tied weights
@pytest.mark.parametrize("k", [1, 3, 200])  # 200 > every rater count: no partition
def test_block_equals_reference_bit_for_bit(model_cls: type[PPCF], integer: bool, k: int) -> None:
    train, queries, items = _data(150, 40, 0.3, 7, integer=integer)
    groups = np.arange(150) % 5
    excl = [i % 5 for i in range(len(queries))]
    model = model_cls(k=k).fit(train, exclude_groups=groups)
    fast = model.predict_block(queries, items, exclude_groups=excl)
    ref = model.set_method("reference").predict_block(queries, items, exclude_groups=excl)
    for (s1, c1), (s2, c2) in zip(fast, ref, strict=True):
        assert np.array_equal(c1, c2)
        assert np.array_equal(s1, s2)  # exact: same additions in the same order
    assert any(c.max() > 0 for _, c in ref)  # neighbours were found, so something was compared


@pytest.mark.parametrize("model_cls", [PPCF, PearsonKNN])
@pytest.mark.parametrize("n_targets", [1, 80])  # raters visited below / above the rows
def test_weights_made_once_per_query_or_per_rater_equal_the_reference(
    model_cls: type[PPCF], n_targets: int
) -> None:
    """The kernel makes every row's weight once when a query's target items have more raters
    than there are rows (a ranking's candidates), else each rater's where it is read."""
    train, queries, _ = _data(150, 40, 0.3, 11, integer=True)
    rng = np.random.default_rng(5)
    items = [rng.integers(0, 40, size=n_targets) for _ in queries]
    visits = [int(np.diff(train.tocsc().indptr)[it].sum()) for it in items]
    assert all(v > 150 for v in visits) if n_targets == 80 else all(v < 150 for v in visits)
    model = model_cls(k=5).fit(train, exclude_groups=np.arange(150) % 5)
    excl = [i % 5 for i in range(len(queries))]
    fast = model.predict_block(queries, items, exclude_groups=excl)
    ref = model.set_method("reference").predict_block(queries, items, exclude_groups=excl)
    for (s1, c1), (s2, c2) in zip(fast, ref, strict=True):
        assert np.array_equal(c1, c2) and np.array_equal(s1, s2)


def test_small_blocks_give_the_same_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    train, queries, items = _data(80, 30, 0.3, 3, integer=False)
    model = PPCF(k=4).fit(train)
    whole = model.predict_block(queries, items)
    monkeypatch.setattr(knn_block, "BLOCK_BYTES", 80 * 3)  # blocks of 3 queries
    assert knn_block.block_size(80) == 3
    for (s1, c1), (s2, c2) in zip(model.predict_block(queries, items), whole, strict=True):
        assert np.array_equal(s1, s2) and np.array_equal(c1, c2)


def test_a_block_of_queries_is_spread_over_every_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """A block smaller than the memory bound is cut into one part per numba thread (a
    referee's 256 queries ran on one core), and the answers are the per-query reference's;
    PPCF's blocks, whose weights may come from the pass over the rows, are not cut below 64
    queries (that pass is cheaper wide; a served batch of 64 stays one block)."""
    monkeypatch.setattr(knn_block.numba, "get_num_threads", lambda: 2)
    assert knn_block.block_size(1000) == knn_block.MAX_BLOCK
    assert knn_block.block_size(1000, 256) == 128
    assert knn_block.block_size(1000, 1) == 1
    assert knn_block.block_size(10**6, 256) == 32  # 33 by memory: 8 parts of 32, not 7 + 25
    assert knn_block.block_size(300_000, 256) == 64  # 111 by memory: 4 parts, not 2 + 1 alone
    train, queries, items = _data(80, 30, 0.3, 3, integer=False)
    model = PearsonKNN(k=4).fit(train)
    cuts: list[int] = []
    real = knn_block.answer_blocks

    def spy(answer, starts):  # type: ignore[no-untyped-def]
        cuts.append(len(starts))
        return real(answer, starts)

    monkeypatch.setattr(knn_block, "answer_blocks", spy)
    fast = model.predict_block(queries, items)
    ref = model.set_method("reference").predict_block(queries, items)
    assert cuts == [2]
    for (s1, c1), (s2, c2) in zip(fast, ref, strict=True):
        assert np.array_equal(s1, s2) and np.array_equal(c1, c2)
    ppcf = PPCF(k=4).fit(train)
    ppcf.predict_block(queries, items)  # 37 queries
    ppcf.predict_block(queries * 4, items * 4)  # 148: two blocks of 74
    assert cuts[1:] == [1, 2]


@pytest.mark.parametrize("model_cls", [PPCF, PearsonKNN])
def test_blocks_on_threads_equal_the_reference(
    model_cls: type[PPCF], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blocks of 2 queries (19 of them, on numba's threads, `knn_block.answer_blocks`), with
    exclusion groups: every answer, in the queries' order, is the per-query reference's."""
    train, queries, items = _data(120, 36, 0.3, 11, integer=True)
    groups = np.arange(120) % 4
    excl = [(i * 3) % 4 for i in range(len(queries))]
    model = model_cls(k=5).fit(train, exclude_groups=groups)
    monkeypatch.setattr(knn_block, "BLOCK_BYTES", 120 * 2)
    fast = model.predict_block(queries, items, exclude_groups=excl)
    ref = model.set_method("reference").predict_block(queries, items, exclude_groups=excl)
    assert len(fast) == len(ref) == len(queries)
    for (s1, c1), (s2, c2) in zip(fast, ref, strict=True):
        assert np.array_equal(c1, c2) and np.array_equal(s1, s2)


def test_queries_of_one_group_share_one_mask() -> None:
    """A block's eligibility masks are one per exclusion group, not one per query (N bools
    each: per query, a referee's block of 100,000 users took 10 GB)."""
    train, queries, _ = _data(60, 20, 0.3, 5, integer=False)
    model = PPCF(k=3).fit(train, exclude_groups=np.arange(60) % 3)
    block = model._check_block(queries, [i % 3 for i in range(len(queries))])
    assert len({id(a) for a in block.allowed}) == 3
    for i, allowed in enumerate(block.allowed):
        assert np.array_equal(allowed, np.arange(60) % 3 != i % 3)


def _one_item_block(weights: np.ndarray, dev: np.ndarray, k: int) -> tuple[float, int]:
    """answer_block on a query whose weights against N rows that all rated item 0 are
    `weights` (a 1-item catalogue: w_u = z_u·q = dev_u · weights_u / dev_u)."""
    n = weights.size
    z = sp.csc_matrix(dev[:, None])
    q = knn_block.query_matrix([np.array([0])], [np.array([1.0])], 1)
    ((avg, cnt),) = knn_block.answer_block(
        knn_block.Columns.of(z, weights),
        q,
        q.data[None, :],
        [np.array([0])],
        k,
        np.ones((1, n), bool),
    )
    return float(avg[0]), int(cnt[0])


def test_ties_at_the_kth_weight_keep_the_smaller_rows() -> None:
    """Rows 0..5 rated item 0 with deviations 1..6 and the same weight 2 (a 6-way tie); k = 2
    must take rows 0 and 1, as the reference does — a partition alone could keep any two."""
    dev = np.arange(1.0, 7.0)
    avg, cnt = _one_item_block(np.full(6, 2.0), dev, 2)
    assert (avg, cnt) == (1.5, 2)  # (1·2 + 2·2) / (2 + 2)
    ref, ref_cnt = neighbour_average(
        sp.csc_matrix(dev[:, None]), np.full(6, 2.0), np.array([0]), 2, np.ones(6, bool)
    )
    assert (avg, cnt) == (float(ref[0]), int(ref_cnt[0]))
    # a broken tie rule (the largest rows) would give (5·2 + 6·2) / 4 = 5.5: the check can fail
    assert avg != 5.5


@pytest.mark.parametrize("k", [1, 7, 64, 600])
def test_the_streamed_top_k_equals_the_sort_with_ties_in_any_order(k: int) -> None:
    """500 raters whose weights take 5 values in random row order (ties everywhere, at the
    k-th weight too), some negative, zero or NaN: the heap of the k best that the block keeps
    while streaming the raters picks and sums exactly what the reference's full sort does.
    (Checked to fail when a tie with the worst kept may enter the heap.)"""
    rng = np.random.default_rng(k)
    weights = rng.choice([-1.0, 0.0, 0.5, 1.0, 2.0, 3.0], size=500)
    weights[rng.choice(500, size=9, replace=False)] = np.nan
    dev = rng.standard_normal(500)
    avg, cnt = _one_item_block(weights, dev, k)
    ref, ref_cnt = neighbour_average(
        sp.csc_matrix(dev[:, None]), weights, np.array([0]), k, np.ones(500, bool)
    )
    assert cnt == int(ref_cnt[0]) == min(k, int(np.sum(weights > 0)))
    assert avg == float(ref[0])  # exact: the same k, summed in the same order


def test_columns_need_one_or_three_products() -> None:
    z = sp.csc_matrix(np.ones((4, 1)))
    with pytest.raises(ValueError, match=r"`products` must have shape \(1 or 3, 4\)"):
        knn_block.Columns.of(z, np.ones((2, 4)))


def test_only_positive_allowed_weights_are_neighbours() -> None:
    avg, cnt = _one_item_block(np.array([-1.0, 0.0, 3.0, 1.0]), np.array([9.0, 9.0, 1.0, 2.0]), 3)
    assert cnt == 2 and avg == pytest.approx((3 * 1 + 1 * 2) / 4)


def test_method_is_checked() -> None:
    with pytest.raises(ValueError, match="`method`"):
        PPCF(k=3).set_method("fast")


@pytest.mark.parametrize("path", ["dense", "scatter"])
@pytest.mark.parametrize("k", [1, 4, 200])
def test_both_weight_passes_equal_the_reference_bit_for_bit(
    path: str, k: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PPCF's blocks answered by the dense pass over the rows (several passes of 5 queries,
    tiles of 7 rows, so heaps are carried across tiles) or by the scatter over the columns:
    both are the per-query reference's answers bit for bit, ties (integer values) included."""
    train, queries, items = _data(150, 40, 0.3, 13, integer=True)
    groups = np.arange(150) % 5
    excl = [i % 5 for i in range(len(queries))]
    model = PPCF(k=k).fit(train, exclude_groups=groups)
    monkeypatch.setattr(knn_block, "SCATTER_NS", np.inf if path == "dense" else 0.0)
    monkeypatch.setattr(knn_block, "DENSE_QUERIES", 5)
    monkeypatch.setattr(knn_block, "DENSE_ROWS", 7)
    dense_calls: list[int] = []
    real = knn_block._answer_dense

    def spy(*args):  # type: ignore[no-untyped-def]
        dense_calls.append(len(args[0]) - 1)
        return real(*args)

    monkeypatch.setattr(knn_block, "_answer_dense", spy)
    fast = model.predict_block(queries, items, exclude_groups=excl)
    assert (sum(dense_calls) == len(queries)) if path == "dense" else not dense_calls
    ref = model.set_method("reference").predict_block(queries, items, exclude_groups=excl)
    for (s1, c1), (s2, c2) in zip(fast, ref, strict=True):
        assert np.array_equal(c1, c2) and np.array_equal(s1, s2)
    assert any(c.max() > 0 for _, c in ref)


def test_the_dense_pass_is_chosen_where_the_queries_fill_many_columns() -> None:
    """Queries filling every item make the pass over the rows cheaper than the scatter;
    queries of one item each, the scatter. Pearson (three products) always scatters."""
    train = sp.random(2000, 50, density=0.2, format="csr", random_state=1)
    model = PPCF(k=5).fit(train)
    columns = knn_block.Columns.of(model._dev_csc, model._column_products(), train)
    every = knn_block.query_matrix([np.arange(50)] * 64, [np.ones(50)] * 64, 50)
    one = knn_block.query_matrix([np.array([3])] * 64, [np.ones(1)] * 64, 50)
    assert columns.dense_is_cheaper(every) and not columns.dense_is_cheaper(one)
    pearson = PearsonKNN(k=5).fit(train)
    pcols = knn_block.Columns.of(pearson._dev_csc, pearson._column_products())
    assert not pcols.dense_is_cheaper(every)


def test_columns_by_row_must_be_the_one_products_matrix() -> None:
    z = sp.csc_matrix(np.ones((4, 2)))
    with pytest.raises(ValueError, match=r"`by_row` must be the one product's \(4, 2\) matrix"):
        knn_block.Columns.of(z, np.ones((3, 8)), sp.csr_matrix(np.ones((4, 2))))
    with pytest.raises(ValueError, match="with 8 cells, got \\(4, 2\\) with 2"):
        knn_block.Columns.of(z, np.ones((1, 8)), sp.csr_matrix(np.eye(4, 2)))


def test_dense_needs_the_rows() -> None:
    z = sp.csc_matrix(np.ones((2, 2)))
    q = knn_block.query_matrix([np.array([0])], [np.array([1.0])], 2)
    columns = knn_block.Columns.of(z, z.data[None, :])
    with pytest.raises(ValueError, match=r"`dense=True` needs `columns.by_row`"):
        knn_block.answer_block(
            columns, q, q.data[None, :], [np.array([0])], 1, np.ones((1, 2), bool), dense=True
        )


def test_compile_kernels_covers_what_a_served_block_calls() -> None:
    """In a fresh process, after `compile_kernels` (run by `make kernels`), answering PPCF and
    Pearson blocks by either pass compiles nothing more: each kernel already has the
    signature a run uses (else a node compiles it, 5 s, inside its phase)."""
    script = textwrap.dedent(
        """
        import numpy as np, scipy.sparse as sp
        from privrec.server.models import knn_block
        from privrec.server.models.knn import PPCF, PearsonKNN
        knn_block.compile_kernels()
        kernels = (knn_block._answer_dense, knn_block._answer_block)
        before = [len(f.signatures) for f in kernels]
        train = sp.random(150, 40, density=0.3, format="csr", random_state=1)
        rng = np.random.default_rng(0)
        queries = [(rng.choice(40, 9, replace=False), rng.normal(size=9)) for _ in range(3)]
        items = [np.array([1, 2])] * 3
        for model in (PPCF(k=3), PearsonKNN(k=3)):
            model.fit(train)
            for scatter_ns in (np.inf, 0.0):  # the pass chosen: dense, then scatter
                knn_block.SCATTER_NS = scatter_ns
                model.predict_block(queries, items)
        print(before, [len(f.signatures) for f in kernels])
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=300
    ).stdout.split("\n")[-2]
    assert out == "[1, 1] [1, 1]", out


def test_the_scatter_method_never_takes_the_row_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """`set_method("scatter")` (what the bench measures the row pass against) answers by the
    scatter even where the row pass is cheaper, with the reference's answers."""
    train, queries, items = _data(150, 40, 0.3, 13, integer=True)
    model = PPCF(k=4).fit(train)
    monkeypatch.setattr(knn_block, "SCATTER_NS", np.inf)  # the row pass always cheaper
    calls: list[int] = []
    real = knn_block._answer_dense
    monkeypatch.setattr(knn_block, "_answer_dense", lambda *a: calls.append(1) or real(*a))
    scatter = model.set_method("scatter").predict_block(queries, items)
    assert not calls
    block = model.set_method("block").predict_block(queries, items)
    assert calls
    ref = model.set_method("reference").predict_block(queries, items)
    for a, b, c in zip(scatter, block, ref, strict=True):
        assert all(np.array_equal(x, y) for x, y in zip(a + b, c + c, strict=True))
