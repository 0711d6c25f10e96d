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
import functools
import json
import logging
import os
import secrets
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

from privrec.adversary.attacks import check_attack_names
from privrec.adversary.knowledge import AdversaryKnowledge
from privrec.adversary.node import (
    PROGRESS_NAME,
    RecordFile,
    attack_record,
    read_progress,
)
from privrec.adversary.sybils import SybilSettings, run_sybils
from privrec.client.shard import polling_waiter, run_shard
from privrec.client.transport import GrpcTransport
from privrec.server.node import ADMIN_TOKEN_ENV, NONCES_NAME, STORE_NAME, open_aggregator
from privrec.server.spec import run_spec
from privrec.shared.accounting import check_mechanism
from privrec.shared.aio import run_blocking
from privrec.shared.config import ExperimentConfig
from privrec.shared.control import ControlPlane
from privrec.shared.data.dataset import RatingData
from privrec.shared.data.splits import cell_roles
from privrec.shared.errors import ConfigError
from privrec.shared.population import load_population
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.threads import configure_layer
from privrec.sim.admin_client import RUN_TIMEOUT_S, GrpcAdmin
from privrec.sim.adversary_knowledge import side_knowledge_plan, sybil_users
from privrec.sim.auxiliary import auxiliary_set, check_auxiliary
from privrec.sim.compatibility import check_compatible
from privrec.sim.faults import Fault, NodeCommand, NodeSupervisor
from privrec.sim.inprocess import InprocessAdmin, InprocessTransport, node_blas_threads
from privrec.sim.launcher import LocalPlacement, NodePlacement, NodeProcess, wait_file
from privrec.sim.phases import POLL_S, announce, attack_progress, drive_phases
from privrec.sim.progress import Progress, label
from privrec.sim.report import build_report, write_report
from privrec.sim.security import OPERATOR, SIM, SYBILS, RunSecurity, prepare_security

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class SimOptions:
    """How to run: where, with which launcher and broker.

    `out_dir` and `tls_dir` may be given as strings; they are `Path`s from then on.
    """

    out_dir: str | os.PathLike[str]
    launcher: str = "processes"  # or "inprocess", or "ray" (`sim.ray_launcher`)
    mqtt: str | None = None  # "embedded", "none" or mqtt://host:port; None: [control].mqtt
    progress: Progress | None = None  # ("phase · what is being done", done, total)
    audit: bool = False
    insecure: bool = False  # no TLS, no node authentication (processes launcher)
    tls_dir: str | os.PathLike[str] | None = None  # a `privrec certs` directory (default: per run)
    faults: tuple[Fault, ...] = ()  # servers to kill and restart (tests of crash recovery)
    on_start: Callable[[str], None] | None = None  # told the run id once the config is valid
    ray_address: str | None = None  # launcher "ray": the cluster (None: a local Ray)

    def __post_init__(self) -> None:
        self.out_dir = Path(self.out_dir)
        self.tls_dir = None if self.tls_dir is None else Path(self.tls_dir)

    def broker(self, config: ExperimentConfig) -> str:
        """The broker of the run: `mqtt`, else the config's `[control].mqtt`."""
        return self.mqtt or config.control.mqtt


def run_id_for(config: ExperimentConfig) -> str:
    """Deterministic run id: the same config and seed name the same run."""
    return f"{config.run.name}-s{config.run.seed}"


def simulate(config: ExperimentConfig, options: SimOptions) -> dict[str, Any]:
    """Run the experiment; returns the report (also written to the run directory).

    Works from a running event loop too (a notebook): the run then gets a loop of its own in
    a worker thread (`shared.aio.run_blocking`).
    """
    configure_layer()  # before the first kernel of this process (`shared.threads`)
    return run_blocking(lambda: _simulate(config, options))


