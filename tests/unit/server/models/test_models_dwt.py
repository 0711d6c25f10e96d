"""Bilge Ch. 5: Haar approximation (Eq 5.1/5.3), mean filling (Eq 5.2), greedy pairing for SA/MA
(§5.3.3) and the PPDWT prediction (Eq 2.4 on U″, Eq 2.6 on z′) on hand-checkable inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from privrec.server.models import PPDWT
from privrec.server.models.dwt import (
    Transform,
    greedy_pair_order,
    haar_approximation,
    mean_filled,
)

R2 = math.sqrt(2.0)


def test_haar_approximation_eq_5_1_by_hand() -> None:
    """(u_j + u_{j+1})/√2 per pair; details dropped; an odd last column pairs with itself."""
    np.testing.assert_allclose(haar_approximation(np.array([1.0, 2.0, 3.0, 4.0])), [3 / R2, 7 / R2])
    np.testing.assert_allclose(haar_approximation(np.array([1.0, 2.0, 3.0])), [3 / R2, 6 / R2])
    x = np.arange(16.0).reshape(2, 8)
    three = Transform((None, None, None)).apply(x)  # 8 → 4 → 2 → 1
    np.testing.assert_allclose(three[:, 0], x.sum(axis=1) / R2**3)
    # a constant row stays constant, scaled by √2 per level, whatever the column count
    np.testing.assert_allclose(Transform((None,) * 3).apply(np.full(1682, 2.0)), 2.0 * R2**3)
    assert Transform((None,) * 3).apply(np.ones(1682)).shape == (211,)


def test_mean_filled_eq_5_2() -> None:
    """Empty cells take the mean of the user's filled (disguised) cells."""
    np.testing.assert_allclose(
        mean_filled(np.array([1, 3]), np.array([2.0, 4.0]), 5), [3.0, 2.0, 3.0, 4.0, 3.0]
    )
    np.testing.assert_array_equal(mean_filled(np.array([], np.int64), np.array([]), 3), 0.0)


def test_greedy_pair_order_puts_most_similar_items_together() -> None:
    """Pairs taken by similarity, most similar first; an odd item last."""
    s = np.full((5, 5), 0.1)
    s[0, 2] = s[2, 0] = 0.9
    s[1, 3] = s[3, 1] = 0.8
    s[3, 4] = s[4, 3] = 0.85  # 3 is taken by 4 before 1 can have it
    np.fill_diagonal(s, 1.0)
    assert greedy_pair_order(s).tolist() == [0, 2, 3, 4, 1]
    assert sorted(greedy_pair_order(np.eye(7)).tolist()) == list(range(7))


def _disguised(seed: int, n: int = 30, m: int = 16) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    filled = rng.random((n, m)) < 0.5
    filled[:, 0] = True
    r, c = np.nonzero(filled)
    return sp.csr_matrix((rng.normal(size=r.size), (r, c)), shape=(n, m))


def test_ppdwt_prediction_by_hand() -> None:
    """One level on 4 items: U″ from mean-filled rows, w = a″·U″_u / 2, P′ from z′_uq."""
    z = sp.csr_matrix(np.array([[1.0, 0.0, 2.0, 0.0], [0.0, -1.0, 1.0, 3.0], [2.0, 2.0, 0.0, 1.0]]))
    z.eliminate_zeros()  # the zeros above are empty cells
    model = PPDWT(k=2, levels=1).fit(z)
    filled = np.array([[1.0, 1.5, 2.0, 1.5], [1.0, -1.0, 1.0, 3.0], [2.0, 2.0, 5 / 3, 1.0]])
    reduced = np.column_stack(
        [(filled[:, 0] + filled[:, 1]) / R2, (filled[:, 2] + filled[:, 3]) / R2]
    )
    a_idx, a_val = np.array([0, 2]), np.array([1.0, -1.0])  # filled: (1, 0, −1, 0)
    a = np.array([1.0 / R2, -1.0 / R2])
    w = reduced @ a / 2
    scores, counts = model.predict(a_idx, a_val, np.array([3]))
    raters = [u for u in (1, 2) if w[u] > 0]  # users with a cell at item 3
    expected = sum(z[u, 3] * w[u] for u in raters) / sum(w[u] for u in raters)
    assert counts[0] == len(raters)
    assert scores[0] == pytest.approx(expected)


def test_orderings_sa_once_ma_every_level() -> None:
    """SA orders before level 1 only; MA before every level; none never."""
    z = _disguised(1)
    groups = np.arange(30) % 2
    for ordering, expect in (("none", 0), ("sa", 1), ("ma", 3)):
        model = PPDWT(ordering=ordering, sigma_max=0.5).fit(z, exclude_groups=groups)
        transform, reduced = model._offline_for(groups != 0)
        assert sum(o is not None for o in transform.orders) == expect
        assert reduced.shape == (30, 2)  # 16 → 8 → 4 → 2
        for order in transform.orders:
            if order is not None:
                assert sorted(order.tolist()) == list(range(order.size))


def test_ppdwt_nonprivate_with_zero_noise_matches_identity_order_when_none() -> None:
    """ordering="none" applies the natural order: the reduced matrix is Haar³ of the filled
    matrix, for every pool."""
    z = _disguised(2)
    model = PPDWT(levels=2).fit(z, exclude_groups=np.arange(30) % 3)
    _, reduced = model._offline_for(np.arange(30) % 3 != 1)
    np.testing.assert_allclose(reduced, Transform((None, None)).apply(model._filled))


def test_ppdwt_validates_parameters_and_item_count() -> None:
    """Bad parameters name themselves; too few items for the levels is a ValueError."""
    for kwargs, needle in [
        ({"levels": 0}, "levels"),
        ({"ordering": "random"}, "ordering"),
        ({"sigma_max": -1.0}, "sigma_max"),
        ({"k": 0}, "k"),
    ]:
        with pytest.raises(ValueError, match=needle):
            PPDWT(**kwargs)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="levels"):
        PPDWT(levels=3).fit(_disguised(3, m=6))
