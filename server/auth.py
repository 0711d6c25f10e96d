"""Who sent a request: node signatures checked against the allow-list, in a replay window.

`NodeVerifier` is the server's half of `privrec.shared.identity`. For a signed method it reads
the request's `NodeAuth` (call metadata for a unary call, field 2 of each `ReleaseBatch`),
and accepts it only when

* the node is on the operator's allow-list and the Ed25519 signature verifies over the method,
  the node, the timestamp, the nonce and the SHA-256 of the request's bytes as received;
* the timestamp is within ``window_s`` of the server's clock (either way);
* the (node, nonce) pair has not been seen within the window (a replayed request is refused;
  remembered nonces older than the window are forgotten, so memory stays bounded by the
  request rate times the window, and capped by ``max_nonces``). With a `UsedNonces` file the
  nonces outlive the process: a server started again on the same run directory refuses what
  its predecessor accepted (each nonce is written before the request is worked on);
* the TLS client certificate the call came with names the signing node: a node's key works
  only with its own certificate (a stolen key without the certificate, or a certificate
  without the key, acts for nobody).

It returns the node's name, which the aggregator uses as the request's authority: a user
belongs to the node that enrolled her. Every failure is an `AuthenticationError`
(UNAUTHENTICATED) whose message says what was wrong and echoes nothing secret.

`ClaimedNodes` is what `--insecure` runs use instead: the node named in the ``privrec-node``
metadata (or a batch's unsigned `auth.node_id`) is taken at its word, so anyone can act as any
node. It exists for comparison and debugging and is announced loudly.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Protocol

from google.protobuf.message import DecodeError

from privrec.shared.errors import AuthenticationError, ResourceExhaustedError
from privrec.shared.identity import (
    AUTH_METADATA_KEY,
    NODE_METADATA_KEY,
    NONCE_BYTES,
    AllowList,
    request_digest,
)
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb

logger = logging.getLogger(__name__)

Metadata = Sequence[tuple[str, str | bytes]]


class Authenticator(Protocol):
    """Names the node behind a request (`NodeVerifier` or `ClaimedNodes`)."""

    secure: bool

    def unary(self, method: str, metadata: Metadata, raw: bytes, peer: str | None = None) -> str:
        """The node behind a unary request (`peer`: its TLS certificate's name, if any)."""
        ...

    def batch(
        self,
        method: str,
        metadata: Metadata,
        body: bytes,
        auth: bytes | None,
        peer: str | None = None,
    ) -> str:
        """The node behind a batch (its `auth` field signs `body`)."""
        ...


def _md(metadata: Metadata, key: str) -> str | bytes | None:
    for k, v in metadata:
        if k == key:
            return v
    return None


class UsedNonces:
    """The nonces a server accepted, in a small SQLite file beside its store (created 0600).

    One row per accepted signed request, written (and committed: WAL, which survives a killed
    process) before the request is worked on; rows older than the replay window are dropped as
    new ones come. A restarted server loads the rows still inside the window.

    Args:
        path: the file (``RUN_DIR/nonces.sqlite``).
    """

    EXPIRE_EVERY = 1024  # rows added between two sweeps of expired ones

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600))
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS nonces (node TEXT NOT NULL, nonce BLOB NOT NULL, "
            "ts REAL NOT NULL, PRIMARY KEY (node, nonce))"
        )
        self._added = 0

    def since(self, horizon: float) -> Iterator[tuple[float, str, bytes]]:
        """(ts, node, nonce) of the nonces accepted at or after `horizon`, oldest first."""
        for ts, node, nonce in self._db.execute(
            "SELECT ts, node, nonce FROM nonces WHERE ts >= ? ORDER BY ts", (horizon,)
        ):
            yield float(ts), str(node), bytes(nonce)

    def add(self, node: str, nonce: bytes, ts: float, horizon: float) -> None:
        """Record one accepted nonce (and now and then forget those before `horizon`)."""
        self._db.execute(
            "INSERT OR IGNORE INTO nonces(node, nonce, ts) VALUES (?, ?, ?)", (node, nonce, ts)
        )
        self._added += 1
        if self._added % self.EXPIRE_EVERY == 0:
            self._db.execute("DELETE FROM nonces WHERE ts < ?", (horizon,))

    def close(self) -> None:
        """Close the nonce database."""
        with contextlib.suppress(sqlite3.Error):
            self._db.close()


