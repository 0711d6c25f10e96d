"""`privrec reproduce`: every entry has a fast smoke test (its --quick run), and the verdicts
compare what they say they compare."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from privrec.sim.reproduce import REPRODUCTIONS, reproduce
from privrec.sim.reproduce.runner import QUICK, verdict


@pytest.mark.parametrize("name", sorted(REPRODUCTIONS))
def test_every_entry_runs_quick(name: str, tmp_path: Path) -> None:
    """Each entry's quick run reports every published key, writes JSON and a plot."""
    entry = REPRODUCTIONS[name]()
    result = reproduce(entry, repeats=1, out_dir=tmp_path, quick=True)
    assert [r.key for r in result.rows] == [p.key for p in entry.published]
    assert all(r.verdict == QUICK for r in result.rows)
    saved = json.loads((tmp_path / f"{name}.json").read_text())
    assert saved["name"] == name and len(saved["rows"]) == len(entry.published)
    assert (tmp_path / f"{name}.png").stat().st_size > 1000


def test_verdict_is_two_percent_relative() -> None:
    """Within 2 % relative: reproduced; outside (either side): differs; nothing printed: —."""
    assert verdict(0.80, 0.8159) == "reproduced"
    assert verdict(0.80, 0.8161) == "differs"
    assert verdict(0.80, 0.7839) == "differs"
    assert verdict(None, 0.5) == "—"
    assert verdict(0.8, float("nan")) == "differs"


def test_cli_lists_entries_and_refuses_unknown_ones() -> None:
    """--list names every entry; an unknown entry is one error line with exit status 2."""
    listed = subprocess.run(
        [sys.executable, "-m", "privrec", "reproduce", "--list"],
        capture_output=True,
        text=True,
        check=True,
    )
    for name in REPRODUCTIONS:
        assert name in listed.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "privrec", "reproduce", "bilge-t99"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2
    assert "unknown reproduction 'bilge-t99'" in bad.stderr