async def _simulate(config: ExperimentConfig, options: SimOptions) -> dict[str, Any]:
    out = Path(options.out_dir)
    started = time.time()
    timings: dict[str, float] = {}
    tell = options.progress or (lambda _label, _done, _total: None)
    t = time.perf_counter()
    tell(label("load", f"dataset {config.data.dataset}"), 0, 1)
    data = load_population(config.data, config.run.seed)
    run_id = run_id_for(config)
    # A config error, or a DP claim the accountant cannot compose, stops the run before the
    # run folder is made or any node starts (and before the caller's banner).
    knowledge, sybils = preflight(config, data)
    if options.launcher == "ray":
        _check_ray(options)
    timings["load"] = time.perf_counter() - t
    tell(label("load", f"{data.name}: {data.n_users} users, {data.n_items} items"), 1, 1)
    if options.on_start is not None:
        options.on_start(run_id)
    out.mkdir(parents=True, exist_ok=True)
    knowledge.write(out)
    (out / "adversary" / "sybils" / "record.json").unlink(missing_ok=True)
    for stale in (f"{db}{end}" for db in (STORE_NAME, NONCES_NAME) for end in ("", "-wal", "-shm")):
        (out / stale).unlink(missing_ok=True)
    # what a node keeps to rejoin this run: not from an earlier run in the same folder
    for stale in ("adversary/record.bin", "adversary/record.bin.run"):
        (out / stale).unlink(missing_ok=True)
    for journal in (out / "predictions").glob("shard-*.answers"):
        journal.unlink()
    (out / "config.toml").write_text(config.to_toml())
    security = RunSecurity(insecure=True)
    with _placement(config, out, options, sybils) as (placement, public_host):
        if options.launcher in ("processes", "ray"):
            security = prepare_security(
                out,
                config.population.shards,
                insecure=options.insecure,
                tls_dir=None if options.tls_dir is None else Path(options.tls_dir),
                sybils=bool(sybils[0]),
                hosts=(public_host,) if options.launcher == "ray" else (),
            )
        broker = options.broker(config)
        async with _broker(broker, out, security.tls_dir, public_host) as mqtt_url:
            if options.launcher == "inprocess":
                with node_blas_threads():
                    status = await _run_inprocess(
                        config, run_id, data, out, options, timings, sybils
                    )
                nodes: dict[str, int] = {}
            else:
                status, nodes = await _run_processes(
                    config,
                    run_id,
                    data,
                    out,
                    mqtt_url,
                    options,
                    timings,
                    security,
                    sybils,
                    placement,
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
        mqtt=options.broker(config),
        started=started,
        audit=options.audit,
        progress=options.progress,
    )
    write_report(out, report, progress=options.progress, report_started=t)
    return report


def preflight(
    config: ExperimentConfig, data: RatingData
) -> tuple[AdversaryKnowledge, tuple[int, int]]:
    """What must hold before a run of `config` on `data` starts: the mechanism and model
    parameters, a DP claim the accountant can compose, the attacks' names, the auxiliary set
    and the adversary's side knowledge. `privrec sweep` calls it for every point before any
    point runs.

    Returns:
        The adversary's stated side knowledge and (sybil users that enroll, crowd profiles
        they release), which the run then uses.

    Raises:
        ConfigError, UnsupportedEventError: naming the key or the mechanism.
    """
    check_mechanism(run_spec(config, run_id_for(config), data, "").mechanism)
    check_attack_names(config.adversary.attacks)
    check_compatible(config)  # mechanism × model × attacks (`sim.compatibility`)
    check_auxiliary(config, data.n_users)
    if config.evaluation.split != "thesis":  # the split's cells (a missing time, a bad file)
        cell_roles(data, config.evaluation, config.run.seed)
    # the adversary's stated side knowledge (its sybils enroll and release like users)
    knowledge, _ = side_knowledge_plan(config, data)
    return knowledge, sybil_users(config, knowledge)


def _check_ray(options: SimOptions) -> None:
    """`--launcher ray` is possible: Ray is installed, and nothing asks for what only the
    `processes` launcher does (restarting a local server process)."""
    from privrec.sim.ray_launcher import import_ray

    import_ray()
    if options.faults:
        raise ConfigError("faults: crash injection runs under --launcher processes, not ray")


