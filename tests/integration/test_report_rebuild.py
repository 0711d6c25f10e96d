"""`privrec report RUN_DIR` (`sim.rebuild`): from a run directory alone, the referee rebuilds
the truth and gives the numbers `privrec sim` gave; without live attack outputs it replays the
transcript; progress is told for every step."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from privrec.shared.config import ExperimentConfig
from privrec.shared.errors import ConfigError
from privrec.sim.rebuild import report_run, status_from_store, timings_from_transcript
from privrec.sim.run import SimOptions, simulate

TINY = {
    "run": {"name": "rebuild", "seed": 5},
    "data": {"dataset": "synthetic", "synthetic_users": 60, "synthetic_items": 80},
    "population": {"shards": 2, "batch_size": 16},
    "model": {"k": 10},
    "adversary": {"attacks": ["rpt_spectral", "rpt_fake_detection"]},
}


@pytest.fixture(scope="module")
def sim_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("sim")
    calls: list[tuple[str, int, int]] = []
    report = simulate(
        ExperimentConfig.from_dict(TINY),
        SimOptions(out, launcher="inprocess", mqtt="none", progress=lambda *c: calls.append(c)),
    )
    return out, report | {"progress_calls": calls}


def test_sim_reports_progress_for_every_phase_attack_and_report_step(sim_run) -> None:
    """Every phase has a line; each attack is named; each report step is named; and the
    timings of both files cover every step."""
    out, report = sim_run
    phases = {label.split(" · ")[0] for label, _, _ in report["progress_calls"]}
    assert phases == {"load", "enroll", "collect", "train", "serve", "attack", "report"}
    details = {label for label, _, _ in report["progress_calls"]}
    assert {"attack · running rpt_spectral", "attack · running rpt_fake_detection"} <= details
    assert "report · drawing the figures" in details
    timings = json.loads((out / "report.json").read_text())["timings"]
    expected = {"load", "enroll", "collect", "train", "serve", "attack", "report"}
    expected |= {"attack.rpt_spectral", "attack.rpt_fake_detection"}
    expected |= {f"report.{s}" for s in ("utility", "baseline", "attacks", "privacy", "plots")}
    assert expected <= set(timings)
    md = (out / "report.md").read_text()
    assert all(f"| {step} |" in md for step in expected)


def test_report_rebuilds_the_same_numbers_and_replays_missing_attacks(
    sim_run, tmp_path: Path
) -> None:
    """A copy of the run directory without the report, the live outputs and the model archive:
    `report_run` replays the attacks and scores exactly what `privrec sim` scored."""
    out, report = sim_run
    run = tmp_path / "run"
    shutil.copytree(out, run)
    for stale in ("report.json", "report.md"):
        (run / stale).unlink()
    shutil.rmtree(run / "plots")
    shutil.rmtree(run / "adversary" / "live")
    calls: list[tuple[str, int, int]] = []
    again = report_run(run, progress=lambda *c: calls.append(c))
    assert again["utility"] == report["utility"]
    assert again["attacks"] == report["attacks"]
    assert again["privacy"] == report["privacy"]
    assert again["run"]["attack_outputs"] == "adversary/replay"
    assert again["run"]["launcher"] == "by hand"
    pop = again["population"]
    assert pop["enrolled"] == pop["profiles"] == pop["queries"] == 60
    assert pop["releases_accepted"] == report["population"]["releases_accepted"]
    # the server's counters, saved in the store's meta at its last phase change
    assert pop["releases_rejected"] == report["population"]["releases_rejected"]
    assert pop["duplicates"] == report["population"]["duplicates"]
    assert {"attack · running rpt_spectral", "report · drawing the figures"} <= {
        c[0] for c in calls
    }
    assert (run / "plots" / "attacks.png").exists() and (run / "report.md").exists()


def test_store_counts_and_transcript_timings(sim_run) -> None:
    """The store's counts match the server's status; every phase's span is non-negative."""
    out, report = sim_run
    status = status_from_store(out)
    for key in (
        "enrolled",
        "profiles",
        "releases_accepted",
        "releases_rejected",
        "duplicates",
        "queries",
    ):
        assert status[key] == report["population"][key]
    timings, first = timings_from_transcript(out)
    assert list(timings) == ["enroll", "collect", "serve"]
    assert all(t >= 0 for t in timings.values()) and first is not None


def test_report_refuses_a_configuration_of_another_run(sim_run, tmp_path: Path) -> None:
    """A --config naming another mechanism than the server ran is refused, naming both."""
    out, _ = sim_run
    other = tmp_path / "other.toml"
    other.write_text('[mechanism]\nname = "rrt"\n')
    with pytest.raises(ConfigError, match=r"mechanism.name: .*'rrt'.*'rpt'"):
        report_run(out, config_file=other)
