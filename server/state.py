"""What the aggregator's collaborators share: the spec, the store, the one writer lock, the
counters, the observation feed and the current phase.

`server.aggregator.Aggregator` is a small facade over collaborators with one job each
(`server.enrollment`, `server.submission`, `server.trainer`, `server.queries`,
`server.feed`); each holds this one `AggregatorState` and nothing of the others but what it
calls. The lock serialises the writers (store transactions, phase changes) and the feed's
notifications, so the feed is in transcript order.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from typing import Any

from privrec.server.feed import ObservationFeed
from privrec.server.spec import RunSpec
from privrec.server.store import Store
from privrec.server.validation import short
from privrec.shared.errors import (
    AlreadyExistsError,
    AuthenticationError,
    ProtocolError,
    ResourceExhaustedError,
    ValidationError,
)
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb

logger = logging.getLogger(__name__)

REFUSALS = (
    ValidationError,
    ProtocolError,
    AuthenticationError,
    AlreadyExistsError,
    ResourceExhaustedError,
)
"""The privrec errors that refuse a request (counted as `releases_rejected`, never stored)."""
TIER_NAMES: dict[pb.Tier.ValueType, str] = {pb.TIER_PRIVATE: "private", pb.TIER_PUBLIC: "public"}


@dataclasses.dataclass
class Counters:
    """What the server counts but does not store as records (rejections leave no trace in the
    store's tables; the counts are saved in `meta` with the next write and at phase changes)."""

    rejected: int = 0
    duplicates: int = 0
    train_seconds: float = 0.0
    answer_seconds: float = 0.0  # the model's time answering Predict/Recommend (Bilge's T)

    @classmethod
    def from_json(cls, text: str | None) -> Counters:
        """The counters a store saved (keys it no longer has are dropped: an older store's)."""
        saved: dict[str, Any] = json.loads(text or "{}")
        return cls(**{f.name: saved[f.name] for f in dataclasses.fields(cls) if f.name in saved})


class AggregatorState:
    """The run's shared state (module docstring).

    Args:
        spec: the run's configuration.
        store: the durable store (an existing one is taken up where it stopped).
        allowed: per tier, the payload field its releases carry.

    Attributes:
        phase: the current phase (changed only by `move_to`).
        counters: the counters, restored from the store.
        feed: the observation feed.
        lock: the one writer lock.
    """

    def __init__(self, spec: RunSpec, store: Store, allowed: dict[pb.Tier.ValueType, str]) -> None:
        self.spec, self.store, self.allowed = spec, store, allowed
        self.lock = threading.RLock()
        self.phase = store.get_meta("phase") or "enroll"
        self.counters = Counters.from_json(store.get_meta("counters"))
        self.feed = ObservationFeed(store, self.lock)

    def counters_meta(self) -> dict[str, str]:
        """The counters as the `meta` entry saved with every write."""
        return {"counters": json.dumps(dataclasses.asdict(self.counters))}

    def move_to(
        self,
        phase: str,
        blobs: dict[str, bytes] | None = None,
        meta: dict[str, str] | None = None,
    ) -> None:
        """Set and store the phase (with `blobs` and `meta`, in one transaction) and put its
        marker on the feed: after every record of the previous phase (same lock, same
        publisher), never stored in the transcript."""
        with self.lock:
            self.phase = phase
            self.store.commit_state({"phase": phase, **(meta or {}), **self.counters_meta()}, blobs)
            self.feed.notify_many([(0, "Phase", phase.encode())])
        logger.info("phase -> %s", phase)

    def check_run(self, run_id: str, *, allow_empty: bool = False) -> None:
        """Refuse a request for another run."""
        if run_id != self.spec.run_id and not (allow_empty and run_id == ""):
            raise ValidationError(
                "run_id", f"unknown run {short(run_id)} (this server runs {self.spec.run_id!r})"
            )

    def check_serving(self) -> None:
        """Refuse a query outside phase "serve"."""
        if self.phase != "serve":
            raise ProtocolError(f"phase: queries are answered in phase 'serve', not {self.phase!r}")

    def check_conflict(self, user_id: str, nonce: str, digest: bytes | None) -> bool:
        """Refuse a release whose (user, nonce) is stored with another content; whether the
        (user, nonce) is stored (a retry of the same content: acknowledged, not stored again)."""
        stored, old = self.store.release_digest(user_id, nonce)
        if stored and old is not None and digest is not None and old != digest:
            raise AlreadyExistsError(
                f"nonce: {short(nonce)} was already used by this user with a different content"
            )
        return stored

    def refusals(self) -> RejectionCounter:
        """A context that counts a privrec refusal raised inside it (`releases_rejected`)."""
        return RejectionCounter(self.counters, self.lock)


class RejectionCounter:
    """Counts requests refused with a privrec error (they are never stored)."""

    def __init__(self, counters: Counters, lock: threading.RLock) -> None:
        self.counters, self.lock = counters, lock

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        if exc_type is not None and issubclass(exc_type, REFUSALS):
            with self.lock:
                self.counters.rejected += 1


def at_position(exc: Exception, prefix: str) -> Exception:
    """`exc` again with `prefix` (a batch position, e.g. ``requests[3].``) before its field."""
    if isinstance(exc, ValidationError):
        return ValidationError(prefix + exc.field, str(exc).split(": ", 1)[1])
    return type(exc)(prefix + str(exc))


def position(name: str, i: int, n: int) -> str:
    """The position prefix of item `i` of a batch of `n` named `name` (none for one)."""
    return f"{name}[{i}]." if n > 1 else ""


__all__ = [
    "REFUSALS",
    "TIER_NAMES",
    "AggregatorState",
    "Counters",
    "RejectionCounter",
    "at_position",
    "position",
]
