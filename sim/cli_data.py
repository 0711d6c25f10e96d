"""``privrec data fetch NAME`` and ``privrec data info NAME|PATH``.

`add_data_commands` registers both on the ``privrec`` argparse parser; each handler returns the
exit status and raises `shared.errors.DataError` on bad input (``sim.cli`` prints it on one line
and exits with status 2).
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from privrec.shared.data.cache import sha256_file
from privrec.shared.data.catalogue import KNOWN_DATASETS, dataset_files, load_dataset
from privrec.shared.data.dataset import RatingData
from privrec.shared.data.fetch import ProgressCallback, fetch_ml100k, read_manifest
from privrec.shared.data.readers import ML100K_NAME
from privrec.shared.data.remote import REMOTE_DATASETS, fetch_remote
from privrec.shared.errors import DataError
from privrec.shared.types import IntArray


@contextlib.contextmanager
def _progress_bar(console: Console) -> Iterator[ProgressCallback]:
    """A rich progress display driven by `fetch_ml100k`'s callback, shown only once called."""
    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    tasks: dict[str, TaskID] = {}

    def update(description: str, completed: int, total: int | None) -> None:
        if not tasks:
            progress.start()
        if description not in tasks:
            tasks[description] = progress.add_task(description, total=total)
        progress.update(tasks[description], completed=completed, total=total)

    try:
        yield update
    finally:
        if tasks:
            progress.stop()


def cmd_data_fetch(args: argparse.Namespace) -> int:
    """``privrec data fetch NAME``: put a known data set in the cache and print where."""
    name = str(args.name).lower()
    if name not in KNOWN_DATASETS:
        raise DataError(f"unknown data set {args.name!r} (known: {', '.join(KNOWN_DATASETS)})")
    console = Console()
    if name in REMOTE_DATASETS:
        dataset = REMOTE_DATASETS[name]
        path = fetch_remote(name)
        console.print(
            f"{name}: [bold]{path}[/bold] (from {dataset.url}; licence: {dataset.licence})"
        )
        return 0
    with _progress_bar(console) as progress:
        directory = fetch_ml100k(progress=progress)
    manifest = read_manifest(directory) or {}
    source = manifest.get("origin", "cache")
    console.print(f"{ML100K_NAME}: [bold]{directory}[/bold] (from {source})")
    return 0


def _histogram(data: RatingData) -> str:
    values, counts = np.unique(data.ratings.data, return_counts=True)
    total = max(1, data.n_ratings)
    if values.size > 12:  # a continuous-looking scale: summarise by quartiles instead
        q = np.quantile(data.ratings.data, [0.0, 0.25, 0.5, 0.75, 1.0])
        return "quantiles 0/25/50/75/100 %: " + " / ".join(f"{v:g}" for v in q)
    return "\n".join(
        f"{value:g}: {count:,} ({100.0 * count / total:.1f} %)"
        for value, count in zip(values, counts, strict=True)
    )


def _spread(counts: IntArray) -> str:
    if counts.size == 0:
        return "-"
    return f"{int(counts.min()):,} / {float(np.median(counts)):g} / {int(counts.max()):,}"


def info_table(data: RatingData, files: list[Path]) -> Table:
    """The `data info` table of `data`, read from `files`."""
    table = Table(title=f"data set {data.name}", show_header=False, title_justify="left")
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    low, high = data.rating_scale
    table.add_row("users", f"{data.n_users:,}")
    table.add_row("items", f"{data.n_items:,}")
    table.add_row("ratings", f"{data.n_ratings:,}")
    table.add_row("density", f"{data.density:.4%}")
    table.add_row("rating scale", f"{low:g} .. {high:g}")
    if data.n_ratings:
        table.add_row(
            "rating mean / sd", f"{data.ratings.data.mean():.3f} / {data.ratings.data.std():.3f}"
        )
    table.add_row("rating histogram", _histogram(data))
    if data.genres is not None:
        per_genre = data.genres.sum(axis=0)
        genres = ", ".join(
            f"{name} ({int(n)})" for name, n in zip(data.genre_names, per_genre, strict=True)
        )
        table.add_row("genres", f"{len(data.genre_names)}: {genres}")
    else:
        table.add_row("genres", "none")
    table.add_row("ratings per user min / median / max", _spread(data.user_counts()))
    table.add_row("ratings per item min / median / max", _spread(data.item_counts()))
    manifest = read_manifest(files[0].parent) if files else None
    if manifest and "origin" in manifest:
        table.add_row("origin", str(manifest["origin"]))
    for path in files:
        table.add_row(f"source {path.name}", f"{path}\nsha256 {sha256_file(path)}")
    return table


def cmd_data_info(args: argparse.Namespace) -> int:
    """``privrec data info NAME|PATH``: load a data set and print its summary table."""
    console = Console()
    with _progress_bar(console) as progress:
        files = dataset_files(args.name_or_path, progress=progress)
    data = load_dataset(args.name_or_path)
    console.print(info_table(data, files))
    return 0


def add_data_commands(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``data fetch`` and ``data info`` on the ``privrec`` subparsers.

    Args:
        subparsers: the object returned by ``parser.add_subparsers()``.

    Returns:
        The ``data`` parser.
    """
    data: argparse.ArgumentParser = subparsers.add_parser(
        "data",
        help="fetch and inspect rating data sets",
        description="Fetch and inspect rating data sets.",
    )
    commands = data.add_subparsers(dest="data_command", required=True, metavar="COMMAND")
    fetch = commands.add_parser(
        "fetch",
        help="download a known data set into the cache",
        description=(
            "Download a known data set into the cache ($PRIVREC_CACHE_DIR or the user cache "
            "directory) from its canonical address, verifying its pinned checksum (sha256, or "
            "the publisher's md5 where no sha256 is published). ml-100k comes from GroupLens "
            "when reachable, otherwise from the recbole 1.2.1 wheel on PyPI. Offline or on a "
            "mismatch: one line naming the address and the manual route (--data PATH), exit 2."
        ),
    )
    fetch.add_argument("name", metavar="NAME", help=f"one of: {', '.join(KNOWN_DATASETS)}")
    fetch.set_defaults(func=cmd_data_fetch)
    info = commands.add_parser(
        "info",
        help="summarise a data set",
        description=(
            "Print users, items, ratings, density, rating scale and histogram, genres, ratings "
            "per user and item, and the source files with their sha256."
        ),
    )
    info.add_argument(
        "name_or_path",
        metavar="NAME|PATH",
        help="a known name (ml-100k), an ML-100K directory, an ML-1M ratings.dat, or a CSV file",
    )
    info.set_defaults(func=cmd_data_info)
    return data


__all__ = ["add_data_commands", "cmd_data_fetch", "cmd_data_info", "info_table"]
