"""`privrec sim`: one experiment, end to end.

The orchestrator starts the nodes, drives the phases enroll → collect → train → serve → attack →
report through the server's Admin service (and announces each on the MQTT control plane), then
hands everything to the referee and writes the run directory. `launcher="processes"` runs every
node as its own OS process over loopback gRPC and MQTT; `launcher="inprocess"` runs the same
objects in this process with no network, and gives the same numbers for the same seed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol, Self

import grpc
import numpy as np

from privrec.adversary.knowledge import AdversaryKnowledge
from privrec.adversary.node import RecordFile, attack_record
from privrec.adversary.sybils import SybilSettings, run_sybils
from privrec.client.shard import polling_waiter, run_shard
from privrec.client.transport import GrpcTransport
from privrec.server.node import ADMIN_TOKEN_ENV, open_aggregator, run_spec
from privrec.shared.accounting import check_mechanism
from privrec.shared.config import ExperimentConfig
from privrec.shared.control import ControlPlane
from privrec.shared.data.dataset import RatingData
from privrec.shared.population import collect_rounds, load_population
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.proto.privrec.v1 import aggregator_pb2_grpc as pb_grpc
from privrec.shared.rpc import raise_from_rpc
from privrec.sim.adversary_knowledge import side_knowledge_plan, sybil_users
from privrec.sim.inprocess import InprocessAdmin, InprocessTransport
from privrec.sim.launcher import NodeProcess, spawn, wait_file
from privrec.sim.report import build_report, write_report

logger = logging.getLogger(__name__)
Progress = Callable[[str, int, int], None]  # (phase, done, total)
RUN_TIMEOUT_S = 3600.0


class Admin(Protocol):
    async def set_phase(self, phase: str, round_: int = 0) -> pb.RunStatus: ...
    async def status(self) -> pb.RunStatus: ...


class GrpcAdmin:
    """The operator's client of the `privrec.v1.Admin` service (an async context manager)."""

    def __init__(self, target: str, run_id: str, token: str) -> None:
        self.run_id, self.token = run_id, token
        self.channel = grpc.aio.insecure_channel(target)
        self.stub = pb_grpc.AdminStub(self.channel)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.channel.close()

    async def set_phase(self, phase: str, round_: int = 0) -> pb.RunStatus:
        req = pb.SetPhaseRequest(
            run_id=self.run_id, admin_token=self.token, phase=phase, round=round_
        )
        try:
            return await self.stub.SetPhase(req, timeout=RUN_TIMEOUT_S)
        except grpc.aio.AioRpcError as exc:
            raise raise_from_rpc(exc) from exc

    async def status(self) -> pb.RunStatus:
        req = pb.GetStatusRequest(run_id=self.run_id, admin_token=self.token)
        try:
            return await self.stub.GetStatus(req, timeout=30)
        except grpc.aio.AioRpcError as exc:
            raise raise_from_rpc(exc) from exc


@dataclasses.dataclass
class SimOptions:
    """How to run: where, with which launcher and broker."""

    out_dir: Path
    launcher: str = "processes"  # or "inprocess"
    mqtt: str = "embedded"  # "embedded", "none" or mqtt://host:port
    progress: Progress | None = None
    audit: bool = False


def run_id_for(config: ExperimentConfig) -> str:
    """Deterministic run id: the same config and seed name the same run."""
    return f"{config.run.name}-s{config.run.seed}"


def simulate(config: ExperimentConfig, options: SimOptions) -> dict[str, Any]:
    """Run the experiment; returns the report (also written to the run directory)."""
    return asyncio.run(_simulate(config, options))


async def _simulate(config: ExperimentConfig, options: SimOptions) -> dict[str, Any]:
    out = options.out_dir
    started = time.time()
    timings: dict[str, float] = {}
    t = time.perf_counter()
    data = load_population(config.data, config.run.seed)
    timings["load"] = time.perf_counter() - t
    run_id = run_id_for(config)
    # A config error, or a DP claim the accountant cannot compose, stops the run before the
    # run folder is made or any node starts.
    check_mechanism(run_spec(config, run_id, data, "").mechanism)
    # the adversary's stated side knowledge (its sybils enroll and release like users)
    knowledge, _ = side_knowledge_plan(config, data)
    sybils = sybil_users(config, knowledge)
    out.mkdir(parents=True, exist_ok=True)
    knowledge.write(out)
    (out / "adversary" / "sybils" / "record.json").unlink(missing_ok=True)
    for stale in ("server.sqlite", "server.sqlite-wal", "server.sqlite-shm"):
        (out / stale).unlink(missing_ok=True)
    (out / "config.toml").write_text(config.to_toml())
    async with _broker(options.mqtt, out) as mqtt_url:
        if options.launcher == "inprocess":
            status = await _run_inprocess(config, run_id, data, out, options, timings, sybils)
            nodes: dict[str, int] = {}
        else:
            status, nodes = await _run_processes(
                config, run_id, data, out, mqtt_url, options, timings, sybils
            )
    t = time.perf_counter()
    report = build_report(
        config,
        run_id,
        data,
        out,
        status,
        timings,
        nodes,
        launcher=options.launcher,
        mqtt=options.mqtt,
        started=started,
        audit=options.audit,
    )
    write_report(out, report)
    timings["report"] = time.perf_counter() - t
    report["timings"]["report"] = timings["report"]
    (out / "report.json").write_text(json.dumps(report, indent=2, sort_keys=False))
    return report


