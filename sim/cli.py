"""The `privrec` command: `sim`, `sweep`, `report`, the node commands (`broker`, `server`,
`clients`, `adversary`), `admin`, `replay`, `data`, `audit`, `reproduce`.

Every error privrec raises on purpose is printed as one line and exits with status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from privrec import __version__
from privrec.shared.addresses import server_arg
from privrec.shared.config import ExperimentConfig
from privrec.shared.errors import ConfigError, PrivrecError
from privrec.shared.lifecycle import (
    exit_at_once,
    exit_status_of_interrupt,
    stop_on_sigterm,
    watch_orchestrator,
)
from privrec.shared.threads import configure_threads
from privrec.sim.cli_admin import add_admin_command
from privrec.sim.cli_audit import add_audit_command
from privrec.sim.cli_data import add_data_commands
from privrec.sim.cli_nodes import add_node_commands, config_of
from privrec.sim.cli_reproduce import add_reproduce_command
from privrec.sim.cli_security import (
    add_security_commands,
    warn_insecure_run,
)
from privrec.sim.cli_sweep import add_sweep_command

if TYPE_CHECKING:
    pass

logger = logging.getLogger("privrec")


def _mqtt(value: str) -> str:
    if value in ("embedded", "none") or value.startswith(("mqtt://", "mqtts://")):
        return value
    raise argparse.ArgumentTypeError(
        f"--mqtt must be embedded, none, mqtt://host:port or mqtts://host:port, got {value!r}"
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
    """`privrec sim`: run a scenario end to end and print its summary."""
    from rich.console import Console

    from privrec.sim.progress import RichProgress
    from privrec.sim.report import summary_table
    from privrec.sim.run import SimOptions, run_id_for, simulate

    config = config_of(args)
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
    """`privrec report`: rebuild a run folder's report and figures."""
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
            allow_incomplete=args.allow_incomplete,
        )
    Console().print(summary_table(report))
    if report.get("incomplete"):
        from privrec.sim.completeness import incomplete_note

        Console(stderr=True).print(f"[bold red]{incomplete_note(report['incomplete'])}[/]")
    print(f"report: {run_dir / 'report.json'} (and report.md, plots/)")
    return 0


def cmd_broker(args: argparse.Namespace) -> int:
    """`privrec broker`: an embedded amqtt broker (TLS and topic ACLs when keys are given)."""
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


# ---------------------------------------------------------------------------- replay
def cmd_replay(args: argparse.Namespace) -> int:
    """`privrec replay`: re-run the attacks on a run's recorded observations."""
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
    """The `privrec` argument parser with every subcommand."""
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
        type=server_arg,
        help="the server, still running, to download a published result (kNN-graph models)",
    )
    p.add_argument("--audit", action="store_true", help="also audit the mechanism's DP claim")
    p.add_argument(
        "--allow-incomplete",
        action="store_true",
        help="score a run whose predictions or attack outputs are incomplete, flagged as such "
        "(default: refuse it)",
    )
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

    add_node_commands(sub)
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
    """Entry point of `privrec`: parse, set logging, dispatch; the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.WARNING - 10 * args.verbose
    if args.command in NODE_COMMANDS:
        level = min(level, logging.INFO)
        watch_orchestrator()  # a node an orchestrator started ends with it (not one by hand)
    else:  # SIGTERM stops a command as Ctrl-C does: every node it started is stopped first
        stop_on_sigterm()
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    # numba's threading layer, wait policy and thread count, before any kernel runs (the
    # nodes a command starts inherit them through the environment)
    configure_threads()
    status = _run(args)
    if argv is None and args.command in LEAVE_AT_ONCE:
        exit_at_once(status)
    return status


LEAVE_AT_ONCE = ("sweep",)
"""Commands whose process ends at once when they return (`lifecycle.exit_at_once`), when `main`
runs the process's own command line (a caller passing `argv` keeps its interpreter): a study's
parent has imported numba, llvmlite, scipy and matplotlib through its checks and results, and
unloading them took ≈ 0.7-1 s after the last file was written (bench/sweep.py;
docs/decisions/studies.md). Only after the command returned: its files are written and
closed, its workers and temporary directories gone."""


def _run(args: argparse.Namespace) -> int:
    """The command's exit status: its own, 2 for a one-line error, 128 + signal when stopped."""
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
