"""A secure aggregator for tests: mutual TLS and node authentication on a free port.

`secure_world(tmp_path)` makes a CA, certificates and node keys once per directory and serves an
`Aggregator` with `NodeVerifier` over TLS; `world.channel(node)` is a signed TLS channel of that
node, `world.raw(node, method)` a raw-bytes callable that still signs (so mutated bytes reach the
server's decoders), and `world.admin` the operator's stub.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from privrec.client.transport import make_channel
from privrec.server.aggregator import Aggregator
from privrec.server.auth import NodeVerifier
from privrec.server.servicer import start_server
from privrec.server.spec import RunSpec
from privrec.server.store import Store
from privrec.shared.identity import AllowList, NodeIdentity
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.proto.privrec.v1 import aggregator_pb2_grpc as pb_grpc
from privrec.shared.tls import make_certs

NODES = ("shard-0", "shard-1", "evil")


@dataclasses.dataclass
class SecureWorld:
    core: Aggregator
    port: int
    tls_dir: Path
    identities: dict[str, NodeIdentity]
    channels: dict[str, grpc.aio.Channel]
    admin_token: str

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def channel(self, node: str) -> grpc.aio.Channel:
        if node not in self.channels:
            self.channels[node] = make_channel(
                self.target, identity=self.identities[node], tls_dir=self.tls_dir
            )
        return self.channels[node]

    def stub(self, node: str) -> pb_grpc.AggregatorStub:
        return pb_grpc.AggregatorStub(self.channel(node))

    @property
    def admin(self) -> pb_grpc.AdminStub:
        return pb_grpc.AdminStub(self.channel("shard-0"))

    def raw(self, node: str, method: str) -> Callable[..., Any]:
        """A raw-bytes multi-callable of `method` on `node`'s signed channel."""
        service = "Admin" if method in ("SetPhase", "GetStatus") else "Aggregator"
        path = f"/privrec.v1.{service}/{method}"
        ch = self.channel(node)
        if method == "SubmitStream":
            return ch.stream_unary(path)
        if method == "GetModel":
            return ch.unary_stream(path)
        return ch.unary_unary(path)

    async def phase(self, name: str, round_: int = 0) -> pb.RunStatus:
        return await self.admin.SetPhase(
            pb.SetPhaseRequest(
                run_id=self.core.spec.run_id,
                admin_token=self.admin_token,
                phase=name,
                round=round_,
            )
        )

    async def healthy(self, timeout: float = 5.0) -> bool:
        h = health_pb2_grpc.HealthStub(self.channel("shard-0"))
        resp = await h.Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout)
        return bool(resp.status == health_pb2.HealthCheckResponse.SERVING)


def identities(keys_dir: Path) -> dict[str, NodeIdentity]:
    return {n: NodeIdentity.generate(n) for n in NODES}


@contextlib.asynccontextmanager
async def secure_world(
    tmp_path: Path, spec: RunSpec, *, clock: Callable[[], float] | None = None
) -> AsyncIterator[SecureWorld]:
    """Serve `spec` with TLS and node authentication (see the module docstring)."""
    tls = tmp_path / "tls"
    if not (tls / "ca.pem").exists():
        make_certs(tls, list(NODES))
    ids = identities(tmp_path)
    kwargs: dict[str, Any] = {} if clock is None else {"clock": clock}
    verifier = NodeVerifier(AllowList.of(ids.values()), **kwargs)
    core = Aggregator(spec, Store(tmp_path / "server.sqlite"))
    server, port = await start_server(core, auth=verifier, tls_dir=tls)
    world = SecureWorld(core, port, tls, ids, {}, spec.admin_token)
    try:
        yield world
    finally:
        for ch in world.channels.values():
            await ch.close()
        await server.stop(None)
        core.store.close()


def store_digest(path: Path) -> str:
    """SHA-256 over every row of the transcript, enrollments and releases tables."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    h = hashlib.sha256()
    for table, order in (("transcript", "seq"), ("enrollments", "user_id"), ("releases", "seq")):
        for row in db.execute(f"SELECT * FROM {table} ORDER BY {order}"):
            h.update(repr(row).encode())
    db.close()
    return h.hexdigest()


__all__ = ["NODES", "SecureWorld", "secure_world", "store_digest"]
