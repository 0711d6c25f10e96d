"""5,000 concurrent users on one `privrec server` process (issue 12 (7)).

Above ~1,000 concurrent calls, gRPC's C-core cancelled the calls it had not yet handed to the
application (its "max pending requests": 1,000 soft, 3,000 hard), and the client did not retry
CANCELLED. Now the server takes every call, admits `max_in_flight` at a time and answers the
rest "busy" (RESOURCE_EXHAUSTED), which clients retry with jittered backoff. Here every user
enrolls and submits her profile at once, through ten signed TLS node channels, and each is
stored exactly once.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from privrec.client.transport import GrpcTransport
from privrec.shared.identity import NodeIdentity, make_keys
from privrec.shared.mechanisms.base import Profile
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.run_config import PublicRunConfig
from privrec.shared.serde import payload_to_proto
from privrec.shared.tls import make_certs
from privrec.sim.admin_client import GrpcAdmin
from privrec.sim.launcher import spawn, wait_file

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

N_USERS = 5000
N_NODES = 10
RUN = "scale"


async def test_five_thousand_concurrent_users_are_each_stored_exactly_once(
    tmp_path: Path,
) -> None:
    """Regression: #12 (7) with 5,000 users 1,992 calls came back CANCELLED, never processed."""
    nodes = [f"shard-{i}" for i in range(N_NODES)]
    make_keys(tmp_path / "keys", nodes)
    make_certs(tmp_path / "tls", [*nodes, "operator"])
    (tmp_path / "c.toml").write_text(
        '[run]\nname = "scale"\n[data]\ndataset = "synthetic"\n'
        "synthetic_users = 50\nsynthetic_items = 200\n"
    )
    server = spawn(
        "server",
        [
            "server",
            "--config",
            str(tmp_path / "c.toml"),
            "--run-dir",
            str(tmp_path),
            "--run-id",
            RUN,
            "--ready-file",
            str(tmp_path / "ready"),
            "--allow-list",
            str(tmp_path / "keys" / "allow-list.json"),
            "--tls-dir",
            str(tmp_path / "tls"),
        ],
        tmp_path / "logs",
        {"PRIVREC_ADMIN_TOKEN": "admin"},
    )
    transports: list[GrpcTransport] = []
    try:
        port = int(wait_file(tmp_path / "ready", 120, [server]).split()[0])
        target = f"127.0.0.1:{port}"
        admin = GrpcAdmin(target, RUN, "admin", tls_dir=tmp_path / "tls", retry_deadline_s=60)
        transports = [
            GrpcTransport(
                target,
                RUN,
                identity=NodeIdentity.load(tmp_path / "keys" / f"{n}.key"),
                tls_dir=tmp_path / "tls",
                retry_deadline_s=600,
                backoff_s=0.05,
                max_backoff_s=2.0,
            )
            for n in nodes
        ]
        rc = PublicRunConfig.from_proto(await transports[0].run_config())
        mechanism = rc.mechanism()
        m = rc.n_items

        collect = asyncio.Event()  # the phase, as the shards would learn it from the broker

        async def user(i: int) -> tuple[int, int]:
            t = transports[i % N_NODES]
            uid = f"user-{i:05d}"
            req = pb.EnrollRequest(run_id=RUN, user_id=uid, shard=f"{i % N_NODES}", tier=1)
            token = (await t.enroll(req)).token
            await collect.wait()
            rng = np.random.default_rng(i)
            items = np.sort(rng.choice(m, 20, replace=False))
            prof = Profile(items, rng.integers(1, 6, items.size).astype(float), m)
            rel = pb.Release(run_id=RUN, user_id=uid, token=token, nonce="profile", purpose=1)
            payload_to_proto(mechanism.payload_field, mechanism.release(prof, rng), rel)
            return await t.submit_batch([rel])

        tasks = [asyncio.create_task(user(i)) for i in range(N_USERS)]
        while (await admin.status()).enrolled < N_USERS:
            for task in tasks:
                if task.done() and task.exception():
                    raise task.exception()  # type: ignore[misc]
            await asyncio.sleep(0.2)
        await admin.set_phase("collect")
        collect.set()
        results = await asyncio.gather(*tasks)
        assert sum(a for a, _ in results) == N_USERS
        status = await admin.status()
        assert status.enrolled == status.profiles == N_USERS
        assert status.releases_rejected == 0
        retried = sum(t.retried for t in transports)
        await admin.channel.close()
    finally:
        for t in transports:
            await t.close()
        server.stop()
    db = sqlite3.connect(tmp_path / "server.sqlite")
    per_user = dict(db.execute("SELECT user_id, COUNT(*) FROM releases GROUP BY user_id"))
    assert len(per_user) == N_USERS and set(per_user.values()) == {1}
    (n_enrolled,) = db.execute("SELECT COUNT(*) FROM enrollments").fetchone()
    assert n_enrolled == N_USERS
    # the server shed load ("busy") and the clients came back: some retries happened
    print(f"5,000 users: {retried} retries")
