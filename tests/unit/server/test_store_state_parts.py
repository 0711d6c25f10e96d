"""State blobs longer than SQLite's length limit are stored in parts (a million-user kNN model
is a 2.8 GB archive; SQLite refuses a value over 1e9 bytes). The limit is lowered on the test's
connection so that the same refusal happens at 100 kB."""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from privrec.server.store import Store

LIMIT = 100_000


def limited(path: Path) -> Store:
    store = Store(path)
    store._db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, LIMIT)
    return store


def blob(n: int, seed: int = 0) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


def test_the_limit_is_real_a_whole_blob_over_it_is_refused(tmp_path: Path) -> None:
    """What the store did before parts: one row per blob, refused over the limit."""
    store = limited(tmp_path / "s.sqlite")
    with pytest.raises(sqlite3.DataError, match="too big"):
        store._db.execute("INSERT INTO state(key, value) VALUES (?, ?)", ("m", blob(LIMIT + 1)))


@pytest.mark.parametrize("n", [0, 1, LIMIT // 2, LIMIT // 2 + 1, 7 * LIMIT + 3])
def test_a_blob_of_any_length_reads_back_whole(tmp_path: Path, n: int) -> None:
    path = tmp_path / "s.sqlite"
    store = limited(path)
    data = blob(n, seed=n)
    store.commit_state({"phase": "train"}, {"final/model": data, "small": b"x"})
    assert store.get_state("final/model") == data
    assert store.get_state("small") == b"x"
    assert store.state_keys("final/") == ["final/model"]
    store.close()
    # a restarted server and a read-only report read the same bytes
    assert Store(path).get_state("final/model") == data
    assert Store(path, read_only=True).get_state("final/model") == data


def test_a_memoryview_is_stored_like_its_bytes(tmp_path: Path) -> None:
    store = limited(tmp_path / "s.sqlite")
    data = blob(3 * LIMIT)
    store.commit_state({}, {"final/model": memoryview(data)})
    assert store.get_state("final/model") == data


def test_a_shorter_blob_replaces_every_part_of_a_longer_one(tmp_path: Path) -> None:
    store = limited(tmp_path / "s.sqlite")
    store.commit_state({}, {"final/model": blob(5 * LIMIT, seed=1)})
    store.commit_state({}, {"final/model": b"short"})
    assert store.get_state("final/model") == b"short"
    assert store._db.execute("SELECT count(*) FROM state_parts").fetchone() == (0,)


def test_a_failed_commit_leaves_the_previous_blob_whole(tmp_path: Path) -> None:
    """Parts and meta are one transaction: a write that fails at its last part (a trigger
    stands for a full disk) keeps what was there."""
    store = limited(tmp_path / "s.sqlite")
    old = blob(4 * LIMIT, seed=2)
    store.commit_state({"phase": "train"}, {"final/model": old})
    store._db.execute(
        "CREATE TRIGGER full BEFORE INSERT ON state_parts WHEN NEW.key = 'late'"
        " BEGIN SELECT RAISE(ABORT, 'disk full'); END"
    )
    new = {"final/model": blob(4 * LIMIT, seed=3), "late": blob(2 * LIMIT)}
    with pytest.raises(sqlite3.IntegrityError, match="disk full"):
        store.commit_state({"phase": "serve"}, new)
    assert store.get_state("final/model") == old
    assert store.get_state("late") is None
    assert store.get_meta("phase") == "train"


def test_a_store_from_before_parts_reads_as_before(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    store = Store(path)
    store.commit_state({}, {"final/model": b"archive"})
    store._db.execute("DROP TABLE state_parts")
    store.close()
    assert Store(path, read_only=True).get_state("final/model") == b"archive"
    assert Store(path).get_state("final/model") == b"archive"  # gains the table on open


class CountingReader(io.BytesIO):
    """A binary file that remembers the longest single read asked of it."""

    longest = 0

    def read(self, size: int | None = -1) -> bytes:
        out = super().read(size)
        self.longest = max(self.longest, len(out))
        return out


@pytest.mark.parametrize("n", [0, 1, LIMIT // 2, 7 * LIMIT + 3])
def test_a_file_is_stored_like_its_bytes_read_part_by_part(tmp_path: Path, n: int) -> None:
    """A blob given as a file (the fitted model's archive in a temporary file) is read from its
    position in parts no longer than the store's parts, and stored as its bytes would be."""
    store = limited(tmp_path / "s.sqlite")
    data = blob(n, seed=n)
    source = CountingReader(b"skipped" + data)
    source.seek(len(b"skipped"))
    store.commit_state({"phase": "serve"}, {"final/model": source, "small": b"x"})
    assert store.get_state("final/model") == data
    assert store.get_state("small") == b"x"
    assert source.longest <= LIMIT // 2


@pytest.mark.parametrize("n", [1, 7 * LIMIT + 3])
def test_copy_state_writes_the_blob_to_a_file(tmp_path: Path, n: int) -> None:
    store = limited(tmp_path / "s.sqlite")
    data = blob(n, seed=n)
    store.commit_state({}, {"final/model": data})
    target = io.BytesIO()
    assert store.copy_state("final/model", target)
    assert target.getvalue() == data
    empty = io.BytesIO()
    assert not store.copy_state("absent", empty)
    assert empty.getvalue() == b""


def test_state_file_is_the_first_key_held_rewound(tmp_path: Path) -> None:
    store = limited(tmp_path / "s.sqlite")
    data = blob(3 * LIMIT + 5)
    store.commit_state({}, {"two_tier/model": data})
    with store.state_file("final/model", "two_tier/model") as f:
        assert f is not None and f.read() == data
    with store.state_file("final/model") as f:
        assert f is None
    assert all(p.name.startswith("s.sqlite") for p in tmp_path.iterdir())  # the copy is gone
