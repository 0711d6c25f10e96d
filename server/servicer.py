"""The gRPC adapter: a thin layer over `server.aggregator.Aggregator`.

Each handler takes the request's raw bytes (so the transcript stores them verbatim, and so that
undecodable bytes reach our own decoder and come back INVALID_ARGUMENT instead of gRPC's
UNKNOWN), checks the byte limit of its kind, learns which node sent it (`server.auth`: a
verified signature, or in `--insecure` runs an unsigned claim), and hands the work to a thread
pool: decoding, validation, store writes and training never run on the event loop, so health
checks and reads are answered while a 16 MiB batch is ingested or a model is fitted.

Errors map in one place (`shared.rpc`): a privrec refusal gets its status and message; any other
exception is logged with its traceback under a short reference and reaches the client as
INTERNAL "internal error (ref …)" with no Python class or text. Admission control: at most
`Limits.max_in_flight` user requests are worked on at once; the next is answered
RESOURCE_EXHAUSTED "busy: …", which clients retry with jittered backoff. The core never imports
grpc.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import hashlib
import logging
import secrets
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from privrec.server.aggregator import Aggregator
from privrec.server.auth import Authenticator, ClaimedNodes, Metadata
from privrec.server.validation import Limits, check_size, short
from privrec.server.wire import read_release_batch
from privrec.shared.errors import PrivrecError, ResourceExhaustedError
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.rpc import BUSY_PREFIX, INTERNAL_MESSAGE, status_of

logger = logging.getLogger(__name__)
R = TypeVar("R")
Context = grpc.aio.ServicerContext[Any, Any]

MODEL_CHUNK_BYTES = 1 << 20
MAX_SEND_BYTES = 64 << 20
SERVICE = "privrec.v1.Aggregator"
ADMIN_SERVICE = "privrec.v1.Admin"
MAX_PENDING_REQUESTS = 1 << 20
"""gRPC C-core cancels calls it has not yet handed to the application once more than 1,000
(soft) / 3,000 (hard) wait; that was the CANCELLED above ~1,000 concurrent users. We take
every call at once and do admission control ourselves, with a status clients retry."""


def _raw(b: bytes) -> bytes:
    return b


def _metadata(context: Context) -> Metadata:
    return [(str(k), v) for k, v in (context.invocation_metadata() or ())]


def _peer(context: Context) -> str | None:
    """The common name of the caller's TLS client certificate (None without TLS)."""
    names = list((context.auth_context() or {}).get("x509_common_name") or ())
    return names[0].decode(errors="replace") if names else None


