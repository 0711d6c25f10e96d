"""How a client shard talks to the aggregator.

`Transport` is the aggregator's client-side API; `GrpcTransport` is its gRPC implementation,
through the generated `AggregatorStub`, with retries. The in-process implementation that
`--launcher inprocess` uses lives with the launcher (`sim.inprocess`), so that the client never
imports the server. Both raise the same `shared.errors` exceptions (`shared.rpc`), so the user
agents and the shard runner are transport-free, and both launchers give the same numbers for
the same seed.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Protocol, Self, TypeVar

import grpc

from privrec.shared.errors import ProtocolError
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.proto.privrec.v1 import aggregator_pb2_grpc as pb_grpc
from privrec.shared.rpc import RETRYABLE, raise_from_rpc

logger = logging.getLogger(__name__)
T = TypeVar("T")

MAX_MESSAGE_BYTES = 64 << 20
"""Largest message either way (a batch of releases, a model chunk)."""


class Transport(Protocol):
    """The aggregator's client-side API."""

    async def run_config(self) -> pb.RunConfig: ...
    async def enroll(self, req: pb.EnrollRequest) -> pb.EnrollResponse: ...
    async def submit_batch(self, releases: list[pb.Release]) -> tuple[int, int]: ...
    async def predict(self, req: pb.PredictRequest) -> pb.PredictResponse: ...
    async def model_archive(self, round_: int | None = None) -> bytes: ...
    async def close(self) -> None: ...


def verified_archive(chunks: list[pb.ModelChunk]) -> bytes:
    """Join GetModel chunks, checking order, count and the sha256 the server announced."""
    if not chunks or [c.index for c in chunks] != list(range(chunks[0].total)):
        raise ProtocolError("GetModel: chunks missing or out of order")
    data = b"".join(c.data for c in chunks)
    if hashlib.sha256(data).hexdigest() != chunks[0].sha256:
        raise ProtocolError("GetModel: archive does not match its sha256")
    return data


class GrpcTransport:
    """gRPC client with retries: UNAVAILABLE and DEADLINE_EXCEEDED are retried with exponential
    backoff (safe because every release carries an idempotency nonce); other errors are final.

    An async context manager (``async with GrpcTransport(target, run_id) as t: ...`` closes
    the channel on exit); `close` does the same by hand.

    Args:
        target: "host:port" of the aggregator.
        run_id: the run (sent with every request).
        deadline_s: per-call deadline.
        retries: retries after the first attempt.
        backoff_s: first backoff; doubles each retry, with jitter from `jitter`.
    """

    def __init__(
        self,
        target: str,
        run_id: str,
        *,
        deadline_s: float = 30.0,
        retries: int = 6,
        backoff_s: float = 0.2,
        jitter: Callable[[], float] | None = None,
    ) -> None:
        self.target, self.run_id = target, run_id
        self.deadline_s, self.retries, self.backoff_s = deadline_s, retries, backoff_s
        self._jitter = jitter or (lambda: 1.0)
        self.channel = grpc.aio.insecure_channel(
            target,
            options=[
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ],
        )
        self.stub = pb_grpc.AggregatorStub(self.channel)
        self.retried = 0

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def _call(self, what: str, attempt: Callable[[], Awaitable[T]]) -> T:
        delay = self.backoff_s
        for i in range(self.retries + 1):
            try:
                return await attempt()
            except grpc.aio.AioRpcError as exc:
                if exc.code() not in RETRYABLE or i == self.retries:
                    raise raise_from_rpc(exc) from exc
                self.retried += 1
                logger.info("%s: %s, retry %d in %.2fs", what, exc.code().name, i + 1, delay)
                await asyncio.sleep(delay * self._jitter())
                delay *= 2
        raise AssertionError("unreachable")

    async def wait_ready(self, timeout: float = 30.0) -> None:
        """Wait until the server's channel connects."""
        await asyncio.wait_for(self.channel.channel_ready(), timeout)

    async def run_config(self) -> pb.RunConfig:
        req = pb.GetRunConfigRequest(run_id=self.run_id)
        return await self._call(
            "GetRunConfig", lambda: self.stub.GetRunConfig(req, timeout=self.deadline_s)
        )

    async def enroll(self, req: pb.EnrollRequest) -> pb.EnrollResponse:
        return await self._call("Enroll", lambda: self.stub.Enroll(req, timeout=self.deadline_s))

    async def submit_batch(self, releases: list[pb.Release]) -> tuple[int, int]:
        """Send a batch as one SubmitStream; returns (accepted, duplicates)."""
        batch = pb.ReleaseBatch(releases=releases)

        async def attempt() -> tuple[int, int]:
            resp = await self.stub.SubmitStream(iter([batch]), timeout=self.deadline_s)
            return int(resp.accepted), int(resp.duplicates)

        return await self._call("SubmitStream", attempt)

    async def submit_stream(self, batches: list[list[pb.Release]]) -> tuple[int, int]:
        """Many batches on ONE stream (the ingest benchmark's path); no retry."""
        try:
            resp = await self.stub.SubmitStream(
                iter([pb.ReleaseBatch(releases=b) for b in batches]),
                timeout=self.deadline_s * 10,
            )
        except grpc.aio.AioRpcError as exc:
            raise raise_from_rpc(exc) from exc
        return int(resp.accepted), int(resp.duplicates)

    async def predict(self, req: pb.PredictRequest) -> pb.PredictResponse:
        return await self._call("Predict", lambda: self.stub.Predict(req, timeout=self.deadline_s))

    async def recommend(self, req: pb.RecommendRequest) -> pb.RecommendResponse:
        return await self._call(
            "Recommend", lambda: self.stub.Recommend(req, timeout=self.deadline_s)
        )

    async def model_archive(self, round_: int | None = None) -> bytes:
        """The published model (.npz bytes), verified; `round_`: that collect round's."""
        req = pb.GetModelRequest(run_id=self.run_id, round=round_)

        async def attempt() -> bytes:
            return verified_archive(
                [c async for c in self.stub.GetModel(req, timeout=self.deadline_s)]
            )

        return await self._call("GetModel", attempt)

    async def close(self) -> None:
        await self.channel.close()


__all__ = ["MAX_MESSAGE_BYTES", "GrpcTransport", "Transport", "verified_archive"]
