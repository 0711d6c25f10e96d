"""Ingest benchmark: RPT releases per second accepted over gRPC vs in-process.

Target (issue #2): >= 20,000 releases/s from one client-shard process into the server process
over SubmitStream, and a ratio >= 0.5 to the in-process rate measured in the same run.
Target (issue #12): with mutual TLS and node signatures (one Ed25519 signature per batch) at
least 0.7 x the insecure gRPC rate, both measured in the same run.

Releases are ML-100K-sized: m = 1,682 items, 106 genuine ratings (the ML-100K mean) plus the RPT
fake fill at β_max = 25 %, i.e. about 310 filled cells per release. A pool of distinct releases
is made once and reused under different user ids (making 100k releases takes longer than
ingesting them). Both paths receive the same serialized bytes; the server stores every one in
its SQLite transcript.

Issue #13 (target 4): the same targets as the median of >= 3 runs, and enrollment throughput:
enrollments/s with one unary `Enroll` per user (128 in flight, as the shards did) and with
`EnrollBatch` (B users per call), measured in the same run against the same server.

Issue 28 (item 5): the per-release work in `submit_many` (parse, checks, store) <= 50 us of CPU;
each path also prints CPU microseconds per release: the server process's (user + system, from
/proc) during the timed SubmitStream calls, and this process's during the in-process loop.

Usage: python bench/ingest.py [--users N] [--batch B] [--streams S] [--repeats R]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from privrec.client.transport import GrpcTransport
from privrec.server.aggregator import Aggregator
from privrec.server.spec import RunSpec
from privrec.server.store import Store
from privrec.shared.identity import NodeIdentity, make_keys
from privrec.shared.mechanisms import RandomizedPerturbation
from privrec.shared.mechanisms.base import Profile
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.serde import payload_to_proto
from privrec.shared.tls import make_certs
from privrec.sim.admin_client import GrpcAdmin

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nodes import start_server  # bench/nodes.py, shared with vs_flower.py

N_ITEMS, N_RATED, POOL = 1682, 106, 500
RUN = "bench-ingest"


def payload_pool() -> list[pb.Release]:
    mech = RandomizedPerturbation(2.0, 25)
    rng = np.random.default_rng(0)
    pool = []
    for _ in range(POOL):
        items = np.sort(rng.choice(N_ITEMS, N_RATED, replace=False))
        prof = Profile(items, rng.integers(1, 6, N_RATED).astype(float), N_ITEMS)
        rel = pb.Release()
        payload_to_proto("rpt", mech.release(prof, rng), rel)
        pool.append(rel)
    return pool


def releases(pool: list[pb.Release], tokens: dict[str, str]) -> list[pb.Release]:
    out = []
    for i, (user, token) in enumerate(tokens.items()):
        rel = pb.Release()
        rel.CopyFrom(pool[i % len(pool)])
        rel.run_id, rel.user_id, rel.token = RUN, user, token
        rel.nonce, rel.purpose = "profile", pb.PURPOSE_PROFILE
        out.append(rel)
    return out


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) a live process has used, from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def inprocess_rate(rels: list[pb.Release], batch: int, workdir: Path) -> tuple[float, float]:
    """(releases/s, CPU seconds per release) of `submit_many` called in this process."""
    spec = RunSpec(
        RUN,
        RandomizedPerturbation(2.0, 25),
        "ppcf",
        {"k": 100},
        N_ITEMS,
        "bench",
        (1.0, 5.0),
        5,
        0,
        1 << 22,
        "admin",
        secrets.token_bytes(32),
    )
    core = Aggregator(spec, Store(workdir / "inprocess.sqlite"))
    core.set_phase(pb.SetPhaseRequest(run_id=RUN, admin_token="admin", phase="enroll"))
    fixed = [pb.Release() for _ in rels]
    reqs = [
        pb.EnrollRequest(run_id=RUN, user_id=r.user_id, tier=pb.TIER_PRIVATE).SerializeToString()
        for r in rels
    ]
    answers = [
        a
        for i in range(0, len(reqs), batch)
        for a in core.enroll_many(reqs[i : i + batch], "shard-0")
    ]
    for f, r, a in zip(fixed, rels, answers, strict=True):
        f.CopyFrom(r)
        f.token = a.token
    core.set_phase(pb.SetPhaseRequest(run_id=RUN, admin_token="admin", phase="collect"))
    raws = [r.SerializeToString() for r in fixed]
    t, cpu = time.perf_counter(), time.process_time()
    for i in range(0, len(raws), batch):
        core.submit_many(raws[i : i + batch], node="shard-0")
    elapsed, cpu = time.perf_counter() - t, time.process_time() - cpu
    assert core.store.count("releases") == len(raws)
    core.store.close()
    return len(raws) / elapsed, cpu / len(raws)


async def grpc_rate(
    n_users: int,
    batch: int,
    streams: int,
    pool: list[pb.Release],
    workdir: Path,
    *,
    secure: bool,
) -> tuple[float, list[pb.Release], float, float, float]:
    """The rate into a `privrec server` process: plaintext and unsigned, or (`secure`) mutual
    TLS with every batch signed by the shard's node key."""
    workdir.mkdir(parents=True, exist_ok=True)
    if secure:
        make_keys(workdir / "keys", ["shard-0"])
        make_certs(workdir / "tls", ["shard-0", "operator"])
        security = [
            "--allow-list",
            str(workdir / "keys" / "allow-list.json"),
            "--tls-dir",
            str(workdir / "tls"),
        ]
    else:
        security = ["--insecure"]
    cfg = workdir / "bench.toml"
    cfg.write_text(
        f'[data]\ndataset = "synthetic"\nsynthetic_users = 10\nsynthetic_items = {N_ITEMS}\n'
    )
    server, target = start_server(workdir, cfg, RUN, security, "admin")
    try:
        tls = workdir / "tls" if secure else None
        identity = NodeIdentity.load(workdir / "keys" / "shard-0.key") if secure else None
        async with (
            GrpcAdmin(target, RUN, "admin", tls_dir=tls) as admin,
            GrpcTransport(
                target, RUN, identity=identity, tls_dir=tls, node="" if secure else "shard-0"
            ) as transport,
        ):
            return await _ingest(
                admin, transport, n_users, batch, streams, pool, lambda: process_cpu(server.pid)
            )
    finally:
        server.stop()


