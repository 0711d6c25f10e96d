"""PPCF and PearsonKNN: hand-computed examples, brute-force oracles, exclusion, top-k."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from privrec.server.models import PPCF, PearsonKNN, make_model
from privrec.shared.errors import ConfigError, NotFittedError
from privrec.shared.mechanisms import Profile, RandomizedPerturbation
from privrec.shared.zscores import denormalise, zscore


def _csr(rows: dict[int, dict[int, float]], shape: tuple[int, int]) -> sp.csr_matrix:
    r, c, v = [], [], []
    for u, cells in rows.items():
        for i, x in cells.items():
            r.append(u)
            c.append(i)
            v.append(x)
    return sp.csr_matrix((np.array(v, float), (np.array(r), np.array(c))), shape=shape)


def _random_ratings(
    seed: int, n_users: int = 40, n_items: int = 25, density: float = 0.4
) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    filled = rng.random((n_users, n_items)) < density
    filled[:, 0] = True  # every user rates at least one item
    r, c = np.nonzero(filled)
    return sp.csr_matrix(
        (rng.integers(1, 6, r.size).astype(float), (r, c)), shape=(n_users, n_items)
    )


def _oracle(
    dev: np.ndarray,
    filled: np.ndarray,
    w: np.ndarray,
    items: np.ndarray,
    *,
    k: int,
    allowed: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Loop-by-loop reference of the shared neighbourhood step (module docstring rules)."""
    out, cnt = np.zeros(items.size), np.zeros(items.size, dtype=np.uint32)
    for t, q in enumerate(items):
        cand = [u for u in range(w.size) if filled[u, q] and allowed[u] and w[u] > 0]
        cand.sort(key=lambda u: (-w[u], u))
        nb = cand[:k]
        if nb:
            out[t] = sum(dev[u, q] * w[u] for u in nb) / sum(w[u] for u in nb)
            cnt[t] = len(nb)
    return out, cnt


# ------------------------------------------------------------------ PPCF, Bilge Eq 2.4/2.6
def test_ppcf_hand_example_eq_2_4_and_2_6() -> None:
    """P′ on a 4-user × 4-item example computed by hand (explicit 0.0 is a filled cell)."""
    train = _csr(
        {
            0: {0: 2.0, 1: 1.0, 2: -1.0},  # w′ = (2·1 + 1·1)/4 = 0.75
            1: {0: 1.0, 2: 0.0, 3: 3.0},  # w′ = 1/4 = 0.25
            2: {1: -3.0, 3: 2.0},  # w′ = −3/4 -> never a neighbour
            3: {0: 0.5, 3: -1.0},  # w′ = 0.5/4 = 0.125
        },
        (4, 4),
    )
    assert train.nnz == 10  # the explicit zero is stored
    q_idx, q_val = np.array([0, 1]), np.array([1.0, 1.0])
    scores, counts = PPCF(k=2).fit(train).predict(q_idx, q_val, np.array([2, 3, 1]))
    expected = [
        (0.75 * -1.0 + 0.25 * 0.0) / (0.75 + 0.25),
        (0.25 * 3.0 + 0.125 * -1.0) / (0.25 + 0.125),
        1.0,
    ]
    np.testing.assert_allclose(scores, expected, rtol=1e-15)
    np.testing.assert_array_equal(counts, [2, 2, 1])
    assert counts.dtype == np.uint32 and scores.dtype == np.float64
    # k = 1 keeps only the largest weight at item 3 (user 1)
    scores1, counts1 = PPCF(k=1).fit(train).predict(q_idx, q_val, np.array([3]))
    assert scores1[0] == 3.0 and counts1[0] == 1


def test_ppcf_no_positive_neighbour_falls_back_to_zero() -> None:
    """An item with no eligible neighbour scores P′ = 0 (her mean) with count 0."""
    train = _csr({0: {0: 1.0, 1: 2.0}, 1: {0: -1.0, 2: 5.0}}, (2, 3))
    scores, counts = PPCF(k=5).fit(train).predict(np.array([0]), np.array([1.0]), np.array([2, 1]))
    np.testing.assert_array_equal(scores, [0.0, 2.0])
    np.testing.assert_array_equal(counts, [0, 1])


