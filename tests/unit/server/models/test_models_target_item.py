"""Bilge Ch. 4: item similarities (Eq 2.1 on items, Eq 4.2, Eq 4.5–4.7), CF+/CF++ (Eq 4.1) and
PPCF+/PPCF++ (Eq 4.3/4.4, Procedure 4) on hand-checkable inputs, their reductions to CF/PPCF,
τ elimination, and the noise correction's expectation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from privrec.server.models import PPCF, PearsonKNN, TargetItemCF, TargetItemPPCF
from privrec.server.models.item_similarity import (
    disguised_item_cosine,
    item_cosine,
    item_pearson,
    shift_to_unit,
)
from privrec.server.models.offline import restricted_dot
from privrec.shared.types import BoolArray, FloatArray


def _csr(rows: dict[int, dict[int, float]], shape: tuple[int, int]) -> sp.csr_matrix:
    r = [u for u, cells in rows.items() for _ in cells]
    c = [i for cells in rows.values() for i in cells]
    v = [x for cells in rows.values() for x in cells.values()]
    return sp.csr_matrix((np.array(v, float), (np.array(r), np.array(c))), shape=shape)


def _random(seed: int, n: int = 40, m: int = 25, density: float = 0.4) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    filled = rng.random((n, m)) < density
    filled[:, 0] = True
    r, c = np.nonzero(filled)
    return sp.csr_matrix((rng.integers(1, 6, r.size).astype(float), (r, c)), shape=(n, m))


# ------------------------------------------------------------------ item similarities
def test_disguised_item_cosine_hand_example_eq_4_5_to_4_7() -> None:
    """Item 0 holds z′ = (1, 3, −1), item 1 holds (2, ⊥, 1): Σz′² = 11 and 5 over 3 and 2
    raters; the dot product over co-filled rows is 1·2 + (−1)·1 = 1."""
    z = _csr({0: {0: 1.0, 1: 2.0}, 1: {0: 3.0}, 2: {0: -1.0, 1: 1.0}}, (3, 2))
    plain = disguised_item_cosine(z, 0.0)
    assert plain[0, 1] == pytest.approx(1 / math.sqrt(11 * 5))
    corrected = disguised_item_cosine(z, 1.0)  # Eq 4.7: 11 − 3·1 and 5 − 2·1
    assert corrected[0, 1] == pytest.approx(1 / math.sqrt(8 * 3))
    assert corrected[1, 0] == corrected[0, 1]
    np.testing.assert_array_equal(np.diag(corrected), [1.0, 1.0])
    # v = 3: item 1's corrected power 5 − 6 < 0: no magnitude, similarity 0 (and diagonal 0)
    broken = disguised_item_cosine(z, 3.0)
    assert broken[0, 1] == 0.0 and broken[1, 1] == 0.0 and broken[0, 0] == 1.0
    with pytest.raises(ValueError, match="noise_variance"):
        disguised_item_cosine(z, -1.0)


def test_item_pearson_and_cosine_hand_example() -> None:
    """Eq 2.1 on items (means over all raters) and Eq 4.2 over co-raters, by hand."""
    # item 0: users 0,1,2 rate 1,3,5 (mean 3); item 1: users 0,1 rate 2,4 (mean 3), user 3 rates 3
    r = _csr({0: {0: 1.0, 1: 2.0}, 1: {0: 3.0, 1: 4.0}, 2: {0: 5.0}, 3: {1: 3.0}}, (4, 2))
    # co-raters 0,1: centred item 0 (−2, 0), item 1 (−1, 1): num 2, den √4·√2
    assert item_pearson(r)[0, 1] == pytest.approx(2 / (2 * math.sqrt(2)))
    # cosine over co-raters: (1·2 + 3·4)/(√(1 + 9)·√(4 + 16))
    assert item_cosine(r)[0, 1] == pytest.approx(14 / math.sqrt(10 * 20))
    assert shift_to_unit(np.array([-1.0, 0.0, 1.0])).tolist() == [0.0, 0.5, 1.0]


def test_expected_noise_correction_is_unbiased_and_thesis_one_is_negative() -> None:
    """Under Procedure 1's noise (σ ~ U(0, σ_max], Gaussian or uniform of variance σ²), Σ(z + r)²
    − |S|σ_max²/3 estimates Σz² (the "expected" correction); the thesis's |S|σ_max² leaves a
    negative "magnitude" at σ_max = 2. Tolerance: 4 standard errors of the mean over 4,000
    users (false failure < 1e-4)."""
    rng = np.random.default_rng(0)
    n, sigma_max = 4000, 2.0
    z = rng.normal(size=n)
    sigma = rng.uniform(0.0, sigma_max, size=n)
    gaussian = rng.random(n) < 0.5
    noise = np.where(
        gaussian,
        rng.normal(size=n) * sigma,
        rng.uniform(-1.0, 1.0, size=n) * math.sqrt(3.0) * sigma,
    )
    observed = (z + noise) ** 2
    terms = observed - sigma_max**2 / 3.0 - z**2
    assert abs(terms.mean()) < 4 * terms.std() / math.sqrt(n)
    assert observed.sum() - n * sigma_max**2 < 0
    # the same through the estimator: one item rated by everyone, a second identical one
    col = sp.csr_matrix(np.column_stack([z + noise, z + noise]))
    assert disguised_item_cosine(col, sigma_max**2)[0, 1] == 0.0  # thesis: no magnitude
    assert disguised_item_cosine(col, sigma_max**2 / 3.0)[0, 1] == 1.0  # clipped at 1


def test_restricted_dot_touches_only_the_named_columns() -> None:
    """csc[:, cols] @ vec, whatever the other columns hold."""
    x = _random(1, n=12, m=9).tocsc()
    cols = np.array([7, 2, 4])
    vec = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(restricted_dot(x, cols, vec), x[:, cols] @ vec)


# ------------------------------------------------------------------ PPCF+ / PPCF++
class _FixedIS(TargetItemPPCF):
    """PPCF+ with a given IS matrix instead of the estimate (to isolate Eq 4.3)."""

    fixed: FloatArray

    def _build_offline(self, allowed: BoolArray) -> FloatArray:
        return self.fixed


def test_ppcf_plus_with_unit_item_similarity_is_ppcf() -> None:
    """IS ≡ 1 turns Eq 4.3 into Eq 2.3/2.4: PPCF+ then answers exactly as PPCF."""
    z = _random(2).astype(float)
    z.data = z.data - 3.0  # any real values stand for disguised z-scores
    model = _FixedIS(k=4)
    model.fixed = np.ones((25, 25))
    model.fit(z)
    ref = PPCF(k=4).fit(z)
    idx, val = np.array([0, 3, 7, 11]), np.array([1.0, -0.5, 2.0, 0.3])
    items = np.array([1, 2, 5, 20])
    got, ref_out = model.predict(idx, val, items), ref.predict(idx, val, items)
    np.testing.assert_allclose(got[0], ref_out[0], rtol=1e-12)
    np.testing.assert_array_equal(got[1], ref_out[1])


def test_ppcf_plus_hand_example_eq_4_3() -> None:
    """w^q_au = Σ_i IS_iq z_ai z_ui / m, then P′ = Σ z_uq w / Σ w over the 2 best users."""
    z = _csr(
        {
            0: {0: 1.0, 1: 1.0, 3: 2.0},
            1: {0: 1.0, 1: -1.0, 3: -1.0},
            2: {0: -1.0, 1: 2.0, 3: 0.5},
        },
        (3, 4),
    )
    model = _FixedIS(k=2)
    model.fixed = np.zeros((4, 4))
    model.fixed[:, 3] = [0.5, 1.0, 0.0, 1.0]  # IS_i3 for i = 0, 1, 2, 3
    model.fit(z)
    # a = (z_a0, z_a1) = (1, 1); w_u = (0.5·1·z_u0 + 1.0·1·z_u1)/4
    w = np.array([(0.5 + 1.0) / 4, (0.5 - 1.0) / 4, (-0.5 + 2.0) / 4])  # 0.375, −0.125, 0.375
    scores, counts = model.predict(np.array([0, 1]), np.array([1.0, 1.0]), np.array([3]))
    assert counts[0] == 2  # user 1 has w < 0
    assert scores[0] == pytest.approx((2.0 * w[0] + 0.5 * w[2]) / (w[0] + w[2]))


def test_tau_eliminates_items_procedure_4() -> None:
    """PPCF++: the active user's items with IS_iq ≤ τ do not take part — changing every value
    in those columns changes nothing, and the answer equals a query without them."""
    z = _random(3).astype(float)
    z.data -= 3.0
    rng = np.random.default_rng(5)
    sim = rng.uniform(0.0, 1.0, (25, 25))
    idx, val = np.array([0, 2, 4, 6, 8, 10]), np.array([1.0, -1.0, 0.5, 2.0, -0.3, 0.8])
    q = 13
    kept = sim[idx, q] > 0.4
    assert 0 < kept.sum() < idx.size
    model = _FixedIS(k=5, tau=0.4)
    model.fixed = sim
    model.fit(z)
    full = model.predict(idx, val, np.array([q]))
    alone = model.predict(idx[kept], val[kept], np.array([q]))
    np.testing.assert_allclose(full[0], alone[0], rtol=1e-12)
    other = z.tolil()
    for i in idx[~kept]:
        for u in range(z.shape[0]):
            if other[u, i] != 0:
                other[u, i] = 99.0
    twin = _FixedIS(k=5, tau=0.4)
    twin.fixed = sim
    twin.fit(other.tocsr())
    np.testing.assert_allclose(twin.predict(idx, val, np.array([q]))[0], full[0], rtol=1e-12)


def test_ppcf_plus_similarities_come_from_the_pool_only() -> None:
    """The offline IS of the pool excluding a group is computed without that group's rows (the
    test users' own releases never shape what serves them)."""
    z = _random(4).astype(float)
    z.data -= 3.0
    groups = np.arange(z.shape[0]) % 2
    model = TargetItemPPCF(sigma_max=0.5).fit(z, exclude_groups=groups)
    pool = model._offline_for(groups != 1)
    expected = np.maximum(disguised_item_cosine(z[groups != 1], 0.25 / 3), 0.0)
    np.testing.assert_array_equal(pool, expected)


