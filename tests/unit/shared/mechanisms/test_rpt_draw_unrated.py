"""Regression: #13 the RPT draw finds the unrated items with a mask instead of np.setdiff1d;
the fake cells (and so every release) must be the ones the setdiff1d version drew."""

from __future__ import annotations

import numpy as np

from privrec.shared.mechanisms import RandomizedPerturbation
from privrec.shared.mechanisms.base import Profile


def _reference_fakes(
    mech: RandomizedPerturbation, p: Profile, rng: np.random.Generator
) -> np.ndarray:
    """Procedure 1 lines 5-8 as written before issue 13 (np.setdiff1d)."""
    beta = int(rng.integers(1, mech.beta_max + 1))
    rng.random()
    rng.random()
    empty = np.setdiff1d(np.arange(p.n_items), p.items, assume_unique=True)
    n_fake = (empty.size * beta) // 100
    fake = rng.choice(empty, size=n_fake, replace=False) if n_fake else empty[:0]
    return fake.astype(np.int64)


def test_rpt_draw_fakes_equal_the_setdiff1d_reference() -> None:
    """Same generator state in, the same fake cells out, for 200 random profiles."""
    mech = RandomizedPerturbation(2.0, 25)
    gen = np.random.default_rng(0)
    for t in range(200):
        m = int(gen.integers(5, 500))
        k = int(gen.integers(1, m))
        items = np.sort(gen.choice(m, k, replace=False)).astype(np.int64)
        p = Profile(items, gen.integers(1, 6, k).astype(float), m)
        new = mech.draw(p, np.random.default_rng(t)).fake_items
        ref = _reference_fakes(mech, p, np.random.default_rng(t))
        assert new.dtype == ref.dtype
        np.testing.assert_array_equal(new, ref)
