"""privrec's real-gRPC collect side by side with Flower's simulation engine, in one run.

Targets, each client returning one 1,682-float vector: at N = 10,000 privrec >= 50x faster
than Flower on the collect of one round and >= 30x including process start-up and enrollment
(issue 28); below 10,000 clients >= 20x and >= 10x (issue 13, target 5). Each line prints the
target for its N.

The population is privrec's synthetic one (`[data] dataset = "synthetic"`, N users x 1,682
items, run seed 0), loaded once with `load_population`, the function the shards use.

* privrec: a `privrec server` process and 2 `privrec clients` shard processes (`bench/nodes.py`,
  plaintext gRPC like Flower's simulation, or `--secure` for mutual TLS and node keys); every
  user enrolls and releases one JLT sketch of her ratings with L = 1,682 (a dense 1,682-float
  vector, `[mechanism] jlt`). "collect" is from the collect phase's start until the server
  has stored all N releases in its SQLite transcript; "total" from before the server is spawned
  until then (start-up, the shards loading their users, enrollment, collect). The shards are
  spawned with the server, on a port picked first, and load their users while it starts;
  "start-up" is until the server serves, "enroll" from then until all N are enrolled.
* Flower: `bench/flower_round.py` in an interpreter with ``flwr[simulation]`` (Flower pins
  protobuf < 7 while privrec's stubs need >= 7, so it cannot share privrec's environment; see
  docs/decisions/libraries.md), started from this process: N virtual SuperNodes, one round in
  which each ClientApp replies with its user's rating row (1,682 floats, the same users).
  "round" is `Grid.send_and_receive`; "total" is the child process's wall time (interpreter
  start, Ray start-up, the round, shutdown).

Exit status: 0 when both ran, 2 when Flower is not available (the message says how to get it).

Usage: python bench/vs_flower.py [--quick] [--users N ...] [--flower-python PATH] [--secure]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from nodes import (  # bench/nodes.py, shared with ingest.py
    free_port,
    spawn_server,
    start_shards,
    wait_serving,
)

from privrec.shared.config import ExperimentConfig
from privrec.shared.population import load_population
from privrec.sim.admin_client import GrpcAdmin
from privrec.sim.launcher import NodeProcess
from privrec.sim.security import prepare_security

ROOT = Path(__file__).resolve().parent.parent

N_ITEMS = 1682
N_SHARDS = 2
RUN = "bench-vs-flower"
POLL_S = 0.02
FLOWER_SCRIPT = ROOT / "bench" / "flower_round.py"
FLOWER_VENV = ROOT / ".venv-flower" / "bin" / "python"


def experiment(n_users: int) -> ExperimentConfig:
    """The privrec run: N synthetic users, JLT with L = 1,682, no adversary, no broker."""
    return ExperimentConfig.from_dict(
        {
            "run": {"name": RUN, "seed": 0},
            "data": {
                "dataset": "synthetic",
                "synthetic_users": n_users,
                "synthetic_items": N_ITEMS,
            },
            "population": {"shards": N_SHARDS},
            "mechanism": {"name": "jlt", "params": {"dim": N_ITEMS, "n_items": N_ITEMS}},
            "model": {"name": "sketch_knn", "k": 10, "baseline": False},
            "adversary": {"attacks": [], "live": False},
            "control": {"mqtt": "none", "phase_poll_s": 0.05},
        }
    )


def flower_python(explicit: str | None) -> str | None:
    """An interpreter that imports flwr: --flower-python, $PRIVREC_FLOWER_PYTHON,
    .venv-flower (``make flower-env``), or this one."""
    candidates = [explicit, os.environ.get("PRIVREC_FLOWER_PYTHON")]
    candidates += [str(FLOWER_VENV) if FLOWER_VENV.exists() else None, sys.executable]
    for python in candidates:
        if not python:
            continue
        probe = subprocess.run(
            [python, "-c", "import flwr.simulation, ray"], capture_output=True, check=False
        )
        if probe.returncode == 0:
            return python
        if python == explicit:
            return None
    return None


async def privrec_collect(n_users: int, workdir: Path, *, secure: bool) -> dict[str, float]:
    """One collect over real gRPC with server and shard processes; seconds per phase."""
    t0 = time.perf_counter()
    workdir.mkdir(parents=True, exist_ok=True)
    cfg = workdir / "config.toml"
    cfg.write_text(experiment(n_users).to_toml())
    security = prepare_security(workdir, N_SHARDS, insecure=not secure)
    token = secrets.token_hex(16)
    nodes: list[NodeProcess] = []
    try:
        # the shards start beside the server: they load their users while it starts, and
        # their first call waits (with retries) until it serves
        port = free_port()
        target = f"127.0.0.1:{port}"
        server = spawn_server(workdir, cfg, RUN, security.server_args(), token, port=port)
        nodes.append(server)
        nodes += start_shards(workdir, cfg, RUN, target, N_SHARDS, security.node_args)
        wait_serving(server, workdir)
        t_server = time.perf_counter()
        async with GrpcAdmin(target, RUN, token, tls_dir=security.tls_dir) as admin:

            async def until(field: str) -> None:
                while int(getattr(await admin.status(), field)) < n_users:
                    for node in nodes:
                        node.check_alive()
                    await asyncio.sleep(POLL_S)

            await admin.set_phase("enroll")
            await until("enrolled")
            t_enrolled = time.perf_counter()
            await admin.set_phase("public")
            await admin.set_phase("collect")
            t_collect = time.perf_counter()
            await until("profiles")
            t_done = time.perf_counter()
        return {
            "start-up": t_server - t0,
            "enroll": t_enrolled - t_server,
            "collect": t_done - t_collect,
            "total": t_done - t0,
        }
    finally:
        for node in reversed(nodes):
            node.stop()


def flower_round(python: str, n_users: int, workdir: Path) -> dict[str, float]:
    """One Flower round (`bench/flower_round.py`) on the same users' rating rows."""
    workdir.mkdir(parents=True, exist_ok=True)
    data = load_population(experiment(n_users).data, 0)
    rows = workdir / "population.npy"
    np.save(rows, np.asarray(data.ratings.toarray(), dtype=np.float64))
    out, log = workdir / "flower.json", workdir / "flower.log"
    t = time.perf_counter()
    with log.open("wb") as f:
        code = subprocess.run(
            [python, str(FLOWER_SCRIPT), str(rows), str(out)],
            stdout=f,
            stderr=subprocess.STDOUT,
            check=False,
        ).returncode
    wall = time.perf_counter() - t
    if code != 0 or not out.exists():
        tail = log.read_text(errors="replace").splitlines()[-15:]
        raise RuntimeError(f"Flower round failed (status {code}); {log}:\n" + "\n".join(tail))
    times = json.loads(out.read_text())
    if int(times["replies"]) != n_users:
        raise RuntimeError(f"Flower: {times['replies']} replies for {n_users} clients")
    return {"nodes": times["nodes"], "round": times["round"], "total": wall}


