"""Public protocol rules every node applies the same way (no secret, no truth)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np

from privrec.shared.types import IntArray

PHASES = ("enroll", "public", "collect", "train", "serve", "attack", "report", "done")
"""The run's phases, in order. In "public" the public-tier users (Xin & Jaakkola's public users)
share their ratings openly; on leaving it a two-tier model fits the public model (µ, V) and
publishes it through GetModel, so the private users of "collect" can complete their ratings
before they release. A one-tier run passes through "public" with nobody submitting."""

RELEASE_PHASE = {"public": "public", "private": "collect"}
"""The phase in which each tier submits its profile release."""

ENROLL_PHASES = frozenset({"enroll", "public", "collect"})
"""The phases Enroll is accepted in (it stays open in collect so a restarted shard re-enrolls;
later, a restarted shard learns its users from `ListUsers`)."""


def fold_of(user_id: str, n_folds: int, seed: int) -> int:
    """The evaluation fold of a user: a public, seeded hash of her id (Bilge §2.4 k-fold).

    Every node derives it from the user id alone, so the server can leave the querying user's
    fold out of the neighbour pool without being told anything (5-fold CV over users in one
    protocol run). Folds are balanced only in expectation.
    """
    digest = hashlib.blake2b(f"{seed}:{user_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") % n_folds


def excluded_fold(user_id: str, n_folds: int, seed: int) -> int | None:
    """The fold the model leaves out when `user_id` queries: `fold_of`, or None under a run
    without a fold rule (``n_folds = 0``: a named split whose users release only their
    training ratings, so the model answers everyone from everyone's training ratings)."""
    return fold_of(user_id, n_folds, seed) if n_folds else None


def fold_groups(user_ids: Iterable[str], n_folds: int, seed: int) -> IntArray | None:
    """Each training row's fold (`fold_of`) for `Recommender.fit`, or None without a fold
    rule (``n_folds = 0``)."""
    if not n_folds:
        return None
    return np.array([fold_of(u, n_folds, seed) for u in user_ids], dtype=np.int64)


def profile_nonce() -> str:
    """The nonce of a user's one profile release (fixed, so a resubmit is a duplicate)."""
    return "profile"


def query_nonce(index: int) -> str:
    """The nonce of a user's `index`-th query."""
    return f"query-{index}"


__all__ = [
    "ENROLL_PHASES",
    "PHASES",
    "RELEASE_PHASE",
    "excluded_fold",
    "fold_groups",
    "fold_of",
    "profile_nonce",
    "query_nonce",
]
