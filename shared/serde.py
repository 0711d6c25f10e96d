"""Paired converters between payload dataclasses and their proto messages.

`payload_to_proto` / `payload_from_proto` are exact inverses (float64 values travel as proto
`double`, so a release is bit-identical on both sides). `payload_from_proto` also checks the wire
shape (lengths, index order and range, finiteness, bit padding) and raises `ValidationError`
naming the field; mechanism-specific checks live in `Mechanism.validate`.
"""

from __future__ import annotations

import dataclasses
import io
import json
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO, Self

import numpy as np

from privrec.shared.errors import DataError, ValidationError
from privrec.shared.files import private_writer
from privrec.shared.mechanisms.base import BitPayload, DensePayload, Payload, SparsePayload
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb

_PAYLOAD_BY_MESSAGE: dict[str, type[Payload]] = {
    "SparseVector": SparsePayload,
    "DenseVector": DensePayload,
    "BitVector": BitPayload,
}


def _payload_kinds() -> dict[str, type[Payload]]:
    """The payload dataclass of every `Release.payload` field, read from the proto descriptor.

    The proto is where a field's kind is declared (`SparseVector rpt = 10;`); a new payload field
    needs no second list here. A field of a message type without a dataclass fails at import.
    """
    kinds: dict[str, type[Payload]] = {}
    for field in pb.Release.DESCRIPTOR.oneofs_by_name["payload"].fields:
        message = field.message_type
        if message is None:  # a scalar in the oneof: not a payload
            raise TypeError(f"Release.payload.{field.name} is not a message")
        kinds[field.name] = _PAYLOAD_BY_MESSAGE[message.name]
    return kinds


PAYLOAD_KINDS = _payload_kinds()
SPARSE_FIELDS = frozenset(f for f, kind in PAYLOAD_KINDS.items() if kind is SparsePayload)
DENSE_FIELDS = frozenset(f for f, kind in PAYLOAD_KINDS.items() if kind is DensePayload)
BIT_FIELDS = frozenset(f for f, kind in PAYLOAD_KINDS.items() if kind is BitPayload)
PAYLOAD_FIELDS = frozenset(PAYLOAD_KINDS)


def payload_to_proto(field: str, payload: Payload, release: pb.Release) -> None:
    """Write `payload` into `release.<field>` (the oneof).

    Args:
        field: a `Release.payload` field name (`PAYLOAD_FIELDS`).
        payload: a payload of the field's kind (`PAYLOAD_KINDS[field]`).
        release: the message to fill.

    Raises:
        ValueError: an unknown field, or a payload of another kind.
    """
    kind = PAYLOAD_KINDS.get(field)
    if kind is None:
        raise ValueError(f"unknown payload field {field!r}")
    if not isinstance(payload, kind):
        raise ValueError(
            f"payload field {field!r} takes a {kind.__name__}, got {type(payload).__name__}"
        )
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


def release_payload(raw: bytes) -> Payload:
    """The payload of a stored `Release` (its bytes as recorded), checked as by
    `payload_from_proto`."""
    return payload_from_proto(pb.Release.FromString(raw))[1]


class StoredReleases(Mapping[str, Payload]):
    """user id → the payload of her stored `Release` bytes, decoded on each access: a million
    users' releases stay a million small byte strings (≈0.2 kB each for OUE) instead of
    decoded arrays and objects (≈1.2 kB), and a caller that walks them block by block holds
    one block decoded at a time.

    Args:
        raws: user id → the `Release` bytes, in the order iteration should follow.
    """

    def __init__(self, raws: Mapping[str, bytes]) -> None:
        self._raws = raws

    def __getitem__(self, user_id: str) -> Payload:
        return release_payload(self._raws[user_id])

    def __contains__(self, user_id: object) -> bool:
        return user_id in self._raws

    def __iter__(self) -> Iterator[str]:
        return iter(self._raws)

    def __len__(self) -> int:
        return len(self._raws)


