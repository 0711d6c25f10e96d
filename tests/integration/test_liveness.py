"""No request stalls the aggregator (issue 12 (6)): health checks and reads are answered within
0.5 s while a maximal batch is ingested and while the model is fitted; a release sent during the
fit is refused (FAILED_PRECONDITION), never acknowledged and dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from pathlib import Path

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from privrec.server.models import PPCF
from privrec.server.spec import RunSpec
from privrec.server.validation import Limits
from privrec.shared.identity import save_identity
from privrec.shared.mechanisms import RandomizedPerturbation
from privrec.shared.mechanisms.base import Profile
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.serde import payload_to_proto
from tests.secure_helpers import SecureWorld, secure_world

RUN = "live"
ADMIN = "admin"
N_ITEMS = 3000
MAX_LATENCY_S = 0.5


def spec() -> RunSpec:
    return RunSpec(
        run_id=RUN,
        mechanism=RandomizedPerturbation(1.0, 10),
        model="ppcf",
        model_params={"k": 5},
        n_items=N_ITEMS,
        dataset="test",
        rating_scale=(1, 5),
        n_folds=2,
        fold_seed=0,
        max_release_bytes=64 * 1024,
        admin_token=ADMIN,
        token_key=b"k" * 32,
    )


def big_release(user: str, token: str, seed: int) -> pb.Release:
    rng = np.random.default_rng(seed)
    items = np.sort(rng.choice(N_ITEMS, 1500, replace=False))
    prof = Profile(items, rng.integers(1, 6, items.size).astype(float), N_ITEMS)
    rel = pb.Release(run_id=RUN, user_id=user, token=token, nonce="profile", purpose=1)
    payload_to_proto("rpt", RandomizedPerturbation(1.0, 10).release(prof, rng), rel)
    return rel


async def watch_health(w: SecureWorld, stop: asyncio.Event, what: str) -> list[float]:
    """Health checks and a read (GetRunConfig) every 20 ms until `stop`; their latencies."""
    health = health_pb2_grpc.HealthStub(w.channel("shard-1"))
    agg = w.stub("shard-1")
    latencies: list[float] = []
    while not stop.is_set():
        t = time.perf_counter()
        resp = await health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
        assert resp.status == health_pb2.HealthCheckResponse.SERVING
        await agg.GetRunConfig(pb.GetRunConfigRequest(run_id=RUN), timeout=5)
        latencies.append(time.perf_counter() - t)
        await asyncio.sleep(0.02)
    assert latencies, f"no health check ran during {what}"
    return latencies


async def enroll_all(w: SecureWorld, users: list[str]) -> dict[str, str]:
    """Enroll through the core directly (the set-up, not what is measured)."""
    out = {}
    for u in users:
        req = pb.EnrollRequest(run_id=RUN, user_id=u, shard="0/1", tier=pb.TIER_PRIVATE)
        out[u] = w.core.enroll(req.SerializeToString(), "shard-0").token
    return out


@pytest.mark.slow
async def test_health_answers_while_a_maximal_batch_is_ingested(tmp_path: Path) -> None:
    """Regression: #12 (6) one 59 MiB SubmitStream batch blocked every RPC, health checks
    included, for 7 s. A batch just under the 16 MiB limit now goes through the thread pool."""
    async with secure_world(tmp_path, spec()) as w:
        users = [f"u{i:04d}" for i in range(1200)]
        await w.phase("enroll")
        tokens = await enroll_all(w, users)
        await w.phase("collect")
        limit = Limits().batch_bytes
        rels, size = [], 0
        for i, u in enumerate(users):
            r = big_release(u, tokens[u], i)
            n = r.ByteSize() + 4
            if size + n > limit - 1024:
                break
            rels.append(r)
            size += n
        body = pb.ReleaseBatch(releases=rels).SerializeToString()
        assert limit * 0.95 < len(body) <= limit
        stop = asyncio.Event()
        watcher = asyncio.create_task(watch_health(w, stop, "ingest"))
        await asyncio.sleep(0.1)
        t = time.perf_counter()
        resp = await w.raw("shard-0", "SubmitStream")(iter([body]), timeout=300)
        took = time.perf_counter() - t
        stop.set()
        latencies = await watcher
        assert pb.SubmitStreamResponse.FromString(resp).accepted == len(rels)
        assert max(latencies) < MAX_LATENCY_S, (max(latencies), took)
        assert len(latencies) >= 2, f"ingest of {len(body)} bytes took {took:.2f}s"


@pytest.mark.slow
async def test_health_answers_while_the_model_trains_and_late_releases_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: #12 (6) SetPhase train blocked every RPC for 8.3 s, and a release sent during
    training was acknowledged, stored and left out of the model. The fit here is made slow by a
    pure-Python loop (holding the GIL between switches, like a Python-heavy model)."""
    fit = PPCF.fit

    def slow_fit(self: PPCF, *args: object, **kwargs: object) -> PPCF:
        deadline = time.perf_counter() + 2.0
        x = 0
        while time.perf_counter() < deadline:
            x += sum(range(1000))
        return fit(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(PPCF, "fit", slow_fit)
    async with secure_world(tmp_path, spec()) as w:
        users = [f"u{i:03d}" for i in range(60)]
        await w.phase("enroll")
        tokens = await enroll_all(w, users)
        late_user = users[-1]
        await w.phase("collect")
        agg = w.stub("shard-0")
        rels = [big_release(u, tokens[u], i) for i, u in enumerate(users[:-1])]
        await agg.SubmitStream(iter([pb.ReleaseBatch(releases=rels)]))
        stop = asyncio.Event()
        watcher = asyncio.create_task(watch_health(w, stop, "training"))
        train = asyncio.create_task(w.phase("train"))
        while w.core.phase != "train":
            await asyncio.sleep(0.01)
        assert not train.done()
        late = big_release(late_user, tokens[late_user], 999)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await agg.Submit(late)
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        status = await w.admin.GetStatus(pb.GetStatusRequest(run_id=RUN, admin_token=ADMIN))
        assert status.phase == "train" and status.train_seconds == 0  # still fitting
        await train
        stop.set()
        latencies = await watcher
        assert max(latencies) < MAX_LATENCY_S, max(latencies)
        assert len(latencies) >= 10
        status = await w.admin.GetStatus(pb.GetStatusRequest(run_id=RUN, admin_token=ADMIN))
        assert status.profiles == len(users) - 1 and status.train_seconds >= 2.0


SENDER = """
import asyncio, sys
from pathlib import Path
from privrec.client.transport import make_channel
from privrec.shared.identity import NodeIdentity
target, tls, key, *bodies = sys.argv[1:]
async def main():
    channel = make_channel(target, identity=NodeIdentity.load(key), tls_dir=Path(tls))
    submit = channel.stream_unary("/privrec.v1.Aggregator/SubmitStream")
    await asyncio.gather(*(submit(iter([Path(b).read_bytes()]), timeout=300) for b in bodies))
    await channel.close()
asyncio.run(main())
"""
FIVE = 5


@pytest.mark.slow
async def test_health_answers_while_five_maximal_batches_arrive_at_once(tmp_path: Path) -> None:
    """Regression: #27 (6) with five 15 MiB batches arriving at once, one health check took
    0.84 s (the documented bound is 0.5 s; 1.34 s here before the fix). Five batches of just
    under the 16 MiB limit, sent at once by another process (as shards would), while this
    one checks the server's health every 20 ms."""
    async with secure_world(tmp_path, spec()) as w:
        per_batch = 1150
        users = [f"u{i:05d}" for i in range(FIVE * per_batch)]
        await w.phase("enroll")
        tokens = await enroll_all(w, users)
        await w.phase("collect")
        limit = Limits().batch_bytes
        files, sizes = [], []
        for b in range(FIVE):
            rels, size = [], 0
            for i, u in enumerate(users[b * per_batch : (b + 1) * per_batch]):
                r = big_release(u, tokens[u], b * per_batch + i)
                n = r.ByteSize() + 4
                if size + n > limit - 1024:
                    break
                rels.append(r)
                size += n
            body = pb.ReleaseBatch(releases=rels).SerializeToString()
            assert limit * 0.95 < len(body) <= limit
            files.append(tmp_path / f"batch-{b}.bin")
            files[-1].write_bytes(body)
            sizes.append(len(rels))
        key = save_identity(w.identities["shard-0"], tmp_path / "keys")
        sender = await asyncio.create_subprocess_exec(
            sys.executable, "-c", SENDER, w.target, str(w.tls_dir), str(key), *map(str, files)
        )
        health = health_pb2_grpc.HealthStub(w.channel("shard-1"))
        checks: list[float] = []
        while sender.returncode is None:
            t = time.perf_counter()
            resp = await health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
            assert resp.status == health_pb2.HealthCheckResponse.SERVING
            checks.append(time.perf_counter() - t)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(sender.wait(), 0.02)
        assert sender.returncode == 0
        assert w.core.store.count("releases") == sum(sizes)
        assert len(checks) >= 20, f"the five batches went in {len(checks)} checks"
        assert max(checks) < MAX_LATENCY_S, sorted(checks)[-5:]
