"""`--launcher ray`: the same node processes placed by Ray actors give the `processes` numbers.

The equality test runs on a Ray cluster of two nodes on this machine (two raylets), the
failure tests on a local Ray as `privrec sim` starts one; they skip only when Ray is absent;
`make test` installs the ``[ray]`` extra so CI runs them.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from privrec.shared.config import ExperimentConfig
from privrec.shared.errors import ConfigError
from privrec.sim.cli import main
from privrec.sim.launcher import NodeError
from privrec.sim.ray_launcher import (
    PROBE_NAME,
    RayPlacement,
    RunDirNotShared,
    check_run_dir,
    node_count,
    ray_cluster,
)
from privrec.sim.run import SimOptions, simulate

SMALL = {
    "run": {"name": "ray", "seed": 5},
    "data": {"dataset": "synthetic", "synthetic_users": 100, "synthetic_items": 150},
    "population": {"shards": 2, "batch_size": 16},
    "model": {"k": 10},
    # one attack keeps the run short; the live adversary still follows the feed over MQTT
    "adversary": {"attacks": ["rpt_spectral"]},
}


def small_config() -> ExperimentConfig:
    return ExperimentConfig.from_dict(json.loads(json.dumps(SMALL)))


def comparable(report: dict) -> dict:
    """What must agree between launchers: utility, attack metrics, privacy, counts."""
    return {k: report[k] for k in ("utility", "attacks", "privacy", "population")}


def test_ray_launcher_without_ray_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without Ray installed, --launcher ray fails before the run starts, naming the extra."""
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    out = tmp_path / "run"
    with pytest.raises(ConfigError, match=r"pip install 'privrec\[ray\]'"):
        simulate(small_config(), SimOptions(out_dir=out, launcher="ray", mqtt="none"))
    assert not out.exists()


def test_cli_ray_address_needs_the_ray_launcher(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--ray-address with another launcher is a one-line error with status 2."""
    out = tmp_path / "run"
    argv = ["sim", "--launcher", "processes", "--ray-address", "10.0.0.1:6379", "--out", str(out)]
    assert main(argv) == 2
    assert "--ray-address needs --launcher ray" in capsys.readouterr().err
    assert not out.exists()


def test_check_run_dir_accepts_the_token_and_names_the_node_otherwise(tmp_path: Path) -> None:
    """The shared-filesystem probe: the run's token passes; another token or no file fails,
    naming the Ray node and the run directory."""
    probe = tmp_path / PROBE_NAME
    probe.write_text("token-a")
    assert check_run_dir(str(probe), "token-a", "10.0.0.7") is None
    wrong = check_run_dir(str(probe), "token-b", "10.0.0.7")
    assert wrong is not None and "10.0.0.7" in wrong and str(tmp_path) in wrong
    missing = check_run_dir(str(tmp_path / "elsewhere" / PROBE_NAME), "token-a", "10.0.0.8")
    assert missing is not None and "10.0.0.8" in missing


def test_node_count_counts_every_actor() -> None:
    """One actor per node: the server, each shard, the live adversary, the sybil clients."""
    assert node_count(2, adversary=True, sybils=False) == 4
    assert node_count(3, adversary=False, sybils=True) == 5


@pytest.fixture
def two_ray_nodes() -> Iterator[Any]:
    """A Ray cluster of two nodes (two raylets, 2 CPUs each) on this machine, what `ray start
    --head` and `ray start --address` make on two machines (`ray.cluster_utils.Cluster`)."""
    pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    store = 80 * 2**20  # keep Ray's shared memory small on a shared machine
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 2, "object_store_memory": store, "include_dashboard": False},
    )
    try:
        cluster.add_node(num_cpus=2, object_store_memory=store)
        cluster.wait_for_nodes()
        yield cluster
    finally:
        cluster.shutdown()


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.timeout(300)
def test_ray_launcher_gives_the_processes_numbers(
    two_ray_nodes: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """On a two-node Ray cluster (--ray-address), server, shards and adversary run as node
    processes spread over both Ray nodes, over real gRPC (the server's published node IP) and
    MQTT (the broker on the driver's IP), with TLS and node keys, and the report's figures
    equal `--launcher processes` for the same seed."""
    caplog.set_level(logging.INFO, logger="privrec.sim.ray_launcher")
    config = small_config()
    ref = simulate(config, SimOptions(out_dir=tmp_path / "proc", launcher="processes"))
    out = tmp_path / "ray"
    got = simulate(
        config, SimOptions(out_dir=out, launcher="ray", ray_address=two_ray_nodes.address)
    )
    assert got["run"]["launcher"] == "ray"
    assert {"server", "adversary", "shard-0", "shard-1"} <= set(got["run"]["nodes"])
    assert comparable(got) == comparable(ref)
    placed = dict(
        re.findall(r"node (\S+) runs on \S+ \(Ray node (\w+)\)", caplog.text)  # name → node
    )
    assert set(placed) == {"server", "adversary", "shard-0", "shard-1"}
    assert len(set(placed.values())) == 2  # SPREAD: both Ray nodes run nodes of the run
    for log in ("server", "adversary", "shard-0", "shard-1"):
        assert (out / "logs" / f"{log}.log").exists(), log
    assert not (out / PROBE_NAME).exists()  # removed when the run ends


@pytest.fixture(scope="class")
def local_ray() -> Iterator[Any]:
    """A local Ray, as `privrec sim --launcher ray` starts it without --ray-address."""
    pytest.importorskip("ray")
    with ray_cluster(None, 2) as ray:
        yield ray


class TestOnALocalRay:
    """What goes wrong on a node, on a local Ray started as `privrec sim --launcher ray`
    starts it without --ray-address (`ray_cluster(None, n)`)."""

    def test_ray_node_without_the_run_dir_fails_naming_its_machine(
        self, local_ray: Any, tmp_path: Path
    ) -> None:
        """A Ray node that reads another token in the probe (no shared run directory) does
        not start its node; the orchestrator raises `RunDirNotShared` naming the node's IP."""
        placement = RayPlacement(local_ray, tmp_path)
        try:
            (tmp_path / PROBE_NAME).write_text("another machine's directory")
            node = placement.spawn("shard-0", ["--version"], tmp_path / "logs")
            ip = local_ray.util.get_node_ip_address()
            with pytest.raises(RunDirNotShared, match=rf"Ray node {ip} does not see the run"):
                node.check_alive()
        finally:
            placement.close()

    def test_ray_node_that_fails_reports_its_status_and_log(
        self, local_ray: Any, tmp_path: Path
    ) -> None:
        """A node started through Ray that exits non-zero raises `NodeError` with its exit
        status and the tail of its log, as under `processes`."""
        placement = RayPlacement(local_ray, tmp_path)
        try:
            node = placement.spawn("shard-0", ["clients"], tmp_path / "logs")  # no --run-dir
            with pytest.raises(NodeError, match=r"(?s)exited with status 2.*--run-dir"):
                node.wait(60)
        finally:
            placement.close()
