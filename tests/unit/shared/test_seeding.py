"""Seeding a batch of generators at once (`rngs_for`) gives exactly `rng_for`'s generators,
and the shard's batched profile releases are byte for byte the per-user ones."""

from __future__ import annotations

import numpy as np
import pytest

from privrec.client.agent import PROFILE_STREAM, UserAgent, profile_releases
from privrec.shared import seeding
from privrec.shared.mechanisms import make_mechanism
from privrec.shared.mechanisms.base import Profile
from privrec.shared.seeding import rng_for, rngs_for


def _keys() -> list[tuple[object, ...]]:
    rng = np.random.default_rng(11)
    return [
        *(("user", str(u), "withheld") for u in rng.integers(0, 10**9, 400)),
        *(("user", int(u), "query", int(i)) for u, i in rng.integers(0, 2**63, (200, 2))),
        (),  # the seed alone
        ("a",),
        (0,),  # an entropy word of 0
        (2**32 - 1, 2**32, 2**64 + 3),  # one, two and three 32-bit words
        (True, "x", 1, 2, 3, 4, 5, 6, 7),  # entropy longer than the pool
    ]


@pytest.mark.parametrize("seed", [0, 1, 2**31, 2**40 + 17])
def test_batch_seeding_equals_one_generator_per_key(seed: int) -> None:
    keys = _keys()
    for key, got in zip(keys, rngs_for(seed, keys), strict=True):
        expected = rng_for(seed, *key)
        assert got.bit_generator.state == expected.bit_generator.state, key
        assert np.array_equal(got.random(4), expected.random(4))


def test_batch_words_are_numpys_seed_sequence_words(monkeypatch: pytest.MonkeyPatch) -> None:
    """The vectorised pool gives numpy's `SeedSequence.generate_state(4, uint64)` words, and a
    mixer with one constant changed does not (the comparison can fail)."""
    entropy = np.random.default_rng(2).integers(0, 2**32, (300, 7), dtype=np.uint64)
    expected = np.array(
        [np.random.SeedSequence(row.tolist()).generate_state(4, np.uint64) for row in entropy]
    )
    assert np.array_equal(seeding._pcg64_seeds(entropy.astype(np.uint32)), expected)
    monkeypatch.setattr(seeding, "_MIX_R", np.uint32(0x4973F716))
    assert not np.array_equal(seeding._pcg64_seeds(entropy.astype(np.uint32)), expected)


def test_batch_seeding_refuses_a_negative_seed() -> None:
    with pytest.raises(ValueError, match="seed"):
        rngs_for(-1, [("a",)])


@pytest.mark.parametrize(
    ("mechanism", "params"),
    [("oue", {}), ("rpt", {}), ("blip", {}), ("jlt", {"dim": 16, "n_items": 50})],
)
@pytest.mark.parametrize("holdout", [False, True])
def test_batched_profile_releases_equal_the_per_user_ones(
    mechanism: str, params: dict[str, object], holdout: bool
) -> None:
    """The shard's batch path (one `rngs_for`, one `release_many`) sends the same bytes as
    each user releasing on her own; JLT's `release_many` is its own sparse-product code."""
    rng = np.random.default_rng(3)
    agents = []
    for u in range(40):
        items = np.sort(rng.choice(50, size=int(rng.integers(8, 30)), replace=False))
        profile = Profile(items.astype(np.int64), rng.integers(1, 6, items.size) * 1.0, 50)
        withheld = items[:2].astype(np.int64)
        agents.append(UserAgent(str(1000 + u), profile, 9, withheld, token="t"))
    mech = make_mechanism(mechanism, params)
    batched = profile_releases(agents, "run", mech, holdout=holdout)
    single = [a.profile_release("run", mech, holdout=holdout) for a in agents]
    assert [r.SerializeToString() for r in batched] == [r.SerializeToString() for r in single]
    assert agents[0].stream(PROFILE_STREAM) == ("user", "1000", "profile")
