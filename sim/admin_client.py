"""The operator's client of a run's `privrec.v1.Admin` service (SetPhase, GetStatus).

`privrec sim` drives the phases through it (`sim.run`), and so does `privrec admin` for a
hand-started run (`sim.cli_admin`); `Admin` is what both launchers' drivers need, which the
in-process launcher provides without a network (`sim.inprocess.InprocessAdmin`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol, Self

import grpc

from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.proto.privrec.v1 import aggregator_pb2_grpc as pb_grpc
from privrec.shared.rpc import raise_from_rpc, retryable
from privrec.sim.security import OPERATOR

RUN_TIMEOUT_S = 3600.0
"""The longest a run's phase change (a fit) or its adversary may take."""


class Admin(Protocol):
    """What drives a run's phases: set the phase (and two-tier round), read the status."""

    async def set_phase(self, phase: str, round_: int = 0) -> pb.RunStatus:
        """Move the run to `phase` (and two-tier `round_`); the new status."""

    async def status(self) -> pb.RunStatus:
        """The run's status."""


class GrpcAdmin:
    """The operator's client of the `privrec.v1.Admin` service (an async context manager).

    Transient failures (the server restarting, `shared.rpc.retryable`) are retried for
    `retry_deadline_s`; SetPhase is safe to repeat (the same phase again is a no-op).
    With `tls_dir`, the channel is mutual TLS with the certificate of `node`.
    """

    def __init__(
        self,
        target: str,
        run_id: str,
        token: str,
        *,
        tls_dir: Path | None = None,
        node: str = OPERATOR,
        retry_deadline_s: float = 0.0,
    ) -> None:
        from privrec.client.transport import make_channel

        self.run_id, self.token = run_id, token
        self.retry_deadline_s = retry_deadline_s
        self.channel = (
            make_channel(target, tls_dir=tls_dir, node=node)
            if tls_dir is not None
            else grpc.aio.insecure_channel(target)
        )
        self.stub = pb_grpc.AdminStub(self.channel)

    async def _retrying(self, call: Callable[[], Awaitable[pb.RunStatus]]) -> pb.RunStatus:
        give_up = time.monotonic() + self.retry_deadline_s
        delay = 0.05
        while True:
            try:
                return await call()
            except grpc.aio.AioRpcError as exc:
                if not retryable(exc.code(), exc.details() or "") or time.monotonic() > give_up:
                    raise raise_from_rpc(exc) from exc
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.channel.close()

    async def set_phase(self, phase: str, round_: int = 0) -> pb.RunStatus:
        """Move the run to `phase` (SetPhase, retried while the server starts)."""
        req = pb.SetPhaseRequest(
            run_id=self.run_id, admin_token=self.token, phase=phase, round=round_
        )
        return await self._retrying(lambda: self.stub.SetPhase(req, timeout=RUN_TIMEOUT_S))

    async def status(self) -> pb.RunStatus:
        """The run's status (GetStatus, retried while the server starts)."""
        req = pb.GetStatusRequest(run_id=self.run_id, admin_token=self.token)
        return await self._retrying(lambda: self.stub.GetStatus(req, timeout=30))


__all__ = ["RUN_TIMEOUT_S", "Admin", "GrpcAdmin"]
