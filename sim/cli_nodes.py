"""The node commands of `privrec`: `server`, `clients`, `adversary` and `sybils`.

Each runs one node of a run as its own OS process (`privrec sim` starts them; a run by hand
starts each in its own terminal, README "A run by hand"). A node an orchestrator started ends
with it (`shared.lifecycle`); a node killed and started again rejoins the run where it is.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privrec.shared.addresses import server_arg
from privrec.shared.config import ExperimentConfig
from privrec.shared.errors import ConfigError
from privrec.sim.cli_security import (
    add_node_security_args,
    add_server_security_args,
    node_security,
    server_security,
)

if TYPE_CHECKING:
    from privrec.shared.control import ControlKeys

logger = logging.getLogger("privrec")


def config_of(args: argparse.Namespace) -> ExperimentConfig:
    """The experiment configuration of a command line: `--config` (or the default scenario),
    with each `--set KEY=VALUE` applied (`shared.overrides`), then `--seed` over `[run].seed`."""
    from privrec.shared.overrides import override_texts

    config = ExperimentConfig.load(args.config) if args.config else ExperimentConfig()
    config = override_texts(config, getattr(args, "set", None) or ())
    if getattr(args, "seed", None) is not None:
        config = config.replace("run", seed=args.seed)
    return config


def _node_mqtt(value: str) -> str:
    """A node's --mqtt: a broker URL or none. "embedded" is explained, not accepted: only
    `privrec sim` starts (and stops) a broker of its own."""
    if value == "embedded":
        raise argparse.ArgumentTypeError(
            "embedded: a node does not start a broker (only `privrec sim` does); start one with "
            "`privrec broker` (it listens on mqtt://127.0.0.1:1883) and pass "
            "--mqtt mqtt://127.0.0.1:1883, or run without a broker: --mqtt none"
        )
    if value == "none" or value.startswith(("mqtt://", "mqtts://")):
        return value
    raise argparse.ArgumentTypeError(
        f"--mqtt must be none, mqtt://host:port or mqtts://host:port, got {value!r}"
    )


def cmd_server(args: argparse.Namespace) -> int:
    from privrec.server.node import serve
    from privrec.shared.population import load_catalogue
    from privrec.sim.compatibility import model_refusal

    config = config_of(args)
    refusal = model_refusal(config.mechanism.name, config.model.name)
    if refusal is not None:  # before the store is opened or a port bound
        raise ConfigError(refusal)
    catalogue = load_catalogue(config.data, config.run.seed)
    asyncio.run(
        serve(
            config,
            args.run_id,
            Path(args.run_dir),
            catalogue,
            host=args.host,
            port=args.port,
            mqtt=None if args.mqtt == "none" else args.mqtt,
            ready_file=Path(args.ready_file) if args.ready_file else None,
            security=server_security(args),
        )
    )
    return 0


def _shard(value: str) -> tuple[int, int]:
    try:
        i, n = (int(x) for x in value.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shard must be I/N, got {value!r}") from None
    if not (n >= 1 and 0 <= i < n):
        raise argparse.ArgumentTypeError(f"--shard needs 0 <= I < N, got {value!r}")
    return i, n


def cmd_clients(args: argparse.Namespace) -> int:
    from privrec.client.shard import polling_waiter, run_shard
    from privrec.client.transport import GrpcTransport

    config = config_of(args)
    shard, n = args.shard
    identity, tls_dir, node = node_security(args, f"shard-{shard}")

    async def main() -> None:
        t = config.transport
        async with contextlib.AsyncExitStack() as stack:
            transport = await stack.enter_async_context(
                GrpcTransport(
                    args.server,
                    args.run_id,
                    deadline_s=t.deadline_s,
                    retries=t.retries,
                    backoff_s=t.backoff_s,
                    identity=identity,
                    tls_dir=tls_dir,
                    node=node,
                    retry_deadline_s=t.retry_deadline_s,
                    max_backoff_s=t.max_backoff_s,
                )
            )
            waiter = polling_waiter(transport, config.control.phase_poll_s)
            if args.mqtt != "none":
                from privrec.shared.control import ControlPlane

                control = await stack.enter_async_context(
                    ControlPlane(
                        args.mqtt,
                        run_id=args.run_id,
                        node=node,
                        tls_dir=tls_dir,
                        control_keys=await control_keys(transport, identity is not None),
                    )
                )

                async def waiter(name: str) -> str:
                    return (await control.wait_for_phase(name)).name

            result = await run_shard(
                config,
                transport,
                shard,
                n,
                Path(args.run_dir),
                waiter,
                poll_s=config.control.phase_poll_s,
            )
        logger.info("shard %d/%d done: %s", shard, n, result)

    asyncio.run(main())
    return 0


async def control_keys(transport: Any, secure: bool) -> ControlKeys | None:
    """The keys a node verifies phase announcements with: the run's control keys, read from
    the server (over mutual TLS); None in an insecure run (announcements are believed).

    Raises:
        ConfigError: a secure run whose server publishes no control key.
    """
    from privrec.shared.run_config import PublicRunConfig

    if not secure:
        return None
    run_config = PublicRunConfig.from_proto(await transport.run_config())
    keys = run_config.control_public_keys()
    if not keys:
        raise ConfigError(
            "--mqtt: the run's public configuration names no control key, so no phase "
            "announcement can be verified; give the server an allow-list with the operator's "
            "control key (`privrec keys --control NAME`), or run this node without --mqtt "
            "(it then asks the server for the phase)"
        )
    return keys


def cmd_adversary(args: argparse.Namespace) -> int:
    from privrec.adversary.attacks import check_attack_names
    from privrec.adversary.node import (
        PROGRESS_NAME,
        RECORD_NAME,
        RecordFile,
        attack_in_worker,
        catch_up,
        progress_file,
        record_until_attack,
    )
    from privrec.client.shard import polling_waiter
    from privrec.client.transport import GrpcTransport
    from privrec.shared.control import ControlPlane
    from privrec.shared.run_config import PublicRunConfig
    from privrec.sim.auxiliary import auxiliary_set

    if args.mqtt == "none":
        raise ConfigError(
            "--mqtt: the live adversary follows the observation feed and needs a "
            "broker; use `privrec replay RUN_DIR` without one"
        )
    config = config_of(args)
    check_attack_names(config.adversary.attacks)  # now, not when the run reaches its attacks
    out = Path(args.run_dir) / "adversary"
    identity, tls_dir, node = node_security(args, "adversary")

    async def main() -> None:
        record_path = out / RECORD_NAME
        (out / PROGRESS_NAME).unlink(missing_ok=True)
        record = RecordFile(record_path, args.run_id)  # kept across a restart of this node
        if record.seqs:
            logger.info("adversary: %d records from before a restart", len(record.seqs))
        async with GrpcTransport(
            args.server, args.run_id, identity=identity, tls_dir=tls_dir, node=node
        ) as transport:
            run_config = PublicRunConfig.from_proto(await transport.run_config())
            keys = run_config.control_public_keys() or None
            async with ControlPlane(
                args.mqtt, run_id=args.run_id, node=node, tls_dir=tls_dir, control_keys=keys
            ) as control:
                server_phase = polling_waiter(transport, config.control.phase_poll_s)

                async def attack_reached() -> None:
                    waits: list[Awaitable[object]] = [server_phase("attack")]  # authoritative
                    if keys is not None or identity is None:  # the retained announcement
                        waits.append(control.wait_for_phase("attack"))
                    tasks = [asyncio.ensure_future(w) for w in waits]
                    try:
                        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        for task in tasks:
                            task.cancel()

                async with control.observations() as feed:
                    await feed.subscribed()
                    if args.ready_file:
                        Path(args.ready_file).write_text("subscribed\n")
                    logger.info("adversary subscribed to the observation feed of %s", args.run_id)
                    missed = await catch_up(transport, record)
                    if missed:
                        logger.info("adversary: %d records caught up from the transcript", missed)
                    await record_until_attack(feed, record, transport, attack_reached)
                record.close()
                logger.info("adversary recorded %d observations", len(record.seqs))
                # The attacks run in a worker thread: the event loop keeps answering the
                # broker's keep-alive (and the node stays "online") however long they take.
                summary = await attack_in_worker(
                    record_path,
                    run_config,
                    config.adversary.attacks,
                    out / "live",
                    progress_file(out / PROGRESS_NAME),
                    auxiliary_set(config),  # the declared side knowledge, from the config
                    Path(args.run_dir),
                )
                logger.info("attacks done: %s", json.dumps(summary))

    asyncio.run(main())
    return 0


def cmd_sybils(args: argparse.Namespace) -> int:
    """The adversary's sybil clients (`adversary.sybils`), a client node of their own: they
    read the run's stated side knowledge from the run directory and follow the phases."""
    from privrec.adversary.knowledge import AdversaryKnowledge
    from privrec.adversary.sybils import SybilSettings, run_sybils
    from privrec.client.shard import polling_waiter
    from privrec.client.transport import GrpcTransport

    config = config_of(args)
    run_dir = Path(args.run_dir)
    identity, tls_dir, node = node_security(args, "sybils")

    async def main() -> None:
        t = config.transport
        async with GrpcTransport(
            args.server,
            args.run_id,
            deadline_s=t.deadline_s,
            retries=t.retries,
            identity=identity,
            tls_dir=tls_dir,
            node=node,
        ) as transport:
            plan = await run_sybils(
                transport,
                AdversaryKnowledge.read(run_dir),
                SybilSettings.from_section(config.adversary),
                run_dir,
                polling_waiter(transport, config.control.phase_poll_s),
            )
        logger.info("sybils done: %d probes", len(plan.probes))

    asyncio.run(main())
    return 0


