"""Request limits and the checks every RPC starts with: size, decoding, unknown fields, ids.

Each request kind has its own byte limit (`Limits`), checked on the raw bytes before anything
is decoded; decoding failures and unknown fields (at any depth) are `ValidationError`s naming
the message, never a Python exception's text; and every value an error message echoes goes
through `short`, so a 1 MiB user id comes back (and is logged) as its first 40 characters and
its length.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, TypeVar

from google.protobuf.message import DecodeError, Message
from google.protobuf.unknown_fields import UnknownFieldSet

from privrec.shared.errors import ResourceExhaustedError, ValidationError

M = TypeVar("M", bound=Message)

MAX_ID_LEN = 128
MAX_SHARD_LEN = 64
ECHO_CHARS = 40


@dataclasses.dataclass(frozen=True)
class Limits:
    """Largest request of each kind, in bytes, and the admission bound.

    Attributes:
        enroll_bytes: an `EnrollRequest` (ids of at most 128 characters fit many times over).
        small_bytes: `GetRunConfig`, `GetModel`, `SetPhase`, `GetStatus` requests.
        query_extra_bytes: a `PredictRequest`/`RecommendRequest` beyond its release (which is
            bounded by the run's `max_release_bytes`): room for 10,000 target items.
        batch_bytes: one `ReleaseBatch` of a SubmitStream (gRPC's own message limit is set a
            little above it, so a larger one never reaches Python).
        max_in_flight: user requests (Enroll, Submit, SubmitStream, Predict, Recommend) the
            server holds at once (working on them or queued for a worker); beyond it a request
            is answered RESOURCE_EXHAUSTED ("busy: ..."), which clients retry with jittered
            backoff. Health checks, reads and the Admin service are never refused for load.
        max_in_flight_bytes: the same bound on the requests' bytes (a request is always
            admitted when nothing else is in flight), so queued batches cannot exhaust memory.
        workers: threads that decode, validate, store and answer (off the event loop).
        batch_streams: SubmitStream batches read and worked on at once. Taking a 16 MiB
            message off the wire costs its event-loop step ~0.1 s on a loaded machine, and
            the work holds the GIL; the next stream's batch waits in gRPC's flow control
            until one is done (docs/decisions/trust.md, "Health under load").
    """

    enroll_bytes: int = 1024
    small_bytes: int = 1024
    query_extra_bytes: int = 64 * 1024
    batch_bytes: int = 16 * 1024 * 1024
    max_in_flight: int = 1024
    max_in_flight_bytes: int = 256 * 1024 * 1024
    workers: int = 4
    batch_streams: int = 1

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"Limits.{f.name} must be an int >= 1, got {value!r}")


def short(value: object, n: int = ECHO_CHARS) -> str:
    """`repr(value)` cut to about `n` characters, with the full length when cut."""
    if isinstance(value, str | bytes) and len(value) > n:
        return f"{value[:n]!r}… ({len(value)} {'chars' if isinstance(value, str) else 'bytes'})"
    text = repr(value)
    return text if len(text) <= n + 10 else text[: n + 10] + "…"


def check_size(raw: bytes, limit: int, name: str) -> None:
    """Refuse a request over `limit` bytes (RESOURCE_EXHAUSTED, not retried)."""
    if len(raw) > limit:
        raise ResourceExhaustedError(f"{name}: {len(raw)} bytes exceeds the limit of {limit}")


def parse(cls: type[M], raw: bytes, name: str) -> M:
    """Decode `raw` as `cls`, refusing undecodable bytes and unknown fields at any depth.

    Raises:
        ValidationError: named after the message (`name`), with no Python internals.
    """
    try:
        msg = cls.FromString(raw)
    except (DecodeError, RecursionError, ValueError):
        raise ValidationError(name, f"cannot be decoded as a {cls.DESCRIPTOR.name}") from None
    where = _unknown(msg, name)
    if where is not None:
        raise ValidationError(where[0], f"unknown field number {where[1]}")
    return msg


def _unknown(msg: Message, path: str) -> tuple[str, int] | None:
    unknown = UnknownFieldSet(msg)
    if len(unknown):
        return path, int(unknown[0].field_number)
    if not _has_message_fields(msg.DESCRIPTOR):
        return None  # a leaf (e.g. a payload vector): no sub-message can hide a field
    for field, value in msg.ListFields():
        if field.message_type is None:
            continue
        children: list[Any] = list(value) if _is_repeated(field) else [value]
        for i, child in enumerate(children):
            sub = f"{path}.{field.name}" + (f"[{i}]" if _is_repeated(field) else "")
            found = _unknown(child, sub)
            if found is not None:
                return found
    return None


@functools.cache
def _has_message_fields(descriptor: Any) -> bool:
    """Whether a message type has any field of message type (asked once per type)."""
    return any(f.message_type is not None for f in descriptor.fields)


def _is_repeated(field: Any) -> bool:
    # FieldDescriptor.label is deprecated in newer protobuf releases; is_repeated replaces it
    rep = getattr(field, "is_repeated", None)
    if rep is not None:
        return bool(rep)
    return bool(field.label == field.LABEL_REPEATED)


def check_id(field: str, value: str, max_len: int = MAX_ID_LEN) -> None:
    """An id: 1..max_len characters, none of them a control character."""
    if not value or len(value) > max_len:
        raise ValidationError(field, f"must be 1..{max_len} characters, got {short(value)}")
    if not value.isprintable():
        raise ValidationError(field, f"must not contain control characters, got {short(value)}")


__all__ = ["MAX_ID_LEN", "MAX_SHARD_LEN", "Limits", "check_id", "check_size", "parse", "short"]
