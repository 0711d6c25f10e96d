"""The release field kinds come from the proto (shared.serde), and every field round-trips."""

from __future__ import annotations

import numpy as np
import pytest

from privrec.shared.mechanisms.base import BitPayload, DensePayload, Payload, SparsePayload
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.serde import (
    BIT_FIELDS,
    DENSE_FIELDS,
    PAYLOAD_FIELDS,
    PAYLOAD_KINDS,
    SPARSE_FIELDS,
    payload_from_proto,
    payload_to_proto,
)

ONEOF = pb.Release.DESCRIPTOR.oneofs_by_name["payload"]


def example(kind: type[Payload]) -> Payload:
    if kind is SparsePayload:
        return SparsePayload(7, np.array([0, 3, 6]), np.array([-1.5, 0.25, 2.0]))
    if kind is DensePayload:
        return DensePayload(np.array([0.1, -2.0, 3.5]))
    return BitPayload(np.array([True, False, True, True, False, False, True, False, True]))


def test_serde_kinds_are_the_proto_message_types() -> None:
    """Every payload field of the proto has the kind its message type declares, and no other."""
    declared = {f.name: f.message_type.name for f in ONEOF.fields}
    assert set(PAYLOAD_KINDS) == set(declared) == PAYLOAD_FIELDS
    assert {f for f, m in declared.items() if m == "SparseVector"} == SPARSE_FIELDS
    assert {f for f, m in declared.items() if m == "DenseVector"} == DENSE_FIELDS
    assert {f for f, m in declared.items() if m == "BitVector"} == BIT_FIELDS
    assert {"rpt", "raw_ratings"} <= SPARSE_FIELDS and {"blip", "oue"} <= BIT_FIELDS
    assert {"jlt", "pmc"} <= DENSE_FIELDS


@pytest.mark.parametrize("field", sorted(f.name for f in ONEOF.fields))
def test_serde_every_payload_field_round_trips(field: str) -> None:
    """A payload of the field's kind comes back equal, through bytes, as the field written."""
    payload = example(PAYLOAD_KINDS[field])
    release = pb.Release(run_id="r", user_id="u", nonce="profile")
    payload_to_proto(field, payload, release)
    got_field, got = payload_from_proto(pb.Release.FromString(release.SerializeToString()))
    assert got_field == field and type(got) is type(payload)
    for name in ("dim", "indices", "values", "bits"):
        if hasattr(payload, name):
            np.testing.assert_array_equal(getattr(got, name), getattr(payload, name))


def test_serde_refuses_a_payload_of_another_kind() -> None:
    """Writing a dense payload into a sparse field is refused, naming both."""
    with pytest.raises(ValueError, match=r"rpt.*SparsePayload.*DensePayload"):
        payload_to_proto("rpt", example(DensePayload), pb.Release())
