"""The SQLite store's idempotency and atomicity, and the raw ReleaseBatch splitter."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from privrec.server.store import Store
from privrec.server.store_records import NewRelease
from privrec.server.wire import split_release_batch
from privrec.shared.errors import ValidationError
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb


def _rel(user: str, nonce: str = "profile") -> NewRelease:
    return NewRelease(user, nonce, pb.PURPOSE_PROFILE, "rpt", f"{user}:{nonce}".encode())


def test_store_add_releases_is_idempotent_by_user_and_nonce(tmp_path: Path) -> None:
    """A retried (user, nonce) is reported as duplicate and stored once."""
    store = Store(tmp_path / "s.sqlite")
    assert store.add_releases("Submit", [_rel("a"), _rel("b")]) == [1, 2]
    assert store.add_releases("Submit", [_rel("a"), _rel("c")]) == [None, 3]
    assert store.snapshot() == (3, 0, 3)
    assert [r.request for r in store.transcript()] == [b"a:profile", b"b:profile", b"c:profile"]


def test_store_batch_is_atomic(tmp_path: Path) -> None:
    """A batch that fails half way stores nothing and keeps sequence numbers dense."""
    store = Store(tmp_path / "s.sqlite")
    store.add_releases("Submit", [_rel("a")])
    # sqlite cannot bind an arbitrary object: the second insert fails mid-transaction
    # (the digest given, so the object reaches sqlite rather than the hash)
    bad = [_rel("b"), NewRelease("c", "profile", 1, "rpt", object(), b"d")]  # type: ignore[arg-type]
    with pytest.raises(sqlite3.Error):
        store.add_releases("Submit", bad)
    assert store.snapshot() == (1, 0, 1)
    assert store.add_releases("Submit", [_rel("b")]) == [2]


def test_store_survives_reopen(tmp_path: Path) -> None:
    """What was committed is there after reopening (durable store)."""
    store = Store(tmp_path / "s.sqlite")
    store.add_releases("Submit", [_rel("a")])
    store.set_meta("phase", "collect")
    store.close()
    again = Store(tmp_path / "s.sqlite", read_only=True)
    assert again.snapshot() == (1, 0, 1)
    assert again.get_meta("phase") == "collect"


def _scanned(store: Store) -> tuple[int, ...]:
    """The counts GetStatus reports, by full table scans (the reference for the tally)."""
    return (
        *store.snapshot(),
        store.count_purpose(pb.PURPOSE_PROFILE),
        store.count_purpose(pb.PURPOSE_QUERY),
        store.profile_users(pb.PURPOSE_PROFILE),
        store.profile_users(pb.PURPOSE_QUERY),
        store.profile_users(pb.PURPOSE_PROFILE, pb.TIER_PUBLIC),
        store.profile_users(pb.PURPOSE_PROFILE, pb.TIER_PRIVATE),
        store.profile_users(pb.PURPOSE_QUERY, pb.TIER_PUBLIC),
    )


def _tallied(store: Store) -> tuple[int, ...]:
    t = store.tally
    return (
        t.transcript,
        t.enrollments,
        t.releases,
        t.by_purpose[pb.PURPOSE_PROFILE],
        t.by_purpose[pb.PURPOSE_QUERY],
        t.users_with(pb.PURPOSE_PROFILE),
        t.users_with(pb.PURPOSE_QUERY),
        t.users_with(pb.PURPOSE_PROFILE, pb.TIER_PUBLIC),
        t.users_with(pb.PURPOSE_PROFILE, pb.TIER_PRIVATE),
        t.users_with(pb.PURPOSE_QUERY, pb.TIER_PUBLIC),
    )


def test_store_tally_equals_table_scans_through_writes_failures_and_reopen(
    tmp_path: Path,
) -> None:
    """The O(1) counts behind GetStatus equal the table scans after every kind of write: single
    and batched enrollments of both tiers, releases of both purposes with duplicates, a release
    before its user's enrollment, a batch that rolls back, and a reopened store."""
    rng = np.random.default_rng(7)
    path = tmp_path / "s.sqlite"
    store = Store(path)
    store.add_releases("Submit", [_rel("early")])  # released before enrolling (moves tier)
    assert _tallied(store) == _scanned(store)
    users = [f"u{i}" for i in range(60)]
    for i, user in enumerate(users[:20]):
        store.enroll(user, "t", "s0", pb.TIER_PUBLIC if i % 3 else pb.TIER_PRIVATE, b"e")
    tiers = rng.choice([pb.TIER_PUBLIC, pb.TIER_PRIVATE], 40)
    store.enroll_many(
        [(u, "t", "s1", int(t), b"e") for u, t in zip(users[20:], tiers, strict=True)]
        + [("early", "t", "s1", pb.TIER_PUBLIC, b"e")]
    )
    assert _tallied(store) == _scanned(store)
    for round_ in range(6):
        batch = [
            NewRelease(str(u), f"n{rng.integers(3)}", int(p), "f", b"x")
            for u, p in zip(
                rng.choice(users, 25),
                rng.choice([pb.PURPOSE_PROFILE, pb.PURPOSE_QUERY], 25),
                strict=True,
            )
        ]
        store.add_releases("Submit", batch)
        if round_ == 3:
            bad = [_rel("u1", "fresh"), NewRelease("u2", "bad", 1, "f", object(), b"d")]  # type: ignore[arg-type]
            with pytest.raises(sqlite3.Error):
                store.add_releases("Submit", bad)
        assert _tallied(store) == _scanned(store)
    with pytest.raises(sqlite3.IntegrityError):
        store.enroll("u0", "t", "s0", pb.TIER_PUBLIC, b"e")  # enrolled twice: rolled back
    assert _tallied(store) == _scanned(store)
    before = _tallied(store)
    store.close()
    again = Store(path)
    assert _tallied(again) == _scanned(again) == before
    reader = Store(path, read_only=True)  # loads its index only when asked
    assert _tallied(reader) == before
    assert reader.has_release("u1", "fresh") is False


def test_split_release_batch_returns_original_bytes() -> None:
    """Each release in a ReleaseBatch comes back byte for byte."""
    rels = [pb.Release(user_id=str(i), nonce="profile", token="t" * i) for i in range(5)]
    for i, r in enumerate(rels):
        r.rpt.dim = 300
        r.rpt.indices.extend(range(i * 40))
        r.rpt.values.extend([0.5] * (i * 40))
    raw = pb.ReleaseBatch(releases=rels).SerializeToString()
    assert split_release_batch(raw) == [r.SerializeToString() for r in rels]


@pytest.mark.parametrize("raw", [b"\x12\x00", b"\x0a\x05ab", b"\x0a\xff"])
def test_split_release_batch_rejects_malformed(raw: bytes) -> None:
    """Wrong tags, truncated releases and bad varints are INVALID_ARGUMENT errors."""
    with pytest.raises(ValidationError, match="ReleaseBatch"):
        split_release_batch(raw)
