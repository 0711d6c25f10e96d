"""Bilge Ch. 8: NBC-CF (Eq 8.1) and its masked-data estimator (Eq 8.3 soft counts), Tanimoto
(Eq 8.2), item extraction, densifying (Algorithm 7), against loop-by-loop oracles and by hand;
and the referee's CA/F1."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from privrec.server.models import PPNBC
from privrec.server.models.nbc import (
    NO_EVIDENCE,
    extraction_lists,
    feature_log_odds,
    soft_like,
    tanimoto,
)
from privrec.shared.metrics import classification_scores


def _binary(seed: int, n: int = 30, m: int = 14, density: float = 0.5) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    filled = rng.random((n, m)) < density
    filled[:, 0] = True
    r, c = np.nonzero(filled)
    return sp.csr_matrix((rng.integers(0, 2, r.size).astype(float), (r, c)), shape=(n, m))


def _oracle_log_odds(
    train: np.ndarray, filled: np.ndarray, theta: float, a: dict[int, float], q: int
) -> float:
    """Miyahara & Pazzani's NBC with every count accumulated cell by cell by Bilge Eq 8.3 (with
    (1 − θ)² for the fully flipped pair) and Laplace's correction."""

    def soft(y: float) -> float:
        return theta * y + (1 - theta) * (1 - y)

    like_mass = sum(soft(y) for y in a.values())
    prior = math.log((like_mass + 1) / (len(a) - like_mass + 1))
    total = prior
    for u in range(train.shape[0]):
        if not filled[u, q]:
            continue
        s = {(c, v): 0.0 for c in (0, 1) for v in (0, 1)}
        for i, y_a in a.items():
            if not filled[u, i]:
                continue
            x, y = int(y_a), int(train[u, i])
            s[(x, y)] += theta * theta  # Eq 8.3, the observed pair
            s[(1 - x, y)] += (1 - theta) * theta
            s[(x, 1 - y)] += theta * (1 - theta)
            s[(1 - x, 1 - y)] += (1 - theta) * (1 - theta)
        p1 = (s[(1, 1)] + 1) / (s[(1, 1)] + s[(1, 0)] + 2)
        p0 = (s[(0, 1)] + 1) / (s[(0, 1)] + s[(0, 0)] + 2)
        obs = soft(train[u, q])
        total += math.log(obs * p1 + (1 - obs) * (1 - p1)) - math.log(
            obs * p0 + (1 - obs) * (1 - p0)
        )
    return total


@pytest.mark.parametrize("theta", [1.0, 0.7])
def test_ppnbc_matches_the_eq_8_3_oracle(theta: float) -> None:
    """P(like) from the vectorised soft counts equals the cell-by-cell Eq 8.3 oracle (θ = 1 is
    the plain NBC of Miyahara & Pazzani)."""
    x = _binary(0)
    dense, filled = x.toarray(), _filled(x)
    model = PPNBC(theta=theta).fit(x)
    idx = np.array([0, 2, 3, 5, 8, 9])
    val = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 1.0])
    for q in (1, 4, 7, 13):
        p, _ = model.predict(idx, val, np.array([q]))
        lo = _oracle_log_odds(dense, filled, theta, dict(zip(idx.tolist(), val, strict=True)), q)
        assert p[0] == pytest.approx(1 / (1 + math.exp(-lo)), rel=1e-10)


def _filled(x: sp.csr_matrix) -> np.ndarray:
    out = np.zeros(x.shape, dtype=bool)
    coo = x.tocoo()
    out[coo.row, coo.col] = True
    return out


def test_feature_log_odds_by_hand() -> None:
    """One feature with counts n11 = 2, n10 = 0, n01 = 0, n00 = 1 who likes q (θ = 1):
    p(like | like) = 3/4, p(like | dislike) = 1/3 → log(9/4)."""
    got = feature_log_odds(np.array([1.0]), *(np.array([v]) for v in (2.0, 0.0, 0.0, 1.0)))
    assert got[0] == pytest.approx(math.log((3 / 4) / (1 / 3)))
    assert soft_like(np.array([1.0, 0.0]), 0.7).tolist() == pytest.approx([0.7, 0.3])


def test_tanimoto_eq_8_2_with_eq_8_3_counts() -> None:
    """T = ((S11 + S00) − (S10 + S01))/ΣS with S accumulated by Eq 8.3, by brute force."""
    x = _binary(1, n=12, m=5)
    theta = 0.7
    soft = x.copy()
    soft.data = soft_like(x.data, theta)
    got = tanimoto(soft)
    dense, filled = x.toarray(), _filled(x)
    for i in range(5):
        for j in range(5):
            s = {(a, b): 0.0 for a in (0, 1) for b in (0, 1)}
            for u in range(12):
                if filled[u, i] and filled[u, j]:
                    xi, yj = int(dense[u, i]), int(dense[u, j])
                    s[(xi, yj)] += theta**2
                    s[(1 - xi, yj)] += (1 - theta) * theta
                    s[(xi, 1 - yj)] += theta * (1 - theta)
                    s[(1 - xi, 1 - yj)] += (1 - theta) ** 2
            total = sum(s.values())
            want = ((s[1, 1] + s[0, 0]) - (s[1, 0] + s[0, 1])) / total if total else NO_EVIDENCE
            assert got[i, j] == pytest.approx(want)


