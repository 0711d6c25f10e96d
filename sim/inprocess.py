"""`--launcher inprocess`: the transports that call an `Aggregator` in this process.

They carry the same serialized bytes gRPC would and raise the same exceptions, so the shards
(`client.shard`) and the orchestrator (`sim.run`) run unchanged and give the same numbers as
over real gRPC. They live in `sim`, which may import both sides, so that the client never
imports the server.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from threadpoolctl import threadpool_limits

from privrec.server.aggregator import Aggregator
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.threads import BLAS_THREAD_VARS


@contextlib.contextmanager
def node_blas_threads() -> Iterator[None]:
    """BLAS on the threads a node process gets from `sim.launcher.spawn`: one, unless the
    environment sets a BLAS thread count (then the library already follows it).

    The in-process run calls the same server code as a node process, and a threaded BLAS sums
    in another order than a single-threaded one (the two-tier low-rank fit moved by one ulp on
    2 cores), so without this the two launchers would not give the same numbers bit for bit.
    """
    if any(var in os.environ for var in BLAS_THREAD_VARS):
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


class InprocessTransport:
    """The client-side API (`client.transport.Transport`) over an `Aggregator` object.

    Args:
        core: the aggregator.
        node: the node this transport acts as (what a verified signature names over gRPC; in
            one process the launcher itself is the authority, so nothing is signed).
    """

    def __init__(self, core: Aggregator, node: str = "") -> None:
        self.core = core
        self.node = node

    async def run_config(self) -> pb.RunConfig:
        """The run's public configuration."""
        return self.core.run_config(pb.GetRunConfigRequest(run_id=self.core.spec.run_id))

    async def enroll(self, req: pb.EnrollRequest) -> pb.EnrollResponse:
        """Enroll one user."""
        return self.core.enroll(req.SerializeToString(), self.node)

    async def enroll_batch(self, reqs: list[pb.EnrollRequest]) -> list[pb.EnrollResponse]:
        """Enroll a batch of users; one response each."""
        return self.core.enroll_many([r.SerializeToString() for r in reqs], self.node)

    async def submit_batch(self, releases: list[pb.Release]) -> tuple[int, int]:
        """Submit releases; (accepted, duplicates)."""
        seqs = self.core.submit_many(
            [r.SerializeToString() for r in releases], "SubmitStream", self.node
        )
        accepted = sum(s is not None for s in seqs)
        return accepted, len(seqs) - accepted

    async def predict(self, req: pb.PredictRequest) -> pb.PredictResponse:
        """Answer one prediction query."""
        return self.core.predict(req.SerializeToString(), self.node)

    async def predict_batch(self, reqs: list[pb.PredictRequest]) -> list[pb.PredictResponse]:
        """Answer a batch of prediction queries."""
        batch = pb.PredictBatchRequest(requests=reqs)
        return list(self.core.predict_batch(batch.SerializeToString(), self.node).responses)

    async def recommend(self, req: pb.RecommendRequest) -> pb.RecommendResponse:
        """Answer one recommendation query."""
        return self.core.recommend(req.SerializeToString(), self.node)

    async def model_archive(self, round_: int | None = None) -> bytes:
        """The fitted model's archive (of `round_`, or the final one)."""
        return self.core.model_archive(
            pb.GetModelRequest(run_id=self.core.spec.run_id, round=round_)
        )

    async def list_users(self, after: str = "") -> list[pb.UserState]:
        """The enrolled users after `after`, one page."""
        req = pb.ListUsersRequest(run_id=self.core.spec.run_id, after=after)
        return list(self.core.list_users(req.SerializeToString(), self.node).users)

    async def transcript_after(self, seq: int) -> list[pb.TranscriptRecord]:
        """The transcript records after `seq`, one page."""
        req = pb.GetTranscriptRequest(run_id=self.core.spec.run_id, after_seq=seq)
        return list(self.core.transcript_after(req.SerializeToString(), self.node).records)

    async def close(self) -> None:
        """Nothing to close in-process."""
        return None


class InprocessAdmin:
    """The operator's API (`sim.run.Admin`) over an `Aggregator` object."""

    def __init__(self, core: Aggregator) -> None:
        self.core = core

    async def set_phase(self, phase: str, round_: int = 0) -> pb.RunStatus:
        """Move the run to `phase` (and two-tier `round_`)."""
        s = self.core.spec
        return self.core.set_phase(
            pb.SetPhaseRequest(
                run_id=s.run_id, admin_token=s.admin_token, phase=phase, round=round_
            )
        )

    async def status(self) -> pb.RunStatus:
        """The run's status."""
        return self.core.status()


__all__ = ["InprocessAdmin", "InprocessTransport"]
