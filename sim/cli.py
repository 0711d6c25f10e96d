"""The `privrec` command: `sim`, `sweep`, `report`, the node commands (`broker`, `server`,
`clients`, `adversary`), `admin`, `replay`, `data`, `audit`, `reproduce`.

Every error privrec raises on purpose is printed as one line and exits with status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privrec import __version__
from privrec.shared.config import ExperimentConfig
from privrec.shared.errors import ConfigError, PrivrecError
from privrec.shared.lifecycle import exit_status_of_interrupt, stop_on_sigterm, watch_orchestrator
from privrec.sim.cli_admin import add_admin_command
from privrec.sim.cli_audit import add_audit_command
from privrec.sim.cli_data import add_data_commands
from privrec.sim.cli_reproduce import add_reproduce_command
from privrec.sim.cli_security import (
    add_node_security_args,
    add_security_commands,
    add_server_security_args,
    node_security,
    server_security,
    warn_insecure_run,
)
from privrec.sim.cli_sweep import add_sweep_command

if TYPE_CHECKING:
    from privrec.shared.control import ControlKeys

logger = logging.getLogger("privrec")


def _config(args: argparse.Namespace) -> ExperimentConfig:
    from privrec.shared.overrides import override_texts

    config = ExperimentConfig.load(args.config) if args.config else ExperimentConfig()
    config = override_texts(config, getattr(args, "set", None) or ())
    if getattr(args, "seed", None) is not None:
        config = config.replace("run", seed=args.seed)
    return config


def _mqtt(value: str) -> str:
    if value in ("embedded", "none") or value.startswith(("mqtt://", "mqtts://")):
        return value
    raise argparse.ArgumentTypeError(
        f"--mqtt must be embedded, none, mqtt://host:port or mqtts://host:port, got {value!r}"
    )


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


def add_set_argument(p: argparse.ArgumentParser) -> None:
    """`--set KEY=VALUE` (repeatable): a dotted TOML key of the config and a value."""
    p.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override a config key, as in the TOML file (repeatable): "
        "--set mechanism.params.epsilon=2 --set model.k=50 --set mechanism.name=blip",
    )


# ---------------------------------------------------------------------------- sim
def cmd_sim(args: argparse.Namespace) -> int:
    from rich.console import Console

    from privrec.sim.progress import RichProgress
    from privrec.sim.report import summary_table
    from privrec.sim.run import SimOptions, run_id_for, simulate

    config = _config(args)
    if args.ray_address and args.launcher != "ray":
        raise ConfigError(f"--ray-address needs --launcher ray, got --launcher {args.launcher}")
    out = Path(args.out) if args.out else Path("runs") / run_id_for(config)
    if args.insecure:
        warn_insecure_run()
    console = Console(stderr=True)

    with RichProgress(console, held=True) as progress:

        def banner(run_id: str) -> None:  # once the configuration is valid
            console.print(
                f"[bold]privrec sim[/] run {run_id} → {out} "
                f"(launcher={args.launcher}, mqtt={args.mqtt or config.control.mqtt})"
            )
            progress.release()

        report = simulate(
            config,
            SimOptions(
                out_dir=out,
                launcher=args.launcher,
                mqtt=args.mqtt,
                progress=progress,
                audit=args.audit,
                insecure=args.insecure,
                tls_dir=Path(args.tls_dir) if args.tls_dir else None,
                on_start=banner,
                ray_address=args.ray_address,
            ),
        )
    Console().print(summary_table(report))
    print(f"report: {out / 'report.json'} (and report.md, plots/)")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from rich.console import Console

    from privrec.sim.progress import RichProgress
    from privrec.sim.rebuild import report_run
    from privrec.sim.report import summary_table

    run_dir = Path(args.run_dir)
    with RichProgress(Console(stderr=True)) as progress:
        report = report_run(
            run_dir,
            config_file=args.config,
            server=args.server,
            audit=args.audit,
            progress=progress,
        )
    Console().print(summary_table(report))
    print(f"report: {run_dir / 'report.json'} (and report.md, plots/)")
    return 0


def cmd_broker(args: argparse.Namespace) -> int:
    from privrec.sim.broker import serve

    scheme = "mqtts" if args.tls_dir else "mqtt"

    def ready(port: int) -> None:
        print(
            f"MQTT broker listening on {scheme}://{args.host}:{port} (Ctrl-C stops it)", flush=True
        )

    try:
        tls_dir = Path(args.tls_dir) if args.tls_dir else None
        asyncio.run(serve(args.host, args.port, args.ready_file, tls_dir, on_ready=ready))
    except OSError as exc:
        raise ConfigError(
            f"--port: cannot listen on {args.host}:{args.port}: {exc.strerror or exc} "
            "(is another broker running there? choose another --port)"
        ) from None
    return 0


# ---------------------------------------------------------------------------- nodes
def cmd_server(args: argparse.Namespace) -> int:
    from privrec.server.node import serve
    from privrec.shared.population import load_catalogue
    from privrec.sim.compatibility import model_refusal

    config = _config(args)
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

    config = _config(args)
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
        follow_feed,
        progress_file,
    )
    from privrec.client.transport import GrpcTransport
    from privrec.shared.control import ControlPlane
    from privrec.shared.run_config import PublicRunConfig
    from privrec.sim.auxiliary import auxiliary_set

    if args.mqtt == "none":
        raise ConfigError(
            "--mqtt: the live adversary follows the observation feed and needs a "
            "broker; use `privrec replay RUN_DIR` without one"
        )
    config = _config(args)
    check_attack_names(config.adversary.attacks)  # now, not when the run reaches its attacks
    out = Path(args.run_dir) / "adversary"
    identity, tls_dir, node = node_security(args, "adversary")

    async def main() -> None:
        record_path = out / RECORD_NAME
        record_path.unlink(missing_ok=True)
        (out / PROGRESS_NAME).unlink(missing_ok=True)
        record = RecordFile(record_path)
        async with ControlPlane(
            args.mqtt, run_id=args.run_id, node=node, tls_dir=tls_dir
        ) as control:
            async with control.observations() as feed:
                await feed.subscribed()
                if args.ready_file:
                    Path(args.ready_file).write_text("subscribed\n")
                logger.info("adversary subscribed to the observation feed of %s", args.run_id)
                n = await follow_feed(feed, record)
            logger.info("adversary recorded %d observations", n)
            async with GrpcTransport(
                args.server, args.run_id, identity=identity, tls_dir=tls_dir, node=node
            ) as transport:
                run_config = PublicRunConfig.from_proto(await transport.run_config())
            # The attacks run in a worker thread: the event loop keeps answering the broker's
            # keep-alive (and the node stays "online") however long they take.
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

    config = _config(args)
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


# ---------------------------------------------------------------------------- replay
def cmd_replay(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from privrec.adversary.replay import replay
    from privrec.sim.auxiliary import auxiliary_set
    from privrec.sim.phases import attack_progress
    from privrec.sim.progress import RichProgress
    from privrec.sim.rebuild import run_config_path
    from privrec.sim.referee import score_attacks
    from privrec.sim.report import format_value, headline_text

    run_dir = Path(args.run_dir)
    config = ExperimentConfig.load(run_config_path(run_dir, args.config))
    names = args.attack or list(config.adversary.attacks)
    if not names:
        raise ConfigError(
            "--attack: the run's configuration names no attack ([adversary] attacks = []); "
            "name one with --attack NAME"
        )
    out_dir = Path(args.out) if args.out else run_dir / "adversary" / "replay"
    with RichProgress(Console(stderr=True)) as progress:
        outputs = replay(
            run_dir, names, out_dir, auxiliary_set(config), progress=attack_progress(progress)
        )
    scores = score_attacks(config, outputs, run_dir)
    table = Table(title=f"replay of {run_dir}")
    for col in ("attack", "knowledge", "headline, beside its baselines", "metrics"):
        table.add_column(col)
    for s in scores:
        table.add_row(
            s["name"],
            s["knowledge"],
            headline_text(s, "\n"),
            ", ".join(f"{k}={format_value(k, v)}" for k, v in s["metrics"].items()),
        )
    Console().print(table)
    (out_dir / "scores.json").write_text(json.dumps(scores, indent=2))
    return 0


# ---------------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="privrec", description=__doc__)
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more log output (repeatable)"
    )
    parser.add_argument("--version", action="version", version=f"privrec {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("sim", help="run an experiment end to end")
    p.add_argument("--config", help="experiment TOML (default: the built-in default scenario)")
    p.add_argument("--out", help="run directory (default: runs/RUN_ID)")
    p.add_argument(
        "--launcher",
        choices=("processes", "inprocess", "ray"),
        default="processes",
        help="processes (default): every node its own OS process over loopback gRPC and MQTT; "
        "inprocess: the same objects in one process, no network (same numbers); "
        "ray: the same node processes placed on a Ray cluster (pip install 'privrec[ray]')",
    )
    p.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="with --launcher ray: the cluster's address (HOST:6379 of `ray start --head`, or "
        "auto); default: a local Ray on this machine",
    )
    p.add_argument(
        "--mqtt",
        type=_mqtt,
        help="embedded (amqtt), none, or mqtt://host:port (default: the config's "
        '[control].mqtt, "embedded" unless set)',
    )
    add_set_argument(p)
    p.add_argument("--seed", type=int, help="override [run].seed (as --set run.seed=N)")
    p.add_argument("--audit", action="store_true", help="also audit the mechanism's DP claim")
    p.add_argument(
        "--insecure",
        action="store_true",
        help="run without TLS and node authentication (default: both on)",
    )
    p.add_argument(
        "--tls-dir", help="use this `privrec certs` directory (default: one made for the run)"
    )
    p.set_defaults(func=cmd_sim)

    p = sub.add_parser(
        "report", help="score a run directory and write its report (e.g. a run started by hand)"
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="the directory the server ran in")
    p.add_argument(
        "--config", help="experiment TOML the nodes ran with (default: RUN_DIR/config.toml)"
    )
    p.add_argument(
        "--server",
        metavar="HOST:PORT",
        help="the server, still running, to download a published result (kNN-graph models)",
    )
    p.add_argument("--audit", action="store_true", help="also audit the mechanism's DP claim")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser(
        "broker", help="run an MQTT broker (embedded amqtt) for nodes started by hand"
    )
    p.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    p.add_argument(
        "--port", type=int, default=1883, help="TCP port (default 1883, MQTT's; 0 picks a free one)"
    )
    p.add_argument("--ready-file", type=Path, help="write the bound port here once listening")
    p.add_argument(
        "--tls-dir", help="serve mutual TLS with this `privrec certs` directory (mqtts://)"
    )
    p.set_defaults(func=cmd_broker)

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
    p.add_argument("--server", required=True, help="HOST:PORT of the aggregator")
    p.add_argument("--shard", type=_shard, required=True, help="I/N")
    add_node_security_args(p)
    p.set_defaults(func=cmd_clients)

    p = sub.add_parser("adversary", help="run the live adversary node")
    node_args(p)
    p.add_argument("--server", required=True, help="HOST:PORT (for the public run config)")
    p.add_argument("--ready-file", help="write a line here once subscribed to the feed")
    add_node_security_args(p)
    p.set_defaults(func=cmd_adversary)

    p = sub.add_parser("sybils", help="run the adversary's sybil clients")
    node_args(p)
    p.add_argument("--server", required=True, help="HOST:PORT of the aggregator")
    add_node_security_args(p)
    p.set_defaults(func=cmd_sybils)

    add_admin_command(sub)
    add_security_commands(sub)

    p = sub.add_parser("replay", help="run attacks over a recorded transcript")
    p.add_argument("run_dir", metavar="RUN_DIR", help="the directory the server ran in")
    p.add_argument(
        "--attack", action="append", help="attack name (repeatable; default: the run's attacks)"
    )
    p.add_argument("--out", help="where outputs go (default RUN_DIR/adversary/replay)")
    p.add_argument(
        "--config", help="experiment TOML the nodes ran with (default: RUN_DIR/config.toml)"
    )
    p.set_defaults(func=cmd_replay)

    add_sweep_command(sub, add_set_argument)
    add_data_commands(sub)
    add_audit_command(sub)
    add_reproduce_command(sub)
    return parser


NODE_COMMANDS = ("server", "clients", "adversary", "sybils", "broker")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.WARNING - 10 * args.verbose
    if args.command in NODE_COMMANDS:
        level = min(level, logging.INFO)
        watch_orchestrator()  # a node an orchestrator started ends with it (not one by hand)
    else:  # SIGTERM stops a command as Ctrl-C does: every node it started is stopped first
        stop_on_sigterm()
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        return int(args.func(args))
    except PrivrecError as exc:
        print(f"privrec: error: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"privrec: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        status = exit_status_of_interrupt()
        name = signal.Signals(status - 128).name
        print(f"privrec: stopped by {name}; every node it started was stopped", file=sys.stderr)
        return status


if __name__ == "__main__":
    sys.exit(main())
