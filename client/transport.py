"""How a client shard talks to the aggregator: over gRPC, or directly in-process.

Both transports expose the same async methods and raise the same `shared.errors` exceptions, so
the user agents and the shard runner are transport-free, and `--launcher inprocess` gives the
same numbers as `--launcher processes` for the same seed.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

import grpc
from privrec.server.aggregator import Aggregator
from privrec.shared.errors import (
    AlreadyExistsError,
    AuthenticationError,
    PrivrecError,
    ProtocolError,
    ResourceExhaustedError,
    ValidationError,
)
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb

logger = logging.getLogger(__name__)
T = TypeVar("T")

RETRYABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})


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


def error_from_status(code: grpc.StatusCode, details: str) -> PrivrecError:
    """The privrec exception for a gRPC status (inverse of `server.servicer.STATUS_OF`)."""
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        field, _, msg = details.partition(": ")
        return ValidationError(field, msg)
    return {
        grpc.StatusCode.FAILED_PRECONDITION: ProtocolError,
        grpc.StatusCode.UNAUTHENTICATED: AuthenticationError,
        grpc.StatusCode.ALREADY_EXISTS: AlreadyExistsError,
        grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhaustedError,
    }.get(code, PrivrecError)(f"{details} [{code.name}]")


class GrpcTransport:
    """gRPC client with retries: UNAVAILABLE and DEADLINE_EXCEEDED are retried with exponential
    backoff (safe because every release carries an idempotency nonce); other errors are final.

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
                ("grpc.max_send_message_length", 64 << 20),
                ("grpc.max_receive_message_length", 64 << 20),
            ],
        )
        ser = lambda m: m.SerializeToString()  # noqa: E731
        path = "/privrec.v1.Aggregator/"
        self._run_config = self.channel.unary_unary(
            path + "GetRunConfig",
            request_serializer=ser,
            response_deserializer=pb.RunConfig.FromString,
        )
        self._enroll = self.channel.unary_unary(
            path + "Enroll",
            request_serializer=ser,
            response_deserializer=pb.EnrollResponse.FromString,
        )
        self._submit_stream = self.channel.stream_unary(
            path + "SubmitStream",
            request_serializer=ser,
            response_deserializer=pb.SubmitStreamResponse.FromString,
        )
        self._predict = self.channel.unary_unary(
            path + "Predict",
            request_serializer=ser,
            response_deserializer=pb.PredictResponse.FromString,
        )
        self._get_model = self.channel.unary_stream(
            path + "GetModel",
            request_serializer=ser,
            response_deserializer=pb.ModelChunk.FromString,
        )
        self.retried = 0

    async def _call(self, what: str, attempt: Callable[[], Awaitable[T]]) -> T:
        delay = self.backoff_s
        for i in range(self.retries + 1):
            try:
                return await attempt()
            except grpc.aio.AioRpcError as exc:
                if exc.code() not in RETRYABLE or i == self.retries:
                    raise error_from_status(exc.code(), exc.details() or "") from exc
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
            "GetRunConfig", lambda: self._run_config(req, timeout=self.deadline_s)
        )

    async def enroll(self, req: pb.EnrollRequest) -> pb.EnrollResponse:
        return await self._call("Enroll", lambda: self._enroll(req, timeout=self.deadline_s))

    async def submit_batch(self, releases: list[pb.Release]) -> tuple[int, int]:
        """Send a batch as one SubmitStream; returns (accepted, duplicates)."""
        batch = pb.ReleaseBatch(releases=releases)

        async def attempt() -> tuple[int, int]:
            resp = await self._submit_stream(iter([batch]), timeout=self.deadline_s)
            return int(resp.accepted), int(resp.duplicates)

        return await self._call("SubmitStream", attempt)

    async def submit_stream(self, batches: list[list[pb.Release]]) -> tuple[int, int]:
        """Many batches on ONE stream (the ingest benchmark's path); no retry."""
        resp = await self._submit_stream(
            iter([pb.ReleaseBatch(releases=b) for b in batches]), timeout=self.deadline_s * 10
        )
        return int(resp.accepted), int(resp.duplicates)

    async def predict(self, req: pb.PredictRequest) -> pb.PredictResponse:
        return await self._call("Predict", lambda: self._predict(req, timeout=self.deadline_s))

    async def model_archive(self, round_: int | None = None) -> bytes:
        """The published model (.npz bytes), verified; `round_`: that collect round's."""
        req = pb.GetModelRequest(run_id=self.run_id, round=round_)

        async def attempt() -> bytes:
            return verified_archive(
                [c async for c in self._get_model(req, timeout=self.deadline_s)]
            )

        return await self._call("GetModel", attempt)

    async def close(self) -> None:
        await self.channel.close()


class InprocessTransport:
    """Calls an `Aggregator` in this process with the same serialized bytes gRPC would carry."""

    def __init__(self, core: Aggregator) -> None:
        self.core = core

    async def run_config(self) -> pb.RunConfig:
        return self.core.run_config(pb.GetRunConfigRequest(run_id=self.core.spec.run_id))

    async def enroll(self, req: pb.EnrollRequest) -> pb.EnrollResponse:
        return self.core.enroll(req.SerializeToString())

    async def submit_batch(self, releases: list[pb.Release]) -> tuple[int, int]:
        seqs = self.core.submit_many([r.SerializeToString() for r in releases])
        accepted = sum(s is not None for s in seqs)
        return accepted, len(seqs) - accepted

    async def predict(self, req: pb.PredictRequest) -> pb.PredictResponse:
        return self.core.predict(req.SerializeToString())

    async def model_archive(self, round_: int | None = None) -> bytes:
        return self.core.model_archive(
            pb.GetModelRequest(run_id=self.core.spec.run_id, round=round_)
        )

    async def close(self) -> None:
        return None


__all__ = ["GrpcTransport", "InprocessTransport", "Transport", "error_from_status"]
