"""Reading a `ReleaseBatch` without re-encoding its releases.

The transcript keeps each release exactly as it arrived. A `ReleaseBatch` is `repeated Release
releases = 1`, i.e. a sequence of (tag 0x0A, varint length, bytes) records; splitting on that
gives every release's original bytes, with no parse/re-serialise round trip.
"""

from __future__ import annotations

import dataclasses

from privrec.shared.errors import ValidationError

_TAG_RELEASES = (1 << 3) | 2  # field 1, wire type LEN
_TAG_AUTH = (2 << 3) | 2  # field 2 (the node's signature), wire type LEN


@dataclasses.dataclass(frozen=True)
class BatchParts:
    """A `ReleaseBatch` read from its bytes.

    Attributes:
        releases: each release's original bytes.
        body: the batch's bytes without its `auth` field (what the node signed).
        auth: the serialized `NodeAuth`, or None when the batch carries none.
    """

    releases: list[bytes]
    body: bytes
    auth: bytes | None


def read_release_batch(raw: bytes, name: str = "ReleaseBatch") -> BatchParts:
    """Split a signed `ReleaseBatch` (field 1: releases, field 2: at most one `auth`); an
    `EnrollRequestBatch` has the same shape (field 1: requests), read with its `name`.

    Raises:
        ValidationError: any other field, a second `auth`, truncation or a bad varint.
    """
    releases: list[bytes] = []
    auth: bytes | None = None
    auth_span = (0, 0)
    view = memoryview(raw)
    pos, end = 0, len(raw)
    while pos < end:
        start = pos
        tag, pos = _varint(view, pos, end)
        if tag not in (_TAG_RELEASES, _TAG_AUTH):
            raise ValidationError(
                name, f"unknown field (tag {tag}) at byte {start}; fields: releases, auth"
            )
        length, pos = _varint(view, pos, end)
        if pos + length > end:
            raise ValidationError(name, "truncated release")
        if tag == _TAG_AUTH:
            if auth is not None:
                raise ValidationError(f"{name}.auth", "given twice")
            auth = raw[pos : pos + length]
            auth_span = (start, pos + length)
        else:
            releases.append(raw[pos : pos + length])
        pos += length
    body = raw[: auth_span[0]] + raw[auth_span[1] :] if auth is not None else raw
    return BatchParts(releases, body, auth)


def split_release_batch(raw: bytes) -> list[bytes]:
    """The raw bytes of each release in a serialized `ReleaseBatch`.

    Raises:
        ValidationError: the bytes are not a well-formed ReleaseBatch.
    """
    out: list[bytes] = []
    view = memoryview(raw)
    pos, end = 0, len(raw)
    while pos < end:
        tag, pos = _varint(view, pos, end)
        if tag != _TAG_RELEASES:
            raise ValidationError("ReleaseBatch", f"unexpected field tag {tag} at byte {pos}")
        length, pos = _varint(view, pos, end)
        if pos + length > end:
            raise ValidationError("ReleaseBatch", "truncated release")
        out.append(bytes(view[pos : pos + length]))
        pos += length
    return out


def _varint(view: memoryview, pos: int, end: int) -> tuple[int, int]:
    result, shift = 0, 0
    while pos < end and shift < 64:
        b = view[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
    raise ValidationError("ReleaseBatch", "malformed varint")


__all__ = ["BatchParts", "read_release_batch", "split_release_batch"]
