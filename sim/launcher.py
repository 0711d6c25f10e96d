"""Starting nodes as OS processes (`--launcher processes`) and waiting on them."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Protocol

from privrec.shared.errors import PrivrecError
from privrec.shared.lifecycle import orchestrated_env
from privrec.shared.threads import thread_environment


class NodeError(PrivrecError):
    """A node process failed; the message names its log."""


@dataclasses.dataclass
class NodeProcess:
    """One spawned node with its log file."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        """The node's OS process id."""
        return self.proc.pid

    def check_alive(self) -> None:
        """Raise `NodeError` (with the log's tail) if the node exited with a failure."""
        code = self.proc.poll()
        if code is not None and code != 0:
            raise NodeError(
                f"node {self.name} exited with status {code}; see {self.log}:\n{tail(self.log)}"
            )

    def wait(self, timeout: float) -> int:
        """Wait for the node to exit; its status, or `NodeError` after `timeout` seconds."""
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise NodeError(
                f"node {self.name} did not finish within {timeout:.0f}s; see {self.log}"
            ) from None
        if code != 0:
            raise NodeError(
                f"node {self.name} exited with status {code}; see {self.log}:\n{tail(self.log)}"
            )
        return code

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the node, SIGKILL it if still alive after `timeout` seconds."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def spawn(
    name: str, args: list[str], log_dir: Path, env: dict[str, str] | None = None
) -> NodeProcess:
    """Start `privrec ARGS...` (as `python -m privrec.sim.cli`), output in `log_dir/NAME.log`.

    Each node runs its BLAS single-threaded and numba's threads with the layer and wait
    policy of `shared.threads`, unless the caller's environment says otherwise
    (`thread_environment`): a run puts several nodes on few cores. The node watches this
    process and stops when it is gone (`shared.lifecycle`).
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"{name}.log"
    with log.open("ab") as f:
        proc = subprocess.Popen(
            [sys.executable, "-m", "privrec.sim.cli", *args],
            stdout=f,
            stderr=subprocess.STDOUT,
            env=orchestrated_env({**os.environ, **thread_environment(), **(env or {})}),
            start_new_session=True,
        )
    return NodeProcess(name, proc, log)


def wait_file(path: Path, timeout: float, nodes: list[NodeProcess]) -> str:
    """Wait for a ready file written by a node; fail early if a node dies."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        for n in nodes:
            n.check_alive()
            if n.proc.poll() is not None:
                raise NodeError(f"node {n.name} exited before {path.name} appeared; see {n.log}")
        if time.monotonic() > deadline:
            raise NodeError(f"{path} did not appear within {timeout:.0f}s")
        time.sleep(0.05)
    return path.read_text()


class NodePlacement(Protocol):
    """Where the nodes of a `processes`-style run start (`sim.run`): here, or on a cluster
    (`sim.ray_launcher.RayPlacement`)."""

    @property
    def server_bind(self) -> str | None:
        """The interface the server listens on (None: [transport] host)."""
        ...

    def spawn(
        self, name: str, args: list[str], log_dir: Path, env: dict[str, str] | None = None
    ) -> NodeProcess:
        """Start node `name` with `args`, its log in `log_dir`."""

    def address(self, node: NodeProcess) -> str:
        """The host the other nodes dial to reach `node`."""
        ...


class LocalPlacement:
    """Every node an OS process of this machine (`--launcher processes`)."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.server_bind: str | None = host

    def spawn(
        self, name: str, args: list[str], log_dir: Path, env: dict[str, str] | None = None
    ) -> NodeProcess:
        """Start node `name` as a local process."""
        return spawn(name, args, log_dir, env)

    def address(self, node: NodeProcess) -> str:
        """The host the other nodes reach `node` at."""
        return self.host


def tail(path: Path, lines: int = 15) -> str:
    """The last `lines` lines of the file at `path` ("" if it cannot be read)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


__all__ = [
    "LocalPlacement",
    "NodeError",
    "NodePlacement",
    "NodeProcess",
    "spawn",
    "tail",
    "wait_file",
]
