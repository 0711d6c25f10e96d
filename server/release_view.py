"""A batch of releases decoded at once: the profile path's fast lane (issue 28, ingest).

`parse` + `payload_from_proto` cost ≈ 25 µs per ML-100K-sized RPT release, most of it turning
upb's repeated containers into numpy arrays one release at a time. Here every release of a
batch is parsed as a *wire view* of `Release`: the same message with each packed numeric field
of a payload (`SparseVector.indices`, `.values`, `DenseVector.values`) read as ``repeated
bytes``, which is the same wire type (LEN), so upb hands over the packed bytes untouched. The
doubles of the whole batch become one array with one `np.frombuffer`, the varint indices are
decoded by one vectorised pass, and `payload_from_proto`'s wire-shape checks (counts, order,
range, finiteness) run once over the batch.

The view is derived from `Release`'s descriptor (no second copy of the schema). It is exact only
for the canonical encoding (each payload field packed in one piece, no unknown field): any other
release — unpacked or split repeated fields, an unknown field, a bit payload, a bad shape, bytes
upb cannot decode — gets no view (None), and the caller checks it with the full parse, which
gives the same result or the same error (a release the view accepts is decoded to exactly what
`parse` + `payload_from_proto` give; tests/unit/server/test_release_view.py checks both ways).
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple, Protocol

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError, Message
from google.protobuf.unknown_fields import UnknownFieldSet

from privrec.shared.mechanisms.base import DensePayload, Payload, SparsePayload
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.serde import DENSE_FIELDS, SPARSE_FIELDS

_VIEW_PACKAGE = "privrec.v1.wireview"
_PACKED = frozenset({"SparseVector.indices", "SparseVector.values", "DenseVector.values"})
_MAX_VARINT_BYTES = 5  # a uint32; a longer varint (legal but never canonical) takes the full parse
MIN_BATCH = 32
"""Fewer releases than this take the full parse: the vectorised pass costs ≈ 100 µs whatever
the batch's size (a unary `Submit` through it cost 250 µs instead of 148)."""
BLOCK = 128
"""Releases decoded together at most (a batch is cut into blocks of equal size). The arrays of
a block stay small enough (≈ 0.5 MB for ML-100K-sized releases) to be reused by the allocator;
a 512-release batch at once spent more time in page faults of fresh allocations than in the
decoding (measured: 20 vs 14 µs per release)."""


def _view_class() -> type[Message]:
    """`Release` with the packed payload fields read as ``repeated bytes`` (same wire type)."""
    source = descriptor_pb2.FileDescriptorProto()
    pb.DESCRIPTOR.CopyToProto(source)
    view = descriptor_pb2.FileDescriptorProto(
        name="privrec/v1/release_wire_view.proto", package=_VIEW_PACKAGE, syntax=source.syntax
    )
    view.enum_type.extend(source.enum_type)
    view.message_type.extend(source.message_type)
    field_type = descriptor_pb2.FieldDescriptorProto
    for message in view.message_type:
        for field in message.field:
            if f"{message.name}.{field.name}" in _PACKED:
                field.type = field_type.TYPE_BYTES
                field.ClearField("options")
            if field.HasField("type_name"):
                field.type_name = field.type_name.replace(".privrec.v1.", f".{_VIEW_PACKAGE}.")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(view)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_VIEW_PACKAGE}.Release"))


_VIEW = _view_class()


class Envelope(Protocol):
    """The fields of a release around its payload, of a parsed `pb.Release` or a view."""

    @property
    def run_id(self) -> str:
        """The run the release is for."""

    @property
    def user_id(self) -> str:
        """The releasing user."""

    @property
    def token(self) -> str:
        """Retired (must be empty): a release carries no secret."""

    @property
    def nonce(self) -> str:
        """The idempotency key: (user_id, nonce) is stored at most once."""

    @property
    def purpose(self) -> pb.Purpose.ValueType:
        """`PURPOSE_PROFILE` or `PURPOSE_QUERY`."""