def targets(n: int) -> tuple[int, int]:
    """(collect, with start-up) ratio targets for N clients (module docstring)."""
    return (50, 30) if n >= 10_000 else (20, 10)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="N = 200 only (CI size)")
    ap.add_argument("--users", type=int, nargs="+", default=[1_000, 5_000, 10_000])
    ap.add_argument("--flower-python", help="an interpreter with flwr[simulation]")
    ap.add_argument("--secure", action="store_true", help="privrec with mutual TLS + node keys")
    ap.add_argument("--keep", help="keep the run directories here (default: a temporary one)")
    args = ap.parse_args()
    sizes = [200] if args.quick else args.users
    python = flower_python(args.flower_python)
    if python is None:
        print(
            "Flower is not available: no interpreter imports flwr.simulation and ray "
            "(tried --flower-python, $PRIVREC_FLOWER_PYTHON, .venv-flower, this one). "
            "Install it with `make flower-env` (flwr[simulation], the [bench] extra, in "
            ".venv-flower: it pins protobuf < 7, which privrec's stubs cannot use).",
            file=sys.stderr,
        )
        return 2
    version = subprocess.run(
        [python, "-c", "import flwr; print(flwr.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    print(
        f"flwr {version} ({python}); privrec {N_SHARDS} shards, "
        f"{'mutual TLS + node keys' if args.secure else 'plaintext gRPC'}; "
        f"payload 1 x {N_ITEMS} float64 per client; cpus {os.cpu_count()}"
    )
    header = (
        f"{'N':>6s} {'phase':28s} {'privrec':>9s} {'Flower':>9s} {'ratio':>7s} {'target':>7s}  load"
    )
    print(header)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(args.keep) if args.keep else Path(tmp)
        for n in sizes:
            ours = asyncio.run(privrec_collect(n, base / f"privrec-{n}", secure=args.secure))
            theirs = flower_round(python, n, base / f"flower-{n}")
            load = os.getloadavg()[0]
            collect_target, total_target = targets(n)
            for label, a, b, target in (
                ("collect / round", ours["collect"], theirs["round"], collect_target),
                ("with start-up and enrollment", ours["total"], theirs["total"], total_target),
            ):
                print(
                    f"{n:6d} {label:28s} {a:8.2f}s {b:8.2f}s {b / a:6.1f}x {target:6d}x  {load:.1f}"
                )
            print(
                f"{'':6s} (privrec start-up {ours['start-up']:.2f}s, enroll {ours['enroll']:.2f}s; "
                f"Flower nodes visible after {theirs['nodes']:.2f}s)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