class AggregatorServicer:
    """Handlers of `privrec.v1.Aggregator` and `privrec.v1.Admin`.

    Args:
        core: the aggregator.
        auth: who sent a request (`server.auth.NodeVerifier`); None believes claimed nodes
            (`--insecure`).
        limits: byte limits and admission (default: the run spec's).
    """

    def __init__(
        self,
        core: Aggregator,
        auth: Authenticator | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.core = core
        self.auth: Authenticator = auth if auth is not None else ClaimedNodes()
        self.limits = limits or core.spec.limits
        self.pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=self.limits.workers, thread_name_prefix="privrec-server"
        )
        # small reads (run config, status) never queue behind batches or a fit in `pool`
        self.reads = concurrent.futures.ThreadPoolExecutor(
            max_workers=2, thread_name_prefix="privrec-server-read"
        )
        self.batch_gate = asyncio.Semaphore(self.limits.batch_streams)
        self.in_flight = 0
        self.in_flight_bytes = 0
        self.busy_refusals = 0
        spec = core.spec
        query = spec.max_release_bytes + self.limits.query_extra_bytes
        self.size_limits = {
            "Enroll": self.limits.enroll_bytes,
            "Submit": spec.max_release_bytes,
            "Predict": query,
            "Recommend": query,
            "SubmitStream": self.limits.batch_bytes,
            "PredictBatch": self.limits.batch_bytes,
        }

    async def _admit(self, context: Context, n_bytes: int) -> None:
        """Take a place among the requests in flight, or answer "busy" (see `Limits`)."""
        full = self.in_flight >= self.limits.max_in_flight or (
            self.in_flight > 0 and self.in_flight_bytes + n_bytes > self.limits.max_in_flight_bytes
        )
        if full:
            self.busy_refusals += 1
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"{BUSY_PREFIX}{self.in_flight} requests in flight; retry later",
            )
        self.in_flight += 1
        self.in_flight_bytes += n_bytes

    def _release(self, n_bytes: int) -> None:
        self.in_flight -= 1
        self.in_flight_bytes -= n_bytes

    async def _work(
        self,
        method: str,
        context: Context,
        call: Callable[[], R],
        *,
        admit: bool = True,
        n_bytes: int = 0,
        pool: concurrent.futures.Executor | None = None,
    ) -> R:
        """Run `call` in the pool (`self.pool` unless another is given); refusals and
        failures become statuses (see the module)."""
        if admit:
            await self._admit(context, n_bytes)
        try:
            return await asyncio.get_running_loop().run_in_executor(pool or self.pool, call)
        except PrivrecError as exc:
            message = str(exc)
            logger.info("[%s] refused: %s", method, short(message, 300))
            await context.abort(status_of(exc), message)
        except Exception:
            ref = secrets.token_hex(4)
            logger.exception("[%s] internal error (ref %s)", method, ref)
            await context.abort(grpc.StatusCode.INTERNAL, f"{INTERNAL_MESSAGE} (ref {ref})")
        finally:
            if admit:
                self._release(n_bytes)
        raise AssertionError("unreachable: abort raises")

    def _size(self, method: str, raw: bytes) -> None:
        limit = self.size_limits[method]
        if method == "Submit" and len(raw) > limit:
            raise ResourceExhaustedError(
                f"release: {len(raw)} bytes exceeds max_release_bytes {limit}"
            )
        check_size(raw, limit, f"{method} request")

    def _node(self, method: str, context: Context, raw: bytes) -> Callable[[], str]:
        md, peer = _metadata(context), _peer(context)
        return lambda: self.auth.unary(method, md, raw, peer)

    async def _unary(
        self, method: str, context: Context, raw: bytes, answer: Callable[[str], R]
    ) -> R:
        """A user's unary request: its size and its node checked (refusals counted like the
        core's own), then `answer(node)` in the pool."""
        node = self._node(method, context, raw)

        def call() -> R:
            with self.core.refusals():  # counted like the core's own refusals
                self._size(method, raw)
                who = node()
            return answer(who)

        return await self._work(method, context, call, n_bytes=len(raw))

    async def Enroll(self, raw: bytes, context: Context) -> pb.EnrollResponse:
        """Enroll one user."""
        return await self._unary("Enroll", context, raw, lambda who: self.core.enroll(raw, who))

    async def EnrollBatch(self, raw: bytes, context: Context) -> pb.EnrollBatchResponse:
        """Enroll a batch of users, one response each."""
        md, peer = _metadata(context), _peer(context)

        def call() -> pb.EnrollBatchResponse:
            with self.core.refusals():  # counted like the core's own refusals
                self._size("SubmitStream", raw)  # a batch: the batch byte limit
                parts = read_release_batch(raw, "EnrollRequestBatch")
                node = self.auth.batch("EnrollBatch", md, parts.body, parts.auth, peer)
            return pb.EnrollBatchResponse(responses=self.core.enroll_many(parts.releases, node))

        return await self._work("EnrollBatch", context, call, n_bytes=len(raw))

    async def GetRunConfig(self, raw: bytes, context: Context) -> pb.RunConfig:
        """The run's public configuration."""
        return await self._work(
            "GetRunConfig",
            context,
            lambda: self.core.run_config(raw),
            admit=False,
            pool=self.reads,
        )

    async def Submit(self, raw: bytes, context: Context) -> pb.SubmitResponse:
        """Store one release."""
        return await self._unary(
            "Submit", context, raw, lambda who: self.core.submit(raw, "Submit", who)
        )

    async def SubmitStream(
        self, batches: AsyncIterator[bytes], context: Context
    ) -> pb.SubmitStreamResponse:
        """Store every batch of a client stream; totals of accepted and duplicate releases."""
        md, peer = _metadata(context), _peer(context)
        accepted = duplicates = 0

        def store(raw: bytes) -> list[int | None]:
            with self.core.refusals():
                self._size("SubmitStream", raw)
                parts = read_release_batch(raw)
                node = self.auth.batch("SubmitStream", md, parts.body, parts.auth, peer)
            return self.core.submit_many(parts.releases, "SubmitStream", node)

        await self._admit(context, 0)
        stream = batches.__aiter__()
        try:
            while True:
                # one batch read off the wire and worked on at a time (`Limits.batch_streams`)
                async with self.batch_gate:
                    try:
                        raw = await stream.__anext__()
                    except StopAsyncIteration:
                        break
                    self.in_flight_bytes += len(raw)
                    try:
                        seqs = await self._work(
                            "SubmitStream", context, functools.partial(store, raw), admit=False
                        )
                    finally:
                        self.in_flight_bytes -= len(raw)
                n_new = sum(s is not None for s in seqs)
                accepted += n_new
                duplicates += len(seqs) - n_new
        finally:
            self._release(0)
        return pb.SubmitStreamResponse(accepted=accepted, duplicates=duplicates)

    async def GetModel(self, raw: bytes, context: Context) -> AsyncIterator[pb.ModelChunk]:
        """Stream the model archive in chunks, each carrying the whole archive's SHA-256."""
        archive = await self._work(
            "GetModel", context, lambda: self.core.model_archive(raw), admit=False
        )
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
        """Answer one prediction query."""
        return await self._unary("Predict", context, raw, lambda who: self.core.predict(raw, who))

    async def PredictBatch(self, raw: bytes, context: Context) -> pb.PredictBatchResponse:
        """Answer a batch of prediction queries."""
        return await self._unary(
            "PredictBatch", context, raw, lambda who: self.core.predict_batch(raw, who)
        )

    async def Recommend(self, raw: bytes, context: Context) -> pb.RecommendResponse:
        """Answer one recommendation query."""
        return await self._unary(
            "Recommend", context, raw, lambda who: self.core.recommend(raw, who)
        )

    async def ListUsers(self, raw: bytes, context: Context) -> pb.ListUsersResponse:
        """One page of the enrolled users (admin or adversary)."""
        node = self._node("ListUsers", context, raw)
        return await self._work(
            "ListUsers", context, lambda: self.core.list_users(raw, node()), admit=False
        )

    async def GetTranscript(self, raw: bytes, context: Context) -> pb.TranscriptBatch:
        """One page of the transcript after a sequence number."""
        node = self._node("GetTranscript", context, raw)
        return await self._work(
            "GetTranscript", context, lambda: self.core.transcript_after(raw, node()), admit=False
        )

    async def SetPhase(self, raw: bytes, context: Context) -> pb.RunStatus:
        """Move the run to a new phase (admin); training runs in the worker pool."""
        # training may take minutes: it runs in the pool, and this call waits for it
        return await self._work("SetPhase", context, lambda: self.core.set_phase(raw), admit=False)

    async def GetStatus(self, raw: bytes, context: Context) -> pb.RunStatus:
        """The run's status (admin)."""
        return await self._work(
            "GetStatus", context, lambda: self.core.get_status(raw), admit=False, pool=self.reads
        )

    async def resume(self) -> None:
        """Finish a fit a previous server left undone (`Aggregator.resume`), in the pool."""
        if self.core.needs_training():
            logger.info("resuming: fitting the model the previous server did not finish")
            await asyncio.get_running_loop().run_in_executor(self.pool, self.core.resume)


