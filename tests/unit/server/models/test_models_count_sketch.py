"""Balu ch. 4's factorization core: the count-sketch read, the SGD steps, clipping, the width
(4.9), the mean correction and the fold-in, on small hand-checkable inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privrec.server.models.count_sketch import (
    Baseline,
    SGDConfig,
    SketchHashes,
    _epoch_sketch,
    fit_factorization,
    read_sketch,
    sketch_width,
)
from privrec.server.models.factorization import sgd_pass


def _epoch_dense(
    P: np.ndarray,
    Q: np.ndarray,
    users: np.ndarray,
    items: np.ndarray,
    resid: np.ndarray,
    order: np.ndarray,
    eta: float,
    lam: float,
    clip: float,
) -> int:
    """Regular MF's epoch: the shared trainer's pass without biases (returns the skipped)."""
    return sgd_pass(users, items, resid, order, P, Q, learning_rate=eta, reg=lam, clip=clip)[1]


def _hashes(
    entries: dict[tuple[int, int, int], tuple[int, int]], width: int, d: int
) -> SketchHashes:
    """Tables that are zero except T[family, row, 0][byte] = (address << 32) | sign bit."""
    tables = np.zeros((2, 2, 4, 256), dtype=np.uint64)
    for (family, row, byte), (address, bit) in entries.items():
        tables[family, row, 0, byte] = (address << 32) | bit
    return SketchHashes(tables, width, d)


def test_sketch_read_is_the_signed_mean_of_k_cells() -> None:
    """Balu (4.1): p̃_{u,l} = k⁻¹ Σ_j s_j(u,l) c_{j,h_j(u,l)}, worked by hand: k = 2, w = 3,
    d = 2. User 1, l = 0 (key 2): cells (row 0, col 2) sign +1 and (1, 0) sign −1 → (3 − 10)/2;
    l = 1 (key 3): cells (0, 0) sign −1 and (1, 1) sign +1 → (−1 + 20)/2."""
    h = _hashes({(0, 0, 2): (2, 0), (0, 1, 2): (0, 1), (0, 0, 3): (0, 1), (0, 1, 3): (1, 0)}, 3, 2)
    table = np.array([[1.0, 2.0, 3.0], [10.0, 20.0, 30.0]])
    np.testing.assert_allclose(read_sketch(table, h, 0, np.array([1])), [[-3.5, 9.5]])
    addr, sign = h.cells(0, np.array([1]))
    np.testing.assert_array_equal(addr[0], [[2, 0], [0, 1]])
    np.testing.assert_array_equal(sign[0], [[1.0, -1.0], [-1.0, 1.0]])


def test_hash_is_the_xor_of_one_table_entry_per_key_byte() -> None:
    """Simple tabulation: h(x) = ⊕_c T_c[byte_c(x)]; address = (h ≫ 32) mod w, sign from bit 0."""
    h = SketchHashes.draw(1, 1000, 7, np.random.default_rng(3))
    uid, comp = 30_000_000 // 7, 5
    x = uid * 7 + comp
    t = h.tables[1, 0]
    value = int(t[0][x & 255]) ^ int(t[1][(x >> 8) & 255]) ^ int(t[2][(x >> 16) & 255])
    value ^= int(t[3][(x >> 24) & 255])
    addr, sign = h.cells(1, np.array([uid]))
    assert addr[0, comp, 0] == (value >> 32) % 1000
    assert sign[0, comp, 0] == (1.0 if value % 2 == 0 else -1.0)
    with pytest.raises(ValueError, match="32-bit"):
        h.cells(0, np.array([2**32 // 7 + 1]))


def test_width_follows_eq_4_9() -> None:
    """w = ⌈(|U| + |I|) d / (γ k)⌉: ML-100K, d = 32: 21,000 at γ = 1, k = 4; 84,000 with k = 1;
    ⌈84000/2.83⌉ = 29,682 at γ = 2.83, k = 1."""
    assert sketch_width(943, 1682, 32, 1.0, 4) == 21_000
    assert sketch_width(943, 1682, 32, 1.0, 1) == 84_000
    assert sketch_width(943, 1682, 32, 2.83, 1) == math.ceil(84_000 / 2.83)


def test_dense_sgd_step_by_hand() -> None:
    """Balu (2.8)/(2.9) with e = p·q − r = −1, η = 0.1, λ = 0.5, both from the old values:
    p = (1, 2) → (1.25, 1.8); q = (3, −1) → (2.95, −0.75)."""
    P, Q = np.array([[1.0, 2.0]]), np.array([[3.0, -1.0]])
    one = np.array([0], dtype=np.int64)
    skipped = _epoch_dense(P, Q, one, one, np.array([2.0]), one, 0.1, 0.5, math.inf)
    assert skipped == 0
    np.testing.assert_allclose(P, [[1.25, 1.8]])
    np.testing.assert_allclose(Q, [[2.95, -0.75]])


def test_clipping_skips_a_rating_whose_loss_exceeds_epsilon() -> None:
    """Balu §4.2.1: loss ½(r − r̂)² = 0.5 here: ε = 0.4 skips it (nothing moves), ε = 0.6 and
    ε = ∞ take the step."""
    one = np.array([0], dtype=np.int64)
    for clip, moved in ((0.4, False), (0.6, True), (math.inf, True)):
        P, Q = np.array([[1.0, 2.0]]), np.array([[3.0, -1.0]])
        skipped = _epoch_dense(P, Q, one, one, np.array([2.0]), one, 0.1, 0.5, clip)
        assert skipped == (0 if moved else 1)
        assert (not np.allclose(P, [[1.0, 2.0]])) is moved


def _distinct_cells(depth: int, d: int) -> tuple[np.ndarray, ...]:
    """Addresses that put user 0 and item 0 in distinct cells of every row, with mixed signs."""
    ua = np.arange(d * depth, dtype=np.int32).reshape(1, d, depth)
    ia = ua + d * depth
    us = np.where(np.arange(d * depth) % 2 == 0, 1, -1).astype(np.int8).reshape(1, d, depth)
    is_ = -us
    return ua, us, ia, is_


@pytest.mark.parametrize("depth", [1, 3])
def test_sketch_step_moves_each_read_by_the_regular_step(depth: int) -> None:
    """Without collisions, (4.3)/(4.4) change every read by exactly the dense step of (2.8)/(2.9)
    (Balu §4.2: a read just before and after its own update differs by δv); with depth 1 this
    is feature hashing."""
    d = 2
    ua, us, ia, is_ = _distinct_cells(depth, d)
    rng = np.random.default_rng(0)
    C = rng.normal(size=(depth, 2 * d * depth))
    p0 = (us[0] * C[np.arange(depth), ua[0]]).mean(axis=1)
    q0 = (is_[0] * C[np.arange(depth), ia[0]]).mean(axis=1)
    P, Q = p0[None].copy(), q0[None].copy()
    one = np.array([0], dtype=np.int64)
    _epoch_dense(P, Q, one, one, np.array([1.5]), one, 0.2, 0.1, math.inf)
    _epoch_sketch(C, ua, us, ia, is_, one, one, np.array([1.5]), one, 0.2, 0.1, math.inf)
    np.testing.assert_allclose((us[0] * C[np.arange(depth), ua[0]]).mean(axis=1), P[0])
    np.testing.assert_allclose((is_[0] * C[np.arange(depth), ia[0]]).mean(axis=1), Q[0])


def test_sketch_clipping_leaves_the_cells_alone() -> None:
    """The sketch kernel skips a rating whose loss exceeds ε, as the dense one does."""
    ua, us, ia, is_ = _distinct_cells(2, 2)
    C = np.ones((2, 8))
    one = np.array([0], dtype=np.int64)
    # mixed signs read p̃ = q̃ = 0, so r̂ = 0 and the loss ½·10² exceeds ε = 1
    skipped = _epoch_sketch(C, ua, us, ia, is_, one, one, np.array([10.0]), one, 0.2, 0.1, 1.0)
    assert skipped == 1
    np.testing.assert_array_equal(C, np.ones((2, 8)))


def test_mean_read_is_unbiased_with_variance_sigma2_over_wk() -> None:
    """Balu §4.2 error analysis: after storing values v_e in a sketch of k rows and w columns,
    the mean read of e has error mean 0 and variance Σ_{e'≠e} v_e'²/(w k). n = 4000 entries
    read back; the mean error lies within 4 sd/√n (false-failure rate < 1e-4), the variance
    within 15 % of the formula. A broken variant without sign hashes (all s = +1) is biased by
    about Σv/w and fails the same check."""
    rng = np.random.default_rng(7)
    n, d, depth, width = 4000, 1, 4, 500
    h = SketchHashes.draw(depth, width, d, rng)
    values = rng.uniform(0.5, 1.5, n)  # all positive: the sign hash must cancel collisions
    addr, sign = h.cells(0, np.arange(n))
    table = np.zeros((depth, width))
    for j in range(depth):
        np.add.at(table[j], addr[:, 0, j], sign[:, 0, j] * values)
    err = read_sketch(table, h, 0, np.arange(n))[:, 0] - values
    sd = err.std()
    assert abs(err.mean()) < 4 * sd / math.sqrt(n)
    expected_var = (np.sum(values**2) - values**2).mean() / (width * depth)
    assert err.var() == pytest.approx(expected_var, rel=0.15)
    # broken: no sign hash
    broken = np.zeros((depth, width))
    for j in range(depth):
        np.add.at(broken[j], addr[:, 0, j], values)
    berr = broken[np.arange(depth), addr[:, 0, :]].mean(axis=1) - values
    assert abs(berr.mean()) > 4 * berr.std() / math.sqrt(n)


def test_baseline_is_sequential_means() -> None:
    """µ = global mean; b_i = item mean of r − µ; b_u = user mean of r − µ − b_i."""
    users = np.array([0, 0, 1])
    items = np.array([0, 1, 0])
    r = np.array([5.0, 3.0, 1.0])
    b = Baseline.fit(users, items, r, 2, 3)
    assert b.mu == 3.0
    np.testing.assert_allclose(b.item_bias, [0.0, 0.0, 0.0])
    np.testing.assert_allclose(b.user_bias, [1.0, -2.0])
    np.testing.assert_allclose(b.residuals(users, items, r), [1.0, -1.0, 0.0])


def _low_rank(seed: int = 0, n_users: int = 60, n_items: int = 40) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    full = 3.0 + rng.normal(size=(n_users, 2)) @ rng.normal(size=(2, n_items))
    mask = rng.random(full.shape) < 0.5
    u, i = np.nonzero(mask)
    return u.astype(np.int64), i.astype(np.int64), full[mask]


@pytest.mark.parametrize(("storage", "depth"), [("dense", 1), ("sketch", 4), ("sketch", 1)])
def test_factorization_learns_a_low_rank_matrix(storage: str, depth: int) -> None:
    """On a rank-2 matrix the training RMSE falls far below the baseline's, for the three
    methods at equal memory (γ = 1)."""
    u, i, r = _low_rank()
    config = SGDConfig(d=4, storage=storage, depth=depth, eta=0.05, reg=0.01, epochs=60)  # type: ignore[arg-type]
    f = fit_factorization(u, i, r, 60, 40, config, np.random.default_rng(0))
    base = Baseline.fit(u, i, r, 60, 40)
    rmse_base = np.sqrt(np.mean(base.residuals(u, i, r) ** 2))
    rmse = np.sqrt(np.mean((f.predict(u, i) - r) ** 2))
    assert rmse < 0.5 * rmse_base
    assert f.cells == (60 + 40) * 4


def test_clipping_counts_skipped_ratings_per_epoch() -> None:
    """A tiny ε skips almost every rating in the first epoch; ε = ∞ skips none."""
    u, i, r = _low_rank(1)
    rng = np.random.default_rng
    tight = fit_factorization(u, i, r, 60, 40, SGDConfig(d=3, epochs=3, clip=1e-4), rng(0))
    loose = fit_factorization(u, i, r, 60, 40, SGDConfig(d=3, epochs=3), rng(0))
    assert tight.skipped[0] > 0.9 * r.size
    assert loose.skipped == [0, 0, 0]


def test_fold_in_is_the_ridge_minimiser() -> None:
    """p = (QᵀQ + λ|φ|I)⁻¹Qᵀr′ minimises Σ½(r′ − pᵀq)² + ½λ|φ|‖p‖²: the gradient vanishes."""
    u, i, r = _low_rank(2)
    f = fit_factorization(
        u, i, r, 60, 40, SGDConfig(d=3, epochs=5, reg=0.1), np.random.default_rng(0)
    )
    items, ratings = np.array([1, 4, 7, 9]), np.array([4.0, 2.0, 5.0, 3.0])
    b_u, p = f.fold_in(items, ratings)
    resid = ratings - f.baseline.mu - b_u - f.baseline.item_bias[items]
    q = f.item_vectors(items)
    grad = -q.T @ (resid - q @ p) + 0.1 * items.size * p
    np.testing.assert_allclose(grad, 0.0, atol=1e-10)
    scores = f.predict_new_user(items, ratings, np.array([0, 1]))
    expected = (
        f.baseline.mu + b_u + f.baseline.item_bias[[0, 1]] + f.item_vectors(np.array([0, 1])) @ p
    )
    np.testing.assert_allclose(scores, expected)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"d": 0}, "`d`"),
        ({"depth": 0}, "`depth`"),
        ({"eta": 0.0}, "`eta`"),
        ({"gamma": -1.0}, "`gamma`"),
        ({"clip": 0.0}, "`clip`"),
        ({"reg": -0.1}, "`reg`"),
        ({"storage": "tree"}, "`storage`"),
    ],
)
def test_config_refuses_bad_values(kwargs: dict[str, object], needle: str) -> None:
    """Each bad hyper-parameter is a ValueError naming it."""
    with pytest.raises(ValueError, match=needle):
        SGDConfig(**kwargs)  # type: ignore[arg-type]


def test_fit_refuses_out_of_range_ids() -> None:
    """An item id beyond n_items is refused, naming `items`."""
    with pytest.raises(ValueError, match="`items`"):
        fit_factorization(
            np.array([0]),
            np.array([5]),
            np.array([3.0]),
            1,
            5,
            SGDConfig(d=2),
            np.random.default_rng(0),
        )
