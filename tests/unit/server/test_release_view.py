"""The batch decoder of profile releases (server.release_view) against the full parse.

The property: a release the fast lane reads is read exactly as `parse` + `payload_from_proto`
read it (same envelope, same payload, bit for bit), and every release either of them would
refuse, or that the fast lane cannot read exactly, gets no view (the full parse decides).
"""

from __future__ import annotations

import struct

import numpy as np
import pytest

from privrec.server import release_view
from privrec.server.release_view import MIN_BATCH, read_views
from privrec.server.validation import parse
from privrec.shared.errors import ValidationError
from privrec.shared.mechanisms.base import DensePayload, Payload, SparsePayload
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.serde import payload_from_proto, payload_to_proto


def _release(field: str, payload: Payload, user: str = "u1") -> pb.Release:
    rel = pb.Release(run_id="r", user_id=user, nonce="profile", purpose=pb.PURPOSE_PROFILE)
    payload_to_proto(field, payload, rel)
    return rel


def _full(raw: bytes) -> tuple[pb.Release, str, Payload] | None:
    """What the full parse reads, or None if it refuses the bytes."""
    try:
        rel = parse(pb.Release, raw, "Release")
        field, payload = payload_from_proto(rel)
    except ValidationError:
        return None
    return rel, field, payload


def _same_payload(a: Payload, b: Payload) -> bool:
    if isinstance(a, SparsePayload) and isinstance(b, SparsePayload):
        return (
            a.dim == b.dim
            and a.indices.dtype == b.indices.dtype
            and np.array_equal(a.indices, b.indices)
            and a.values.tobytes() == b.values.tobytes()
        )
    if isinstance(a, DensePayload) and isinstance(b, DensePayload):
        return a.values.dtype == b.values.dtype and a.values.tobytes() == b.values.tobytes()
    return False


def _check_agrees(raws: list[bytes]) -> int:
    """Assert the property over a batch; returns how many releases the fast lane read."""
    read = 0
    for raw, view in zip(raws, read_views(raws), strict=True):
        if view is None:
            continue
        full = _full(raw)
        assert full is not None, raw  # the fast lane never reads what the full parse refuses
        rel, field, payload = full
        assert (view.run_id, view.user_id, view.token, view.nonce, view.purpose) == (
            rel.run_id, rel.user_id, rel.token, rel.nonce, rel.purpose,
        )  # fmt: skip
        assert view.field == field
        assert _same_payload(view.payload, payload)
        values = payload.values if isinstance(payload, SparsePayload | DensePayload) else []
        assert view.largest == float(np.max(np.abs(values), initial=0.0))
        read += 1
    return read


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _len_field(number: int, body: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(body)) + body


def _sparse_bytes(dim: int, index_bytes: bytes, values: list[float], *, tail: bytes = b"") -> bytes:
    """A release whose `rpt` payload is written by hand (the envelope by protobuf)."""
    body = _varint(1 << 3) + _varint(dim) + _len_field(2, index_bytes)
    body += _len_field(3, struct.pack(f"<{len(values)}d", *values)) + tail
    head = pb.Release(run_id="r", user_id="u1", nonce="profile", purpose=pb.PURPOSE_PROFILE)
    return head.SerializeToString() + _len_field(10, body)


def test_canonical_releases_are_read_as_the_full_parse_reads_them() -> None:
    rng = np.random.default_rng(0)
    raws = []
    for k in range(300):  # sparse of every index width up to a uint32's 5 bytes, dense, empty
        dim = int(rng.choice([5, 1682, 1 << 14, 1 << 21, 1 << 28, (1 << 32) - 1]))
        n = int(rng.integers(0, min(dim, 400) + 1))
        idx = np.sort(rng.choice(min(dim, 10**9), n, replace=False)).astype(np.int64)
        if dim == (1 << 32) - 1 and n:
            idx[-1] = dim - 1  # the largest index a uint32 holds
        values = rng.normal(0, 3, n) * (10.0 ** rng.integers(-300, 300, n))
        raws.append(_release("rpt", SparsePayload(dim, idx, values), f"u{k}").SerializeToString())
        dense = DensePayload(rng.normal(size=int(rng.integers(0, 50))))
        raws.append(_release("jlt", dense, f"d{k}").SerializeToString())
    views = read_views(raws)
    assert all(v is not None for v in views)
    assert _check_agrees(raws) == len(raws)


