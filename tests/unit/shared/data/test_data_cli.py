"""`privrec data fetch` / `data info` as registered by `sim.cli_data.add_data_commands`."""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

import pytest
from _data_fixtures import write_recbole

from privrec.shared.errors import DataError
from privrec.sim import cli_data


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="privrec")
    cli_data.add_data_commands(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


def test_data_info_prints_summary_with_sources(
    grouplens_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`data info PATH` prints counts, scale, histogram, genres and each file's sha256."""
    monkeypatch.setenv("COLUMNS", "200")
    args = parse(["data", "info", str(grouplens_dir)])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    digest = hashlib.sha256((grouplens_dir / "u.data").read_bytes()).hexdigest()
    for needle in ("users", "ratings", "density", "1 .. 5", "Film-Noir (1)", digest, "u.item"):
        assert needle in out


def test_data_info_unknown_path_raises_data_error() -> None:
    """An unknown name or path is a DataError (printed by the CLI as one line, exit 2)."""
    args = parse(["data", "info", "no-such-set"])
    with pytest.raises(DataError, match="no-such-set"):
        args.func(args)


def test_data_fetch_known_and_unknown_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`data fetch ml-100k` prints the cache directory; unknown names are DataErrors."""
    directory = write_recbole(tmp_path / "cached")
    monkeypatch.setattr(cli_data, "fetch_ml100k", lambda progress=None: directory)
    args = parse(["data", "fetch", "ml-100k"])
    assert args.func(args) == 0
    assert "cached" in capsys.readouterr().out
    # (ml-20m, this test's unknown name before issue 25, is now fetched by name)
    args = parse(["data", "fetch", "ml-99m"])
    with pytest.raises(DataError, match="unknown data set 'ml-99m'"):
        args.func(args)
