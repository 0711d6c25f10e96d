"""`--launcher ray`: the run's nodes placed on a Ray cluster (the optional ``[ray]`` extra).

Each node of the run (the server, every client shard, the live adversary, the sybil clients)
gets a Ray actor of its own, a `NodeHost`. Ray places the actor on one of the cluster's
machines (``scheduling_strategy="SPREAD"``, one logical CPU each), and the actor starts on that
machine the very command `--launcher processes` starts locally, `privrec server|clients|
adversary|sybils ...` through `sim.launcher.spawn`. So the node entry points are the CLI's own
(`sim.cli`), unchanged, and a node behaves exactly as under `processes`: its own OS process,
real gRPC to the server and real MQTT to the broker, its log in ``RUN_DIR/logs/NAME.log``,
SIGTERM to stop it. The orchestrator holds a `RayProcess` per node, a stand-in for
`subprocess.Popen` whose `poll`/`wait`/`send_signal`/`kill` are calls on the actor, so
`sim.run` drives the phases with the code it runs for `processes` (`NodePlacement`).

Addresses: the server listens on every interface (``--host 0.0.0.0``) of the machine Ray put
it on and the orchestrator publishes ``NODE_IP:PORT`` (`ray.util.get_node_ip_address()` in the
server's actor) as the target every other node dials; the embedded MQTT broker runs beside the
orchestrator, bound to the driver's node IP, and its TLS certificate names that address.

Files: the nodes read their inputs (``config.toml``, keys and certificates under ``secrets/``,
the adversary's stated side knowledge) from the run directory and write their results there
(the server's store, the adversary's outputs, the sybils' record, logs, ready files), as they
do under `processes`; the referee then reads them from there. On more than one machine the
run directory must therefore be one shared filesystem (NFS, a cluster filesystem) mounted at
the same path on every Ray node. Each actor checks this before it starts its node: the
orchestrator writes a random token into ``RUN_DIR/.ray-probe`` and a node whose machine does
not read the same token there fails the run with `RunDirNotShared`, naming the machine. The
dataset cache (``privrec data fetch ml-100k``) must be present on every machine that runs a
shard or the server (synthetic data needs nothing).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from privrec.shared.errors import ConfigError
from privrec.sim.launcher import NodeError, NodeProcess, spawn

logger = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'privrec[ray]'"
PROBE_NAME = ".ray-probe"
LOCAL_OBJECT_STORE_BYTES = 100 * 1024 * 1024
"""Object store of the local Ray `privrec sim --launcher ray` starts without --ray-address:
nothing large travels through it (node commands, exit codes), and Ray's default (30 % of RAM)
would reserve gigabytes of shared memory on a laptop."""
ACTOR_START_S = 120.0  # placing an actor and starting its worker process (a busy cluster)
CALL_S = 60.0  # one call on a placed actor (poll, signal)
POLL_CACHE_S = 0.05  # the orchestrator polls every node often; one actor call per this interval
SERVER_BIND = "0.0.0.0"  # every interface: the server must be reachable from other machines


class RunDirNotShared(ConfigError):
    """A Ray node does not see the orchestrator's run directory (no shared filesystem)."""


