"""`privrec admin status|phase`: the operator's command for a hand-started run.

It calls the server's `privrec.v1.Admin` service (GetStatus, SetPhase) through
`sim.admin_client.GrpcAdmin`, as `privrec sim` does; errors are one line and exit status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privrec.shared.addresses import server_arg
from privrec.shared.errors import ConfigError, PrivrecError
from privrec.shared.protocol import PHASES

if TYPE_CHECKING:
    from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
    from privrec.sim.admin_client import Admin

ADMIN_POLL_S = 0.25
"""How often `privrec admin phase --wait-profiles` asks the server for its status."""

STATUS_ROWS = (
    ("run_id", "run"),
    ("phase", "phase"),
    ("round", "round"),
    ("enrolled", "enrolled"),
    ("profiles", "profiles"),
    ("public_profiles", "public profiles"),
    ("releases_accepted", "releases accepted"),
    ("releases_rejected", "releases rejected"),
    ("duplicates", "duplicates"),
    ("queries", "queries"),
    ("transcript_records", "transcript records"),
    ("train_seconds", "train seconds"),
)
"""RunStatus fields in display order, with their table labels."""


def _bounded_int(name: str, lo: int, hi: int) -> Callable[[str], int]:
    def parse(value: str) -> int:
        try:
            n = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {value!r}") from None
        if not lo <= n <= hi:
            raise argparse.ArgumentTypeError(f"{name} must be in [{lo}, {hi}], got {n}")
        return n

    return parse


def _positive_seconds(value: str) -> float:
    try:
        s = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--timeout must be a number, got {value!r}") from None
    if not s > 0:
        raise argparse.ArgumentTypeError(f"--timeout must be > 0, got {value!r}")
    return s


def _token_from_file(text: str) -> str:
    """The admin token in a token file, or in the server's `--ready-file` (the bound port on
    its first line, then the token it generated, or nothing if PRIVREC_ADMIN_TOKEN was set)."""
    lines = text.splitlines()
    first = lines[0].strip() if lines else ""
    if first.isdigit() and int(first) <= 65535:  # a port: this is a ready file
        return lines[1].strip() if len(lines) > 1 else ""
    return text.strip()


def _admin_token(args: argparse.Namespace) -> str:
    """The token from `--token-file` if given, else from the environment.

    Raises:
        ConfigError: no token anywhere, or an unreadable or empty token file.
    """
    from privrec.server.node import ADMIN_TOKEN_ENV

    if args.token_file:
        path = Path(args.token_file)
        try:
            token = _token_from_file(path.read_text())
        except OSError as exc:
            raise ConfigError(f"--token-file: cannot read {path}: {exc.strerror or exc}") from None
        if not token:
            raise ConfigError(
                f"--token-file: {path} holds no admin token (a server started "
                f"with {ADMIN_TOKEN_ENV} set writes none to its --ready-file)"
            )
        return token
    token = os.environ.get(ADMIN_TOKEN_ENV, "").strip()
    if not token:
        raise ConfigError(
            f"admin token: set {ADMIN_TOKEN_ENV} or pass --token-file PATH "
            f"(the server's --ready-file holds the token it generated)"
        )
    return token


def _status_dict(status: pb.RunStatus) -> dict[str, Any]:
    """A RunStatus as plain JSON values, in `STATUS_ROWS` order, then any newer field."""
    names = [name for name, _ in STATUS_ROWS]
    names += [f.name for f in status.DESCRIPTOR.fields if f.name not in names]
    return {name: getattr(status, name) for name in names}


def _print_status(status: pb.RunStatus, as_json: bool) -> None:
    if as_json:
        print(json.dumps(_status_dict(status)))
        return
    from rich.console import Console
    from rich.table import Table

    labels = dict(STATUS_ROWS)
    table = Table(title=f"run {status.run_id}", show_header=False)
    table.add_column("field")
    table.add_column("value", justify="right")
    for name, value in _status_dict(status).items():
        if name != "run_id":
            table.add_row(
                labels.get(name, name), f"{value:.2f}" if isinstance(value, float) else str(value)
            )
    Console().print(table)


async def _wait_profiles(
    admin: Admin, target: int, timeout: float, phase: str, field: str = "profiles"
) -> None:
    """Poll GetStatus until the count `field` (profiles, or enrolled users) reaches `target`.

    Raises:
        PrivrecError: still fewer after `timeout` seconds (the phase is left unchanged).
    """
    option = "--wait-profiles" if field == "profiles" else f"--wait-{field}"
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    console = Console(stderr=True)
    last: pb.RunStatus | None = None
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    ) as bar:
        task = bar.add_task(f"{field} before {phase}", total=target)
        try:
            async with asyncio.timeout(timeout):
                while True:
                    last = await admin.status()
                    bar.update(task, completed=getattr(last, field))
                    if getattr(last, field) >= target:
                        return
                    await asyncio.sleep(ADMIN_POLL_S)
        except TimeoutError:
            seen = (
                "no status"
                if last is None
                else f"{getattr(last, field)} {field} (phase {last.phase!r})"
            )
            raise PrivrecError(
                f"{option}: {seen} after {timeout:g}s, {target} needed; phase {phase!r} not set"
            ) from None


def cmd_admin(args: argparse.Namespace) -> int:
    """`privrec admin status|phase`: GetStatus or SetPhase on the server's Admin service."""
    import grpc

    from privrec.sim.admin_client import GrpcAdmin

    token = _admin_token(args)

    async def main() -> pb.RunStatus:
        tls = Path(args.tls_dir) if args.tls_dir else None
        admin = GrpcAdmin(args.server, args.run_id, token, tls_dir=tls, node=args.node)
        try:
            if args.admin_command == "status":
                return await admin.status()
            if args.wait_enrolled is not None:
                await _wait_profiles(
                    admin, args.wait_enrolled, args.timeout, args.phase, "enrolled"
                )
            if args.wait_profiles is not None:
                await _wait_profiles(admin, args.wait_profiles, args.timeout, args.phase)
            return await admin.set_phase(args.phase, args.round)
        finally:
            await admin.channel.close()

    try:
        status = asyncio.run(main())
    except PrivrecError as exc:
        if type(exc) is PrivrecError and isinstance(exc.__cause__, grpc.aio.AioRpcError):
            # not a refusal by the server but a transport failure (UNAVAILABLE, ...): say where
            raise PrivrecError(f"server {args.server}: {exc}") from exc
        raise
    _print_status(status, args.json)
    return 0