def test_indices_of_at_most_two_bytes_take_the_short_decode(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A catalogue under 16,384 items (every ML dataset) has every index in 1 or 2 bytes: the
    short decode reads those, exactly, without the general one; one longer index in a block
    sends the whole block to the general decode."""
    rng = np.random.default_rng(3)
    raws = []
    for k in range(200):
        dim = int(rng.choice([5, 128, 1682, 1 << 14]))
        idx = np.sort(rng.choice(dim, int(rng.integers(0, min(dim, 400) + 1)), replace=False))
        payload = SparsePayload(dim, idx, rng.normal(0, 30, idx.size))
        raws.append(_release("rpt", payload, f"u{k}").SerializeToString())
    general = release_view._long_varints
    calls = []
    monkeypatch.setattr(release_view, "_long_varints", lambda *a: calls.append(1) or general(*a))
    assert _check_agrees(raws) == len(raws) and not calls
    wide = _release("rpt", SparsePayload(1 << 15, np.array([1, 1 << 14]), np.ones(2)))
    assert _check_agrees([*raws[:40], wide.SerializeToString()]) == 41 and calls


def test_what_the_fast_lane_cannot_read_exactly_is_left_to_the_full_parse() -> None:
    two_bytes = _varint(3) + _varint(200)
    cases = {
        # accepted by the full parse, but not in the canonical form (more below)
        "an over-long varint (6 bytes)": _sparse_bytes(300, b"\x83\x80\x80\x80\x80\x00", [1.0]),
        # refused by the full parse
        "a 5-byte varint above 2^32 - 1": _sparse_bytes(300, b"\xff\xff\xff\xff\x1f", [1.0]),
        "an unknown field in the payload": _sparse_bytes(
            300, two_bytes, [1.0, 2.0], tail=b"\x20\x01"
        ),
        "decreasing indices": _sparse_bytes(300, _varint(200) + _varint(3), [1.0, 2.0]),
        "an index at dim": _sparse_bytes(200, two_bytes, [1.0, 2.0]),
        "more values than indices": _sparse_bytes(300, two_bytes, [1.0, 2.0, 3.0]),
        "a non-finite value": _sparse_bytes(300, two_bytes, [1.0, float("nan")]),
        "an infinite value": _sparse_bytes(300, two_bytes, [float("-inf"), 1.0]),
        "a varint cut short": _sparse_bytes(300, _varint(3) + b"\x80", [1.0]),
        "values not a whole double": _sparse_bytes(300, two_bytes, [1.0, 2.0])[:-1],
    }
    # unpacked: each index its own VARINT field 2
    unpacked = _varint(1 << 3) + _varint(300) + b"\x10\x03\x10\xc8\x01"
    unpacked += _len_field(3, struct.pack("<2d", 1.0, 2.0))
    head = pb.Release(run_id="r", user_id="u1", nonce="profile", purpose=pb.PURPOSE_PROFILE)
    cases["unpacked indices"] = head.SerializeToString() + _len_field(10, unpacked)
    # one payload field in two pieces (protobuf merges them)
    split = _len_field(10, _varint(1 << 3) + _varint(300) + _len_field(2, _varint(3)))
    split += _len_field(10, _len_field(2, _varint(200)) + _len_field(3, struct.pack("<2d", 1, 2)))
    cases["a payload in two pieces"] = head.SerializeToString() + split
    split = _varint(1 << 3) + _varint(300) + _len_field(2, _varint(3))
    split += _len_field(2, _varint(200)) + _len_field(3, b"\0" * 8)
    cases["indices in two pieces"] = head.SerializeToString() + _len_field(10, split)
    dense = _len_field(13, _len_field(1, struct.pack("<d", 1.0)))
    dense += _len_field(13, _len_field(1, struct.pack("<d", 2.0)))
    cases["dense values in two pieces"] = head.SerializeToString() + dense
    canonical = _sparse_bytes(300, two_bytes, [1.0, 2.0])
    fill = [canonical] * max(1, MIN_BATCH - len(cases))  # a batch the fast lane takes
    raws = [*cases.values(), *fill]  # one batch: a case cannot spill into its neighbour
    views = read_views(raws)
    assert {name for name, v in zip(cases, views, strict=False) if v is not None} == set()
    assert all(v is not None for v in views[len(cases) :])
    assert _check_agrees(raws) == len(fill)
    accepted = {name for name, raw in cases.items() if _full(raw) is not None}
    assert accepted == {
        "unpacked indices",
        "an over-long varint (6 bytes)",
        "a payload in two pieces",
        "dense values in two pieces",
    }
    full = _full(cases["unpacked indices"])
    assert full is not None and _same_payload(
        full[2], SparsePayload(300, np.array([3, 200]), np.array([1.0, 2.0]))
    )


def test_bit_payloads_and_bad_bytes_take_the_full_parse() -> None:
    bits = pb.Release(run_id="r", user_id="u", nonce="profile")
    bits.oue.n_bits, bits.oue.packed = 3, b"\xa0"
    dense = _release("jlt", DensePayload(np.ones(3))).SerializeToString()
    views = read_views([bits.SerializeToString(), b"\xff\xff", b"", *[dense] * MIN_BATCH])
    assert views[:3] == [None, None, None] and all(v is not None for v in views[3:])


def test_a_small_batch_takes_the_full_parse() -> None:
    dense = _release("jlt", DensePayload(np.ones(3))).SerializeToString()
    assert read_views([dense] * (MIN_BATCH - 1)) == [None] * (MIN_BATCH - 1)
    assert all(v is not None for v in read_views([dense] * MIN_BATCH))


@pytest.mark.parametrize("seed", range(3))
def test_mutated_releases_are_read_exactly_or_not_at_all(seed: int) -> None:
    """Random byte flips, cuts and insertions into valid releases: whatever the fast lane reads
    is what the full parse reads (≈ 6,000 mutants per seed)."""
    rng = np.random.default_rng(seed)
    base = []
    for k in range(20):  # (seed 2: indices of at most 2 bytes, the short decode's)
        dim = int(rng.choice([40, 1682, 1 << 20] if seed < 2 else [40, 1682]))
        n = int(rng.integers(1, 30))
        idx = np.sort(rng.choice(dim, n, replace=False))
        payload = SparsePayload(dim, idx, rng.normal(size=n))
        base.append(_release("rpt", payload, f"u{k}").SerializeToString())
        base.append(_release("pmc", DensePayload(rng.normal(size=n)), f"d{k}").SerializeToString())
    mutants = []
    for _ in range(6000):
        raw = bytearray(base[int(rng.integers(len(base)))])
        at = int(rng.integers(len(raw)))
        kind = rng.integers(3)
        if kind == 0:
            raw[at] ^= 1 << int(rng.integers(8))
        elif kind == 1:
            del raw[at:]
        else:
            raw[at:at] = bytes(rng.integers(0, 256, int(rng.integers(1, 4)), dtype=np.uint8))
        mutants.append(bytes(raw))
    read = _check_agrees(mutants)
    refused = sum(_full(m) is None for m in mutants)
    assert read > 1000 and refused > 1000  # both outcomes exercised
