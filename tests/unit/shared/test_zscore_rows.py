"""`zscores_by_row`: many users' z-scores in one compiled pass, equal to `zscore` bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from privrec.shared.zscore_rows import _pairwise_sum, zscores_by_row
from privrec.shared.zscores import zscore

# lengths where numpy's pairwise sum changes shape: one by one below 8, one block of eight
# partial sums up to 128, halves cut at multiples of 8 above (two levels past 256, ...)
EDGES = [0, 1, 2, 7, 8, 9, 15, 16, 17, 127, 128, 129, 135, 136, 255, 256, 257, 1000, 4099]


def _rows(rng: np.random.Generator, lengths: list[int]) -> list[np.ndarray]:
    kinds = [
        lambda n: rng.integers(1, 6, n).astype(float),  # a rating scale
        lambda n: rng.standard_normal(n) * 1e3 + 7.0,
        lambda n: np.full(n, 3.0),  # no spread: zeros
        lambda n: rng.uniform(0.5, 5.0, n),
    ]
    return [kinds[i % len(kinds)](n) for i, n in enumerate(lengths)]


def test_zscores_by_row_equal_zscore_bit_for_bit() -> None:
    rng = np.random.default_rng(11)
    lengths = EDGES + rng.integers(0, 700, 800).tolist()
    rows = _rows(rng, lengths)
    got = zscores_by_row(lengths, np.concatenate(rows))
    want = np.concatenate([zscore(r).z for r in rows])
    assert np.array_equal(got.view(np.int64), want.view(np.int64))


def test_the_pairwise_sum_is_numpys_and_a_sequential_sum_is_not() -> None:
    """The kernel's sum equals `np.sum` at every length; a plain left-to-right sum (what a
    careless loop does) differs from it at some length, so the equality above is not luck."""
    rng = np.random.default_rng(12)
    sequential_differs = 0
    for n in [*EDGES, 100_003]:
        a = rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 3)
        assert 0.0 + _pairwise_sum(a, 0, n) == np.sum(a), n
        sequential_differs += float(np.add.accumulate(a)[-1]) != np.sum(a) if n else 0
    assert sequential_differs > 0


def test_zscores_by_row_refuses_lengths_that_do_not_cover_the_ratings() -> None:
    with pytest.raises(ValueError, match="sum to the 3 ratings"):
        zscores_by_row([1, 1], np.array([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match="non-negative"):
        zscores_by_row([4, -1], np.array([1.0, 2.0, 3.0]))
