"""The interface every client-side release mechanism implements.

A mechanism is constructed with its public parameters (sklearn style) and releases one user's
profile with a generator passed in. The server never sees a `Profile`; it sees a `Payload`,
carried on the wire in the `Release.payload` oneof field named by `Mechanism.payload_field`.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import numpy as np

from privrec.shared.accounting import dp
from privrec.shared.capabilities import ReleaseKind
from privrec.shared.errors import ValidationError
from privrec.shared.types import BoolArray, FloatArray, IntArray

PrivacyKind = Literal["pure", "approximate", "element-wise", "none"]


@dataclasses.dataclass(frozen=True, slots=True)
class Profile:
    """One user's true data, which never leaves her client.

    Attributes:
        items: int64 array of shape (g,), strictly increasing item indices she rated.
        ratings: float64 array of shape (g,), her ratings of `items`.
        n_items: m, the number of items in the catalogue.
    """

    items: IntArray
    ratings: FloatArray
    n_items: int


# ------------------------------------------------------------------ payload shapes (wire-neutral)
@dataclasses.dataclass(frozen=True)
class SparsePayload:
    """Values at a subset of `dim` coordinates; the rest are empty (proto `SparseVector`)."""

    dim: int
    indices: IntArray
    values: FloatArray


@dataclasses.dataclass(frozen=True)
class DensePayload:
    """A dense real vector (proto `DenseVector`)."""

    values: FloatArray


@dataclasses.dataclass(frozen=True)
class BitPayload:
    """A bit vector (proto `BitVector`, packed on the wire)."""

    bits: BoolArray


Payload = SparsePayload | DensePayload | BitPayload


@dataclasses.dataclass(frozen=True)
class PrivacyStatement:
    """What a mechanism guarantees, stated honestly.

    Attributes:
        kind: "pure" (ε-DP), "approximate" ((ε, δ)-DP), "element-wise" (Xin & Jaakkola's
            first-order deniability), or "none" (no formal guarantee, e.g. RPT).
        epsilon: ε of one release, or None when `kind` is "none".
        delta: δ of one release (0 for pure ε-DP), or None when `kind` is "none".
        neighbouring: the neighbouring relation, e.g. "one item added or removed".
        notes: free text: assumptions, caveats, citations.
        flags: machine-readable warnings, e.g. ("kkmm12-conditions-violated",).
    """

    kind: PrivacyKind
    epsilon: float | None
    delta: float | None
    neighbouring: str
    notes: str = ""
    flags: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The statement as a plain dict (flags as a list)."""
        return dataclasses.asdict(self) | {"flags": list(self.flags)}


class Mechanism(abc.ABC):
    """A local perturbation run by each user on her own data.

    Subclasses set `name` (the config value), `payload_field` (the `Release.payload` oneof
    field) and `releases` (what their releases are), take their public parameters in
    `__init__` (validated there), and implement `release` (one user). `release_many` must give
    the same numbers as calling `release` with the same generators; subclasses override it
    when they can vectorise.
    """

    name: ClassVar[str]
    payload_field: ClassVar[str]
    releases: ClassVar[ReleaseKind]
    """What a release is: its wire shape and the scale of its values (what a model must read
    them as; `sim.compatibility` refuses a model that reads another scale)."""
    binds_public_model: ClassVar[bool] = False
    """Whether users bind the mechanism to a published public model before they release
    (the second-order mechanisms of Xin & Jaakkola); only a two-tier model publishes one."""

    @abc.abstractmethod
    def public_params(self) -> dict[str, Any]:
        """The public parameters as a JSON-able dict (published through `GetRunConfig`)."""

    @abc.abstractmethod
    def release(self, profile: Profile, rng: np.random.Generator) -> Payload:
        """Perturb one user's profile."""

    def release_many(
        self, profiles: Sequence[Profile], rngs: Sequence[np.random.Generator]
    ) -> list[Payload]:
        """Perturb many users; element i uses `rngs[i]` exactly as `release` would."""
        if len(profiles) != len(rngs):
            raise ValueError(f"got {len(profiles)} profiles but {len(rngs)} generators")
        if not profiles:
            return []
        return self._release_many(profiles, rngs)

    def _release_many(
        self, profiles: Sequence[Profile], rngs: Sequence[np.random.Generator]
    ) -> list[Payload]:
        """`release_many` once checked (as many generators as profiles, at least one): one
        `release` after another; a mechanism that vectorises it overrides this."""
        return [self.release(p, r) for p, r in zip(profiles, rngs, strict=True)]

    @abc.abstractmethod
    def privacy(self) -> PrivacyStatement:
        """The guarantee of one release."""

    @abc.abstractmethod
    def event(self) -> dp.DpEvent:
        """The dp-accounting event of one release (`NonPrivateDpEvent` when there is none)."""

    def estimate(self, payload: Payload, n_items: int) -> FloatArray:
        """The server's estimate of the user's clean encoding from one release, as a dense
        vector; similarity models (`server.models.sketch_knn`) compare these.

        The default is the payload itself, densified (empty cells 0). Mechanisms whose release
        is a biased encoding override it with the de-biased one.
        """
        if isinstance(payload, SparsePayload):
            dense = np.zeros(n_items)
            dense[payload.indices] = payload.values
            return dense
        if isinstance(payload, BitPayload):
            return payload.bits.astype(np.float64)
        return np.asarray(payload.values, dtype=np.float64)

    def estimate_many(self, payloads: Sequence[Payload], n_items: int) -> FloatArray:
        """`estimate` of each payload, one row each, shape (len(payloads), n_items): the same
        numbers as stacking `estimate`'s rows. Mechanisms whose estimate is elementwise
        arithmetic on a fixed-size payload override it to do that arithmetic once on the
        stacked payloads (OUE: a million releases at train time)."""
        if not payloads:
            return np.zeros((0, n_items))
        return np.stack([self.estimate(p, n_items) for p in payloads])

    def validate(self, payload: Payload, n_items: int) -> None:
        """Server-side check of a received payload beyond its wire shape.

        Raises:
            ValidationError: naming the offending field.
        """
        del payload, n_items

    def value_bound(self, n_items: int) -> float:
        """The largest |value| an honest release can carry (a bit release has none to check).

        The default, `MAX_RELEASE_VALUE`, only keeps every sum and square the server forms
        finite; a mechanism whose public parameters bound its releases says so (RPT by σ_max,
        Bilge Procedure 1). A bound over a noise without bounded support stops at a tail no
        honest release reaches (`GAUSSIAN_TAIL_SIGMAS`, `LAPLACE_TAIL_SCALES`).
        """
        del n_items
        return MAX_RELEASE_VALUE

    def check_values(self, payload: Payload, n_items: int) -> None:
        """Refuse a release with a |value| above `value_bound` (one vectorised pass).

        Raises:
            ValidationError: naming ``<payload field>.values``, the bound and the value.
        """
        if isinstance(payload, BitPayload) or not len(payload.values):
            return
        v, bound = payload.values, self.value_bound(n_items)
        if v.max() <= bound and v.min() >= -bound:  # two reductions, no temporary array
            return
        self.check_largest(float(np.max(np.abs(v))), n_items)

    def check_largest(self, largest: float, n_items: int) -> None:
        """`check_values` of a release whose largest |value| is known (the server's batch
        decoder finds it for a whole batch at once; `server.release_view`).

        Raises:
            ValidationError: naming ``<payload field>.values``, the bound and the value.
        """
        bound = self.value_bound(n_items)
        if not largest <= bound:
            raise ValidationError(
                f"{self.payload_field}.values",
                f"|value| must be at most {bound:.6g} for {self.name} with these public "
                f"parameters, got {largest:.6g}",
            )


