"""The aggregator survives SIGKILL in any phase (issue 12 (8)).

`privrec sim --launcher processes` with `SimOptions(faults=...)`: the orchestrator kills the
server process with SIGKILL at the named moments and starts it again on the same port, store and
token; shards, adversary and orchestrator retry until it answers. The run must finish with the
figures of an uninterrupted run of the same seed (the in-process launcher's, which the
end-to-end tests show equal to the processes launcher's): utility, attacks, privacy ledger and
the stored counts. Retried traffic (duplicates) and the seconds spent differ by nature.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from privrec.server.node import ADMIN_TOKEN_ENV
from privrec.shared.config import ExperimentConfig
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.sim.faults import Fault, NodeCommand, NodeSupervisor
from privrec.sim.launcher import spawn, wait_file
from privrec.sim.run import SimOptions, simulate

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ONE_TIER = {
    "run": {"name": "restart", "seed": 5},
    "data": {"dataset": "synthetic", "synthetic_users": 240, "synthetic_items": 300},
    "population": {"shards": 2, "batch_size": 8, "concurrency": 8},
    "model": {"k": 20},
}
TWO_TIER = {
    "run": {"name": "restart2", "seed": 5},
    "data": {"dataset": "synthetic", "synthetic_users": 120, "synthetic_items": 150},
    "population": {"shards": 2, "public_users": 20, "private_round_size": 40, "batch_size": 8},
    "mechanism": {"name": "pmc", "params": {"h_mode": "per-user"}},
    "model": {"name": "two_tier_lowrank", "k": 3},
    "adversary": {"attacks": ["second_order_reconstruction"]},
}


def figures(report: dict[str, Any]) -> dict[str, Any]:
    """What a restart must not change."""
    pop = dict(report["population"])
    for traffic in ("duplicates", "releases_rejected"):
        pop.pop(traffic, None)
    return {
        "utility": report["utility"],
        "attacks": report["attacks"],
        "privacy": report["privacy"],
        "population": pop,
        "curves": report.get("curves"),
    }


def fired(out: Path) -> list[str]:
    path = out / "logs" / "faults.json"
    return json.loads(path.read_text()) if path.exists() else []


def test_server_killed_in_collect_train_and_serve_finishes_with_the_same_figures(
    tmp_path: Path,
) -> None:
    """SIGKILL three times in one run: mid-collection (100 of 240 profiles in), in "train",
    and mid-serve (half of the queries answered); the live adversary follows the feed of all
    three servers (each restart re-sends the transcript; it keeps each seq once)."""
    config = ExperimentConfig.from_dict(ONE_TIER)
    reference = simulate(config, SimOptions(tmp_path / "ref", launcher="inprocess", mqtt="none"))
    n_queries = reference["population"]["queries"]
    faults = (
        Fault("collect", "profiles", 100),
        Fault("train"),
        Fault("serve", "queries", n_queries // 2),
    )
    out = tmp_path / "killed"
    killed = simulate(config, SimOptions(out, launcher="processes", mqtt="embedded", faults=faults))
    assert len(fired(out)) == 3, fired(out)
    assert figures(killed) == figures(reference)
    assert killed["population"]["enrolled"] == 240


def test_two_tier_server_killed_in_a_collect_round_finishes_with_the_same_figures(
    tmp_path: Path,
) -> None:
    """A two-tier run (PMC, rounds of 40 private users) killed in collect round 1, after some
    of the round's releases are in: the restarted server has the public model, every round's
    published model and the folded users, and the curve over rounds is unchanged."""
    config = ExperimentConfig.from_dict(TWO_TIER)
    reference = simulate(config, SimOptions(tmp_path / "ref", launcher="inprocess", mqtt="none"))
    out = tmp_path / "killed"
    killed = simulate(
        config,
        SimOptions(
            out,
            launcher="processes",
            mqtt="none",
            faults=(Fault("collect", "profiles", 20 + 40 + 10, round=1),),
        ),
    )
    assert len(fired(out)) == 1, fired(out)
    assert figures(killed) == figures(reference)


class _Serving:
    """A server status late in serving (the fault's moment), as `NodeSupervisor` polls it."""

    async def status(self) -> pb.RunStatus:
        return pb.RunStatus(phase="serve", queries=130)


async def test_a_restart_waits_for_the_new_server_while_the_shards_finish(tmp_path: Path) -> None:
    """A fault late in serving can kill the server after the shards had every answer: they exit
    (status 0) while the new server starts. The supervisor waits for the new server alone; a
    node that finished its work is not a failure (CI saw the restart fail on exactly this)."""
    (tmp_path / "c.toml").write_text(
        '[run]\nname = "sup"\n[data]\ndataset = "synthetic"\n'
        "synthetic_users = 30\nsynthetic_items = 40\n"
    )
    ready, logs = tmp_path / "server.ready", tmp_path / "logs"
    args = ["server", "--config", str(tmp_path / "c.toml"), "--run-dir", str(tmp_path)]
    args += ["--run-id", "r1", "--ready-file", str(ready), "--insecure"]
    env = {ADMIN_TOKEN_ENV: "t" * 32}
    nodes = [spawn("server", args, logs, env), spawn("shard-0", ["--version"], logs)]
    try:
        port = wait_file(ready, 60, nodes[:1]).split()[0]
        assert nodes[1].wait(30) == 0  # the shard is done
        command = NodeCommand([*args, "--port", port], env, ready)
        supervisor = NodeSupervisor(nodes, {"server": command}, logs)
        first = nodes[0].pid
        supervisor.inject((Fault("serve", "queries", 120),), _Serving())
        deadline = time.monotonic() + 60
        while not (supervisor.restarts and ready.exists()) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await supervisor.stop_injecting()  # re-raises what the watch raised
        assert len(supervisor.restarts) == 1
        assert nodes[0].pid != first and nodes[0].proc.poll() is None
        assert ready.read_text().split()[0] == port  # the same port
    finally:
        for node in nodes:
            node.stop()
