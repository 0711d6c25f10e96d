"""Paired converters between payload dataclasses and their proto messages.

`payload_to_proto` / `payload_from_proto` are exact inverses (float64 values travel as proto
`double`, so a release is bit-identical on both sides). `payload_from_proto` also checks the wire
shape (lengths, index order and range, finiteness, bit padding) and raises `ValidationError`
naming the field; mechanism-specific checks live in `Mechanism.validate`.
"""

from __future__ import annotations

import numpy as np
from privrec.shared.errors import ValidationError
from privrec.shared.mechanisms.base import BitPayload, DensePayload, Payload, SparsePayload
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb

SPARSE_FIELDS = frozenset({"rpt", "rrt", "public_ratings"})
DENSE_FIELDS = frozenset({"jlt", "pmd", "pmc", "laplace_second_order", "exact_second_order"})
BIT_FIELDS = frozenset({"blip", "oue"})
PAYLOAD_FIELDS = SPARSE_FIELDS | DENSE_FIELDS | BIT_FIELDS


def payload_to_proto(field: str, payload: Payload, release: pb.Release) -> None:
    """Write `payload` into `release.<field>` (the oneof)."""
    if field not in PAYLOAD_FIELDS:
        raise ValueError(f"unknown payload field {field!r}")
    msg = getattr(release, field)
    if isinstance(payload, SparsePayload):
        msg.dim = payload.dim
        msg.indices[:] = payload.indices.tolist()
        msg.values[:] = payload.values.tolist()
    elif isinstance(payload, DensePayload):
        msg.values[:] = payload.values.tolist()
    else:
        msg.n_bits = payload.bits.size
        msg.packed = np.packbits(payload.bits.astype(np.uint8)).tobytes()


def payload_from_proto(release: pb.Release) -> tuple[str, Payload]:
    """Read the oneof payload of `release`, checking its wire shape.

    Raises:
        ValidationError: no payload, or a malformed one (naming the field).
    """
    field = release.WhichOneof("payload")
    if field is None:
        raise ValidationError("payload", "a release must carry a payload")
    msg = getattr(release, field)
    if field in SPARSE_FIELDS:
        indices = np.array(msg.indices, dtype=np.int64)  # np.array is ~6x faster than fromiter
        values = np.array(msg.values, dtype=np.float64)
        if indices.size != values.size:
            raise ValidationError(
                f"{field}.values", f"has {values.size} values for {indices.size} indices"
            )
        if indices.size and (
            indices[-1] >= msg.dim or indices[0] < 0 or not (indices[1:] > indices[:-1]).all()
        ):
            raise ValidationError(
                f"{field}.indices", f"must be strictly increasing and < dim {msg.dim}"
            )
        if not np.isfinite(values).all():
            raise ValidationError(f"{field}.values", "must be finite")
        return field, SparsePayload(int(msg.dim), indices, values)
    if field in DENSE_FIELDS:
        values = np.array(msg.values, dtype=np.float64)
        if not np.isfinite(values).all():
            raise ValidationError(f"{field}.values", "must be finite")
        return field, DensePayload(values)
    n_bits, packed = int(msg.n_bits), msg.packed
    if len(packed) != (n_bits + 7) // 8:
        raise ValidationError(
            f"{field}.packed", f"must hold ceil({n_bits}/8) bytes, got {len(packed)}"
        )
    bits = np.unpackbits(np.frombuffer(packed, dtype=np.uint8))
    if bits[n_bits:].any():
        raise ValidationError(f"{field}.packed", "padding bits must be 0")
    return field, BitPayload(bits[:n_bits].astype(bool))


__all__ = [
    "BIT_FIELDS",
    "DENSE_FIELDS",
    "PAYLOAD_FIELDS",
    "SPARSE_FIELDS",
    "payload_from_proto",
    "payload_to_proto",
]