MAX_RELEASE_VALUE = 1e6
"""The largest |value| of a real-valued release of any mechanism: far above every honest
release, and low enough that the server's sums and squares stay finite (a sybil profile of
finite 1e308 values made honest users' predictions non-finite; issue 27)."""
GAUSSIAN_TAIL_SIGMAS = 12.0
"""A Gaussian noise value beyond 12 σ: P(|N(0, 1)| > 12) = 3.6e-33 per value."""
LAPLACE_TAIL_SCALES = 80.0
"""A Laplace noise value beyond 80 b: P(|Lap(0, 1)| > 80) = e^-80 = 1.8e-35 per value."""


def require_payload(payload: Payload, kind: type, field: str) -> None:
    """Raise ValidationError unless `payload` has the wire shape `kind`."""
    if not isinstance(payload, kind):
        raise ValidationError(field, f"expected a {kind.__name__}, got {type(payload).__name__}")


def _require_length(v: np.ndarray, key: str, size: int, wanted: str) -> None:
    if v.ndim != 1 or v.shape[0] != size:
        raise ValidationError(key, f"{wanted}, got {v.shape[0] if v.ndim == 1 else v.shape}")


def require_bits(payload: Payload, field: str, n_bits: int, expected: str) -> None:
    """Refuse a payload that is not `n_bits` boolean bits (`expected` names the length)."""
    require_payload(payload, BitPayload, field)
    assert isinstance(payload, BitPayload)
    bits = np.asarray(payload.bits)
    _require_length(bits, f"{field}.n_bits", n_bits, f"must equal {expected}")
    if bits.dtype != np.bool_:
        raise ValidationError(f"{field}.packed", f"bits must be boolean, got dtype {bits.dtype}")


def require_dense(payload: Payload, field: str, size: int, expected: str) -> FloatArray:
    """The values of a `DensePayload` of `size` finite values (`expected` names the length)."""
    require_payload(payload, DensePayload, field)
    assert isinstance(payload, DensePayload)
    v = np.asarray(payload.values)
    _require_length(v, f"{field}.values", size, f"must hold {expected} values")
    if not np.all(np.isfinite(v)):
        raise ValidationError(f"{field}.values", "must be finite")
    return v


def require_sparse(payload: Payload, field: str, n_items: int, empty: str) -> SparsePayload:
    """`payload` as a non-empty `SparsePayload` over the run's `n_items`; `empty` is the refusal
    of an empty one."""
    require_payload(payload, SparsePayload, field)
    assert isinstance(payload, SparsePayload)
    if payload.indices.size == 0:
        raise ValidationError(f"{field}.indices", empty)
    if payload.dim != n_items:
        raise ValidationError(
            f"{field}.dim", f"must equal the run's n_items {n_items}, got {payload.dim}"
        )
    return payload


__all__ = [
    "BitPayload",
    "DensePayload",
    "Mechanism",
    "Payload",
    "PrivacyKind",
    "PrivacyStatement",
    "Profile",
    "SparsePayload",
    "require_bits",
    "require_dense",
    "require_payload",
    "require_sparse",
]
