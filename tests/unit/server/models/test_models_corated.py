"""Co-rated similarity and recommendation-aware sensitivity (Zhu Eq 3.2.1, 3.2.2, 3.3.2, 3.3.3):
hand-computed values, a brute-force oracle, Lemma 1's bound, and the user-based twin."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from privrec.server.models.corated import (
    CoratedStats,
    corated_similarity,
    item_pair_sensitivity,
    item_pair_similarity,
    item_pair_stats,
    query_user_similarity,
)


def _ratings(seed: int, n_users: int = 25, n_items: int = 9, density: float = 0.6) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    filled = rng.random((n_users, n_items)) < density
    r, c = np.nonzero(filled)
    m = sp.csr_matrix((rng.integers(1, 6, r.size).astype(float), (r, c)), shape=filled.shape)
    m.sort_indices()
    return m


def _naive_sim(a: np.ndarray, b: np.ndarray, kind: str) -> float:
    """Eq 3.2.1 / 3.2.2 over the co-rated vectors a, b, written out."""
    n = a.size
    if kind == "cos":
        den = math.sqrt((a * a).sum() * (b * b).sum())
        return 0.0 if n == 0 or den == 0 else float((a * b).sum() / den)
    if n < 2:
        return 0.0
    ca, cb = a - a.mean(), b - b.mean()
    den = math.sqrt((ca * ca).sum() * (cb * cb).sum())
    return 0.0 if den < 1e-9 else float((ca * cb).sum() / den)


def _naive_rs(dense: np.ndarray, i: int, j: int, kind: str) -> float:
    """Eq 3.3.2 by its definition: max over co-raters of |s − s without her|."""
    co = np.flatnonzero((dense[:, i] > 0) & (dense[:, j] > 0))
    if co.size <= 1:
        return 1.0
    s = _naive_sim(dense[co, i], dense[co, j], kind)
    return max(
        abs(s - _naive_sim(dense[np.delete(co, x), i], dense[np.delete(co, x), j], kind))
        for x in range(co.size)
    )


def test_hand_example_pcc_cos_and_rs() -> None:
    """3 users × 2 items: COS = 33/√(42·29), PCC = 3/√(26/3·2) on co-rated means; deleting
    user 2 flips PCC to −1, so RS_pcc = 1 + 0.7206; deleting user 0 moves COS most."""
    train = sp.csr_matrix(np.array([[5.0, 3.0], [4.0, 4.0], [1.0, 2.0]]))
    stats = item_pair_stats(train)
    cos = item_pair_similarity(stats, "cos")
    pcc = item_pair_similarity(stats, "pcc")
    assert cos[0, 1] == pytest.approx(33 / math.sqrt(42 * 29))
    assert pcc[0, 1] == pytest.approx(3 / math.sqrt(26 / 3 * 2))
    assert pcc[1, 0] == pcc[0, 1] and cos[0, 0] == 0.0  # symmetric, never its own neighbour
    rs = item_pair_sensitivity(train, stats, pcc, "pcc")
    assert rs[0, 1] == pytest.approx(1 + 3 / math.sqrt(26 / 3 * 2))
    # COS: deleting user 0 moves it most, to 18/√(17·20)
    rs_cos = item_pair_sensitivity(train, stats, cos, "cos")
    assert rs_cos[0, 1] == pytest.approx(18 / math.sqrt(340) - 33 / math.sqrt(42 * 29))


@pytest.mark.parametrize("kind", ["pcc", "cos"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_similarity_and_sensitivity_match_the_definitions(kind: str, seed: int) -> None:
    """Every pair of a random matrix: s and RS equal the written-out definitions."""
    train = _ratings(seed)
    dense = train.toarray()
    stats = item_pair_stats(train)
    sim = item_pair_similarity(stats, kind)
    rs = item_pair_sensitivity(train, stats, sim, kind)
    m = dense.shape[1]
    for i in range(m):
        for j in range(m):
            if i == j:
                continue
            co = (dense[:, i] > 0) & (dense[:, j] > 0)
            assert sim[i, j] == pytest.approx(
                _naive_sim(dense[co, i], dense[co, j], kind), abs=1e-9
            )
            assert rs[i, j] == pytest.approx(_naive_rs(dense, i, j, kind), abs=1e-9)


def test_rs_is_one_for_at_most_one_co_rater() -> None:
    """|U_ij| = 1 (thesis) and |U_ij| = 0 (one added user can move s to ±1) give RS = 1."""
    train = sp.csr_matrix(np.array([[5.0, 3.0, 0.0], [0.0, 4.0, 2.0]]))
    stats = item_pair_stats(train)
    sim = item_pair_similarity(stats, "cos")
    rs = item_pair_sensitivity(train, stats, sim, "cos")
    assert rs[0, 1] == 1.0 and rs[0, 2] == 1.0 and rs[1, 2] == 1.0


def test_lemma_1_bounds_the_cos_sensitivity() -> None:
    """Zhu Lemma 1 (Eq 3.3.3 with the proof's numerator, Eq 3.3.5) bounds the brute-force RS
    of COS on non-negative ratings; the bound is attained in the numerator ≥ 0 branch often."""
    train = _ratings(7, n_users=40, n_items=8)
    dense = train.toarray()
    stats = item_pair_stats(train)
    sim = item_pair_similarity(stats, "cos")
    rs = item_pair_sensitivity(train, stats, sim, "cos")
    checked = 0
    for i in range(8):
        for j in range(i + 1, 8):
            co = np.flatnonzero((dense[:, i] > 0) & (dense[:, j] > 0))
            if co.size < 2:
                continue
            a, b = dense[co, i], dense[co, j]
            na, nb, dot = np.linalg.norm(a), np.linalg.norm(b), a @ b
            terms = []
            for x in range(co.size):
                na2 = math.sqrt(na**2 - a[x] ** 2)
                nb2 = math.sqrt(nb**2 - b[x] ** 2)
                if na2 == 0 or nb2 == 0:
                    terms.append(math.inf)
                    continue
                terms.append(a[x] * b[x] / (na2 * nb2))
                terms.append(dot * (na * nb - na2 * nb2) / (na * nb * na2 * nb2))
            assert rs[i, j] <= max(terms) + 1e-12
            checked += 1
    assert checked > 10


@pytest.mark.parametrize("kind", ["pcc", "cos"])
def test_query_user_similarity_is_the_item_pair_rule_transposed(kind: str) -> None:
    """s(a, v) and RS(a, v) of a query equal the item-pair statistics of the transposed
    matrix with the query as one more column (users ↔ items)."""
    train = _ratings(3, n_users=12, n_items=15, density=0.5)
    q_idx = np.array([0, 2, 3, 7, 9, 11])
    q_val = np.array([5.0, 1.0, 4.0, 4.0, 2.0, 3.0])
    got = query_user_similarity(train.tocsc(), q_idx, q_val, kind)
    query = sp.csr_matrix((q_val, (np.zeros(6, int), q_idx)), shape=(1, 15))
    both = sp.vstack([train, query]).T.tocsr()  # items × (users + query)
    both.sort_indices()
    stats = item_pair_stats(both)
    sim = item_pair_similarity(stats, kind)
    rs = item_pair_sensitivity(both, stats, sim, kind)
    np.testing.assert_allclose(got.sim, sim[-1, :-1], atol=1e-12)
    np.testing.assert_allclose(got.sensitivity, rs[-1, :-1], atol=1e-12)
    np.testing.assert_array_equal(got.n_common, stats.n[-1, :-1])


def test_allowed_rows_are_left_out() -> None:
    """Rows not allowed get s = 0, RS = 1, no co-rated item."""
    train = _ratings(4, n_users=6, n_items=5, density=0.9)
    allowed = np.array([True, False, True, True, False, True])
    got = query_user_similarity(
        train.tocsc(), np.array([0, 1, 2]), np.array([4.0, 2.0, 5.0]), "cos", allowed=allowed
    )
    assert np.all(got.sim[~allowed] == 0) and np.all(got.sensitivity[~allowed] == 1)
    assert np.all(got.n_common[~allowed] == 0)


def test_undefined_similarity_is_zero_and_bad_name_refused() -> None:
    """PCC of one co-rater or of constant ratings is 0; an unknown measure names the parameter."""
    stats = CoratedStats(
        np.array([1.0, 3.0]),
        np.array([4.0, 6.0]),
        np.array([2.0, 9.0]),
        np.array([16.0, 12.0]),
        np.array([4.0, 29.0]),
        np.array([8.0, 18.0]),
    )
    np.testing.assert_array_equal(corated_similarity(stats, "pcc"), [0.0, 0.0])
    with pytest.raises(ValueError, match="`similarity` must be one of"):
        corated_similarity(stats, "jaccard")
