"""The transcript store's records: a validated release ready to store (`NewRelease`), one
stored request (`TranscriptRow`), and the row counts a writer keeps in step with its commits
(`Tally`); `server.store.Store` writes and reads them."""

from __future__ import annotations

import collections
import dataclasses
from typing import NamedTuple


@dataclasses.dataclass(frozen=True)
class TranscriptRow:
    """One stored request."""

    seq: int
    arrival_ns: int
    method: str
    request: bytes


class NewRelease(NamedTuple):
    """A validated release ready to store (a named tuple: one is built per release of a batch,
    at a third of a frozen dataclass's cost)."""

    user_id: str
    nonce: str
    purpose: int
    field: str
    raw: bytes
    digest: bytes | None = None  # SHA-256 of the request; None: not compared on a retry


@dataclasses.dataclass
class Tally:
    """Row counts a writer keeps in step with its own commits, so the operator's progress
    polling (`GetStatus`) costs O(1) instead of full scans of tables that grow to millions of
    rows (the scans made a million-user collect quadratic; bench/population.py).

    `users` counts distinct users with a release of (purpose, tier); tier is 0 for a user the
    store has no enrollment of."""

    transcript: int = 0
    enrollments: int = 0
    releases: int = 0
    by_purpose: collections.Counter[int] = dataclasses.field(default_factory=collections.Counter)
    users: collections.Counter[tuple[int, int]] = dataclasses.field(
        default_factory=collections.Counter
    )

    def copy(self) -> Tally:
        """An independent copy (the counters are copied, not shared)."""
        return dataclasses.replace(
            self,
            by_purpose=collections.Counter(self.by_purpose),
            users=collections.Counter(self.users),
        )

    def users_with(self, purpose: int, tier: int | None = None) -> int:
        """Distinct users with a release of `purpose` (of enrollment `tier`, if given)."""
        if tier is not None:
            return self.users[(purpose, tier)]
        return sum(n for (p, _), n in self.users.items() if p == purpose)


__all__ = ["NewRelease", "Tally", "TranscriptRow"]