def add_admin_command(sub: Any) -> None:
    """Register `privrec admin status|phase` on the subcommand parser `sub`."""
    admin = sub.add_parser(
        "admin",
        help="drive a hand-started run's phases (privrec.v1.Admin)",
        description="Call the server's privrec.v1.Admin service. The admin token comes from "
        "--token-file, else from the environment variable PRIVREC_ADMIN_TOKEN.",
    )
    admin_sub = admin.add_subparsers(dest="admin_command", required=True)

    def admin_args(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--server", required=True, type=server_arg, help="HOST:PORT of the aggregator"
        )
        p.add_argument("--run-id", required=True, help="the run's name, as the server was given")
        p.add_argument(
            "--token-file",
            metavar="PATH",
            help="file holding the admin token, or the server's --ready-file "
            "(default: $PRIVREC_ADMIN_TOKEN)",
        )
        p.add_argument("--json", action="store_true", help="print the status as one JSON object")
        p.add_argument("--tls-dir", help="certificate directory (`privrec certs`): mutual TLS")
        p.add_argument("--node", default="operator", help="whose certificate (default: operator)")

    p = admin_sub.add_parser(
        "status",
        help="print the run's status",
        description="Print the server's RunStatus (GetStatus).",
    )
    admin_args(p)
    p.set_defaults(func=cmd_admin)

    p = admin_sub.add_parser(
        "phase",
        help="move the run to a phase",
        description="Move the run to phase NAME (SetPhase) and print the resulting status. "
        "Phases only move forward: " + " → ".join(PHASES) + ".",
    )
    p.add_argument("phase", metavar="NAME", choices=PHASES, help="one of: " + ", ".join(PHASES))
    admin_args(p)
    p.add_argument(
        "--round",
        type=_bounded_int("--round", 0, 2**32 - 1),
        default=0,
        help="collect round of a two-tier run (docs/decisions/two_tier.md, Collect rounds)",
    )
    p.add_argument(
        "--wait-profiles",
        type=_bounded_int("--wait-profiles", 0, 2**63 - 1),
        metavar="N",
        help="first wait until the server holds at least N profiles",
    )
    p.add_argument(
        "--wait-enrolled",
        type=_bounded_int("--wait-enrolled", 0, 2**63 - 1),
        metavar="N",
        help="first wait until at least N users are enrolled",
    )
    p.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=600.0,
        metavar="S",
        help="give up waiting for --wait-enrolled/--wait-profiles after S seconds (default 600)",
    )
    p.set_defaults(func=cmd_admin)


__all__ = ["add_admin_command", "cmd_admin"]
