"""The gRPC adapter: a thin layer over `server.aggregator.Aggregator`.

Each handler reads the request's raw bytes (so the transcript stores them verbatim), calls the
core, and maps privrec errors to status codes in one place (`shared.rpc`). The core never imports
grpc.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from privrec.server.aggregator import Aggregator
from privrec.server.wire import split_release_batch
from privrec.shared.errors import PrivrecError
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.rpc import status_of

logger = logging.getLogger(__name__)
R = TypeVar("R")
Context = grpc.aio.ServicerContext[Any, Any]

MODEL_CHUNK_BYTES = 1 << 20
# Whole messages may carry a batch of releases; each release is bounded by max_release_bytes.
MAX_MESSAGE_BYTES = 64 << 20
SERVICE = "privrec.v1.Aggregator"
ADMIN_SERVICE = "privrec.v1.Admin"


async def _guard(method: str, context: Context, call: Callable[[], R]) -> R:
    try:
        return call()
    except PrivrecError as exc:
        logger.info("[%s] refused: %s", method, exc)
        await context.abort(status_of(exc), str(exc))


def _raw(b: bytes) -> bytes:
    return b


class AggregatorServicer:
    """Handlers of `privrec.v1.Aggregator` and `privrec.v1.Admin`."""

    def __init__(self, core: Aggregator) -> None:
        self.core = core

    async def Enroll(self, raw: bytes, context: Context) -> pb.EnrollResponse:
        return await _guard("Enroll", context, lambda: self.core.enroll(raw))

    async def GetRunConfig(self, req: pb.GetRunConfigRequest, context: Context) -> pb.RunConfig:
        return await _guard("GetRunConfig", context, lambda: self.core.run_config(req))

    async def Submit(self, raw: bytes, context: Context) -> pb.SubmitResponse:
        return await _guard("Submit", context, lambda: self.core.submit(raw))

    async def SubmitStream(
        self, batches: AsyncIterator[bytes], context: Context
    ) -> pb.SubmitStreamResponse:
        accepted = duplicates = 0
        async for raw in batches:

            def store(raw: bytes = raw) -> list[int | None]:
                return self.core.submit_many(split_release_batch(raw))

            seqs = await _guard("SubmitStream", context, store)
            n_new = sum(s is not None for s in seqs)
            accepted += n_new
            duplicates += len(seqs) - n_new
        return pb.SubmitStreamResponse(accepted=accepted, duplicates=duplicates)

    async def GetModel(
        self, req: pb.GetModelRequest, context: Context
    ) -> AsyncIterator[pb.ModelChunk]:
        archive = await _guard("GetModel", context, lambda: self.core.model_archive(req))
        digest = hashlib.sha256(archive).hexdigest()
        total = max(1, -(-len(archive) // MODEL_CHUNK_BYTES))
        for i in range(total):
            yield pb.ModelChunk(
                name=self.core.spec.model,
                index=i,
                total=total,
                sha256=digest,
                data=archive[i * MODEL_CHUNK_BYTES : (i + 1) * MODEL_CHUNK_BYTES],
            )

    async def Predict(self, raw: bytes, context: Context) -> pb.PredictResponse:
        return await _guard("Predict", context, lambda: self.core.predict(raw))

    async def Recommend(self, raw: bytes, context: Context) -> pb.RecommendResponse:
        return await _guard("Recommend", context, lambda: self.core.recommend(raw))

    async def SetPhase(self, req: pb.SetPhaseRequest, context: Context) -> pb.RunStatus:
        # training may take seconds: run it off the event loop (the core serialises writers)
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(None, self.core.set_phase, req)
        except PrivrecError as exc:
            await context.abort(status_of(exc), str(exc))
            raise  # unreachable: abort raises

    async def GetStatus(self, req: pb.GetStatusRequest, context: Context) -> pb.RunStatus:
        return await _guard("GetStatus", context, lambda: self.core.get_status(req))


def _handlers(servicer: AggregatorServicer) -> list[grpc.GenericRpcHandler]:
    ser = lambda m: m.SerializeToString()  # noqa: E731
    unary = grpc.unary_unary_rpc_method_handler
    agg: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
        "Enroll": unary(servicer.Enroll, request_deserializer=_raw, response_serializer=ser),
        "GetRunConfig": unary(
            servicer.GetRunConfig,
            request_deserializer=pb.GetRunConfigRequest.FromString,
            response_serializer=ser,
        ),
        "Submit": unary(servicer.Submit, request_deserializer=_raw, response_serializer=ser),
        "SubmitStream": grpc.stream_unary_rpc_method_handler(
            servicer.SubmitStream, request_deserializer=_raw, response_serializer=ser
        ),
        "GetModel": grpc.unary_stream_rpc_method_handler(
            servicer.GetModel,
            request_deserializer=pb.GetModelRequest.FromString,
            response_serializer=ser,
        ),
        "Predict": unary(servicer.Predict, request_deserializer=_raw, response_serializer=ser),
        "Recommend": unary(servicer.Recommend, request_deserializer=_raw, response_serializer=ser),
    }
    admin: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
        "SetPhase": unary(
            servicer.SetPhase,
            request_deserializer=pb.SetPhaseRequest.FromString,
            response_serializer=ser,
        ),
        "GetStatus": unary(
            servicer.GetStatus,
            request_deserializer=pb.GetStatusRequest.FromString,
            response_serializer=ser,
        ),
    }
    return [
        grpc.method_handlers_generic_handler(SERVICE, agg),
        grpc.method_handlers_generic_handler(ADMIN_SERVICE, admin),
    ]


async def start_server(
    core: Aggregator, host: str = "127.0.0.1", port: int = 0
) -> tuple[grpc.aio.Server, int]:
    """Start a grpc.aio server for `core`; returns (server, bound port)."""
    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ]
    )
    server.add_generic_rpc_handlers(_handlers(AggregatorServicer(core)))
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        raise OSError(f"cannot bind gRPC server to {host}:{port}")
    await server.start()
    for name in ("", SERVICE, ADMIN_SERVICE):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return server, bound


__all__ = ["AggregatorServicer", "start_server"]
