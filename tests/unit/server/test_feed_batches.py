"""The batched observation feed (issue 13, target 4): one message per accepted batch, and the
live adversary's record equal to the transcript (what `replay` reads)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np

from privrec.adversary.node import RecordFile, follow_feed
from privrec.server.aggregator import Aggregator
from privrec.server.node import feed_messages
from privrec.server.store import Store
from privrec.shared.mechanisms import RandomizedPerturbation
from privrec.shared.mechanisms.base import Profile
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.serde import payload_to_proto
from tests.grpc_helpers import one_tier_spec

RUN, ADMIN, N_ITEMS = "t-run", "admin-secret", 40


def release(user: str, seed: int, token: str) -> bytes:
    rng = np.random.default_rng(seed)
    items = np.sort(rng.choice(N_ITEMS, 12, replace=False))
    prof = Profile(items, rng.integers(1, 6, 12).astype(float), N_ITEMS)
    rel = pb.Release(
        run_id=RUN, user_id=user, token=token, nonce="profile", purpose=pb.PURPOSE_PROFILE
    )
    payload_to_proto("rpt", RandomizedPerturbation(1.0, 10).release(prof, rng), rel)
    return rel.SerializeToString()


def test_feed_messages_split_only_past_the_limit() -> None:
    """One message for a batch under the limit; over it, pieces in order, none empty."""
    recs = [pb.TranscriptRecord(seq=i + 1, method="X", request=b"r" * 100) for i in range(10)]
    (one,) = feed_messages(recs)
    assert list(pb.TranscriptBatch.FromString(one).records) == recs
    pieces = feed_messages(recs, limit=350)
    assert len(pieces) == 4  # 3 records (about 108 bytes each) per piece
    joined = [r for m in pieces for r in pb.TranscriptBatch.FromString(m).records]
    assert joined == recs
    huge = [pb.TranscriptRecord(seq=1, method="X", request=b"r" * 1000)]
    assert len(feed_messages(huge, limit=10)) == 1  # a record larger than the limit goes alone


async def _messages(queue: list[bytes]) -> AsyncIterator[bytes]:
    for m in queue:
        yield m
        await asyncio.sleep(0)


def test_live_record_of_the_batched_feed_equals_the_transcript(tmp_path: Path) -> None:
    """The adversary following the batched feed (one message per Enroll batch, per
    SubmitStream batch and per phase marker; a restarted server's replay of everything again)
    records exactly the transcript's records, each seq once."""
    core = Aggregator(one_tier_spec(RUN, ADMIN, N_ITEMS), Store(tmp_path / "s.sqlite"))
    sent: list[bytes] = []
    core.add_batch_observer(lambda recs: sent.extend(feed_messages(recs)))

    def phase(name: str) -> None:
        core.set_phase(pb.SetPhaseRequest(run_id=RUN, admin_token=ADMIN, phase=name))

    phase("enroll")
    users = [f"u{i}" for i in range(9)]
    enroll = [
        pb.EnrollRequest(run_id=RUN, user_id=u, tier=pb.TIER_PRIVATE).SerializeToString()
        for u in users
    ]
    core.enroll_many(enroll[:5], "n")
    core.enroll(enroll[5], "n")
    tokens = [r.token for r in core.enroll_many(enroll, "n")]  # u0-u5 again: not fed again
    phase("collect")
    core.submit_many([release(u, i, tokens[i]) for i, u in enumerate(users[:4])], node="n")
    core.submit_many([release(u, 10 + i, tokens[4 + i]) for i, u in enumerate(users[4:])], node="n")
    n_messages = len(sent)
    # a restarted server's feed: everything again in one call, then the phase marker
    core.add_batch_observer(lambda recs: sent.extend(feed_messages(recs)), replay=True)
    phase("train")
    phase("serve")
    phase("attack")
    # 3 enroll calls with new users + the "collect" marker + 2 release batches ("enroll" is
    # the starting phase: setting it again puts no marker)
    assert n_messages == 6
    record = RecordFile(tmp_path / "record.bin")
    n = asyncio.run(follow_feed(_messages(sent), record))
    stored = [
        pb.TranscriptRecord(seq=r.seq, arrival_unix_ns=0, method=r.method, request=r.request)
        for r in core.store.transcript()
    ]
    live = list(RecordFile.read(tmp_path / "record.bin"))
    assert n == len(stored) == 9 + 9
    for rec in live:
        rec.arrival_unix_ns = 0
    assert live == stored