class NodeVerifier:
    """Checks node signatures (see the module docstring).

    Args:
        allow: the operator's allow-list.
        window_s: accepted clock skew either way, and how long a nonce is remembered.
        max_nonces: the most nonces remembered at once; beyond it requests are refused with
            RESOURCE_EXHAUSTED until old ones expire (never silently accepted).
        clock: seconds since the epoch (tests pass their own).
        used: where accepted nonces persist (`UsedNonces`); None keeps them in memory only.
    """

    secure = True

    def __init__(
        self,
        allow: AllowList,
        *,
        window_s: float = 300.0,
        max_nonces: int = 2_000_000,
        clock: Callable[[], float] = time.time,
        used: UsedNonces | None = None,
    ) -> None:
        self.allow, self.window_s, self.max_nonces, self.clock = allow, window_s, max_nonces, clock
        self._seen: set[tuple[str, bytes]] = set()
        self._order: collections.deque[tuple[float, str, bytes]] = collections.deque()
        self._lock = threading.Lock()
        self._used = used
        if used is not None:  # what the server's predecessors accepted, still in the window
            for ts, node, nonce in used.since(self._horizon(clock())):
                self._seen.add((node, nonce))
                self._order.append((ts, node, nonce))

    def unary(self, method: str, metadata: Metadata, raw: bytes, peer: str | None = None) -> str:
        """Verify the request's signature and nonce; the signing node's id."""
        value = _md(metadata, AUTH_METADATA_KEY)
        if value is None:
            raise AuthenticationError(
                f"node auth: {method} must be signed by an allowed node (metadata "
                f"{AUTH_METADATA_KEY!r} missing)"
            )
        auth = value if isinstance(value, bytes) else value.encode()
        return self._check(method, auth, raw, peer)

    def batch(
        self,
        method: str,
        metadata: Metadata,
        body: bytes,
        auth: bytes | None,
        peer: str | None = None,
    ) -> str:
        """Verify the batch's `auth` signature over `body`; the signing node's id."""
        if auth is None:
            raise AuthenticationError(
                "node auth: every ReleaseBatch must carry its node's signature (field auth)"
            )
        return self._check(method, auth, body, peer)

    def _check(self, method: str, auth_bytes: bytes, raw: bytes, peer: str | None) -> str:
        try:
            auth = pb.NodeAuth.FromString(auth_bytes)
        except DecodeError:
            raise AuthenticationError("node auth: the NodeAuth cannot be decoded") from None
        if auth.node_id not in self.allow.nodes:
            raise AuthenticationError("node auth: the node is not on the allow-list")
        if peer is not None and peer != auth.node_id:
            raise AuthenticationError(
                "node auth: the TLS client certificate names another node than the signature "
                "(a node signs with its own key and certificate)"
            )
        if len(auth.nonce) != NONCE_BYTES or len(auth.signature) != 64:
            raise AuthenticationError(
                f"node auth: nonce must be {NONCE_BYTES} bytes and signature 64 bytes"
            )
        now = self.clock()
        skew = auth.timestamp_ms / 1000.0 - now
        if abs(skew) > self.window_s:
            raise AuthenticationError(
                f"node auth: timestamp is {skew:+.0f}s from the server's clock (window "
                f"±{self.window_s:g}s)"
            )
        if not self.allow.verify(auth, method, request_digest(raw)):
            raise AuthenticationError(f"node auth: bad signature for {method}")
        key = (auth.node_id, bytes(auth.nonce))
        with self._lock:
            self._expire(now)
            if key in self._seen:
                raise AuthenticationError("node auth: replayed request (nonce already used)")
            if len(self._seen) >= self.max_nonces:
                raise ResourceExhaustedError(
                    "busy: too many signed requests in the replay window; retry later"
                )
            if self._used is not None:
                self._used.add(*key, now, self._horizon(now))
            self._seen.add(key)
            self._order.append((now, *key))
        return auth.node_id

    def _horizon(self, now: float) -> float:
        return now - 2 * self.window_s  # a timestamp may lead the clock by window_s

    def _expire(self, now: float) -> None:
        horizon = self._horizon(now)
        while self._order and self._order[0][0] < horizon:
            _, node, nonce = self._order.popleft()
            self._seen.discard((node, nonce))


class ClaimedNodes:
    """`--insecure`: the node a request names is believed (no signature, no allow-list)."""

    secure = False

    def unary(self, method: str, metadata: Metadata, raw: bytes, peer: str | None = None) -> str:
        """The node id the request's metadata claims (not checked)."""
        value = _md(metadata, NODE_METADATA_KEY)
        return value.decode(errors="replace") if isinstance(value, bytes) else (value or "")

    def batch(
        self,
        method: str,
        metadata: Metadata,
        body: bytes,
        auth: bytes | None,
        peer: str | None = None,
    ) -> str:
        """The node id the batch's `auth` field claims (not checked)."""
        if auth is not None:
            try:
                return pb.NodeAuth.FromString(auth).node_id
            except DecodeError:
                raise AuthenticationError("node auth: the NodeAuth cannot be decoded") from None
        return self.unary(method, metadata, body)


__all__ = ["Authenticator", "ClaimedNodes", "NodeVerifier", "UsedNonces"]