@contextlib.asynccontextmanager
async def _broker(mqtt: str, out: Path) -> AsyncIterator[str | None]:
    if mqtt == "none":
        yield None
    elif mqtt == "embedded":
        from privrec.sim.broker import EmbeddedBroker

        (out / "logs").mkdir(parents=True, exist_ok=True)
        with EmbeddedBroker(log_file=out / "logs" / "broker.log") as broker:
            yield broker.url
    else:
        yield mqtt


async def _announce(control: ControlPlane | None, phase: str) -> None:
    if control is not None:
        await control.announce_phase(phase)


async def _drive(
    admin: Admin,
    control: ControlPlane | None,
    config: ExperimentConfig,
    data: RatingData,
    timings: dict[str, float],
    progress: Progress | None,
    serve_done: Callable[[], Awaitable[None]],
    check: Callable[[], None],
    model: Callable[[], Awaitable[bytes]],
    out: Path,
    sybils: tuple[int, int] = (0, 0),
) -> pb.RunStatus:
    """The phase sequence, the same for both launchers. `sybils` = (sybil users that enroll,
    crowd profiles they release) counts on top of the population (`adversary.sybils`)."""

    async def until(phase: str, field: str, target: int, total: int | None = None) -> None:
        while True:
            check()
            st = await admin.status()
            done = int(getattr(st, field))
            if progress:
                progress(phase, done, target if total is None else total)
            if done >= target:
                return
            await asyncio.sleep(0.05)

    n_users = data.n_users
    n_public = min(config.population.public_users, n_users)
    for phase, field, target in (
        ("enroll", "enrolled", n_users + sybils[0]),
        ("public", "public_profiles", n_public),
    ):
        t = time.perf_counter()
        await admin.set_phase(phase)
        await _announce(control, phase)
        await until(phase, field, target)
        timings[phase] = time.perf_counter() - t
    t = time.perf_counter()
    await admin.set_phase("collect")
    await _announce(control, "collect")
    # two-tier rounds: after round r's private users are in, the server refits and publishes
    # the model that round r + 1 binds to (Xin & Jaakkola: every w = 20 private users)
    rounds = collect_rounds(data, config.population, config.run.seed)
    per_round = np.bincount([r for r in rounds if r >= 0], minlength=1)
    for r, done in enumerate(np.cumsum(per_round)):
        if r:
            await admin.set_phase("collect", r)
        crowd = sybils[1] if r == len(per_round) - 1 else 0
        await until("collect", "profiles", n_public + int(done) + crowd, total=n_users + crowd)
    timings["collect"] = time.perf_counter() - t
    t = time.perf_counter()
    await admin.set_phase("train")
    await _announce(control, "train")
    timings["train"] = time.perf_counter() - t
    t = time.perf_counter()
    await admin.set_phase("serve")
    await _announce(control, "serve")
    await serve_done()
    # the published model, as any client may download it (the referee scores graph models)
    (out / "model.npz").write_bytes(await model())
    timings["serve"] = time.perf_counter() - t
    await admin.set_phase("attack")
    await _announce(control, "attack")
    return await admin.status()