@pytest.mark.parametrize("k", [1, 3, 7, 100])
def test_ppcf_matches_oracle_and_respects_k(k: int) -> None:
    """Random U′ with negative values: equals the brute-force oracle, never more than k."""
    rng = np.random.default_rng(3)
    train = _random_ratings(11)
    train.data = rng.normal(size=train.nnz)
    groups = np.arange(train.shape[0]) % 3
    model = PPCF(k=k).fit(train, exclude_groups=groups)
    dense, filled = train.toarray(), train.toarray() != 0
    items = np.arange(train.shape[1])
    for g in (None, 0, 2):
        q_idx = np.array([0, 4, 5, 9, 17])
        q_val = rng.normal(size=q_idx.size)
        za = np.zeros(train.shape[1])
        za[q_idx] = q_val
        w = dense @ za / train.shape[1]
        allowed = np.ones(train.shape[0], bool) if g is None else groups != g
        exp, exp_cnt = _oracle(dense, filled, w, items, k=k, allowed=allowed)
        got, cnt = model.predict(q_idx, q_val, items, exclude_group=g)
        np.testing.assert_allclose(got, exp, rtol=1e-12, atol=1e-14)
        np.testing.assert_array_equal(cnt, exp_cnt)
        assert cnt.max() <= k


def test_ppcf_noise_free_release_is_zscore_knn() -> None:
    """RPT with σ → 0 and β = 0 makes PPCF the z-score kNN of Bilge Eq 2.3 (tolerance ≫ 1e-9·k)."""
    ratings = _random_ratings(5, n_users=30, n_items=20, density=0.5)
    n_users, m = ratings.shape
    mech = RandomizedPerturbation(sigma_max=1e-9, beta_max=0)
    rows = []
    for u in range(n_users):
        lo, hi = ratings.indptr[u], ratings.indptr[u + 1]
        prof = Profile(ratings.indices[lo:hi].astype(np.int64), ratings.data[lo:hi], m)
        rel = mech.release(prof, np.random.default_rng(u))
        rows.append((u, rel.indices, rel.values, zscore(prof.ratings).z))
    u_prime = sp.csr_matrix(
        (
            np.concatenate([r[2] for r in rows]),
            (
                np.concatenate([np.full(r[1].size, r[0]) for r in rows]),
                np.concatenate([r[1] for r in rows]),
            ),
        ),
        shape=(n_users, m),
    )
    z_true = np.zeros((n_users, m))
    for u, idx, _, z in rows:
        z_true[u, idx] = z
    filled = ratings.toarray() > 0
    model = PPCF(k=5).fit(u_prime, exclude_groups=np.arange(n_users))
    items = np.arange(m)
    for a in range(3):
        q_idx = np.flatnonzero(filled[a])
        w = z_true @ z_true[a] / m  # Bilge Eq 2.3 on true z-scores
        allowed = np.arange(n_users) != a
        exp, _ = _oracle(z_true, filled, w, items, k=5, allowed=allowed)
        got, _ = model.predict(q_idx, u_prime[a].toarray()[0, q_idx], items, exclude_group=a)
        np.testing.assert_allclose(got, exp, atol=1e-6)