@contextlib.contextmanager
def _placement(
    config: ExperimentConfig, out: Path, options: SimOptions, sybils: tuple[int, int]
) -> Iterator[tuple[NodePlacement, str]]:
    """Where the nodes start, and the host the orchestrator's own services (the embedded
    broker) are reached at: this machine's loopback, or the Ray cluster
    (`sim.ray_launcher`) and the driver's node IP."""
    if options.launcher != "ray":
        yield LocalPlacement(config.transport.host), "127.0.0.1"
        return
    from privrec.sim.ray_launcher import RayPlacement, node_count, ray_cluster

    live = options.broker(config) != "none" and config.adversary.live
    n = node_count(config.population.shards, adversary=live, sybils=bool(sybils[0]))
    with ray_cluster(options.ray_address, n) as ray:
        placement = RayPlacement(ray, out)
        try:
            yield placement, str(ray.util.get_node_ip_address())
        finally:
            placement.close()


@contextlib.asynccontextmanager
async def _broker(
    mqtt: str, out: Path, tls_dir: Path | None, host: str = "127.0.0.1"
) -> AsyncIterator[str | None]:
    if mqtt == "none":
        yield None
    elif mqtt == "embedded":
        from privrec.sim.broker import EmbeddedBroker

        (out / "logs").mkdir(parents=True, exist_ok=True)
        with EmbeddedBroker(host, log_file=out / "logs" / "broker.log", tls_dir=tls_dir) as broker:
            yield broker.url
    else:
        yield mqtt


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
    transport = InprocessTransport(core, node=OPERATOR)
    waiter = polling_waiter(transport, 0.01)
    n = config.population.shards
    shards: list[asyncio.Task[Any]] = [
        asyncio.create_task(
            run_shard(
                config,
                InprocessTransport(core, node=f"shard-{i}"),
                i,
                n,
                out,
                waiter,
                data=data,
                poll_s=0.01,
            ),
            name=f"privrec[shard-{i}]",
        )
        for i in range(n)
    ]
    if sybils[0]:  # the adversary's sybil clients, on the same transport as the users
        shards.append(
            asyncio.create_task(
                run_sybils(
                    InprocessTransport(core, node=SYBILS),
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
        status = await drive_phases(
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
    summary = attack_record(
        record_path,
        core.public_config(),
        config.adversary.attacks,
        out / "adversary" / "live",
        attack_progress(options.progress),
        auxiliary_set(config, data),
        run_dir=out,
    )
    timings["attack"] = time.perf_counter() - t
    timings |= {f"attack.{name}": s for name, s in summary["seconds"].items()}
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
    security: RunSecurity,
    sybils: tuple[int, int] = (0, 0),
    placement: NodePlacement | None = None,
) -> tuple[pb.RunStatus, dict[str, int]]:
    place = placement or LocalPlacement(config.transport.host)
    bind = place.server_bind or config.transport.host
    cfg = str(out / "config.toml")
    logs = out / "logs"
    token = secrets.token_hex(16)
    mqtt_arg = mqtt_url or "none"
    common = ["--config", cfg, "--run-dir", str(out), "--run-id", run_id, "--mqtt", mqtt_arg]
    ready = out / "server.ready"
    ready.unlink(missing_ok=True)
    nodes: list[NodeProcess] = []
    server_args = ["server", *common, "--host", bind, "--ready-file", str(ready)]
    server_args += security.server_args()
    try:
        server = place.spawn(
            "server",
            [*server_args, "--port", str(config.transport.port)],
            logs,
            {ADMIN_TOKEN_ENV: token},
        )
        nodes.append(server)
        port = int(wait_file(ready, 60, nodes).split()[0])
        target = f"{place.address(server)}:{port}"
        commands = {
            "server": NodeCommand(
                [*server_args, "--port", str(port)], {ADMIN_TOKEN_ENV: token}, ready
            )
        }
        adv_ready = out / "adversary.ready"
        live = bool(mqtt_url and config.adversary.live)
        if live:
            adv_ready.unlink(missing_ok=True)
            commands["adversary"] = NodeCommand(
                ["adversary", *common, "--server", target, "--ready-file", str(adv_ready),
                 *security.node_args("adversary")],
                ready=adv_ready,
            )  # fmt: skip
        n = config.population.shards
        clients = [f"shard-{i}" for i in range(n)] + ([SYBILS] if sybils[0] else [])
        for i in range(n):
            commands[f"shard-{i}"] = NodeCommand(
                ["clients", *common, "--server", target, "--shard", f"{i}/{n}",
                 *security.node_args(f"shard-{i}")]
            )  # fmt: skip
        if sybils[0]:  # the adversary's sybil clients: a client node of their own
            commands[SYBILS] = NodeCommand(
                ["sybils", *common, "--server", target, *security.node_args(SYBILS)]
            )
        for name, command in commands.items():
            if name != "server":
                nodes.append(place.spawn(name, command.args, logs, command.env))
        supervisor = NodeSupervisor(nodes, commands, logs)
        if live:
            # the shards load their users meanwhile; no phase is set before it listens
            wait_file(adv_ready, 60, nodes)

        def check() -> None:
            for node in nodes:
                node.check_alive()

        async def serve_done() -> None:
            for name in clients:  # (a node restarted by a fault is looked up afresh)
                while (shard := supervisor.node(name)).proc.poll() is None:
                    check()
                    await asyncio.sleep(0.05)
                shard.wait(1)

        retry_s = config.transport.retry_deadline_s
        async with contextlib.AsyncExitStack() as stack:
            admin = await stack.enter_async_context(
                GrpcAdmin(target, run_id, token, tls_dir=security.tls_dir, retry_deadline_s=retry_s)
            )
            client = await stack.enter_async_context(
                GrpcTransport(
                    target,
                    run_id,
                    tls_dir=security.tls_dir,
                    node=OPERATOR if security.tls_dir else "",
                    retry_deadline_s=retry_s,
                )
            )
            control = None
            if mqtt_url:
                control = await stack.enter_async_context(
                    ControlPlane(
                        mqtt_url,
                        run_id=run_id,
                        node=SIM,
                        tls_dir=security.tls_dir,
                        signer=security.identity(SIM),  # every phase announcement signed
                    )
                )
            if options.faults:
                stack.push_async_callback(supervisor.stop_injecting)
                supervisor.inject(options.faults, admin)
            status = await drive_phases(
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
                functools.partial(supervisor.checkpoint, admin) if options.faults else None,
            )
            t = time.perf_counter()
            tell = attack_progress(options.progress)
            if live:
                await _follow_adversary(
                    functools.partial(supervisor.node, "adversary"),
                    out / "adversary" / PROGRESS_NAME,
                    tell,
                )
                seconds = _attack_seconds(out / "adversary" / "live" / "summary.json")
            else:  # no feed without a broker: the adversary works from the transcript
                from privrec.adversary.replay import replay

                seconds = {}
                await asyncio.to_thread(
                    replay,
                    out,
                    config.adversary.attacks,
                    out / "adversary" / "live",
                    auxiliary_set(config, data),
                    tell,
                    seconds,
                )
            timings["attack"] = time.perf_counter() - t
            timings |= {f"attack.{name}": s for name, s in seconds.items()}
            await admin.set_phase("report")
            await announce(control, "report")
        return status, {n.name: n.pid for n in nodes}
    finally:
        for node in reversed(nodes):
            node.stop()


async def _follow_adversary(
    adversary_node: Callable[[], NodeProcess],
    progress_path: Path,
    tell: Callable[[str, int, int], None],
) -> None:
    """Wait for the adversary node (its current process: a fault may restart it) to finish
    its attacks, relaying what its progress file says (`adversary.node.progress_file`)."""
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while (adversary := adversary_node()).proc.poll() is None:
        # told on every poll, not only on a change: a line kept alive through a long attack
        state = read_progress(progress_path)
        if state is not None:
            tell(str(state["attack"]), int(state["done"]), int(state["total"]))
        if time.monotonic() > deadline:
            break
        await asyncio.sleep(POLL_S)
    await asyncio.to_thread(adversary.wait, max(1.0, deadline - time.monotonic()))
    state = read_progress(progress_path)
    if state is not None:
        tell(str(state["attack"]), int(state["done"]), int(state["total"]))


def _attack_seconds(summary_path: Path) -> dict[str, float]:
    try:
        seconds = json.loads(summary_path.read_text()).get("seconds", {})
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in seconds.items()}


__all__ = ["SimOptions", "preflight", "run_id_for", "simulate"]
