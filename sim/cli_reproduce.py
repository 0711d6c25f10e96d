"""`privrec reproduce`: list the entries, or run one and print published beside ours."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from privrec.shared.errors import ConfigError


def add_reproduce_command(subparsers: Any) -> argparse.ArgumentParser:
    """Add `privrec reproduce` to the parser."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "reproduce",
        help="run a published table or figure and compare with it",
        description="Run a published table or figure through the protocol's classes and print "
        "the published numbers beside ours, with a verdict per row.",
    )
    p.add_argument("name", nargs="?", metavar="NAME", help="the entry (see --list)")
    p.add_argument("--list", action="store_true", help="list the entries and exit")
    p.add_argument("--repeats", type=int, metavar="N", help="repeats (default: the entry's)")
    p.add_argument(
        "--out", default="runs/reproduce", metavar="DIR", help="where NAME.json and NAME.png go"
    )
    p.add_argument("--data", metavar="PATH", help="a dataset file or folder the entry may use")
    p.add_argument("--quick", action="store_true", help="a small version (smoke test)")
    p.add_argument(
        "--jobs",
        type=int,
        metavar="N",
        help="repeats at once (default: the cores); a stopped reproduction resumes",
    )
    p.set_defaults(func=run_reproduce)
    return p


def run_reproduce(args: argparse.Namespace) -> int:
    """`privrec reproduce`: run the named entries (or list them) and print the comparison."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TimeElapsedColumn
    from rich.table import Table

    from privrec.sim.reproduce import REPRODUCTIONS, reproduce

    console = Console()
    if args.list or not args.name:
        table = Table(title="privrec reproduce entries")
        for col in ("name", "what", "source"):
            table.add_column(col)
        for name, cls in sorted(REPRODUCTIONS.items()):
            table.add_row(name, cls.title, cls.source)
        console.print(table)
        return 0 if args.list else 2
    entry = REPRODUCTIONS.lookup(args.name)()
    repeats = args.repeats if args.repeats is not None else entry.default_repeats
    if repeats < 1:
        raise ConfigError(f"--repeats must be >= 1, got {repeats}")
    if args.jobs is not None and args.jobs < 1:
        raise ConfigError(f"--jobs must be >= 1, got {args.jobs}")
    data = Path(args.data) if args.data else None
    if data is not None and not data.exists():
        raise ConfigError(f"--data: {data} does not exist")
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
    ) as bar:
        task = bar.add_task(entry.name, total=repeats)

        def progress(what: str, done: int, total: int) -> None:
            bar.update(task, description=what, completed=done, total=total)

        result = reproduce(
            entry,
            repeats=repeats,
            out_dir=Path(args.out),
            data=data,
            quick=args.quick,
            progress=progress,
            jobs=args.jobs,
        )
    table = Table(title=f"{result.title} — {result.source}")
    for col in ("row", "metric", "published", "ours", "verdict", "note"):
        table.add_column(col)
    for r in result.rows:
        spread = f" ± {r.std:.4f} (n={len(r.values)})" if result.repeats > 1 else ""
        ours = f"{r.mean:.4f}{spread}"
        pub = "—" if r.published is None else f"{r.published:.4f}"
        table.add_row(
            r.label, r.metric, pub, ours, r.verdict, r.reason if r.verdict == "differs" else ""
        )
    console.print(table)
    for c in result.claims:
        console.print(f"claim: {c['claim']} — [bold]{c['verdict']}[/]")
    console.print(
        f"{result.seconds:.1f} s; wrote {Path(args.out) / (entry.name + '.json')} "
        f"and {entry.name}.png"
    )
    return 0


__all__ = ["add_reproduce_command", "run_reproduce"]