# ------------------------------------------------------------------ Pearson, Bilge Eq 2.1/2.2
def test_pearson_hand_example_eq_2_1_and_2_2() -> None:
    """Eq 2.1 over co-rated items with overall means; Eq 2.2 with positive weights only."""
    train = _csr(
        {
            0: {0: 5, 1: 4, 2: 3},  # v̄ = 4, c = (1, 0, −1);  w = 2/√(2·8) = 0.5
            1: {0: 1, 1: 5, 3: 3},  # v̄ = 3, c = (−2, 2, ·, 0); w = −8/√(8·8) = −1
            2: {0: 4, 1: 2, 3: 5},  # v̄ = 11/3, c = (1/3, −5/3, ·, 4/3)
            3: {0: 5, 2: 1, 3: 3},  # v̄ = 3, c = (2, ·, −2, 0); w = 4/√(8·4)
        },
        (4, 4),
    )
    q_idx, q_val = np.array([0, 1, 2]), np.array([5.0, 1.0, 3.0])  # v̄_a = 3, c_a = (2, −2, 0)
    w0 = 0.5
    w2 = (2 * (1 / 3) + (-2) * (-5 / 3)) / np.sqrt((1 / 9 + 25 / 9) * 8)
    w3 = 4 / np.sqrt(8 * 4)
    model = PearsonKNN(k=10).fit(train)
    scores, counts = model.predict(q_idx, q_val, np.array([2, 3]))
    expected = [3 + (w0 * -1 + w3 * -2) / (w0 + w3), 3 + (w2 * 4 / 3 + w3 * 0) / (w2 + w3)]
    np.testing.assert_allclose(scores, expected, rtol=1e-14)
    np.testing.assert_array_equal(counts, [2, 2])
    np.testing.assert_allclose(model.user_means_, [4, 3, 11 / 3, 3])
    # clipping to the scale
    clipped, _ = (
        PearsonKNN(k=10, clip=(2.0, 3.5)).fit(train).predict(q_idx, q_val, np.array([2, 3]))
    )
    np.testing.assert_allclose(clipped, np.clip(expected, 2.0, 3.5))


@pytest.mark.parametrize("k", [1, 4, 50])
def test_pearson_matches_oracle(k: int) -> None:
    """Random ratings: PearsonKNN equals a loop implementation of Eq 2.1/2.2."""
    train = _random_ratings(2)
    dense, filled = train.toarray(), train.toarray() > 0
    means = dense.sum(1) / filled.sum(1)
    dev = np.where(filled, dense - means[:, None], 0.0)
    q_idx = np.array([0, 2, 3, 8, 13, 21])
    q_val = np.array([4.0, 2.0, 5.0, 3.0, 1.0, 4.0])
    ca = q_val - q_val.mean()
    w = np.zeros(train.shape[0])
    for u in range(train.shape[0]):
        co = filled[u, q_idx]
        num = np.sum(ca[co] * dev[u, q_idx][co])
        den = np.sqrt(np.sum(ca[co] ** 2) * np.sum(dev[u, q_idx][co] ** 2))
        w[u] = num / den if den > 0 else 0.0
    items = np.arange(train.shape[1])
    exp, exp_cnt = _oracle(dev, filled, w, items, k=k, allowed=np.ones(train.shape[0], bool))
    got, cnt = PearsonKNN(k=k).fit(train).predict(q_idx, q_val, items)
    np.testing.assert_allclose(got, q_val.mean() + exp, rtol=1e-12)
    np.testing.assert_array_equal(cnt, exp_cnt)


# --------------------------------------------------------------------------- shared behaviour
@pytest.mark.parametrize("cls", [PPCF, PearsonKNN])
def test_exclude_group_equals_fitting_without_the_group(cls: type) -> None:
    """exclude_group=g gives exactly what a model fitted on the other rows gives."""
    train = _random_ratings(7, n_users=50)
    groups = np.random.default_rng(0).integers(0, 5, train.shape[0])
    model = cls(k=6).fit(train, exclude_groups=groups)
    q_idx, q_val = np.array([0, 1, 6, 9]), np.array([1.0, 5.0, 4.0, 2.0])
    items = np.arange(train.shape[1])
    for g in range(5):
        sub = cls(k=6).fit(train[groups != g])
        np.testing.assert_array_equal(
            model.predict(q_idx, q_val, items, exclude_group=g), sub.predict(q_idx, q_val, items)
        )
        # and the excluded rows really matter: some score differs from the full pool
        assert not np.array_equal(
            model.predict(q_idx, q_val, items, exclude_group=g)[0],
            model.predict(q_idx, q_val, items)[0],
        )


