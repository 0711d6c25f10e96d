"""The shards' gRPC transport against a real grpc.aio aggregator on a free port."""

from __future__ import annotations

from pathlib import Path
from unittest.mock import patch

import grpc
import pytest

from privrec.client.transport import GrpcTransport
from privrec.server.aggregator import Aggregator
from privrec.server.store import Store
from privrec.shared.errors import ValidationError
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.run_config import PublicRunConfig
from tests.grpc_helpers import one_tier_spec, serving

RUN = "transport-run"


def _unavailable() -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(
        grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(), "down"
    )


async def test_transport_is_an_async_context_manager(tmp_path: Path) -> None:
    """`async with` gives a working transport and closes its channel on exit."""
    core = Aggregator(one_tier_spec(RUN, "admin", 12), Store(tmp_path / "s.sqlite"))
    async with serving(core) as port:
        async with GrpcTransport(f"127.0.0.1:{port}", RUN) as t:
            rc = PublicRunConfig.from_proto(await t.run_config())
            assert rc == core.public_config()
        assert t.channel.get_state() == grpc.ChannelConnectivity.SHUTDOWN


async def test_unavailable_is_retried_then_succeeds(tmp_path: Path) -> None:
    """Two UNAVAILABLE answers (fault injection on the live stub) are retried; the third call
    succeeds and the retries are counted."""
    core = Aggregator(one_tier_spec(RUN, "admin", 12), Store(tmp_path / "s.sqlite"))
    async with (
        serving(core) as port,
        GrpcTransport(f"127.0.0.1:{port}", RUN, backoff_s=0.001) as t,
    ):
        real = t.stub.Enroll
        calls = {"n": 0}

        def flaky(req: pb.EnrollRequest, timeout: float) -> object:
            calls["n"] += 1
            if calls["n"] <= 2:
                raise _unavailable()
            return real(req, timeout=timeout)

        with patch.object(t.stub, "Enroll", side_effect=flaky):
            resp = await t.enroll(pb.EnrollRequest(run_id=RUN, user_id="u1", tier=1))
        assert resp.token and calls["n"] == 3 and t.retried == 2


async def test_refusals_arrive_as_privrec_errors(tmp_path: Path) -> None:
    """A refused request is not retried; it raises the core's exception class and field."""
    core = Aggregator(one_tier_spec(RUN, "admin", 12), Store(tmp_path / "s.sqlite"))
    async with serving(core) as port, GrpcTransport(f"127.0.0.1:{port}", RUN, retries=5) as t:
        with pytest.raises(ValidationError) as info:
            await t.enroll(pb.EnrollRequest(run_id=RUN, user_id="", tier=1))
        assert info.value.field == "user_id" and t.retried == 0