def test_ppcf_plus_parameters_are_validated() -> None:
    """Bad τ, σ_max, correction or scale name the parameter."""
    for kwargs, needle in [
        ({"tau": 1.0}, "tau"),
        ({"tau": -0.1}, "tau"),
        ({"sigma_max": -1.0}, "sigma_max"),
        ({"noise_correction": "none"}, "noise_correction"),
        ({"scale": "abs"}, "scale"),
        ({"k": 0}, "k"),
    ]:
        with pytest.raises(ValueError, match=needle):
            TargetItemPPCF(**kwargs)  # type: ignore[arg-type]


# ------------------------------------------------------------------ CF+ / CF++
class _FixedCF(TargetItemCF):
    fixed: FloatArray

    def _build_offline(self, allowed: BoolArray) -> FloatArray:
        return self.fixed


def test_cf_plus_with_unit_item_similarity_is_pearson_knn() -> None:
    """IS ≡ 1 turns Eq 4.1 into Eq 2.1: CF+ then answers exactly as the Pearson baseline."""
    r = _random(6)
    model = _FixedCF(k=6)
    model.fixed = np.ones((25, 25))
    model.fit(r)
    ref = PearsonKNN(k=6).fit(r)
    idx, val = np.array([0, 1, 5, 9, 12]), np.array([5.0, 3.0, 4.0, 1.0, 2.0])
    items = np.array([2, 3, 17])
    np.testing.assert_allclose(
        model.predict(idx, val, items)[0], ref.predict(idx, val, items)[0], rtol=1e-12
    )


