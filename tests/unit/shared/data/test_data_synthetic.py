"""The synthetic generator: shape and canonical form, reproducibility, documented statistics.

The statistical checks use fixed seeds, so they are deterministic; each tolerance is at least
five standard deviations of the statistic across seeds (measured over 20 seeds), so a change of
seed or a harmless refactor of the draws fails them with probability well below 1e-4.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from privrec.shared.data import RatingData, make_synthetic
from privrec.shared.data.synthetic import SyntheticRatings


@pytest.fixture(scope="module")
def default_data() -> RatingData:
    return make_synthetic(3000, 2000, seed=11)


def test_make_synthetic_is_canonical(default_data: RatingData) -> None:
    """Ids 0..n-1, sorted CSR indices, integer ratings on the scale, no explicit zeros."""
    data = default_data
    assert data.ratings.shape == (3000, 2000)
    np.testing.assert_array_equal(data.user_ids, np.arange(3000))
    np.testing.assert_array_equal(data.item_ids, np.arange(2000))
    assert data.ratings.dtype == np.float64
    assert data.ratings.has_canonical_format
    assert data.rating_scale == (1.0, 5.0)
    values = data.ratings.data
    assert np.all(values == np.rint(values))
    assert values.min() >= 1 and values.max() <= 5
    assert data.genres is None and data.genre_names == ()


def test_make_synthetic_same_seed_same_data() -> None:
    """The same arguments give bit-identical data; another seed gives other data."""
    a = make_synthetic(500, 400, seed=3)
    b = make_synthetic(500, 400, seed=3)
    c = make_synthetic(500, 400, seed=4)
    for name in ("data", "indices", "indptr"):
        np.testing.assert_array_equal(getattr(a.ratings, name), getattr(b.ratings, name))
    assert a.ratings.nnz != c.ratings.nnz or np.any(a.ratings.indices != c.ratings.indices)


def test_make_synthetic_statistics_match_docstring(default_data: RatingData) -> None:
    """Density, floor, rating mean / sd / histogram and popularity skew as documented."""
    data = default_data
    assert data.density == pytest.approx(0.05, rel=0.03)
    assert data.user_counts().min() >= 20
    values = data.ratings.data
    assert values.mean() == pytest.approx(3.46, abs=0.05)
    assert values.std() == pytest.approx(1.04, abs=0.05)
    histogram = np.bincount(values.astype(int), minlength=6)[1:] / values.size
    np.testing.assert_allclose(histogram, [0.04, 0.13, 0.33, 0.33, 0.17], atol=0.02)
    counts = np.sort(data.item_counts())[::-1]
    assert 0.42 < counts[:200].sum() / data.n_ratings < 0.52


def test_make_synthetic_uniform_popularity() -> None:
    """popularity_exponent=0: the top 10 % of items hold about 10 % of the ratings."""
    data = make_synthetic(3000, 2000, popularity_exponent=0.0, seed=12)
    counts = np.sort(data.item_counts())[::-1]
    assert 0.09 < counts[:200].sum() / data.n_ratings < 0.14


@pytest.mark.parametrize("sigma", [0.5, 1.0])
def test_make_synthetic_activity_is_lognormal(sigma: float) -> None:
    """sd of log ratings-per-user ≈ activity_sigma when floor and cap rarely bind."""
    data = make_synthetic(2000, 10_000, activity_sigma=sigma, seed=13)
    assert np.log(data.user_counts()).std() == pytest.approx(sigma, abs=0.08)


def test_make_synthetic_floor_dominates_at_low_density() -> None:
    """density · n_items < floor: every user gets >= 20, density ≈ (20 + 3) / n_items."""
    data = make_synthetic(2000, 2000, density=0.005, seed=14)
    counts = data.user_counts()
    assert counts.min() >= 20
    assert counts.mean() == pytest.approx(23, abs=1.0)


def test_make_synthetic_small_catalogue_caps_the_floor() -> None:
    """With 30 items the floor is min(20, 30 // 2) = 15."""
    data = make_synthetic(200, 30, density=0.1, seed=15)
    assert data.user_counts().min() >= 15
    assert data.user_counts().max() <= 30


def test_make_synthetic_rank_one_sign_structure() -> None:
    """Rank 1 without noise: sign(r − μ) = sign(U_u)·sign(V_i), so every observed 2×2 minor of
    the sign matrix has product +1 (|Σ_i s_ui s_vi| = #common items for every user pair);
    noise breaks it."""

    def consistent(noise: float) -> bool:
        data = make_synthetic(
            150, 120, rank=1, density=0.4, rating_scale=(1, 100), mean_rating=50.5,
            signal=15.0, noise=noise, seed=16,
        )  # fmt: skip
        dense = data.ratings.toarray()
        signs = np.where(dense > 0, np.sign(dense - 50.5), 0.0)
        agreement = signs @ signs.T
        common = (signs != 0).astype(float) @ (signs != 0).T
        return bool(np.all(np.abs(agreement) == common))

    assert consistent(0.0)
    assert not consistent(5.0)


def test_make_synthetic_genres() -> None:
    """n_genres > 0 gives flags of shape (n_items, n_genres), at least one per item."""
    data = make_synthetic(100, 300, n_genres=6, seed=17)
    assert data.genres is not None and data.genres.shape == (300, 6)
    assert data.genres.any(axis=1).all()
    assert data.genre_names == tuple(f"genre-{g:02d}" for g in range(6))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"density": 0.0}, "`density` must be in"),
        ({"rank": 0}, "`rank` must be an int > 0"),
        ({"noise": -1.0}, "`noise` must be >= 0"),
        ({"rating_scale": (0, 5)}, "`rating_scale` must be integers"),
        ({"rating_scale": (1.5, 5)}, "`rating_scale` must be integers"),
    ],
)
def test_make_synthetic_rejects_bad_parameters(kwargs: dict, message: str) -> None:
    """Out-of-range parameters raise ValueError naming the parameter."""
    with pytest.raises(ValueError, match=message):
        make_synthetic(10, 10, seed=0, **kwargs)