async def _run_inprocess(
    config: ExperimentConfig,
    run_id: str,
    data: Any,
    out: Path,
    options: SimOptions,
    timings: dict[str, float],
    sybils: tuple[int, int] = (0, 0),
) -> pb.RunStatus:
    core = open_aggregator(config, run_id, out, data, secrets.token_hex(16))
    record_path = out / "adversary" / "record.bin"
    record_path.unlink(missing_ok=True)
    record = RecordFile(record_path)
    until_attack = {"on": True}

    def observe(rec: pb.TranscriptRecord) -> None:
        if rec.method == "Phase":
            until_attack["on"] = rec.request.decode() != "attack"
        elif until_attack["on"]:
            record.append(rec.SerializeToString())

    core.observers.append(observe)
    transport = InprocessTransport(core)
    waiter = polling_waiter(transport, 0.01)
    n = config.population.shards
    shards: list[asyncio.Task[Any]] = [
        asyncio.create_task(
            run_shard(config, transport, i, n, out, waiter, data=data, poll_s=0.01),
            name=f"privrec[shard-{i}]",
        )
        for i in range(n)
    ]
    if sybils[0]:  # the adversary's sybil clients, on the same transport as the users
        shards.append(
            asyncio.create_task(
                run_sybils(
                    transport,
                    AdversaryKnowledge.read(out),
                    SybilSettings.from_section(config.adversary),
                    out,
                    waiter,
                ),
                name="privrec[sybils]",
            )
        )

    def check() -> None:
        for task in shards:
            if task.done() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]

    async def serve_done() -> None:
        await asyncio.gather(*shards)

    try:
        status = await _drive(
            InprocessAdmin(core),
            None,
            config,
            data,
            timings,
            options.progress,
            serve_done,
            check,
            transport.model_archive,
            out,
            sybils,
        )
    finally:
        for task in shards:
            task.cancel()
    record.close()
    t = time.perf_counter()
    attack_record(
        record_path,
        core.public_config(),
        config.adversary.attacks,
        out / "adversary" / "live",
        run_dir=out,
    )
    timings["attack"] = time.perf_counter() - t
    core.store.close()
    return status


async def _run_processes(
    config: ExperimentConfig,
    run_id: str,
    data: Any,
    out: Path,
    mqtt_url: str | None,
    options: SimOptions,
    timings: dict[str, float],
    sybils: tuple[int, int] = (0, 0),
) -> tuple[pb.RunStatus, dict[str, int]]:
    cfg = str(out / "config.toml")
    logs = out / "logs"
    token = secrets.token_hex(16)
    mqtt_arg = mqtt_url or "none"
    common = ["--config", cfg, "--run-dir", str(out), "--run-id", run_id, "--mqtt", mqtt_arg]
    ready = out / "server.ready"
    ready.unlink(missing_ok=True)
    nodes: list[NodeProcess] = []
    try:
        server = spawn(
            "server",
            [
                "server",
                *common,
                "--host",
                config.transport.host,
                "--port",
                str(config.transport.port),
                "--ready-file",
                str(ready),
            ],
            logs,
            {ADMIN_TOKEN_ENV: token},
        )
        nodes.append(server)
        port = int(wait_file(ready, 60, nodes).split()[0])
        target = f"{config.transport.host}:{port}"
        adversary = None
        if mqtt_url and config.adversary.live:
            adv_ready = out / "adversary.ready"
            adv_ready.unlink(missing_ok=True)
            adversary = spawn(
                "adversary",
                ["adversary", *common, "--server", target, "--ready-file", str(adv_ready)],
                logs,
            )
            nodes.append(adversary)
            wait_file(adv_ready, 60, nodes)
        n = config.population.shards
        shards = [
            spawn(
                f"shard-{i}", ["clients", *common, "--server", target, "--shard", f"{i}/{n}"], logs
            )
            for i in range(n)
        ]
        if sybils[0]:  # the adversary's sybil clients: a client node of their own
            shards.append(spawn("sybils", ["sybils", *common, "--server", target], logs))
        nodes += shards

        def check() -> None:
            for node in nodes:
                node.check_alive()

        async def serve_done() -> None:
            for shard in shards:
                while shard.proc.poll() is None:
                    check()
                    await asyncio.sleep(0.05)
                shard.wait(1)

        async with contextlib.AsyncExitStack() as stack:
            admin = await stack.enter_async_context(GrpcAdmin(target, run_id, token))
            client = await stack.enter_async_context(GrpcTransport(target, run_id))
            control = None
            if mqtt_url:
                control = await stack.enter_async_context(
                    ControlPlane(mqtt_url, run_id=run_id, node="sim")
                )
            status = await _drive(
                admin,
                control,
                config,
                data,
                timings,
                options.progress,
                serve_done,
                check,
                client.model_archive,
                out,
                sybils,
            )
            t = time.perf_counter()
            if adversary is not None:
                await asyncio.to_thread(adversary.wait, RUN_TIMEOUT_S)
            else:  # no feed without a broker: the adversary works from the transcript
                from privrec.adversary.replay import replay

                replay(out, config.adversary.attacks, out / "adversary" / "live")
            timings["attack"] = time.perf_counter() - t
            await admin.set_phase("report")
            await _announce(control, "report")
        return status, {n.name: n.pid for n in nodes}
    finally:
        for node in reversed(nodes):
            node.stop()


__all__ = ["SimOptions", "run_id_for", "simulate"]