def test_cf_plus_hand_example_eq_4_1() -> None:
    """PCC^q with IS² weights over co-rated items, by hand, and the Eq 2.2 prediction."""
    r = _csr({0: {0: 5.0, 1: 1.0, 2: 3.0, 3: 4.0}, 1: {0: 2.0, 1: 4.0, 3: 3.0}}, (2, 4))
    model = _FixedCF(k=2)
    model.fixed = np.zeros((4, 4))
    model.fixed[:, 3] = [1.0, 0.5, 0.2, 1.0]
    model.fit(r)
    a_idx, a_val = np.array([0, 1, 2]), np.array([4.0, 2.0, 3.0])  # mean 3: c_a = (1, −1, 0)
    # user 0: mean 13/4, c = (1.75, −2.25, −0.25), co-rated 0,1,2
    is2 = np.array([1.0, 0.25, 0.04])
    c_a, c_0 = np.array([1.0, -1.0, 0.0]), np.array([1.75, -2.25, -0.25])
    w0 = (is2 * c_a * c_0).sum() / math.sqrt((is2 * c_a**2).sum() * (is2 * c_0**2).sum())
    # user 1: mean 3, c = (−1, 1) on co-rated items 0, 1: negatively correlated, not a neighbour
    scores, counts = model.predict(a_idx, a_val, np.array([3]))
    assert counts[0] == 1
    assert w0 > 0
    assert scores[0] == pytest.approx(3.0 + (4.0 - 13 / 4))


def test_cf_plus_tau_keeps_items_above_threshold_only() -> None:
    """CF++ equals CF+ run on the query restricted to the items with IS_iq > τ."""
    r = _random(7)
    rng = np.random.default_rng(8)
    sim = rng.uniform(0.0, 1.0, (25, 25))
    idx, val = np.array([0, 1, 3, 5, 7, 9, 11]), np.array([5.0, 3.0, 4.0, 1.0, 2.0, 4.0, 3.0])
    q = 20
    kept = sim[idx, q] > 0.5
    plus_plus = _FixedCF(k=5, tau=0.5)
    plus_plus.fixed = sim
    plus = _FixedCF(k=5)
    plus.fixed = sim
    plus_plus.fit(r)
    plus.fit(r)
    # the mean stays the query's full mean (v̄_a: a's statistics), only the items shrink
    got = plus_plus.predict(idx, val, np.array([q]))[0]
    c_a = val - val.mean()
    w = plus._weights(idx[kept], c_a[kept], sim[idx[kept], q])
    from privrec.server.models.knn import neighbour_average

    avg, _ = neighbour_average(plus._dev_csc, w, np.array([q]), 5, np.ones(40, dtype=bool))
    assert got[0] == pytest.approx(val.mean() + avg[0])