# ------------------------------------------------------------------ .npz archives
def write_npz(
    target: str | Path | BinaryIO, arrays: Mapping[str, Any], *, private: bool = False
) -> None:
    """Named arrays as one .npz archive; to a path atomically (a temporary file renamed into
    place, so no reader ever sees half an archive under the real name). `private`: the file
    is created 0600 (per-user data: `shared.files`)."""
    named: dict[str, Any] = dict(arrays)
    if isinstance(target, str | Path):
        path = Path(target)
        if private:
            with private_writer(path) as f:
                np.savez(f, **named)
            return
        tmp = path.with_name(path.name + ".tmp")
        with tmp.open("wb") as f:
            np.savez(f, **named)
        tmp.replace(path)
    else:
        np.savez(target, **named)


def read_npz(path: str | Path, what: str = "archive") -> dict[str, np.ndarray]:
    """Every array of a .npz file, read whole (no object arrays).

    Args:
        path: the file.
        what: what the file is, for the message (e.g. "prediction file").

    Raises:
        DataError: the file is missing, unreadable, cut short or not a .npz archive (one line
            naming it; what numpy and zipfile raise is no message for a user).
    """
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise DataError(f"{what} {path} cannot be read ({reason}): damaged or cut short") from None


# ------------------------------------------------------------------ the published model
_META = ("name", "params", "stage", "round", "binding", "n_profiles", "user_ids")


@dataclasses.dataclass(frozen=True)
class PublishedModel:
    """What `GetModel` carries: the run's model metadata and the arrays the model publishes.

    On the wire it is one flat `.npz` archive (the metadata under the names of `_META`, each
    published array under its own name), which anyone may open with `numpy.load`.

    Attributes:
        name: the model's registry name.
        params: its hyper-parameters.
        stage: "public" (a two-tier run's public model), "round" (a collect round's model) or
            "final" (after training).
        round: the collect round the arrays belong to.
        binding: what a second-order mechanism binds to besides (µ, V) (e.g. PMC's shared h).
        user_ids: the users the model was fitted on, in row order (graph rows refer to them).
        arrays: the model's published arrays (`Model.public_arrays`).
    """

    name: str
    params: Mapping[str, Any]
    stage: str
    round: int
    binding: Mapping[str, float]
    user_ids: tuple[str, ...]
    arrays: Mapping[str, np.ndarray]

    def to_bytes(self) -> bytes:
        """The archive as one flat `.npz` (the metadata under `_META`'s names, then the arrays).

        Raises:
            ValueError: an array is named like a metadata entry.
        """
        clash = set(self.arrays) & set(_META)
        if clash:
            raise ValueError(f"published arrays may not be named {sorted(clash)}")
        buf = io.BytesIO()
        meta = {
            "name": np.array(self.name),
            "params": np.array(json.dumps(dict(self.params), sort_keys=True)),
            "stage": np.array(self.stage),
            "round": np.array(self.round),
            "binding": np.array(json.dumps(dict(self.binding), sort_keys=True)),
            "n_profiles": np.array(len(self.user_ids)),
            "user_ids": np.array(self.user_ids, dtype=str),
        }
        write_npz(buf, meta | dict(self.arrays))
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, raw: bytes) -> Self:
        """Inverse of `to_bytes`.

        Raises:
            ValidationError: not a published-model archive.
        """
        try:
            with np.load(io.BytesIO(raw)) as z:
                files = {k: z[k] for k in z.files}
            return cls(
                name=str(files["name"]),
                params=json.loads(str(files["params"])),
                stage=str(files["stage"]),
                round=int(files["round"]),
                binding={k: float(v) for k, v in json.loads(str(files["binding"])).items()},
                user_ids=tuple(str(u) for u in files["user_ids"]),
                arrays={k: v for k, v in files.items() if k not in _META},
            )
        except (OSError, ValueError, KeyError) as exc:
            raise ValidationError("model", f"not a published model archive: {exc}") from exc


__all__ = [
    "BIT_FIELDS",
    "DENSE_FIELDS",
    "PAYLOAD_FIELDS",
    "PAYLOAD_KINDS",
    "SPARSE_FIELDS",
    "PublishedModel",
    "StoredReleases",
    "payload_from_proto",
    "payload_to_proto",
    "read_npz",
    "release_payload",
    "write_npz",
]