UNARY_SAMPLE = 5_000
"""Users enrolled one unary call each, for the unary enrollment rate (they release nothing)."""


async def _ingest(
    admin: GrpcAdmin,
    transport: GrpcTransport,
    n_users: int,
    batch: int,
    streams: int,
    pool: list[pb.Release],
    server_cpu: Callable[[], float],
) -> tuple[float, list[pb.Release], float, float, float]:
    """Enroll `n_users` in batches (and a sample one by one), then time their releases on
    `streams` SubmitStream calls. Returns (releases/s, the releases, unary enrollments/s,
    batched enrollments/s, the server's CPU seconds per release)."""
    await admin.set_phase("enroll")
    sem = asyncio.Semaphore(128)

    async def enroll(u: str) -> None:
        async with sem:
            await transport.enroll(pb.EnrollRequest(run_id=RUN, user_id=u, tier=pb.TIER_PRIVATE))

    sample = [f"unary-{i}" for i in range(min(n_users, UNARY_SAMPLE))]
    t = time.perf_counter()
    await asyncio.gather(*(enroll(u) for u in sample))
    unary_rate = len(sample) / (time.perf_counter() - t)

    users = [f"user-{i}" for i in range(n_users)]
    reqs = [pb.EnrollRequest(run_id=RUN, user_id=u, tier=pb.TIER_PRIVATE) for u in users]
    in_flight = asyncio.Semaphore(streams)

    async def enroll_batch(part: list[pb.EnrollRequest]) -> list[pb.EnrollResponse]:
        async with in_flight:
            return await transport.enroll_batch(part)

    t = time.perf_counter()
    parts = await asyncio.gather(
        *(enroll_batch(reqs[i : i + batch]) for i in range(0, len(reqs), batch))
    )
    batch_rate = n_users / (time.perf_counter() - t)
    tokens = {u: r.token for u, r in zip(users, (r for p in parts for r in p), strict=True)}
    await admin.set_phase("collect")
    rels = releases(pool, tokens)
    per_stream = -(-len(rels) // streams)
    chunks = [rels[i : i + per_stream] for i in range(0, len(rels), per_stream)]
    batched = [[c[i : i + batch] for i in range(0, len(c), batch)] for c in chunks]
    t, cpu = time.perf_counter(), server_cpu()
    counts = await asyncio.gather(*(transport.submit_stream(b) for b in batched))
    elapsed, cpu = time.perf_counter() - t, server_cpu() - cpu
    accepted = sum(c[0] for c in counts)
    status = await admin.status()
    assert accepted == n_users == status.releases_accepted, (accepted, status)
    return accepted / elapsed, rels, unary_rate, batch_rate, cpu / n_users


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", type=int, default=40_000)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--streams", type=int, default=2)
    ap.add_argument(
        "--repeats", type=int, default=3, help="alternate insecure/secure/in-process R times"
    )
    args = ap.parse_args()
    pool = payload_pool()
    insecure: list[float] = []
    secure: list[float] = []
    local: list[float] = []
    cpu: dict[str, list[float]] = {"grpc": [], "tls": [], "local": []}
    unary: list[float] = []
    batched: list[float] = []
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for r in range(args.repeats):  # alternated, so load changes hit all alike
            rate, rels, _, _, c = asyncio.run(
                grpc_rate(
                    args.users, args.batch, args.streams, pool, work / f"plain{r}", secure=False
                )
            )
            insecure.append(rate)
            cpu["grpc"].append(c)
            rate, _, u, b, c = asyncio.run(
                grpc_rate(args.users, args.batch, args.streams, pool, work / f"tls{r}", secure=True)
            )
            secure.append(rate)
            cpu["tls"].append(c)
            unary.append(u)
            batched.append(b)
            rate, c = inprocess_rate(rels, args.batch, work / f"local{r}")
            local.append(rate)
            cpu["local"].append(c)
            load.append(os.getloadavg()[0])
    med = statistics.median
    rate_grpc, rate_tls, rate_local = med(insecure), med(secure), med(local)
    size = np.mean([len(r.SerializeToString()) for r in rels[:POOL]])
    print(
        f"releases: {args.users} (mean {size:.0f} bytes), batch {args.batch}, "
        f"streams {args.streams}, cpus {os.cpu_count()}, repeats {args.repeats} (medians), "
        f"load {' '.join(f'{x:.1f}' for x in load)}"
    )
    runs = lambda xs: ", ".join(f"{x:,.0f}" for x in xs)  # noqa: E731
    print(
        f"grpc (insecure)     : {rate_grpc:10,.0f} releases/s  (target >= 20,000; {runs(insecure)})"
    )
    print(f"grpc (TLS + signed) : {rate_tls:10,.0f} releases/s  ({runs(secure)})")
    print(f"inprocess           : {rate_local:10,.0f} releases/s  ({runs(local)})")
    us = lambda key: ", ".join(f"{x * 1e6:.1f}" for x in cpu[key])  # noqa: E731
    print(
        f"CPU per release     : server (insecure) {med(cpu['grpc']) * 1e6:.1f} us ({us('grpc')}), "
        f"server (TLS) {med(cpu['tls']) * 1e6:.1f} us ({us('tls')}), "
        f"in-process submit_many {med(cpu['local']) * 1e6:.1f} us ({us('local')}); "
        f"target <= 50 us"
    )
    print(f"ratio grpc/inprocess: {rate_grpc / rate_local:10.2f}        (target >= 0.5)")
    print(f"ratio TLS/insecure  : {rate_tls / rate_grpc:10.2f}        (target >= 0.7)")
    print(f"enroll, unary (TLS) : {med(unary):10,.0f} enrollments/s  ({runs(unary)})")
    print(f"enroll, batch (TLS) : {med(batched):10,.0f} enrollments/s  ({runs(batched)})")
    print(f"ratio batch/unary   : {med(batched) / med(unary):10.2f}")


if __name__ == "__main__":
    main()