def _handlers(servicer: AggregatorServicer) -> list[grpc.GenericRpcHandler]:
    ser = lambda m: m.SerializeToString()  # noqa: E731
    unary = grpc.unary_unary_rpc_method_handler

    def u(f: Any) -> grpc.RpcMethodHandler[Any, Any]:
        return unary(f, request_deserializer=_raw, response_serializer=ser)

    agg: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
        "Enroll": u(servicer.Enroll),
        "EnrollBatch": u(servicer.EnrollBatch),
        "GetRunConfig": u(servicer.GetRunConfig),
        "Submit": u(servicer.Submit),
        "SubmitStream": grpc.stream_unary_rpc_method_handler(
            servicer.SubmitStream, request_deserializer=_raw, response_serializer=ser
        ),
        "GetModel": grpc.unary_stream_rpc_method_handler(
            servicer.GetModel, request_deserializer=_raw, response_serializer=ser
        ),
        "Predict": u(servicer.Predict),
        "Recommend": u(servicer.Recommend),
        "PredictBatch": u(servicer.PredictBatch),
        "ListUsers": u(servicer.ListUsers),
        "GetTranscript": u(servicer.GetTranscript),
    }
    admin: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
        "SetPhase": u(servicer.SetPhase),
        "GetStatus": u(servicer.GetStatus),
    }
    return [
        grpc.method_handlers_generic_handler(SERVICE, agg),
        grpc.method_handlers_generic_handler(ADMIN_SERVICE, admin),
    ]


async def start_server(
    core: Aggregator,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    auth: Authenticator | None = None,
    tls_dir: str | Path | None = None,
    limits: Limits | None = None,
) -> tuple[grpc.aio.Server, int]:
    """Start a grpc.aio server for `core`; returns (server, bound port).

    Args:
        core: the aggregator.
        host, port: where to listen (port 0: a free one).
        auth: node authentication (`server.auth.NodeVerifier`); None: claimed nodes.
        tls_dir: a `privrec certs` directory: serve TLS with ``server.pem`` and require client
            certificates signed by ``ca.pem``; None: plaintext.
        limits: byte limits and admission (default: the spec's).
    """
    servicer = AggregatorServicer(core, auth, limits)
    batch = servicer.limits.batch_bytes
    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", batch + 4096),
            ("grpc.max_send_message_length", MAX_SEND_BYTES),
            ("grpc.server.max_pending_requests", MAX_PENDING_REQUESTS),
            ("grpc.server.max_pending_requests_hard_limit", MAX_PENDING_REQUESTS),
        ]
    )
    server.add_generic_rpc_handlers(_handlers(servicer))
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    address = f"{host}:{port}"
    if tls_dir is not None:
        from privrec.shared.tls import server_credentials

        bound = server.add_secure_port(address, server_credentials(tls_dir))
    else:
        bound = server.add_insecure_port(address)
    if bound == 0:
        raise OSError(f"cannot bind gRPC server to {host}:{port}")
    await server.start()
    for name in ("", SERVICE, ADMIN_SERVICE):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    server.privrec_servicer = servicer  # type: ignore[attr-defined]
    server.privrec_resume = asyncio.create_task(  # type: ignore[attr-defined]
        servicer.resume(), name="privrec[server].resume"
    )
    return server, bound


__all__ = ["AggregatorServicer", "start_server"]
