"""The vectorised batch checks (`server.batch_checks`) against the reference per-release path."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from privrec.server.aggregator import Aggregator
from privrec.server.batch_checks import decode_varints, varint
from privrec.server.store import Store
from privrec.shared.errors import PrivrecError
from privrec.shared.mechanisms import RandomizedPerturbation
from privrec.shared.mechanisms.base import Profile
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.serde import payload_from_proto, payload_to_proto
from tests.grpc_helpers import one_tier_spec

RUN, ADMIN, N_ITEMS = "t-run", "admin-secret", 300


def test_decode_varints_matches_protobuf() -> None:
    """Packed uint32 varints of 1 to 5 bytes decode as protobuf does; a cut one is refused."""
    rng = np.random.default_rng(0)
    values = np.concatenate([rng.integers(0, 1 << 32, 500), [0, 127, 128, 16383, 16384]])
    buf = b"".join(varint(int(v)) for v in values)
    np.testing.assert_array_equal(decode_varints(buf), values.astype(np.uint64))
    assert decode_varints(buf[:-1] + b"\x80") is None
    assert decode_varints(b"\xff" * 5 + b"\x01") is None  # 6 bytes: not a uint32


def world(tmp_path: Path, name: str) -> tuple[Aggregator, list[pb.Release]]:
    core = Aggregator(one_tier_spec(RUN, ADMIN, N_ITEMS), Store(tmp_path / f"{name}.sqlite"))
    core.set_phase(pb.SetPhaseRequest(run_id=RUN, admin_token=ADMIN, phase="enroll"))
    reqs = [
        pb.EnrollRequest(run_id=RUN, user_id=f"u{i}", tier=pb.TIER_PRIVATE).SerializeToString()
        for i in range(12)
    ]
    tokens = [r.token for r in core.enroll_many(reqs, "n")]
    core.set_phase(pb.SetPhaseRequest(run_id=RUN, admin_token=ADMIN, phase="collect"))
    rels = []
    rng = np.random.default_rng(1)
    mech = RandomizedPerturbation(1.0, 10)
    for i, tok in enumerate(tokens):
        k = int(rng.integers(1, 80))
        items = np.sort(rng.choice(N_ITEMS, k, replace=False))
        prof = Profile(items, rng.integers(1, 6, k).astype(float), N_ITEMS)
        rel = pb.Release(
            run_id=RUN, user_id=f"u{i}", token=tok, nonce="profile", purpose=pb.PURPOSE_PROFILE
        )
        payload_to_proto("rpt", mech.release(prof, rng), rel)
        rels.append(rel)
    return core, rels


def test_batch_checks_equal_the_reference_on_valid_batches(tmp_path: Path) -> None:
    """The batch path accepts a valid batch with the same releases, fields, tiers and
    payloads (bit for bit) as the per-release reference, and stores the same transcript."""
    core, rels = world(tmp_path, "a")
    raws = [r.SerializeToString() for r in rels]
    fast = core._batch_checked(raws, "n")
    assert fast is not None
    ref = [core._check_release(r, pb.PURPOSE_PROFILE, "n") for r in raws]
    for (rel_f, field_f, tier_f), (rel_r, field_r, tier_r) in zip(fast, ref, strict=True):
        assert rel_f == rel_r and field_f == field_r and tier_f == tier_r
        pf, pr = payload_from_proto(rel_f)[1], payload_from_proto(rel_r)[1]
        np.testing.assert_array_equal(pf.indices, pr.indices)  # type: ignore[union-attr]
        np.testing.assert_array_equal(pf.values, pr.values)  # type: ignore[union-attr]
    other, _ = world(tmp_path, "b")
    other.batch_checks = False
    assert core.submit_many(raws, node="n") == other.submit_many(raws, node="n")
    assert [(r.seq, r.method, r.request) for r in core.store.transcript()] == [
        (r.seq, r.method, r.request) for r in other.store.transcript()
    ]


def _unknown_field(rel: pb.Release) -> bytes:
    return rel.SerializeToString() + b"\xa8\x06\x01"  # field 101, varint 1


def _bad_index_order(rel: pb.Release) -> bytes:
    rel.rpt.indices[0], rel.rpt.indices[1] = rel.rpt.indices[1], rel.rpt.indices[0]
    return rel.SerializeToString()


def _nan(rel: pb.Release) -> bytes:
    rel.rpt.values[0] = float("nan")
    return rel.SerializeToString()


def _wrong_dim(rel: pb.Release) -> bytes:
    rel.rpt.dim = N_ITEMS + 1
    return rel.SerializeToString()


def _out_of_range(rel: pb.Release) -> bytes:
    rel.rpt.indices[-1] = N_ITEMS
    return rel.SerializeToString()


def _short_values(rel: pb.Release) -> bytes:
    del rel.rpt.values[-1]
    return rel.SerializeToString()


def _wrong_token(rel: pb.Release) -> bytes:
    rel.token = "x" * 32
    return rel.SerializeToString()


def _query_nonce(rel: pb.Release) -> bytes:
    rel.nonce = "q0"
    return rel.SerializeToString()


def _other_run(rel: pb.Release) -> bytes:
    rel.run_id = "other"
    return rel.SerializeToString()


def _unpacked(rel: pb.Release) -> bytes:
    # the same indices as non-packed varints (legal protobuf, not the canonical encoding)
    sv = rel.rpt
    body = varint(sv.dim).join([b"\x08", b""]) if sv.dim else b""
    body += b"".join(b"\x10" + varint(i) for i in sv.indices)
    vals = np.asarray(sv.values, dtype="<f8").tobytes()
    body += b"\x1a" + varint(len(vals)) + vals
    head = pb.Release()
    head.CopyFrom(rel)
    head.ClearField("rpt")
    return head.SerializeToString() + b"\x52" + varint(len(body)) + body


@pytest.mark.parametrize(
    "corrupt",
    [
        _unknown_field,
        _bad_index_order,
        _nan,
        _wrong_dim,
        _out_of_range,
        _short_values,
        _wrong_token,
        _query_nonce,
        _other_run,
        _unpacked,
    ],
)
def test_batch_checks_defer_anything_unusual_to_the_reference(tmp_path: Path, corrupt) -> None:
    """One odd release makes the batch path say "not sure" (None); `submit_many` then gives
    the reference path's verdict: the same error, or (a legal non-canonical encoding) the same
    acceptance."""
    core, rels = world(tmp_path, "a")
    raws = [r.SerializeToString() for r in rels]
    raws[5] = corrupt(rels[5])
    assert core._batch_checked(raws, "n") is None
    ref, _ = world(tmp_path, "b")
    ref.batch_checks = False
    outcomes = []
    for c in (core, ref):
        try:
            outcomes.append(("ok", len(c.submit_many(raws, node="n"))))
        except PrivrecError as exc:
            outcomes.append((type(exc).__name__, str(exc)))
    assert outcomes[0] == outcomes[1]
    if corrupt is _unpacked:
        assert outcomes[0] == ("ok", len(raws))
    else:
        assert "releases[5]." in outcomes[0][1]
