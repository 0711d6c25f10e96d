"""Crash injection for `privrec sim --launcher processes`: SIGKILL a node, start it again.

A `Fault` names a node (the server by default, a client shard, the adversary) and a moment of
the run (a phase, optionally a collect round, a counter of the server's status reaching a
value, or a fit in progress). `NodeSupervisor.inject` polls the server's status and, at each
moment, kills that node's process with SIGKILL (no clean-up, as a crash) and starts it again
with the same arguments (the server on the same port, store and admin token). Every other node
keeps running: the shards and the orchestrator retry until a new server answers
(`client.transport`, `sim.run.GrpcAdmin`), the new server takes up its stored state
(`server.aggregator`), a new shard or adversary rejoins where the run is (`client.shard`,
`adversary.node`), and the run finishes. The tests use it to check that a run with a node
killed in any phase ends with the same figures as an uninterrupted one.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
from pathlib import Path
from typing import Protocol

from privrec.shared.errors import PrivrecError
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.sim.launcher import NodeProcess, spawn, wait_file

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Fault:
    """Kill `node` once the server's status shows `phase` (and `round`, in a two-tier collect),
    and `field` (a RunStatus counter, e.g. "profiles", "queries") at least `at_least`; with
    `while_training`, only before the fit is over (`train_seconds` still 0)."""

    phase: str
    field: str = ""
    at_least: int = 0
    round: int = 0
    while_training: bool = False
    node: str = "server"

    def due(self, st: pb.RunStatus) -> bool:
        """Whether the fault fires on this status (phase, round, counter and training state)."""
        if st.phase != self.phase or st.round < self.round:
            return False
        if self.field and int(getattr(st, self.field)) < self.at_least:
            return False
        return not self.while_training or st.train_seconds == 0


class _Status(Protocol):
    async def status(self) -> pb.RunStatus: ...


@dataclasses.dataclass(frozen=True)
class NodeCommand:
    """How a node was started: its command line, extra environment and ready file (None: the
    node writes none)."""

    args: list[str]
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    ready: Path | None = None


class NodeSupervisor:
    """Kills and restarts the nodes of a run (see the module docstring).

    Args:
        nodes: the run's node list; a node's entry is replaced in place on a restart.
        commands: node name → how it was started (the server's with ``--port`` of the first
            server).
        log_dir: where node logs go.
    """

    def __init__(
        self, nodes: list[NodeProcess], commands: dict[str, NodeCommand], log_dir: Path
    ) -> None:
        self.nodes, self.commands, self.log_dir = nodes, commands, log_dir
        self.restarts: list[str] = []
        self._pending: list[Fault] = []
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    def node(self, name: str) -> NodeProcess:
        """The current process of node `name` (a restart replaces it)."""
        return next(n for n in self.nodes if n.name == name)

    def restart(self, name: str = "server") -> NodeProcess:
        """SIGKILL node `name` and start a new one (returned); synchronous, so no liveness
        check of the orchestrator sees the dead process in between."""
        i = next(i for i, n in enumerate(self.nodes) if n.name == name)
        command = self.commands[name]
        self.nodes[i].kill()
        if command.ready is not None:
            command.ready.unlink(missing_ok=True)
        self.nodes[i] = spawn(name, command.args, self.log_dir, command.env)
        return self.nodes[i]

    def inject(self, faults: tuple[Fault, ...], admin: _Status, poll_s: float = 0.02) -> None:
        """Start watching for `faults` (in order) in the background."""
        self._pending = list(faults)
        self._task = asyncio.create_task(self._watch(admin, poll_s), name="privrec[sim].faults")

    async def checkpoint(self, admin: _Status) -> None:
        """Fire the next fault now if it is due. The orchestrator calls this after each phase
        change and at the end of serving, so that a fault on a short moment (a fit that ends
        between two polls on a loaded machine, the last queries) still fires, at the latest
        before the run moves on. A status that cannot be read skips the check (the next one
        fires it); a restart whose new server does not come up fails the run."""
        try:
            st = await admin.status()
        except PrivrecError:
            return
        await self._fire_if_due(st)

    async def _watch(self, admin: _Status, poll_s: float) -> None:
        while self._pending:
            try:
                st = await admin.status()
            except PrivrecError:
                await asyncio.sleep(poll_s)
                continue
            await self._fire_if_due(st)
            await asyncio.sleep(poll_s)

    async def _fire_if_due(self, st: pb.RunStatus) -> None:
        async with self._lock:
            if not self._pending or not self._pending[0].due(st):
                return
            fault = self._pending.pop(0)
            node = self.restart(fault.node)
            note = (
                f"{fault} (status: phase {st.phase}, round {st.round}, "
                f"trained in {st.train_seconds:.3f}s)"
            )
            self.restarts.append(note)
            (self.log_dir / "faults.json").write_text(json.dumps(self.restarts, indent=2))
            logger.warning("%s killed and restarted at %s", fault.node, note)
            # only the new node's death fails the wait: the other nodes may finish their
            # work meanwhile (a fault late in serving: the shards had every answer before the
            # kill and exit), and a node that fails is the orchestrator's `check` to report
            ready = self.commands[fault.node].ready
            if ready is not None:
                await asyncio.to_thread(wait_file, ready, 60, [node])

    async def stop_injecting(self) -> None:
        """Cancel the injection task and wait for it to end."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            if self._task.done() and not self._task.cancelled() and self._task.exception():
                raise self._task.exception()  # type: ignore[misc]


__all__ = ["Fault", "NodeCommand", "NodeSupervisor"]
