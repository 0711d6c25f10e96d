"""The SQLite store's idempotency and atomicity, and the raw ReleaseBatch splitter."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from privrec.server.store import NewRelease, Store
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
    bad = [_rel("b"), NewRelease("c", "profile", 1, "rpt", object())]  # type: ignore[arg-type]
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