@pytest.mark.parametrize("cls", [PPCF, PearsonKNN])
def test_predictions_are_deterministic_and_per_item(cls: type) -> None:
    """Same inputs, same bits; an item's score does not depend on the other items asked."""
    train = _random_ratings(9)
    q_idx, q_val = np.array([0, 3, 4]), np.array([2.0, 4.0, 5.0])
    items = np.array([5, 1, 5, 20, 7])
    a = cls(k=4).fit(train).predict(q_idx, q_val, items)
    b = cls(k=4).fit(train.copy()).predict(q_idx, q_val, items)
    np.testing.assert_array_equal(a[0], b[0])
    single = np.array(
        [cls(k=4).fit(train).predict(q_idx, q_val, np.array([i]))[0][0] for i in items]
    )
    np.testing.assert_array_equal(a[0], single)


@pytest.mark.parametrize("cls", [PPCF, PearsonKNN])
def test_recommend_returns_top_n_unseen_items(cls: type) -> None:
    """recommend = the n best predict scores over unseen items with a neighbour, best first."""
    train = _random_ratings(4)
    q_idx, q_val = np.array([0, 2, 5]), np.array([5.0, 1.0, 3.0])
    model = cls(k=5).fit(train)
    items, scores = model.recommend(q_idx, q_val, 6)
    assert items.size == 6 and not set(items) & set(q_idx)
    assert np.all(np.diff(scores) <= 0)
    unseen = np.setdiff1d(np.arange(train.shape[1]), q_idx)
    all_scores, counts = model.predict(q_idx, q_val, unseen)
    ok = counts > 0
    ranked = sorted(zip(-all_scores[ok], unseen[ok], strict=True))[:6]
    np.testing.assert_array_equal(items, [i for _, i in ranked])
    np.testing.assert_array_equal(scores, [-s for s, _ in ranked])


def test_denormalise_eq_2_5() -> None:
    """p = v̄_a + σ_a·P′ (Bilge Eq 2.5), clipped only when asked."""
    P = np.array([-3.0, 0.0, 0.5])
    np.testing.assert_allclose(denormalise(P, 3.5, 1.2), [-0.1, 3.5, 4.1])
    np.testing.assert_allclose(denormalise(P, 3.5, 1.2, clip=(1, 5)), [1.0, 3.5, 4.1])
    with pytest.raises(ValueError, match="clip"):
        denormalise(P, 3.5, 1.2, clip=(5, 1))


def test_boundary_validation() -> None:
    """Bad hyper-parameters and inputs raise precise errors naming the parameter."""
    train = _random_ratings(1)
    with pytest.raises(ValueError, match="`k`"):
        PPCF(k=0)
    with pytest.raises(NotFittedError):
        PPCF().predict(np.array([0]), np.array([1.0]), np.array([1]))
    model = PPCF().fit(train)
    with pytest.raises(ValueError, match="exclude_group"):
        model.predict(np.array([0]), np.array([1.0]), np.array([1]), exclude_group=0)
    with pytest.raises(ValueError, match="query_indices"):
        model.predict(np.array([0, 0]), np.array([1.0, 2.0]), np.array([1]))
    with pytest.raises(ValueError, match="items"):
        model.predict(np.array([0]), np.array([1.0]), np.array([train.shape[1]]))
    with pytest.raises(ValueError, match="exclude_groups"):
        PPCF().fit(train, exclude_groups=np.zeros(3, dtype=np.int64))
    dup = sp.coo_matrix((np.array([1.0, 2.0]), (np.array([0, 0]), np.array([1, 1]))), shape=(2, 2))
    with pytest.raises(ValueError, match="duplicate"):
        PPCF().fit(dup)
    with pytest.raises(ConfigError, match=r"model\.name"):
        make_model("nope")
    with pytest.raises(ConfigError, match=r"model\.ppcf"):
        make_model("ppcf", {"k": -1})
    assert isinstance(make_model("pearson_knn", {"k": 3}), PearsonKNN)
