"""The neighbouring profiles an audit compares: the worst case of each stated relation.

An audit (`shared.privacy.audit`) bounds P[M(D′) ∈ E]/P[M(D) ∈ E] on one pair (D, D′). The
pair must be the worst case of the relation the mechanism states, or the bound says little:

  * "one item added or removed" (BLIP, OUE add-remove, JLT): the empty profile (the added
    item collides with nothing) vs one item — for BLIP an item with K distinct hash positions,
    for JLT the item of largest codeword norm (it attains the sensitivity).
  * "one item replaced by another" (OUE): {j} vs {j′}.
  * "one element … changed" (the Laplace second-order baseline): {j} rated 1 vs rated 5, with
    the mechanism bound to a public model (µ = 3, V = 0) under which the completed vectors
    differ in exactly that element, by the full range.
"""

from __future__ import annotations

import copy
import dataclasses

import numpy as np

from privrec.shared.errors import ConfigError
from privrec.shared.mechanisms import Blip, JohnsonLindenstrauss, SecondOrderMechanism
from privrec.shared.mechanisms.base import Mechanism, Profile

#: Rating scale used to build neighbouring profiles (MovieLens: 1–5).
RATING_LOW, RATING_HIGH = 1.0, 5.0


@dataclasses.dataclass(frozen=True)
class NeighbourPair:
    """Two neighbouring profiles and how they differ.

    Attributes:
        d: the profile in the denominator of the privacy-loss ratio (e.g. without the item).
        d_prime: its neighbour (e.g. with the item).
        description: one line, e.g. "item 0 added (rated 5) to the empty profile".
    """

    d: Profile
    d_prime: Profile
    description: str


def _profile(items: list[int], ratings: list[float], n_items: int) -> Profile:
    return Profile(
        np.asarray(items, dtype=np.int64), np.asarray(ratings, dtype=np.float64), n_items
    )


def _accepts(mechanism: Mechanism, profile: Profile) -> bool:
    try:
        mechanism.release(profile, np.random.default_rng(0))
    except (ValueError, IndexError, ZeroDivisionError, FloatingPointError):
        return False
    return True


def neighbour_pair(mechanism: Mechanism, n_items: int = 100, *, item: int = 0) -> NeighbourPair:
    """The worst-case neighbouring pair for the mechanism's stated relation.

    The relation is read from `mechanism.privacy().neighbouring`:

    * "… replaced by another" (OUE): {item} vs {item + 1 mod m}, both rated 5.
    * "… added or removed" (BLIP, OUE add-remove, JLT): the empty profile (so the added item
      collides with nothing) vs {item} rated 5; a one-item profile {item + 1 mod m} is the
      base if the mechanism rejects an empty one.
    * "rating …", "element …", "… changed/flipped" (PMD, Laplace): {item} rated 1 vs rated 5,
      the whole rating range.

    Args:
        mechanism: the mechanism under audit.
        n_items: the catalogue size m of both profiles.
        item: the item that differs (callers may pick one, e.g. a BLIP item whose K hash
            positions are distinct).

    Raises:
        ConfigError: the relation is not one the audit knows how to instantiate.
    """
    relation = mechanism.privacy().neighbouring.lower()
    if not 0 <= item < n_items or n_items < 2:
        raise ConfigError(
            f"audit: need n_items >= 2 and 0 <= item < n_items, got "
            f"item={item!r}, n_items={n_items!r}"
        )
    other = (item + 1) % n_items
    hi, lo = RATING_HIGH, RATING_LOW
    if "replac" in relation and "item" in relation:
        return NeighbourPair(
            _profile([item], [hi], n_items),
            _profile([other], [hi], n_items),
            f"item {item} replaced by item {other}; m = {n_items}",
        )
    if any(w in relation for w in ("add", "remov", "insert", "delet")):
        base, what = _profile([], [], n_items), "the empty profile"
        if not _accepts(mechanism, base):
            base, what = _profile([other], [hi], n_items), f"{{{other}}}"
        items = sorted([item, *base.items.tolist()])
        return NeighbourPair(
            base,
            _profile(items, [hi] * len(items), n_items),
            f"item {item} (rated {hi:g}) added to {what}; m = {n_items}",
        )
    if any(w in relation for w in ("flip", "chang", "replac", "modif", "rating", "element")):
        return NeighbourPair(
            _profile([item], [lo], n_items),
            _profile([item], [hi], n_items),
            f"item {item} rated {lo:g} vs {hi:g}; m = {n_items}",
        )
    raise ConfigError(
        f"audit: cannot build a neighbouring pair for the relation "
        f"{mechanism.privacy().neighbouring!r} of mechanism {mechanism.name!r}"
    )


def worst_case_item(mechanism: Mechanism, n_items: int) -> int:
    """The item whose addition moves the release most (0 when all items are alike).

    * BLIP: the first item whose K hash positions are distinct (a codeword of weight K; with a
      collision the item touches fewer bits and leaks less than ε).
    * JLT: argmax_j ‖X_j‖₂, the item that attains the codebook's sensitivity.
    """
    if isinstance(mechanism, Blip):
        pos = mechanism.hashes.positions(np.arange(n_items))
        distinct = [j for j in range(n_items) if np.unique(pos[j]).size == mechanism.n_hashes]
        return distinct[0] if distinct else 0
    if isinstance(mechanism, JohnsonLindenstrauss):
        return int(np.argmax(np.linalg.norm(mechanism.codebook(n_items), axis=1)))
    return 0


def audit_setup(mechanism: Mechanism, n_items: int = 100) -> tuple[Mechanism, NeighbourPair]:
    """The mechanism instance to sample and the worst-case pair for its stated relation.

    * JLT with a public `n_items`: the profiles use that catalogue size.
    * Second-order mechanisms (Laplace baseline) not yet bound to a public model: a copy is
      bound to µ = 3 (mid-scale), V = 0 (m × 1). With V = 0 the completion leaves unrated items
      at µ, so "item rated 1 vs 5" changes exactly one element of the completed vector by the
      full range Δ = 4: the worst case of the stated element-level relation. (With a real
      model the completion moves every unrated element and the profile-level loss is up to
      m·ε, which the mechanism flags and does not claim.)
    """
    if isinstance(mechanism, JohnsonLindenstrauss) and mechanism.n_items is not None:
        n_items = mechanism.n_items
    if isinstance(mechanism, SecondOrderMechanism) and not mechanism.is_bound:
        mechanism = copy.copy(mechanism)
        mechanism.bind(np.full(n_items, 0.5 * (RATING_LOW + RATING_HIGH)), np.zeros((n_items, 1)))
    return mechanism, neighbour_pair(mechanism, n_items, item=worst_case_item(mechanism, n_items))


__all__ = [
    "RATING_HIGH",
    "RATING_LOW",
    "NeighbourPair",
    "audit_setup",
    "neighbour_pair",
    "worst_case_item",
]