def import_ray() -> Any:
    """The `ray` module, or a `ConfigError` naming the extra that installs it."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(
            f"--launcher ray needs Ray, which is not installed ({exc}): {INSTALL_HINT}"
        ) from None
    return ray


def check_run_dir(probe: str, token: str, node_ip: str) -> str | None:
    """On a Ray node: None when `probe` holds `token` (the run directory is shared), otherwise
    the reason, naming the node."""
    try:
        seen = Path(probe).read_text()
    except OSError as exc:
        seen = f"<{exc.strerror or exc}>"
    if seen == token:
        return None
    run_dir = Path(probe).parent
    return (
        f"--launcher ray: the Ray node {node_ip} does not see the run directory {run_dir} "
        f"(its {PROBE_NAME} reads {seen[:40]!r}, not this run's token). Every node of the "
        "run reads its inputs from and writes its results to the run directory, so on more "
        "than one machine --out must be on a filesystem every Ray node mounts at the same "
        "path (e.g. NFS); see the README, 'More than one machine'"
    )


class NodeHost:
    """The Ray actor that runs one node on its machine (`ray.remote(NodeHost)`).

    Its methods mirror what the orchestrator does with a local `subprocess.Popen`.
    """

    def __init__(self) -> None:
        self.node: NodeProcess | None = None

    def start(
        self,
        name: str,
        args: list[str],
        log_dir: str,
        env: dict[str, str] | None,
        probe: str,
        token: str,
    ) -> tuple[str | None, int, str, str]:
        """Start `privrec ARGS...` here; returns (error or None, pid, this machine's IP, the
        Ray node's id)."""
        import ray

        ip = str(ray.util.get_node_ip_address())  # type: ignore[no-untyped-call]
        ray_node = str(ray.get_runtime_context().get_node_id())
        problem = check_run_dir(probe, token, ip)
        if problem is not None:
            return problem, 0, ip, ray_node
        self.node = spawn(name, args, Path(log_dir), env)
        return None, self.node.pid, ip, ray_node

    def _proc(self) -> subprocess.Popen[bytes]:
        assert self.node is not None, "start() first"
        return self.node.proc

    def poll(self) -> int | None:
        """The node's exit status, or None while it runs."""
        return self._proc().poll()

    def wait(self, timeout: float | None) -> int | None:
        """The exit status, or None while the node still runs after `timeout` seconds."""
        try:
            return self._proc().wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def send_signal(self, sig: int) -> None:
        """Send `sig` to the node."""
        self._proc().send_signal(sig)

    def kill(self) -> None:
        """SIGKILL the node."""
        self._proc().kill()

    def shutdown(self) -> None:
        """Stop the node (SIGTERM, then SIGKILL), before the actor itself is killed: the node
        runs in a session of its own and would outlive its actor."""
        if self.node is not None:
            self.node.stop()


class RayProcess:
    """The orchestrator's handle on a node `NodeHost` runs: the part of `subprocess.Popen`
    that `sim.launcher.NodeProcess` and `sim.run` use."""

    def __init__(self, ray: Any, name: str, actor: Any, started: Any) -> None:
        self._ray, self.name, self.actor = ray, name, actor
        self._started = started
        self._pid: int | None = None
        self._ip = ""
        self.ray_node = ""  # the id of the Ray node the node runs on
        self._code: int | None = None
        self._polled = 0.0

    def _get(self, ref: Any, timeout: float) -> Any:
        try:
            return self._ray.get(ref, timeout=timeout)
        except self._ray.exceptions.GetTimeoutError:
            raise NodeError(
                f"node {self.name}: its Ray actor did not answer within {timeout:.0f}s "
                f"(cluster resources: {self._ray.available_resources()})"
            ) from None
        except self._ray.exceptions.RayActorError as exc:
            raise NodeError(f"node {self.name}: its Ray actor died: {exc}") from None

    def _ensure_started(self) -> None:
        if self._pid is None:
            problem, pid, ip, ray_node = self._get(self._started, ACTOR_START_S)
            if problem is not None:
                raise RunDirNotShared(problem)
            self._pid, self._ip, self.ray_node = int(pid), str(ip), str(ray_node)
            logger.info("node %s runs on %s (Ray node %s)", self.name, ip, ray_node[:12])

    @property
    def pid(self) -> int:
        """The node's process id on its Ray host."""
        self._ensure_started()
        assert self._pid is not None
        return self._pid

    @property
    def node_ip(self) -> str:
        """The IP address of the machine the node runs on."""
        self._ensure_started()
        return self._ip

    def poll(self) -> int | None:
        """The node's exit status, or None while it runs (cached for a short while)."""
        if self._code is None and time.monotonic() - self._polled >= POLL_CACHE_S:
            self._ensure_started()
            self._code = self._get(self.actor.poll.remote(), CALL_S)
            self._polled = time.monotonic()
        return self._code

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the node to exit; its status."""
        self._ensure_started()
        if self._code is None:
            budget = CALL_S + (timeout if timeout is not None else 24 * 3600.0)
            self._code = self._get(self.actor.wait.remote(timeout), budget)
        if self._code is None:
            raise subprocess.TimeoutExpired(self.name, timeout or 0.0)
        return self._code

    def send_signal(self, sig: int) -> None:
        """Send `sig` to the node on its Ray host."""
        self._ensure_started()
        self._get(self.actor.send_signal.remote(int(sig)), CALL_S)

    def terminate(self) -> None:
        """SIGTERM the node."""
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL the node."""
        self._ensure_started()
        self._get(self.actor.kill.remote(), CALL_S)


class RayPlacement:
    """`sim.run.NodePlacement` on a Ray cluster: every node a `NodeHost` actor.

    Args:
        ray: the imported, initialised `ray` module.
        run_dir: the run directory (shared by every Ray node; see the module docstring).
    """

    server_bind = SERVER_BIND

    def __init__(self, ray: Any, run_dir: Path) -> None:
        self.ray = ray
        self.run_dir = run_dir.resolve()
        self.token = secrets.token_hex(16)
        (self.run_dir / PROBE_NAME).write_text(self.token)
        self._host = ray.remote(num_cpus=1, scheduling_strategy="SPREAD")(NodeHost)
        self.hosts: list[Any] = []

    def spawn(
        self, name: str, args: list[str], log_dir: Path, env: dict[str, str] | None = None
    ) -> NodeProcess:
        """Place node `name` on the cluster and start `privrec ARGS...` there."""
        actor = self._host.remote()
        self.hosts.append(actor)
        started = actor.start.remote(
            name,
            args,
            str(log_dir.resolve()),
            env,
            str(self.run_dir / PROBE_NAME),
            self.token,
        )
        proc: Any = RayProcess(self.ray, name, actor, started)
        return NodeProcess(name, proc, log_dir / f"{name}.log")

    def address(self, node: NodeProcess) -> str:
        """The address the other nodes dial to reach `node` (the IP of its machine)."""
        proc = node.proc
        assert isinstance(proc, RayProcess)
        return proc.node_ip

    def close(self) -> None:
        """Stop every node still running, then release its actor."""
        pending = [h.shutdown.remote() for h in self.hosts]
        with contextlib.suppress(Exception):
            self.ray.get(pending, timeout=30)
        for h in self.hosts:
            with contextlib.suppress(Exception):
                self.ray.kill(h)
        self.hosts.clear()
        (self.run_dir / PROBE_NAME).unlink(missing_ok=True)


def node_count(n_shards: int, *, adversary: bool, sybils: bool) -> int:
    """How many actors a run places: the server, the shards, the live adversary, the sybils."""
    return 1 + n_shards + int(adversary) + int(sybils)


def _init_ray(ray: Any, kwargs: dict[str, Any], *, local: bool) -> None:
    """`ray.init(**kwargs)`; a local Ray whose raylet did not register within Ray's fixed 30 s
    (seen on this 2-core machine under a load of 8) is shut down and started once more."""
    for attempt in (1, 2):
        try:
            ray.init(**kwargs)
            return
        except Exception as exc:  # Ray raises a bare Exception for a raylet start-up timeout
            if not local or attempt == 2 or "timed out during startup" not in str(exc):
                raise
            logger.warning("local Ray did not start in time (%s); starting it once more", exc)
            ray.shutdown()


@contextlib.contextmanager
def ray_cluster(address: str | None, n_nodes: int) -> Iterator[Any]:
    """Connect to the Ray cluster at `address` (``ray.init(address=...)``), or start a local
    one when `address` is None; yields the `ray` module and shuts down what it started.

    A local Ray gets one logical CPU per node of the run (as `processes` starts one OS process
    per node whatever the number of cores) and a 100 MB object store. On a cluster, the run
    needs `n_nodes` free CPUs and fails at once, with the count, when they are not there
    (an actor that cannot be placed would otherwise wait for ever).

    Raises:
        ConfigError: Ray is not installed, or the cluster lacks CPUs for the run.
    """
    ray = import_ray()
    started = False
    if not ray.is_initialized():
        # Ray's own start-up messages go to its log, not into the run's progress display
        kwargs: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": False,
            "logging_level": logging.WARNING,
        }
        if address is None:
            kwargs |= {
                "address": "local",
                "num_cpus": n_nodes,
                "object_store_memory": LOCAL_OBJECT_STORE_BYTES,
            }
        else:
            kwargs["address"] = address
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        try:
            _init_ray(ray, kwargs, local=address is None)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ConfigError(
                f"--ray-address {address}: cannot connect to Ray: {exc} (is `ray start --head` "
                "running there? If the cluster uses Ray's token authentication, export "
                "RAY_AUTH_MODE=token here too, with the head's token in ~/.ray/auth_token)"
            ) from None
        started = True
    try:
        cpus = float(ray.cluster_resources().get("CPU", 0.0))
        if cpus < n_nodes:
            raise ConfigError(
                f"--launcher ray: the run places {n_nodes} nodes (the server, the shards, the "
                f"adversary) with one CPU each, and the Ray cluster has {cpus:g} CPUs; add "
                "machines (`ray start --address ...`) or lower [population] shards"
            )
        yield ray
    finally:
        if started:
            ray.shutdown()


__all__ = [
    "INSTALL_HINT",
    "NodeHost",
    "RayPlacement",
    "RayProcess",
    "RunDirNotShared",
    "check_run_dir",
    "import_ray",
    "node_count",
    "ray_cluster",
]
