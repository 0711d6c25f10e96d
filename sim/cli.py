"""The `privrec` command: `sim`, the node commands, `admin`, `replay`, `data`, `audit`.

Every error privrec raises on purpose is printed as one line and exits with status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from privrec import __version__
from privrec.shared.config import ExperimentConfig
from privrec.shared.errors import ConfigError, PrivrecError
from privrec.sim.cli_admin import add_admin_command
from privrec.sim.cli_audit import add_audit_command
from privrec.sim.cli_data import add_data_commands
from privrec.sim.cli_reproduce import add_reproduce_command

logger = logging.getLogger("privrec")


def _config(args: argparse.Namespace) -> ExperimentConfig:
    config = ExperimentConfig.load(args.config) if args.config else ExperimentConfig()
    if getattr(args, "seed", None) is not None:
        config = config.replace("run", seed=args.seed)
    return config


def _mqtt(value: str) -> str:
    if value in ("embedded", "none") or value.startswith("mqtt://"):
        return value
    raise argparse.ArgumentTypeError(
        f"--mqtt must be embedded, none or mqtt://host:port, got {value!r}"
    )


# ---------------------------------------------------------------------------- sim
def cmd_sim(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from privrec.sim.report import summary_table
    from privrec.sim.run import SimOptions, run_id_for, simulate

    config = _config(args)
    out = Path(args.out) if args.out else Path("runs") / run_id_for(config)
    console = Console(stderr=True)
    console.print(
        f"[bold]privrec sim[/] run {run_id_for(config)} → {out} "
        f"(launcher={args.launcher}, mqtt={args.mqtt})"
    )
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as bar:
        tasks: dict[str, Any] = {}

        def progress(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(phase, total=total)
            bar.update(tasks[phase], completed=done)

        report = simulate(
            config,
            SimOptions(
                out_dir=out,
                launcher=args.launcher,
                mqtt=args.mqtt,
                progress=progress,
                audit=args.audit,
            ),
        )
    Console().print(summary_table(report))
    print(f"report: {out / 'report.json'}")
    return 0


# ---------------------------------------------------------------------------- nodes
def cmd_server(args: argparse.Namespace) -> int:
    from privrec.server.node import serve
    from privrec.shared.population import load_population

    config = _config(args)
    catalogue = load_population(config.data, config.run.seed)  # only n_items and the scale
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
                )
            )
            waiter = polling_waiter(transport, config.control.phase_poll_s)
            if args.mqtt != "none":
                from privrec.shared.control import ControlPlane

                control = await stack.enter_async_context(
                    ControlPlane(args.mqtt, run_id=args.run_id, node=f"shard-{shard}")
                )

                async def waiter(name: str) -> str:  # type: ignore[misc]
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


def cmd_adversary(args: argparse.Namespace) -> int:
    from privrec.adversary.node import RecordFile, attack_record, follow_feed
    from privrec.client.transport import GrpcTransport
    from privrec.shared.control import ControlPlane
    from privrec.shared.run_config import PublicRunConfig

    if args.mqtt == "none":
        raise ConfigError(
            "--mqtt: the live adversary follows the observation feed and needs a "
            "broker; use `privrec replay RUN_DIR` without one"
        )
    config = _config(args)
    out = Path(args.run_dir) / "adversary"

    async def main() -> None:
        record_path = out / "record.bin"
        record_path.unlink(missing_ok=True)
        record = RecordFile(record_path)
        async with ControlPlane(args.mqtt, run_id=args.run_id, node="adversary") as control:
            async with control.observations() as feed:
                await feed.subscribed()
                if args.ready_file:
                    Path(args.ready_file).write_text("subscribed\n")
                n = await follow_feed(feed, record)
            logger.info("adversary recorded %d observations", n)
            async with GrpcTransport(args.server, args.run_id) as transport:
                run_config = PublicRunConfig.from_proto(await transport.run_config())
            summary = attack_record(
                record_path,
                run_config,
                config.adversary.attacks,
                out / "live",
                run_dir=Path(args.run_dir),
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

    async def main() -> None:
        t = config.transport
        async with GrpcTransport(
            args.server, args.run_id, deadline_s=t.deadline_s, retries=t.retries
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
    from privrec.sim.referee import score_attacks

    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        raise ConfigError(f"RUN_DIR: {run_dir} is not a directory")
    config = ExperimentConfig.load(run_dir / "config.toml")
    names = args.attack or list(config.adversary.attacks)
    out_dir = Path(args.out) if args.out else run_dir / "adversary" / "replay"
    outputs = replay(run_dir, names, out_dir)
    scores = score_attacks(config, outputs, run_dir)
    table = Table(title=f"replay of {run_dir}")
    for col in ("attack", "knowledge", "metrics"):
        table.add_column(col)
    for s in scores:
        table.add_row(
            s["name"], s["knowledge"], ", ".join(f"{k}={v:.4f}" for k, v in s["metrics"].items())
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
    p.add_argument("--launcher", choices=("processes", "inprocess"), default="processes")
    p.add_argument(
        "--mqtt",
        type=_mqtt,
        default="embedded",
        help="embedded (amqtt, default), none, or mqtt://host:port",
    )
    p.add_argument("--seed", type=int, help="override [run].seed")
    p.add_argument("--audit", action="store_true", help="also audit the mechanism's DP claim")
    p.set_defaults(func=cmd_sim)

    def node_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--config", help="experiment TOML")
        p.add_argument("--run-dir", required=True)
        p.add_argument("--run-id", required=True)
        p.add_argument("--mqtt", type=_mqtt, default="none")
        p.add_argument("--seed", type=int)

    p = sub.add_parser("server", help="run the aggregator node")
    node_args(p)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--ready-file", help="write the bound port here once serving")
    p.set_defaults(func=cmd_server)

    p = sub.add_parser("clients", help="run one client shard")
    node_args(p)
    p.add_argument("--server", required=True, help="HOST:PORT of the aggregator")
    p.add_argument("--shard", type=_shard, required=True, help="I/N")
    p.set_defaults(func=cmd_clients)

    p = sub.add_parser("adversary", help="run the live adversary node")
    node_args(p)
    p.add_argument("--server", required=True, help="HOST:PORT (for the public run config)")
    p.add_argument("--ready-file")
    p.set_defaults(func=cmd_adversary)

    p = sub.add_parser("sybils", help="run the adversary's sybil clients")
    node_args(p)
    p.add_argument("--server", required=True, help="HOST:PORT of the aggregator")
    p.set_defaults(func=cmd_sybils)

    add_admin_command(sub)

    p = sub.add_parser("replay", help="run attacks over a recorded transcript")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--attack", action="append", help="attack name (repeatable)")
    p.add_argument("--out", help="where outputs go (default RUN_DIR/adversary/replay)")
    p.set_defaults(func=cmd_replay)

    add_data_commands(sub)
    add_audit_command(sub)
    add_reproduce_command(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.WARNING - 10 * args.verbose
    if args.command in ("server", "clients", "adversary", "sybils"):
        level = min(level, logging.INFO)
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
        return 130


if __name__ == "__main__":
    sys.exit(main())
