"""The Python API in a notebook (issue 26, item 6): `privrec.simulate` inside a running event
loop, its awaitable twin, paths as strings, and the typed report that is still the dict."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

import privrec
from privrec.sim.results import Report

TINY = {
    "run": {"name": "api", "seed": 2},
    "data": {"dataset": "synthetic", "synthetic_users": 60, "synthetic_items": 80},
    "model": {"k": 10},
    "adversary": {"attacks": ["rpt_spectral"]},
}


def tiny_config() -> privrec.ExperimentConfig:
    return privrec.ExperimentConfig.from_dict(json.loads(json.dumps(TINY)))


def comparable(report: Report) -> dict:
    return {k: report[k] for k in ("utility", "attacks", "privacy", "population")}


async def test_simulate_inside_a_running_loop_and_awaited(tmp_path: Path) -> None:
    """Regression: #26 `privrec.simulate` raised "asyncio.run() cannot be called from a
    running event loop" in a notebook, and `SimOptions(out_dir=str)` failed deep inside.
    Both calls work inside this test's running loop, the awaited one leaves the loop free
    (a ticker keeps ticking), and both give the same numbers."""
    sync_dir = str(tmp_path / "sync")  # a string, as a notebook user types it
    report = privrec.simulate(
        tiny_config(), privrec.SimOptions(out_dir=sync_dir, launcher="inprocess", mqtt="none")
    )
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.05)
            ticks += 1

    task = asyncio.create_task(ticker())
    awaited = await privrec.simulate_async(
        tiny_config(),
        privrec.SimOptions(out_dir=str(tmp_path / "async"), launcher="inprocess", mqtt="none"),
    )
    task.cancel()
    assert ticks >= 5  # the loop ran while the run went on
    assert comparable(report) == comparable(awaited)
    assert report.run_dir == Path(sync_dir)


def test_report_is_typed_and_converts_to_the_same_dict(tmp_path: Path) -> None:
    """A string config path and overrides; the report's attributes and its dict agree with
    report.json, and `dict(report)` is report.json's dict."""
    path = tmp_path / "tiny.toml"
    path.write_text(tiny_config().to_toml())
    out = tmp_path / "run"
    report = privrec.simulate(
        str(path),
        privrec.SimOptions(out_dir=str(out), launcher="inprocess", mqtt="none"),
        overrides={"mechanism.params.sigma_max": 1.5},
    )
    written = json.loads((out / "report.json").read_text())
    assert dict(report) == written and report.to_dict() == written and report == written
    assert report.utility == written["utility"]
    assert report.privacy["public_params"]["sigma_max"] == 1.5
    assert report.seed == 2
    assert report.epsilon is None and report.per_user_epsilon is None  # RPT claims no DP
    assert report.attack("rpt_spectral") == written["attacks"][0]["metrics"]
    with pytest.raises(KeyError, match="it ran \\['rpt_spectral'\\]"):
        report.attack("rpt_bayes")
    assert Report.read(out) == report


async def test_sweep_inside_a_running_loop_and_awaited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`privrec.sweep` from inside a running loop, then `sweep_async` on the same study: the
    second runs nothing and reads back the same table; `to_dataframe` names pandas when it
    is missing (pandas is not a dependency)."""
    out = str(tmp_path / "study")
    grid = {"mechanism.params.sigma_max": [0.5, 2.0]}
    study = privrec.sweep(tiny_config(), grid, seeds=1, out=out, jobs=2)
    assert study.ran == 2 and study.skipped == 0 and not study.failed
    assert [r["mechanism.params.sigma_max"] for r in study.rows] == [0.5, 2.0]
    assert (
        study.rows[0]["utility.ppcf_mae"]
        == Report.read(Path(out) / study.rows[0]["run_dir"]).utility["ppcf_mae"]
    )
    assert [p["axes"] for p in study.points] == [
        {"mechanism.params.sigma_max": 0.5},
        {"mechanism.params.sigma_max": 2.0},
    ]
    again = await privrec.sweep_async(tiny_config(), grid, seeds=1, out=out, jobs=2)
    assert again.ran == 0 and again.skipped == 2 and again.rows == study.rows
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="pip install pandas"):
        study.to_dataframe()