def test_make_synthetic_large_population_is_fast() -> None:
    """100,000 users × 10,000 items (10 M ratings here) take seconds, not minutes.

    CPU time, not wall time, so other processes on the machine matter less; it measures about
    2–3 s on an idle 2-core machine (at the default density 0.05, 50 M ratings, about 5 s).
    """
    start = time.process_time()
    data = make_synthetic(100_000, 10_000, density=0.01, seed=18)
    elapsed = time.process_time() - start
    assert data.density == pytest.approx(0.01, rel=0.03)
    assert elapsed < 15.0


def test_ratings_are_float64_integers_on_any_scale() -> None:
    """The ratings are assembled from small integer parts into float64: exact integers within
    the scale, whatever the scale's width (uint8 and wider parts)."""
    synth = make_synthetic
    for scale in ((1, 5), (1, 300)):
        data = synth(200, 60, seed=7, rating_scale=scale, noise=50.0)
        values = data.ratings.data
        assert values.dtype == np.float64
        assert np.array_equal(values, np.rint(values))
        assert values.min() >= scale[0] and values.max() <= scale[1]
    assert synth(200, 60, seed=7, rating_scale=(1, 300), noise=50.0).ratings.data.max() > 255


def test_rows_generate_only_their_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """`make_synthetic(rows=...)` equals those rows of the whole data set bit for bit and
    makes only the generator's blocks that hold them (issue 28: a shard of a million users
    made every block, then kept its own rows)."""
    whole = make_synthetic(2000, 1000, seed=5)  # 524 users per block
    made: list[int] = []
    block = SyntheticRatings.block

    def counting(self: SyntheticRatings, number: int) -> tuple[np.ndarray, ...]:
        made.append(number)
        return block(self, number)

    monkeypatch.setattr(SyntheticRatings, "block", counting)
    for rows, blocks in [
        (range(0, 524), [0]),
        (range(500, 600), [0, 1]),
        (range(1999, 2000), [3]),
        (range(0, 2000), [0, 1, 2, 3]),
        (range(7, 7), []),
    ]:
        made.clear()
        part = make_synthetic(2000, 1000, seed=5, rows=rows)
        assert made == blocks
        expected = whole.ratings[rows.start : rows.stop]
        np.testing.assert_array_equal(part.ratings.indptr, expected.indptr)
        np.testing.assert_array_equal(part.ratings.indices, expected.indices)
        np.testing.assert_array_equal(part.ratings.data, expected.data)
        np.testing.assert_array_equal(part.user_ids, np.arange(rows.start, rows.stop))
    with pytest.raises(ValueError, match="rows"):
        make_synthetic(10, 10, seed=0, rows=range(5, 11))


def test_chunks_draw_the_population_parameters_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A shard making its users chunk by chunk draws the activity of every user once, not once
    per chunk (issue 28: at a million users each draw redid a million users' work, and the
    shards' generation grew as N²)."""
    from privrec.shared.data import synthetic

    calls: list[int] = []
    target_counts = synthetic._target_counts

    def counting(**kwargs: object) -> np.ndarray:
        calls.append(1)
        return target_counts(**kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(synthetic, "_target_counts", counting)
    synthetic._generator.cache_clear()
    for start in range(0, 3000, 1000):
        make_synthetic(3000, 700, seed=21, rows=range(start, start + 1000))
    assert len(calls) == 1
