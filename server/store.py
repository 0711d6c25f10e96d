"""The aggregator's durable store: SQLite in WAL mode.

Tables:
  * `transcript(seq, arrival_ns, method, request, digest)`: every request the server ACCEPTED,
    verbatim (the bytes as they arrived on the wire), numbered in arrival order, with its
    SHA-256. Rejected requests are counted but not stored, so a bad request leaves the store
    untouched (docs/decisions/protocol.md).
  * `enrollments(user_id, token, shard, tier, seq, node)`: `node` is the node that enrolled
    the user, her only authority; `token` is the public enrollment receipt.
  * `releases(user_id, nonce, purpose, field, seq, digest)`: the idempotency index. (user_id,
    nonce) is the primary key, so a retried release is acknowledged and never stored twice;
    `digest` (SHA-256 of the request) tells a retry from a different content under a used nonce.
  * `meta(key, value)`: the run's public configuration, the phase, the round and the counters.
  * `state(key, value)`: what a restarted aggregator needs to go on: every published model
    archive, the fitted model, the two-tier rounds (`server.two_tier.TwoTierRounds.state`).
    A blob longer than `STATE_PART_BYTES` keeps its first part there and the rest in
    `state_parts(key, part, value)`: SQLite refuses a value over its length limit (1e9 bytes),
    which a million-user kNN model passes.

One writer at a time (the aggregator core serialises them with its lock); each batch of
releases, and each phase change with the state it publishes, is one transaction, so a crash
never leaves half of either. Readers (replay, reports) open the file read-only. The file is
created 0600: it holds every user's releases.

What is read is verified (docs/decisions/trust.md, "A damaged transcript is refused"): opening
runs SQLite's ``PRAGMA integrity_check`` (once per file state and process), and every request
read back (`transcript`, `releases_by_purpose`) is checked against its stored SHA-256. A damaged
or unreadable file raises `StoreDamagedError` (a `DataError`: one ``privrec: error:`` line)
naming the file and, for a record, its sequence number. The digests detect damage (a failing
disk, a copy cut short), not a forger with write access to the file, who can rewrite both.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

from privrec.server.store_records import NewRelease, Tally, TranscriptRow
from privrec.shared.errors import DataError

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS transcript (
    seq INTEGER PRIMARY KEY,
    arrival_ns INTEGER NOT NULL,
    method TEXT NOT NULL,
    request BLOB NOT NULL,
    digest BLOB
);
CREATE TABLE IF NOT EXISTS enrollments (
    user_id TEXT PRIMARY KEY,
    token TEXT NOT NULL,
    shard TEXT NOT NULL,
    tier INTEGER NOT NULL,
    seq INTEGER NOT NULL REFERENCES transcript(seq),
    node TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS releases (
    user_id TEXT NOT NULL,
    nonce TEXT NOT NULL,
    purpose INTEGER NOT NULL,
    field TEXT NOT NULL,
    seq INTEGER NOT NULL REFERENCES transcript(seq),
    digest BLOB,
    PRIMARY KEY (user_id, nonce)
);
CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS state_parts
    (key TEXT NOT NULL, part INTEGER NOT NULL, value BLOB NOT NULL, PRIMARY KEY (key, part));
"""
STATE_PART_BYTES = 1 << 24
"""Longest part of a state blob (16 MiB; at most half of SQLite's length limit). Writing a part
holds it about four times (the bytes read, SQLite's bound copy, the record it builds, the
first part kept for the `state` row): what storing a blob from a file costs in memory.
Any part size reads back (parts are joined in order)."""
StateBlob = bytes | memoryview | BinaryIO
"""A state blob to store: its bytes, or a binary file read from its current position."""


def _pieces(blob: StateBlob, size: int) -> Iterator[bytes | memoryview]:
    """`blob` in consecutive pieces of at most `size` bytes (none for an empty blob)."""
    if isinstance(blob, bytes | bytearray | memoryview):
        view = memoryview(blob).cast("B")
        yield from (view[at : at + size] for at in range(0, len(view), size))
    else:
        yield from iter(lambda: blob.read(size), b"")