def test_extraction_lists_rank_by_similarity_then_index() -> None:
    """The e most similar other items, ties to the smaller index, never the item itself."""
    s = np.array(
        [
            [1.0, 0.2, 0.9, 0.2],
            [0.2, 1.0, NO_EVIDENCE, 0.5],
            [0.9, NO_EVIDENCE, 1.0, -0.3],
            [0.2, 0.5, -0.3, 1.0],
        ]
    )
    assert extraction_lists(s, 2).tolist() == [[2, 1], [3, 0], [0, 3], [1, 0]]
    assert extraction_lists(s, 10).shape == (4, 3)


def test_extraction_uses_only_the_extracted_items() -> None:
    """With e set, only q's e listed items are a's training examples: her values elsewhere
    change nothing (without mean filling); with filling, her unrated listed cells carry her
    de-biased mean vote, so her votes elsewhere matter only through that mean."""
    x = _binary(2, n=40, m=20)
    q = 11
    idx = np.array([i for i in range(20) if i != q])
    val = (np.arange(idx.size) % 2).astype(float)
    plain = PPNBC(theta=0.8, e=4, fill_active=False).fit(x)
    listed = set(plain._offline_for(np.ones(40, dtype=bool)).extract[q].tolist())
    inside = np.array([i in listed for i in idx])
    assert 0 < inside.sum() < idx.size
    flipped = np.where(inside, val, 1.0 - val)
    full = plain.predict(idx, val, np.array([q]))[0]
    np.testing.assert_allclose(plain.predict(idx, flipped, np.array([q]))[0], full)
    np.testing.assert_allclose(plain.predict(idx[inside], val[inside], np.array([q]))[0], full)
    filling = PPNBC(theta=0.8, e=4).fit(x)
    # a query holding only one listed item: the other listed cells are filled with her mean
    one = np.array([sorted(listed)[0]])
    like, dislike = (
        filling.predict(one, np.array([1.0]), np.array([q]))[0],
        filling.predict(one, np.array([0.0]), np.array([q]))[0],
    )
    assert like[0] != dislike[0]


def test_densifying_algorithm_7_fills_rho_percent_of_empty_cells() -> None:
    """Each pool row gains ⌊ρ % of its empty cells⌋ PSPs, ρ ~ U(0, d] from its own stream;
    the PSP values are probabilities; d = 0 adds nothing; the same seed, the same cells."""
    x = _binary(3, n=25, m=40, density=0.3)
    model = PPNBC(d=30.0, random_state=7).fit(x)
    pre = model._offline_for(np.ones(25, dtype=bool))
    empty = 40 - np.diff(x.indptr)
    from privrec.shared.seeding import rng_for

    expect = [
        int(np.floor(rng_for(7, "densify", r).uniform(0.0, 30.0) / 100 * empty[r]))
        for r in range(25)
    ]
    dens = pre.soft_csc.tocsr()
    np.testing.assert_array_equal(np.diff(dens.indptr) - np.diff(x.indptr), expect)
    assert pre.densified == sum(expect) > 0
    added = dens - sp.csr_matrix((soft_like(x.data, model.theta), x.indices, x.indptr), x.shape)
    assert np.all((added.data > 0) & (added.data < 1))
    assert PPNBC(d=0.0).fit(x)._offline_for(np.ones(25, dtype=bool)).densified == 0
    again = PPNBC(d=30.0, random_state=7).fit(x)._offline_for(np.ones(25, dtype=bool))
    assert (again.soft_csc != pre.soft_csc).nnz == 0


def test_densifying_excludes_rows_outside_the_pool() -> None:
    """A pool's PSPs are computed and placed only for its own rows."""
    x = _binary(4, n=20, m=30, density=0.3)
    groups = np.arange(20) % 2
    model = PPNBC(d=40.0).fit(x, exclude_groups=groups)
    pre = model._offline_for(groups != 0)
    dens = pre.soft_csc.tocsr()
    gained = np.diff(dens.indptr) - np.diff(x.indptr)
    assert np.all(gained[groups == 0] == 0) and gained[groups == 1].sum() > 0


def test_ppnbc_refuses_bad_parameters() -> None:
    """θ outside [½, 1], e < 1, d < 0 name the parameter."""
    for kwargs, needle in [
        ({"theta": 0.4}, "theta"),
        ({"e": 0}, "e"),
        ({"d": -1.0}, "d"),
        ({"fill_active": 1}, "fill_active"),
        ({"random_state": -1}, "random_state"),
    ]:
        with pytest.raises(ValueError, match=needle):
            PPNBC(**kwargs)  # type: ignore[arg-type]


def test_classification_scores_by_hand() -> None:
    """CA = 4/6; TP = 2, FP = 1, FN = 1: precision = recall = F1 = 2/3."""
    got = classification_scores(np.array([1, 1, 1, 0, 0, 0.0]), np.array([1, 1, 0, 1, 0, 0.0]))
    assert got == pytest.approx({"ca": 4 / 6, "precision": 2 / 3, "recall": 2 / 3, "f1": 2 / 3})
    none = classification_scores(np.zeros(3), np.array([1.0, 0.0, 1.0]))
    assert none["f1"] == 0.0 and none["precision"] == 0.0
    with pytest.raises(ValueError, match="0/1"):
        classification_scores(np.array([0.5]), np.array([1.0]))
