"""Admission control and the client's retry budget (issue 12 (7))."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import grpc
import pytest

from privrec.client.transport import GrpcTransport
from privrec.server.aggregator import Aggregator
from privrec.server.servicer import start_server
from privrec.server.store import Store
from privrec.server.validation import Limits
from privrec.shared.errors import PrivrecError
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.rpc import retryable
from tests.conftest import free_port
from tests.grpc_helpers import one_tier_spec

RUN = "retry-run"


def test_only_busy_resource_exhausted_is_retried() -> None:
    """ "busy: ..." is load (retried); a request too large is final."""
    code = grpc.StatusCode.RESOURCE_EXHAUSTED
    assert retryable(code, "busy: 9 requests in flight; retry later")
    assert not retryable(code, "release: 5000 bytes exceeds max_release_bytes 4096")
    assert retryable(grpc.StatusCode.CANCELLED, "")
    assert not retryable(grpc.StatusCode.INVALID_ARGUMENT, "busy: no")


async def test_over_the_bound_requests_are_busy_and_the_client_retries(tmp_path: Path) -> None:
    """With one request admitted at a time, concurrent enrollments are answered "busy" while
    the first is held, and every client gets through by retrying."""
    core = Aggregator(one_tier_spec(RUN, "admin", 12), Store(tmp_path / "s.sqlite"))
    gate = threading.Event()
    enroll = core.enroll

    def held(raw: bytes, node: str = "") -> pb.EnrollResponse:
        gate.wait(10)
        return enroll(raw, node)

    core.enroll = held  # type: ignore[method-assign]
    server, port = await start_server(core, limits=Limits(max_in_flight=1))
    try:
        async with GrpcTransport(
            f"127.0.0.1:{port}", RUN, node="n", backoff_s=0.01, max_backoff_s=0.05
        ) as t:
            jobs = [
                asyncio.create_task(t.enroll(pb.EnrollRequest(run_id=RUN, user_id=f"u{i}", tier=1)))
                for i in range(5)
            ]
            await asyncio.sleep(0.5)
            servicer = server.privrec_servicer  # type: ignore[attr-defined]
            assert servicer.busy_refusals > 0 and t.retried > 0
            gate.set()
            done = await asyncio.gather(*jobs)
        assert len(done) == 5 and core.store.count("enrollments") == 5
    finally:
        await server.stop(None)
        core.store.close()


async def test_retries_stop_at_the_retry_deadline(tmp_path: Path) -> None:
    """Nothing listening: UNAVAILABLE is retried until `retry_deadline_s`, then raised."""
    import time

    t0 = time.monotonic()
    async with GrpcTransport(
        "127.0.0.1:1", RUN, retry_deadline_s=1.0, backoff_s=0.05, max_backoff_s=0.2, deadline_s=0.5
    ) as t:
        with pytest.raises(PrivrecError, match="UNAVAILABLE"):
            await t.run_config()
        assert t.retried >= 2
    assert 0.8 < time.monotonic() - t0 < 10


async def test_a_client_started_before_its_server_calls_soon_after_it_listens(
    tmp_path: Path,
) -> None:
    """A shard may start before its server. Its first call, retried while nothing listens,
    goes through within a second of the server listening, typically a quarter: without the
    channel's short reconnect backoff and the retry cut short on reconnection it took 3.9 s
    (2.8 s with the short backoff alone; the retry backoff here is several seconds)."""
    import time

    port = free_port("127.0.0.1")
    core = Aggregator(one_tier_spec(RUN, "admin", 12), Store(tmp_path / "s.sqlite"))
    async with GrpcTransport(f"127.0.0.1:{port}", RUN, backoff_s=4.0, max_backoff_s=4.0) as t:
        call = asyncio.create_task(t.run_config())
        await asyncio.sleep(2.5)  # a few failed connection attempts, gRPC's backoff grown
        assert not call.done() and t.retried >= 1
        server, bound = await start_server(core, port=port)
        listening = time.monotonic()
        try:
            assert bound == port
            await asyncio.wait_for(call, 10)
            assert time.monotonic() - listening < 1.0
        finally:
            await server.stop(None)
            core.store.close()