class ReleaseView(NamedTuple):
    """A release decoded by the fast lane: what `Submissions` checks, as `parse` reads it (a
    named tuple: built once per release, it costs a third of a frozen dataclass)."""

    run_id: str
    user_id: str
    token: str
    nonce: str
    purpose: pb.Purpose.ValueType
    field: str
    payload: Payload
    largest: float
    """The largest |value| of the payload (0 when it has none): `Mechanism.check_largest`."""


@dataclasses.dataclass
class _Pending:
    """Releases whose envelope decoded, their payloads still in bytes."""

    index: list[int] = dataclasses.field(default_factory=list)
    messages: list[Any] = dataclasses.field(default_factory=list)
    fields: list[str] = dataclasses.field(default_factory=list)
    dims: list[int] = dataclasses.field(default_factory=list)
    indices: list[bytes] = dataclasses.field(default_factory=list)  # b"" for a dense payload
    values: list[bytes] = dataclasses.field(default_factory=list)


def read_views(raws: list[bytes]) -> list[ReleaseView | None]:
    """Decode a batch of serialized releases; None where the full parse must decide.

    Args:
        raws: each release's bytes.

    Returns:
        per release, its view, or None (a batch under `MIN_BATCH`; not canonical, not a sparse
        or dense payload, or a payload `payload_from_proto` would refuse).
    """
    views: list[ReleaseView | None] = [None] * len(raws)
    if len(raws) < MIN_BATCH:
        return views
    size = -(-len(raws) // -(-len(raws) // BLOCK))  # equal blocks of at most BLOCK
    for start in range(0, len(raws), size):
        pending = _Pending()
        for i, raw in enumerate(raws[start : start + size], start):
            _read_envelope(i, raw, pending)
        if not pending.index:
            continue
        payloads, largest = _payloads(pending)
        for i, msg, field, payload, top in zip(
            pending.index, pending.messages, pending.fields, payloads, largest, strict=True
        ):
            if payload is not None:
                views[i] = ReleaseView(
                    msg.run_id, msg.user_id, msg.token, msg.nonce, msg.purpose, field, payload, top
                )
    return views


def _read_envelope(i: int, raw: bytes, pending: _Pending) -> None:
    """Parse one release's view; queue it if its encoding is canonical."""
    try:
        msg = _VIEW.FromString(raw)
    except (DecodeError, RecursionError, ValueError):
        return
    field = msg.WhichOneof("payload")
    if field is None:
        return
    sparse = field in SPARSE_FIELDS
    if not sparse and field not in DENSE_FIELDS:
        return
    sub = getattr(msg, field)
    packed = sub.values
    if len(UnknownFieldSet(msg)) or len(UnknownFieldSet(sub)) or len(packed) > 1:
        return
    values = packed[0] if packed else b""
    if len(values) % 8:
        return
    indices = b""
    if sparse:
        if len(sub.indices) > 1:
            return
        indices = sub.indices[0] if sub.indices else b""
        if indices and indices[-1] & 0x80:  # the last varint runs past the field
            return
    pending.index.append(i)
    pending.messages.append(msg)
    pending.fields.append(field)
    pending.dims.append(int(sub.dim) if sparse else -1)
    pending.indices.append(indices)
    pending.values.append(values)


def _payloads(pending: _Pending) -> tuple[list[Payload | None], list[float]]:
    """Every queued release's payload, decoded and checked as `payload_from_proto` does
    (values finite; a sparse payload's indices as many as its values, strictly increasing,
    below `dim`), over the whole batch at once; None where a check fails. Also each release's
    largest |value| (the mechanism's bound is checked on it; one reduction for the batch)."""
    n = len(pending.index)
    values = np.frombuffer(b"".join(pending.values), dtype="<f8").astype(np.float64, copy=False)
    value_counts = np.fromiter((len(v) // 8 for v in pending.values), np.int64, n)
    indices, index_counts, too_long = _varints(pending.indices)
    value_start = np.concatenate(([0], np.cumsum(value_counts)))
    index_start = np.concatenate(([0], np.cumsum(index_counts)))
    dims = np.array(pending.dims, dtype=np.int64)
    nonempty = index_counts > 0
    last = np.zeros(n, dtype=np.int64)  # a sparse payload's last index: its largest if in order
    last[nonempty] = indices[index_start[1:][nonempty] - 1]
    bad = (dims >= 0) & (index_counts != value_counts) | nonempty & (last >= dims)
    later = np.flatnonzero(indices[1:] <= indices[:-1]) + 1  # an index not above the one before
    owners = _owners(later, index_start)
    bad[owners[index_start[owners] != later]] = True  # ... unless it is its release's first
    bad[_owners(too_long, index_start)] = True
    bad[_owners(np.flatnonzero(~np.isfinite(values)), value_start)] = True
    largest = np.zeros(n)
    has_values = value_counts > 0
    if values.size:
        largest[has_values] = np.maximum.reduceat(np.abs(values), value_start[:-1][has_values])
    out: list[Payload | None] = []
    v0, i0 = value_start.tolist(), index_start.tolist()
    for r, (refused, dim) in enumerate(zip(bad.tolist(), pending.dims, strict=True)):
        if refused:
            out.append(None)
        elif dim >= 0:
            out.append(SparsePayload(dim, indices[i0[r] : i0[r + 1]], values[v0[r] : v0[r + 1]]))
        else:
            out.append(DensePayload(values[v0[r] : v0[r + 1]]))
    return out, largest.tolist()


def _owners(positions: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The release holding each position of a flat array (`starts`: each release's first
    position, then the end)."""
    return np.searchsorted(starts, positions, side="right") - 1


def _varints(chunks: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Decode packed uint32 varints, each chunk ending on a varint's last byte.

    Returns:
        (the values as int64, how many each chunk holds, the positions of the values longer
        than a uint32's 5 bytes: the full parse decides those).
    """
    buf = np.frombuffer(b"".join(chunks), dtype=np.uint8)
    ends = np.flatnonzero(buf < 0x80)  # each varint's last byte
    bounds = np.cumsum(np.fromiter((len(c) for c in chunks), np.int64, len(chunks)))
    counts = np.diff(np.searchsorted(ends, bounds), prepend=0)
    # the byte before each last byte (before the first: the buffer's last byte, a last byte)
    before = (buf[ends - 1] if len(ends) else buf[:0]).astype(np.uint16)
    two = before >= 0x80
    if len(buf) - len(ends) == np.count_nonzero(two):  # every varint in 1 or 2 bytes: the rule
        last = buf[ends].astype(np.uint16)  # (every item index below 16,384): its high 7 bits
        return np.where(two, last << 7 | (before & 0x7F), last).astype(np.int64), counts, ends[:0]
    values, too_long = _long_varints(buf, ends)
    return values, counts, too_long


def _long_varints(buf: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`_varints` of any length (`ends`: each varint's last byte in `buf`): the values, and the
    positions of those longer than 5 bytes."""
    starts = np.empty_like(ends)
    starts[:1], starts[1:] = 0, ends[:-1] + 1
    lengths = ends - starts + 1
    values = buf[ends].astype(np.int64)
    for k in range(min(int(lengths.max(initial=0)), _MAX_VARINT_BYTES) - 2, -1, -1):
        low = buf[np.minimum(starts + k, ends)] & 0x7F  # byte k of each varint (7 bits each)
        values = np.where(lengths > k + 1, (values << 7) | low, values)
    # (a 5-byte value >= 2^32 is >= dim: refused)
    return values, np.flatnonzero(lengths > _MAX_VARINT_BYTES)


__all__ = ["Envelope", "ReleaseView", "read_views"]