def add_node_commands(sub: Any) -> None:
    """Register `privrec server`, `clients`, `adversary` and `sybils`."""

    def node_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--config", help="experiment TOML (default: the built-in default scenario)")
        p.add_argument(
            "--run-dir",
            required=True,
            help="the run directory (store, logs, predictions, config.toml) all nodes share",
        )
        p.add_argument(
            "--run-id", required=True, help="the run's name; every node of the run gives the same"
        )
        p.add_argument(
            "--mqtt",
            type=_node_mqtt,
            default="none",
            help="the broker's URL, mqtt://HOST:PORT (start one with `privrec broker`), "
            "or none (default)",
        )
        p.add_argument("--seed", type=int, help="override [run].seed")

    p = sub.add_parser("server", help="run the aggregator node")
    node_args(p)
    p.add_argument("--host", default="127.0.0.1", help="interface to serve gRPC on")
    p.add_argument("--port", type=int, default=0, help="gRPC port (default 0: a free one)")
    p.add_argument(
        "--ready-file", help="write the bound port (and the admin token) here once serving"
    )
    add_server_security_args(p)
    p.set_defaults(func=cmd_server)

    p = sub.add_parser("clients", help="run one client shard")
    node_args(p)
    p.add_argument("--server", required=True, type=server_arg, help="HOST:PORT of the aggregator")
    p.add_argument("--shard", type=_shard, required=True, help="I/N")
    add_node_security_args(p)
    p.set_defaults(func=cmd_clients)

    p = sub.add_parser("adversary", help="run the live adversary node")
    node_args(p)
    p.add_argument(
        "--server", required=True, type=server_arg, help="HOST:PORT (for the public run config)"
    )
    p.add_argument("--ready-file", help="write a line here once subscribed to the feed")
    add_node_security_args(p)
    p.set_defaults(func=cmd_adversary)

    p = sub.add_parser("sybils", help="run the adversary's sybil clients")
    node_args(p)
    p.add_argument("--server", required=True, type=server_arg, help="HOST:PORT of the aggregator")
    add_node_security_args(p)
    p.set_defaults(func=cmd_sybils)


__all__ = ["add_node_commands", "config_of"]
