"""The per-user privacy ledger: every release of every user in a run, and its composition.

Every release a user makes (her profile release, each re-perturbed Predict query, each round) is
recorded as a `(DpEvent, count, purpose)` entry of her ledger. At report time the ledger
composes each user's events (`shared.accounting.accountant`: PLD or RDP, Koskela et al. 2020,
Mironov 2017) and reports the per-user ε at a stated δ (max and median over users) next to the
naive sum of the per-release ε's (basic sequential composition, Dwork & Roth 2014, Thm 3.16).
A ledger holding a `NonPrivateDpEvent` (e.g. RPT) has no ε: `summary` says so with a reason.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Hashable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import dp_accounting

from privrec.shared.accounting.accountant import (
    PURE_LEAVES,
    FlatLedger,
    check_delta,
    compose_epsilon,
    compose_flat,
    composition_path,
    flatten_ledger,
    naive_epsilon,
)
from privrec.shared.errors import UnsupportedEventError

if TYPE_CHECKING:  # the mechanisms import this package: a runtime import would be a cycle
    from privrec.shared.mechanisms.base import PrivacyStatement


@dataclasses.dataclass(frozen=True, slots=True)
class LedgerEntry:
    """One line of a user's ledger.

    Attributes:
        event: the dp-accounting event of one release.
        count: how many times the release was made (≥ 1).
        purpose: what the release was for, e.g. "profile", "predict", "round-3".
    """

    event: dp_accounting.DpEvent
    count: int
    purpose: str


class PrivacyLedger:
    """Every release of every user in a run, and its composition.

    Args:
        value_discretization_interval: PLD discretisation of the privacy loss; smaller is
            tighter and slower. The PLD rounds pessimistically, so reported ε's are upper
            bounds that exceed the exact value by at most about this much per composed leaf.

    Example:
        >>> ledger = PrivacyLedger()
        >>> ledger.record("u1", mechanism.event(), purpose="profile")
        >>> ledger.record("u1", mechanism.event(), count=3, purpose="predict")
        >>> ledger.summary(delta=1e-6)["per_user_epsilon"]["max"]
    """

    def __init__(self, *, value_discretization_interval: float = 1e-4) -> None:
        if not value_discretization_interval > 0:
            raise ValueError(
                "`value_discretization_interval` must be > 0, got "
                f"{value_discretization_interval!r}"
            )
        self.value_discretization_interval = float(value_discretization_interval)
        self._entries: dict[Hashable, list[LedgerEntry]] = {}
        self._cache: dict[tuple[Any, ...], float] = {}
        self._flat_cache: dict[tuple[tuple[dp_accounting.DpEvent, int], ...], FlatLedger] = {}

    # -- recording
    def record(
        self,
        user: Hashable,
        event: dp_accounting.DpEvent,
        *,
        count: int = 1,
        purpose: str = "profile",
    ) -> None:
        """Append `count` releases of `event` by `user`.

        Events the accountant cannot compose (e.g. PMD's `UnsupportedDpEvent`) are recorded too:
        the ledger is a record of what was released; `summary` then states that no ε exists.
        Use `check_mechanism` before a run to refuse such a protocol when it claims DP.

        Raises:
            TypeError: `event` is not a DpEvent.
            ValueError: `count` < 1.
        """
        if not isinstance(event, dp_accounting.DpEvent):
            raise TypeError(f"`event` must be a dp_accounting.DpEvent, got {type(event)!r}")
        if int(count) != count or count < 1:
            raise ValueError(f"`count` must be a positive integer, got {count!r}")
        self._entries.setdefault(user, []).append(LedgerEntry(event, int(count), purpose))

    def users(self) -> list[Hashable]:
        """Users with at least one entry, in first-recorded order."""
        return list(self._entries)

    def entries(self, user: Hashable) -> tuple[LedgerEntry, ...]:
        """`user`'s entries (empty if she released nothing)."""
        return tuple(self._entries.get(user, ()))

    def __iter__(self) -> Iterator[tuple[Hashable, tuple[LedgerEntry, ...]]]:
        for user, entries in self._entries.items():
            yield user, tuple(entries)

    def __len__(self) -> int:
        return len(self._entries)

    def composed_event(self, user: Hashable) -> dp_accounting.DpEvent:
        """`user`'s ledger as one dp-accounting event."""
        parts: list[dp_accounting.DpEvent] = [
            e.event if e.count == 1 else dp_accounting.SelfComposedDpEvent(e.event, e.count)
            for e in self.entries(user)
        ]
        return dp_accounting.ComposedDpEvent(parts)

    # -- composition
    def _flat(self, user: Hashable) -> FlatLedger:
        entries = tuple((e.event, e.count) for e in self.entries(user))
        try:  # users with equal ledgers share one flattening (a million users, one event)
            cached = self._flat_cache.get(entries)
        except TypeError:  # an event with unhashable fields: flatten it every time
            return flatten_ledger(entries)
        if cached is None:
            cached = self._flat_cache[entries] = flatten_ledger(entries)
        return cached

    def _composable(self, user: Hashable, delta: float) -> FlatLedger | None:
        """`user`'s flattened ledger, or None when a release was non-private (ε = ∞).

        Raises:
            ValueError: `delta` outside [0, 1).
            UnsupportedEventError: a release the accountant cannot compose.
        """
        check_delta(delta)
        flat = self._flat(user)
        if flat.non_private:
            return None
        if flat.unsupported is not None:
            raise UnsupportedEventError(
                f"user {user!r}: cannot compose, caused by subevent {flat.unsupported!r}"
            )
        return flat

    def epsilon(self, user: Hashable, delta: float) -> float:
        """`user`'s composed ε at `delta` (math.inf if any release was non-private)."""
        flat = self._composable(user, delta)
        if flat is None:
            return math.inf
        # Users with the same multiset of releases share one composition.
        key = ("eps", flat.key, delta)
        if key not in self._cache:
            self._cache[key] = compose_flat(flat, delta, self.value_discretization_interval)
        return self._cache[key]

    def naive_epsilon(self, user: Hashable, delta: float) -> float:
        """`user`'s ε by basic sequential composition (the "naive sum")."""
        flat = self._composable(user, delta)
        return math.inf if flat is None else naive_epsilon(flat, delta)

    def summary(
        self,
        delta: float,
        statement: PrivacyStatement | None = None,
        *,
        weights: Mapping[Any, int] | None = None,
    ) -> dict[str, Any]:
        """The `privacy` block of report.json.

        Args:
            delta: the δ at which per-user ε's are stated.
            statement: the run's mechanism statement (its kind and per-release ε are copied).
            weights: user → how many users with exactly her ledger she stands for (default
                1 each): a million users who released alike are composed once, and the
                summary is the one of every user recorded alone (`weighted_median`).

        Returns:
            ``{kind, epsilon_per_release, delta, per_user_epsilon: {max, median},
            naive_sum: {max, median}, accountant: "pld"|"rdp", users}``, or, when the
            mechanism makes no DP claim or any release is non-private,
            ``{kind: "none", epsilon: None, reason, users}``.
        """
        check_delta(delta)
        users = self.users()
        w = [1 if weights is None else int(weights.get(u, 1)) for u in users]
        total = sum(w)
        weight = dict(zip(users, w, strict=True))
        if statement is not None and (
            statement.kind in ("none", "element-wise") or statement.epsilon is None
        ):
            what = (
                "element-wise privacy only (Xin & Jaakkola Def. 4.1), not differential privacy"
                if statement.kind == "element-wise"
                else "no differential-privacy claim"
            )
            return _no_guarantee(
                f"mechanism makes {what}; no epsilon can be stated. {statement.notes}".strip(),
                total,
            )
        flats = {u: self._flat(u) for u in users}
        bad = [u for u, f in flats.items() if f.non_private]
        if bad:
            purposes = sorted(
                {
                    e.purpose
                    for e in self.entries(bad[0])
                    if flatten_ledger([(e.event, 1)]).non_private
                }
            )
            return _no_guarantee(
                f"{sum(weight[u] for u in bad)} of {total} users made a non-private release "
                f"(NonPrivateDpEvent; purpose {', '.join(purposes) or 'unknown'}); "
                "no epsilon can be stated",
                total,
            )
        odd = [(u, f.unsupported) for u, f in flats.items() if f.unsupported is not None]
        if odd:
            return _no_guarantee(
                f"{sum(weight[u] for u, _ in odd)} of {total} users made a release the "
                f"accountant cannot compose, caused by subevent {odd[0][1]!r}; no epsilon can "
                "be stated",
                total,
            )
        if not users:
            return {
                "kind": statement.kind if statement else "pure",
                "epsilon_per_release": statement.epsilon if statement else None,
                "delta": delta,
                "per_user_epsilon": {"max": 0.0, "median": 0.0},
                "naive_sum": {"max": 0.0, "median": 0.0},
                "accountant": "pld",
                "users": 0,
            }
        eps = [self.epsilon(u, delta) for u in users]
        naive = [self.naive_epsilon(u, delta) for u in users]
        paths = {composition_path(f) for f in flats.values() if f.leaves}
        all_leaves = [e for f in flats.values() for e, _ in f.leaves]
        kind = (
            statement.kind
            if statement is not None
            else ("pure" if all(isinstance(e, PURE_LEAVES) for e in all_leaves) else "approximate")
        )
        if statement is not None and statement.epsilon is not None:
            per_release: float | None = statement.epsilon
        else:
            first = self.entries(users[0])[0].event
            per_release = compose_epsilon(
                [first],
                0.0 if kind == "pure" else delta,
                value_discretization_interval=self.value_discretization_interval,
            )
        return {
            "kind": kind,
            "epsilon_per_release": per_release,
            "delta": delta,
            "per_user_epsilon": {"max": max(eps), "median": weighted_median(eps, w)},
            "naive_sum": {"max": max(naive), "median": weighted_median(naive, w)},
            "accountant": "rdp" if paths == {"rdp"} else "pld",
            "users": total,
        }


def weighted_median(values: Sequence[float], weights: Sequence[int] | None = None) -> float:
    """`statistics.median` of `values` with value i repeated `weights[i]` times (default
    once), without making the repeated list: the middle value, or the mean of the two middle
    values (summed and halved as `statistics.median` does, so the result is the same float)."""
    if weights is None:
        return float(statistics.median(values))
    pairs = sorted((v, n) for v, n in zip(values, weights, strict=True) if n > 0)
    total = sum(n for _, n in pairs)
    if not total:
        raise statistics.StatisticsError("no median for empty data")

    def at(i: int) -> float:  # the i-th value of the sorted, repeated list
        seen = 0
        for v, n in pairs:
            seen += n
            if i < seen:
                return v
        raise IndexError(i)

    if total % 2:
        return at(total // 2)
    return (at(total // 2 - 1) + at(total // 2)) / 2


def _no_guarantee(reason: str, users: int) -> dict[str, Any]:
    return {"kind": "none", "epsilon": None, "reason": reason, "users": users}


__all__ = ["LedgerEntry", "PrivacyLedger", "weighted_median"]