# columns added after the first stores were written (an older store gains them on open)
_MIGRATIONS = (
    ("enrollments", "node", "ALTER TABLE enrollments ADD COLUMN node TEXT NOT NULL DEFAULT ''"),
    ("releases", "digest", "ALTER TABLE releases ADD COLUMN digest BLOB"),
    ("transcript", "digest", "ALTER TABLE transcript ADD COLUMN digest BLOB"),
)
DIGESTS_FROM = "transcript_digests_from"
"""Meta key: the first seq whose transcript row carries its own digest (absent: every row). A
store written before per-record digests gains them from the seq it had reached."""


class StoreDamagedError(DataError):
    """The store file is damaged, cut short, not a privrec store, or a stored record does not
    match its digest. `seq` names the record (0: the file as a whole)."""

    def __init__(self, path: Path, message: str, *, seq: int = 0) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.seq = seq


_CHECKED_STATES: set[tuple[tuple[str, int, int], ...]] = set()
"""(path, size, mtime_ns) of the store files (and WAL) this process has found intact."""


def _sha256(raw: bytes) -> bytes:
    return hashlib.sha256(raw).digest()


class Store:
    """The SQLite store of one run.

    Args:
        path: the database file (created with its schema if missing).
        read_only: open an existing file without write access (replay).
    """

    def __init__(self, path: str | Path, *, read_only: bool = False) -> None:
        self.path = Path(path)
        try:
            self._open(read_only)
        except sqlite3.DatabaseError as exc:
            with contextlib.suppress(AttributeError, sqlite3.Error):
                self._db.close()
            raise StoreDamagedError(
                self.path, f"the store cannot be read ({exc}); it is damaged or not a privrec store"
            ) from None

    def _open(self, read_only: bool) -> None:
        if read_only:
            if not self.path.exists():
                raise FileNotFoundError(f"no store at {self.path}")
            self._db = sqlite3.connect(
                f"file:{self.path}?mode=ro", uri=True, check_same_thread=False
            )
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # created 0600 before SQLite opens it; SQLite gives its -wal and -shm the same mode
            os.close(os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600))
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._check_integrity()
        if not read_only:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")  # durable at checkpoints; WAL-safe
            fresh = not self._columns("transcript")
            self._db.executescript(SCHEMA)
            for table, column, sql in _MIGRATIONS:
                if column not in self._columns(table):
                    self._db.execute(sql)
                    if table == "transcript" and not fresh:
                        self.set_meta(DIGESTS_FROM, str(self._current_max() + 1))
        self._next_seq = self._current_max() + 1
        self._has_parts = bool(self._columns("state_parts"))  # absent in an older store
        # rows before this seq carry no digest of their own (a store older than them)
        self._digests_from = (
            int(self.get_meta(DIGESTS_FROM) or 1)
            if "digest" in self._columns("transcript")
            else self._next_seq
        )
        self._user_state: dict[str, int] = {}
        self._indexed = False
        if not read_only:  # the writer keeps them in step with its commits from the start
            self._index()

    def _columns(self, table: str) -> set[str]:
        return {str(r[1]) for r in self._db.execute(f"PRAGMA table_info({table})")}

    def _check_integrity(self) -> None:
        """SQLite's structure check, once per state of the file in this process (a report
        opens the store several times). The WAL is part of the state: a live server's store
        is checked as its last commit left it."""
        states = []
        for p in (self.path, self.path.with_name(self.path.name + "-wal")):
            with contextlib.suppress(FileNotFoundError):
                st = p.stat()
                states.append((str(p.resolve()), st.st_size, st.st_mtime_ns))
        key = tuple(states)
        if key in _CHECKED_STATES:
            return
        problems = [str(r[0]) for r in self._db.execute("PRAGMA integrity_check(5)")]
        if problems != ["ok"]:
            raise StoreDamagedError(
                self.path, f"the store is damaged (SQLite integrity check: {'; '.join(problems)})"
            )
        _CHECKED_STATES.add(key)

    def _index(self) -> None:
        """Load, once, the in-memory idempotency index (the table's primary key stays the
        authority; a batch then needs no per-release look-up) and the tally. A reader loads
        them only if asked (`has_release`, `tally`): reports and replay open the store
        several times and never need a million-entry index."""
        if self._indexed:
            return
        self._indexed = True
        cols = {r[1] for r in self._db.execute("PRAGMA table_info(releases)")}
        digest = "digest" if "digest" in cols else "NULL"  # a store older than digests
        self._keys = {
            (str(u), str(n)): (bytes(d) if d is not None else None)
            for u, n, d in self._db.execute(f"SELECT user_id, nonce, {digest} FROM releases")
        }
        self._load_tally()

    # ------------------------------------------------------------------ tally
    _TIER_BITS = 8  # a user's packed state: tier in the low bits, a bit per purpose above

    def _load_tally(self) -> None:
        """Count once; the writes keep the counts in step with every commit."""
        self._tally = Tally(
            transcript=self.count("transcript"),
            enrollments=self.count("enrollments"),
            releases=self.count("releases"),
        )
        self._user_state = {
            str(u): int(t) for u, t in self._db.execute("SELECT user_id, tier FROM enrollments")
        }
        for u, purpose, n in self._db.execute(
            "SELECT user_id, purpose, COUNT(*) FROM releases GROUP BY user_id, purpose"
        ):
            self._tally.by_purpose[int(purpose)] += int(n)
            self._mark_purpose(str(u), int(purpose))

    def _mark_purpose(self, user_id: str, purpose: int) -> None:
        """Record that `user_id` has a release of `purpose` (counted once per user)."""
        state = self._user_state.get(user_id, 0)
        bit = 1 << (self._TIER_BITS + purpose)
        if not state & bit:
            self._user_state[user_id] = state | bit
            self._tally.users[(purpose, state & ((1 << self._TIER_BITS) - 1))] += 1

    @property
    def tally(self) -> Tally:
        """The current row counts (a copy). Exact for the writer; a read-only store's are
        those when first asked (call `count` and friends for a live reader's view)."""
        self._index()
        return self._tally.copy()

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    # ------------------------------------------------------------------ meta
    def set_meta(self, key: str, value: str) -> None:
        """Set one metadata entry (insert or replace)."""
        self._db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    def commit_state(
        self, meta: Mapping[str, str], blobs: Mapping[str, StateBlob] | None = None
    ) -> None:
        """Write meta values and state blobs in one transaction (a phase change with what it
        published: after a crash either all of it is there or none). A blob is cut into parts
        of at most `STATE_PART_BYTES` (and half the connection's length limit); a blob given
        as a binary file is read from its position one part at a time, so a fitted model
        written to a temporary file is never held whole in memory (2.1 GB at a million users)."""
        size = min(STATE_PART_BYTES, self._db.getlimit(sqlite3.SQLITE_LIMIT_LENGTH) // 2)
        pieces = {key: _pieces(blob, size) for key, blob in (blobs or {}).items()}
        firsts = [(key, next(each, b"")) for key, each in pieces.items()]

        def parts() -> Iterator[tuple[str, int, bytes | memoryview]]:
            for key, each in pieces.items():
                yield from ((key, i, piece) for i, piece in enumerate(each, 1))

        with self._transaction() as cur:
            cur.executemany(
                "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", list(meta.items())
            )
            cur.executemany("INSERT OR REPLACE INTO state(key, value) VALUES (?, ?)", firsts)
            cur.executemany("DELETE FROM state_parts WHERE key = ?", [(k,) for k, _ in firsts])
            cur.executemany("INSERT INTO state_parts(key, part, value) VALUES (?, ?, ?)", parts())

    def get_state(self, key: str) -> bytes | None:
        """The saved state blob of `key` (its parts joined), or None."""
        chunks = list(self._state_chunks(key))
        return b"".join(chunks) if chunks else None

    def copy_state(self, key: str, target: BinaryIO) -> bool:
        """Write the saved state blob of `key` to `target`, one part at a time (a reader of a
        large model never holds its archive whole); whether the store holds it."""
        found = False
        for chunk in self._state_chunks(key):
            target.write(chunk)
            found = True
        return found

    @contextlib.contextmanager
    def state_file(self, *keys: str) -> Iterator[BinaryIO | None]:
        """The first of `keys` the store holds, copied part by part to a temporary file beside
        the store (or in the system's temporary directory when the store's is read-only;
        0600, gone when the context ends) and rewound; None if it holds none. A saved model is
        read from it array by array (`server.models.persistence.read_model`) without the
        archive's bytes in memory."""
        beside = self.path.parent if os.access(self.path.parent, os.W_OK) else None
        with tempfile.TemporaryFile(dir=beside) as f:
            if any(self.copy_state(key, f) for key in keys):
                f.seek(0)
                yield f
            else:
                yield None

    def _state_chunks(self, key: str) -> Iterator[bytes]:
        """The parts of the state blob of `key` in order (none if absent), read one by one."""
        row = self._db.execute("SELECT value FROM state WHERE key = ?", (key,)).fetchone()
        if row is None:
            return
        yield row[0]
        if self._has_parts:
            sql = "SELECT value FROM state_parts WHERE key = ? ORDER BY part"
            for (chunk,) in self._db.execute(sql, (key,)):
                yield chunk

    def state_keys(self, prefix: str = "") -> list[str]:
        """The saved state keys that start with `prefix`, sorted."""
        return [
            str(k)
            for (k,) in self._db.execute(
                "SELECT key FROM state WHERE substr(key, 1, ?) = ? ORDER BY key",
                (len(prefix), prefix),
            )
        ]

    def get_meta(self, key: str, default: str | None = None) -> str | None:
        """The metadata value of `key`, or `default`."""
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return default if row is None else str(row[0])

    # ------------------------------------------------------------------ writes
    def _append(self, cur: sqlite3.Cursor, method: str, raw: bytes) -> int:
        seq = self._next_seq
        cur.execute(
            "INSERT INTO transcript(seq, arrival_ns, method, request, digest) VALUES (?,?,?,?,?)",
            (seq, time.time_ns(), method, raw, _sha256(raw)),
        )
        self._next_seq += 1
        return seq

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Cursor]:
        """BEGIN … COMMIT; on any error ROLLBACK and resynchronise the sequence counter."""
        cur = self._db.cursor()
        cur.execute("BEGIN")
        try:
            yield cur
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            self._next_seq = self._current_max() + 1
            raise

    def enroll(
        self,
        user_id: str,
        token: str,
        shard: str,
        tier: int,
        raw: bytes,
        node: str = "",
        meta: Mapping[str, str] | None = None,
    ) -> int:
        """Store a first enrollment (by `node`) with its transcript record; returns its seq.
        `meta` values are written in the same transaction (the counters)."""
        with self._transaction() as cur:
            seq = self._append(cur, "Enroll", raw)
            cur.execute(
                "INSERT INTO enrollments(user_id, token, shard, tier, seq, node) "
                "VALUES (?,?,?,?,?,?)",
                (user_id, token, shard, tier, seq, node),
            )
            cur.executemany(
                "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", list((meta or {}).items())
            )
        self._count_enrollments([(user_id, tier)])
        return seq

    def enroll_many(
        self,
        rows: list[tuple[str, str, str, int, bytes]],
        node: str = "",
        meta: Mapping[str, str] | None = None,
    ) -> list[int]:
        """Store first enrollments (user_id, token, shard, tier, request bytes) by `node`, each
        with its own transcript record ("Enroll"), in one transaction; returns their seqs."""
        now = time.time_ns()
        seqs = list(range(self._next_seq, self._next_seq + len(rows)))
        with self._transaction() as cur:
            cur.executemany(
                "INSERT INTO transcript(seq, arrival_ns, method, request, digest) "
                "VALUES (?,?,?,?,?)",
                [
                    (seq, now, "Enroll", r[4], _sha256(r[4]))
                    for seq, r in zip(seqs, rows, strict=True)
                ],
            )
            cur.executemany(
                "INSERT INTO enrollments(user_id, token, shard, tier, seq, node) "
                "VALUES (?,?,?,?,?,?)",
                [(*r[:4], seq, node) for seq, r in zip(seqs, rows, strict=True)],
            )
            cur.executemany(
                "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", list((meta or {}).items())
            )
        self._next_seq += len(rows)
        self._count_enrollments([(r[0], r[3]) for r in rows])
        return seqs

    def _count_enrollments(self, users: list[tuple[str, int]]) -> None:
        self._tally.transcript += len(users)
        self._tally.enrollments += len(users)
        for user_id, tier in users:
            state = self._user_state.get(user_id, 0)
            self._user_state[user_id] = state | tier
            for purpose in range(state.bit_length() - self._TIER_BITS):
                if state >> (self._TIER_BITS + purpose) & 1:  # released before enrolling
                    self._tally.users[(purpose, 0)] -= 1
                    self._tally.users[(purpose, tier)] += 1

    def add_releases(
        self,
        method: str,
        releases: Iterable[NewRelease],
        meta: Mapping[str, str] | None = None,
    ) -> list[int | None]:
        """Store a batch atomically; a (user, nonce) already stored is skipped. `meta` values
        are written in the same transaction (the counters).

        Returns:
            per release, its new transcript seq, or None for a duplicate.
        """
        out: list[int | None] = []
        rows_t, rows_r = [], []
        keys: dict[tuple[str, str], bytes | None] = {}
        now = time.time_ns()
        seq = self._next_seq
        for user_id, nonce, purpose, field, raw, digest in releases:
            key = (user_id, nonce)
            if key in self._keys or key in keys:
                out.append(None)
                continue
            keys[key] = digest
            # the caller's digest is the request's SHA-256 (`NewRelease`); reads verify it
            rows_t.append((seq, now, method, raw, digest or _sha256(raw)))
            rows_r.append((user_id, nonce, purpose, field, seq, digest))
            out.append(seq)
            seq += 1
        if not rows_t:
            return out
        with self._transaction() as cur:
            cur.executemany(
                "INSERT INTO transcript(seq, arrival_ns, method, request, digest) "
                "VALUES (?,?,?,?,?)",
                rows_t,
            )
            cur.executemany(
                "INSERT INTO releases(user_id, nonce, purpose, field, seq, digest) "
                "VALUES (?,?,?,?,?,?)",
                rows_r,
            )
            cur.executemany(
                "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", list((meta or {}).items())
            )
        self._next_seq = seq
        self._keys |= keys
        self._tally.transcript += len(rows_t)
        self._tally.releases += len(rows_r)
        self._tally.by_purpose.update(row[2] for row in rows_r)
        for user_id, _, purpose, _, _, _ in rows_r:
            self._mark_purpose(user_id, purpose)
        return out

    def _current_max(self) -> int:
        return int(self._db.execute("SELECT COALESCE(MAX(seq), 0) FROM transcript").fetchone()[0])

    # ------------------------------------------------------------------ reads
    def has_release(self, user_id: str, nonce: str) -> bool:
        """True when `user_id` already stored a release with `nonce`."""
        self._index()
        return (user_id, nonce) in self._keys

    def release_digest(self, user_id: str, nonce: str) -> tuple[bool, bytes | None]:
        """(stored?, its digest) of a (user, nonce)."""
        self._index()
        key = (user_id, nonce)
        return (key in self._keys, self._keys.get(key))

    def enrollments(self) -> Iterator[tuple[str, str, int]]:
        """(user_id, token, tier) of every enrolled user."""
        for u, t, tier in self._db.execute("SELECT user_id, token, tier FROM enrollments"):
            yield str(u), str(t), int(tier)

    def owners(self) -> Iterator[tuple[str, str, int, str]]:
        """(user_id, token, tier, node) of every enrolled user."""
        for u, t, tier, node in self._db.execute(
            "SELECT user_id, token, tier, node FROM enrollments"
        ):
            yield str(u), str(t), int(tier), str(node)

    def count_purpose(self, purpose: int) -> int:
        """Stored releases of `purpose` (e.g. the answered queries)."""
        return int(
            self._db.execute(
                "SELECT COUNT(*) FROM releases WHERE purpose = ?", (purpose,)
            ).fetchone()[0]
        )

    def count(self, table: str) -> int:
        """Number of rows of `table` (transcript, enrollments or releases)."""
        if table not in ("transcript", "enrollments", "releases"):
            raise ValueError(f"unknown table {table!r}")
        return int(self._db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])

    def profile_users(self, purpose: int, tier: int | None = None) -> int:
        """Distinct users with a stored release of `purpose` (of enrollment `tier`, if given)."""
        if tier is None:
            return int(
                self._db.execute(
                    "SELECT COUNT(DISTINCT user_id) FROM releases WHERE purpose = ?", (purpose,)
                ).fetchone()[0]
            )
        return int(
            self._db.execute(
                "SELECT COUNT(DISTINCT r.user_id) FROM releases r JOIN enrollments e "
                "ON r.user_id = e.user_id WHERE r.purpose = ? AND e.tier = ?",
                (purpose, tier),
            ).fetchone()[0]
        )

    def tiers(self) -> dict[str, int]:
        """user id → enrollment tier."""
        return {
            str(u): int(t) for u, t in self._db.execute("SELECT user_id, tier FROM enrollments")
        }

    def releases_by_purpose(self, purpose: int) -> Iterator[tuple[str, bytes]]:
        """(user_id, raw Release bytes) of every stored release with `purpose`, in seq order,
        each verified against its digest.

        Raises:
            StoreDamagedError: a release does not match its digest.
        """
        for user_id, raw, seq, digest in self._db.execute(
            "SELECT r.user_id, t.request, t.seq, r.digest FROM releases r "
            "JOIN transcript t ON r.seq = t.seq WHERE r.purpose = ? ORDER BY r.seq",
            (purpose,),
        ):
            self._verify(int(seq), raw, digest)
            yield str(user_id), bytes(raw)

    def _verify(self, seq: int, raw: bytes, digest: bytes | None) -> None:
        if digest is not None and _sha256(raw) != digest:
            raise StoreDamagedError(
                self.path,
                f"transcript record seq {seq} does not match its stored SHA-256 digest: the "
                "store is damaged (restore it from a copy; nothing was read from it)",
                seq=seq,
            )

    def tier_counts(self) -> dict[int, int]:
        """Enrollment tier → how many users enrolled in it."""
        return {
            int(t): int(n)
            for t, n in self._db.execute("SELECT tier, COUNT(*) FROM enrollments GROUP BY tier")
        }

    def release_count_groups(
        self, purposes: Sequence[int], exclude_tier: int
    ) -> list[tuple[tuple[int, ...], int]]:
        """The users' release counts, grouped: each distinct vector (stored releases of
        ``purposes[0]``, of ``purposes[1]``, …) with how many users stored exactly that,
        counting every user with a stored release who is not enrolled in `exclude_tier`; in
        ascending order of the vectors. The privacy ledger composes each vector once: a
        million users who released alike are one composition, and no per-user row reaches
        Python."""
        columns = [f"c{i}" for i in range(len(purposes))]
        sums = ", ".join(
            f"SUM(r.purpose = {int(p)}) AS {c}" for p, c in zip(purposes, columns, strict=True)
        )
        names = ", ".join(columns)
        sql = (
            f"SELECT {names}, COUNT(*) FROM (SELECT {sums} FROM releases r "
            "LEFT JOIN enrollments e ON e.user_id = r.user_id WHERE e.tier IS NOT ? "
            f"GROUP BY r.user_id) GROUP BY {names} ORDER BY {names}"
        )
        return [
            (tuple(int(c) for c in row[:-1]), int(row[-1]))
            for row in self._db.execute(sql, (exclude_tier,))
        ]

    def release_counts(self) -> list[tuple[str, int, int]]:
        """(user_id, purpose, number of stored releases) for the privacy ledger."""
        return [
            (str(u), int(p), int(n))
            for u, p, n in self._db.execute(
                "SELECT user_id, purpose, COUNT(*) FROM releases GROUP BY user_id, purpose "
                "ORDER BY user_id, purpose"
            )
        ]

    def transcript(
        self, after: int = 0, methods: Sequence[str] | None = None
    ) -> Iterator[TranscriptRow]:
        """Every stored request with a seq above `after` (and, if given, one of `methods`), in
        seq order, each verified against its digest (rows of a store older than per-record
        digests: against their release's). The method is filtered in SQLite: the referee's
        10,000 queries among two million records are read without reading the others.

        Raises:
            StoreDamagedError: a record does not match its digest.
        """
        only = ""
        params: tuple[object, ...] = (after,)
        if methods is not None:
            only = f" AND t.method IN ({', '.join('?' * len(methods))})"
            params += tuple(methods)
        if self._digests_from <= after + 1:
            sql = (
                "SELECT t.seq, t.arrival_ns, t.method, t.request, t.digest FROM transcript t "
                f"WHERE t.seq > ?{only} ORDER BY t.seq"
            )
        else:  # the rows older than their own digests: the release index has one
            own = "t.digest" if "digest" in self._columns("transcript") else "NULL"
            sql = (
                f"SELECT t.seq, t.arrival_ns, t.method, t.request, COALESCE({own}, r.digest) "
                "FROM transcript t LEFT JOIN releases r ON r.seq = t.seq "
                f"WHERE t.seq > ?{only} ORDER BY t.seq"
            )
        for seq, ns, method, req, digest in self._db.execute(sql, params):
            self._verify(int(seq), req, digest)
            yield TranscriptRow(int(seq), int(ns), str(method), bytes(req))

    def snapshot(self) -> tuple[int, int, int]:
        """(transcript, enrollments, releases) row counts: what tests compare before/after."""
        return self.count("transcript"), self.count("enrollments"), self.count("releases")


__all__ = ["Store", "StoreDamagedError"]
