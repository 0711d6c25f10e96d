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


def test_repeats_run_on_the_sweep_engine_and_resume(tmp_path: Path) -> None:
    """Issue 26: the repeats are jobs of the sweep engine, two at once in workers; each
    repeat's measured values land in its done.json, and running the entry again takes them
    from there (the same table, nothing recomputed) unless the repeat's identity changed."""
    entry = REPRODUCTIONS["bilge-ppcf"]()
    first = reproduce(entry, repeats=2, out_dir=tmp_path, quick=True, jobs=2)
    done = [tmp_path / "bilge-ppcf-work" / f"repeat-{r}" / "done.json" for r in range(2)]
    records = [json.loads(p.read_text()) for p in done]
    assert [r["identity"]["seed"] for r in records] == [0, 1]
    assert [r.values for r in first.rows] == [
        [records[0]["result"][row.key], records[1]["result"][row.key]] for row in first.rows
    ]
    stamps = [p.stat().st_mtime_ns for p in done]
    again = reproduce(entry, repeats=2, out_dir=tmp_path, quick=True, jobs=2)
    assert [r.values for r in again.rows] == [r.values for r in first.rows]
    assert [p.stat().st_mtime_ns for p in done] == stamps  # not run again
    records[1]["identity"]["quick"] = False  # as if that repeat had been a full run
    done[1].write_text(json.dumps(records[1]))
    third = reproduce(entry, repeats=2, out_dir=tmp_path, quick=True, jobs=2)
    assert done[0].stat().st_mtime_ns == stamps[0] and done[1].stat().st_mtime_ns != stamps[1]
    assert [r.values for r in third.rows] == [r.values for r in first.rows]
