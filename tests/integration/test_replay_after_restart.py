"""No captured request is accepted twice by any incarnation of the server (issue 27, finding 6).

A real `privrec server` process with TLS and an allow-list. The attacker has captured one signed
request of shard-0 exactly as it travelled (its bytes and its signature metadata): say from a
log, a proxy or a core dump; TLS keeps it from the wire, not from everywhere. It replays it
after the server was killed with SIGKILL and started again on the same run directory.
"""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from privrec.client.transport import make_channel
from privrec.server.node import ADMIN_TOKEN_ENV
from privrec.shared.identity import NodeIdentity, make_keys
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.tls import make_certs
from privrec.sim.launcher import NodeProcess, spawn, wait_file

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

RUN = "replay"
CONFIG = """
[data]
dataset = "synthetic"
synthetic_users = 20
synthetic_items = 30
"""


def start_server(tmp_path: Path) -> tuple[NodeProcess, str]:
    ready = tmp_path / "server.ready"
    ready.unlink(missing_ok=True)
    args = [
        "server", "--config", str(tmp_path / "run.toml"), "--run-dir", str(tmp_path / "run"),
        "--run-id", RUN, "--ready-file", str(ready), "--tls-dir", str(tmp_path / "tls"),
        "--allow-list", str(tmp_path / "keys" / "allow-list.json"),
    ]  # fmt: skip
    server = spawn("server", args, tmp_path / "logs", {ADMIN_TOKEN_ENV: "admin"})
    port = wait_file(ready, 60, [server]).split()[0]
    return server, f"127.0.0.1:{port}"


async def test_a_captured_request_is_refused_by_the_next_server(tmp_path: Path) -> None:
    """Regression: #27 (6) a captured signed request was accepted again after a server restart
    (used nonces lived in memory only)."""
    (tmp_path / "run.toml").write_text(CONFIG)
    make_certs(tmp_path / "tls", ["shard-0"])
    make_keys(tmp_path / "keys", ["shard-0"])
    shard = NodeIdentity.load(tmp_path / "keys" / "shard-0.key")
    request = pb.EnrollRequest(run_id=RUN, user_id="u1", shard="0/1", tier=pb.TIER_PRIVATE)
    raw = request.SerializeToString()
    captured = shard.metadata("Enroll", raw)  # the signature as it travelled
    server, target = start_server(tmp_path)
    try:
        channel = make_channel(target, tls_dir=tmp_path / "tls", node="shard-0")
        enroll = channel.unary_unary("/privrec.v1.Aggregator/Enroll")
        first = pb.EnrollResponse.FromString(await enroll(raw, metadata=captured, timeout=30))
        assert not first.already_enrolled
        with pytest.raises(grpc.aio.AioRpcError) as same:  # the same incarnation: refused
            await enroll(raw, metadata=captured, timeout=30)
        assert same.value.code() == grpc.StatusCode.UNAUTHENTICATED
        await channel.close()
        server.kill()
        server, target = start_server(tmp_path)
        channel = make_channel(target, tls_dir=tmp_path / "tls", node="shard-0")
        enroll = channel.unary_unary("/privrec.v1.Aggregator/Enroll")
        with pytest.raises(grpc.aio.AioRpcError) as again:
            await enroll(raw, metadata=captured, timeout=30)
        assert again.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "replayed" in (again.value.details() or "")
        # the node itself carries on: a fresh signature of the same request is fine
        fresh = pb.EnrollResponse.FromString(
            await enroll(raw, metadata=shard.metadata("Enroll", raw), timeout=30)
        )
        assert fresh.already_enrolled and fresh.token == first.token
        await channel.close()
    finally:
        server.stop()
