"""The store verifies what it reads: per-record digests, SQLite's integrity check at open, and
stores written before per-record digests (issue 27, finding 4)."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from privrec.server.store import DIGESTS_FROM, Store, StoreDamagedError
from privrec.server.store_records import NewRelease


def release(user: str, raw: bytes) -> NewRelease:
    return NewRelease(user, "profile", 1, "rpt", raw, hashlib.sha256(raw).digest())


def corrupt(path: Path, seq: int) -> None:
    """Change one stored request the way a bad sector would: its digest stays as it was."""
    db = sqlite3.connect(path)
    (raw,) = db.execute("SELECT request FROM transcript WHERE seq = ?", (seq,)).fetchone()
    db.execute(
        "UPDATE transcript SET request = ? WHERE seq = ?", (bytes([raw[0] ^ 1]) + raw[1:], seq)
    )
    db.commit()
    db.close()


def test_every_record_carries_its_digest(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    store.enroll("u0", "tok", "0/1", 1, b"enroll-u0")
    store.add_releases("SubmitStream", [release("u0", b"rel-u0"), release("u1", b"rel-u1")])
    store.close()
    db = sqlite3.connect(tmp_path / "s.sqlite")
    rows = db.execute("SELECT request, digest FROM transcript ORDER BY seq").fetchall()
    db.close()
    assert [bytes(d) for _, d in rows] == [hashlib.sha256(r).digest() for r, _ in rows]


@pytest.mark.parametrize("seq", [1, 3])
def test_a_changed_record_is_named_by_its_seq(tmp_path: Path, seq: int) -> None:
    """An enrollment (seq 1) and a release (seq 3) alike: the reader stops at the record."""
    store = Store(tmp_path / "s.sqlite")
    store.enroll("u0", "tok", "0/1", 1, b"enroll-u0")
    store.add_releases("SubmitStream", [release("u0", b"rel-u0"), release("u1", b"rel-u1")])
    store.close()
    corrupt(tmp_path / "s.sqlite", seq)
    reader = Store(tmp_path / "s.sqlite", read_only=True)
    with pytest.raises(StoreDamagedError, match=rf"seq {seq} does not match its stored SHA-256"):
        list(reader.transcript())
    if seq == 3:
        with pytest.raises(StoreDamagedError, match="seq 3"):
            list(reader.releases_by_purpose(1))
    reader.close()


def test_transcript_after_a_seq(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    store.add_releases("Submit", [release(f"u{i}", f"r{i}".encode()) for i in range(5)])
    assert [r.seq for r in store.transcript(after=3)] == [4, 5]
    store.close()


def test_a_store_older_than_record_digests_is_verified_by_its_release_digests(
    tmp_path: Path,
) -> None:
    """A store written before transcript digests: its old releases are checked against the
    release index's digest, and rows written after the upgrade against their own."""
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        "CREATE TABLE transcript (seq INTEGER PRIMARY KEY, arrival_ns INTEGER NOT NULL,"
        " method TEXT NOT NULL, request BLOB NOT NULL);"
        "CREATE TABLE releases (user_id TEXT NOT NULL, nonce TEXT NOT NULL,"
        " purpose INTEGER NOT NULL, field TEXT NOT NULL, seq INTEGER NOT NULL, digest BLOB,"
        " PRIMARY KEY (user_id, nonce));"
    )
    for seq, raw in ((1, b"old-1"), (2, b"old-2")):
        db.execute("INSERT INTO transcript VALUES (?, 0, 'Submit', ?)", (seq, raw))
        db.execute(
            "INSERT INTO releases VALUES (?, 'profile', 1, 'rpt', ?, ?)",
            (f"u{seq}", seq, hashlib.sha256(raw).digest()),
        )
    db.commit()
    db.close()
    reader = Store(path, read_only=True)  # not migrated: every row is checked by the join
    assert [r.request for r in reader.transcript()] == [b"old-1", b"old-2"]
    reader.close()
    writer = Store(path)
    assert writer.get_meta(DIGESTS_FROM) == "3"
    writer.add_releases("Submit", [release("u3", b"new-3")])
    writer.close()
    corrupt(path, 2)
    reader = Store(path, read_only=True)
    assert [r.seq for r in reader.transcript(after=2)] == [3]
    with pytest.raises(StoreDamagedError, match="seq 2"):
        list(reader.transcript())
    reader.close()


def test_a_file_that_is_not_a_store_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    path.write_bytes(b"SQLite format 3\x00" + b"\x07" * 4000)
    for read_only in (True, False):
        with pytest.raises(StoreDamagedError, match=r"s\.sqlite: the store") as err:
            Store(path, read_only=read_only)
        assert "\n" not in str(err.value)


def test_a_structurally_damaged_store_fails_its_integrity_check(tmp_path: Path) -> None:
    """A page of the index overwritten: SQLite's own check finds it at open."""
    path = tmp_path / "s.sqlite"
    store = Store(path)
    store.add_releases("Submit", [release(f"u{i:05d}", b"x" * 300) for i in range(2000)])
    store.close()
    data = bytearray(path.read_bytes())
    page = 4096
    assert len(data) > 40 * page
    data[20 * page + 100 : 20 * page + 400] = b"\xff" * 300
    path.write_bytes(bytes(data))
    with pytest.raises(StoreDamagedError, match=r"s\.sqlite: the store"):
        Store(path, read_only=True)


def test_transcript_filters_methods_in_seq_order(tmp_path: Path) -> None:
    """`transcript(methods=...)` gives the records of those methods only, in seq order, each
    verified as without the filter (the referee reads 10,000 queries among millions)."""
    store = Store(tmp_path / "s.sqlite")
    for i, method in enumerate(["Enroll", "Predict", "SubmitStream", "Predict", "Recommend"]):
        store.add_releases(method, [release(f"u{i}", f"{method}-{i}".encode())])
    picked = [(r.seq, r.method) for r in store.transcript(methods=("Predict", "Recommend"))]
    assert picked == [(2, "Predict"), (4, "Predict"), (5, "Recommend")]
    assert [r.seq for r in store.transcript(after=2, methods=("Predict",))] == [4]
    assert len(list(store.transcript())) == 5
    store.close()
