"""`privrec report` refuses an incomplete run, or flags it when asked to score it anyway
(issue 27, finding 3).

A shard that died before writing its predictions, or wrote part of them, and an adversary that
died before its last attack: the report once scored the half it found, exit 0, no warning.
The report runs as the user runs it, as a subprocess.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from privrec.shared.config import ExperimentConfig
from privrec.shared.serde import read_npz, write_npz
from privrec.sim.run import SimOptions, simulate

TINY = {
    "run": {"name": "incomplete", "seed": 4},
    "data": {"dataset": "synthetic", "synthetic_users": 60, "synthetic_items": 80},
    "population": {"shards": 2, "batch_size": 16},
    "model": {"k": 10},
    "adversary": {"attacks": ["rpt_spectral", "rpt_fake_detection"]},
}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("incomplete")
    simulate(ExperimentConfig.from_dict(TINY), SimOptions(out, launcher="inprocess", mqtt="none"))
    return out


@pytest.fixture
def run(run_dir: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    (copy / "report.json").unlink()
    return copy


def report(run: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "privrec", "report", str(run), *extra],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def refused(res: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert res.returncode == 2, res.stderr[-1500:]
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("privrec: error:")]
    assert len(errors) == 1 and "Traceback" not in res.stderr, res.stderr[-1500:]
    for needle in needles:
        assert needle in errors[0], errors[0]


def test_a_missing_prediction_file_is_refused_then_flagged(run: Path) -> None:
    """Regression: #27 (3) a shard that never wrote its predictions: the report scored the
    other half with exit 0 and no warning."""
    (run / "predictions" / "shard-1.npz").unlink()
    refused(report(run), "predictions/shard-1.npz is missing", "--allow-incomplete")
    assert not (run / "report.json").exists()
    flagged = report(run, "--allow-incomplete")
    assert flagged.returncode == 0, flagged.stderr[-1500:]
    assert "INCOMPLETE run: predictions/shard-1.npz is missing" in flagged.stderr
    written = json.loads((run / "report.json").read_text())
    assert written["incomplete"] == ["predictions/shard-1.npz is missing (30 test users)"]


def test_a_prediction_file_with_part_of_its_users_is_refused(run: Path) -> None:
    path = run / "predictions" / "shard-0.npz"
    preds = read_npz(path)
    users = np.unique(preds["user_ids"])
    keep = np.isin(preds["user_ids"], users[: users.size // 2])
    write_npz(
        path, {k: (v[keep] if v.ndim and v.shape[0] == keep.size else v) for k, v in preds.items()}
    )
    refused(report(run), f"predictions/shard-0.npz holds {users.size // 2} of its {users.size}")


def test_a_missing_attack_output_is_refused(run: Path) -> None:
    (run / "adversary" / "live" / "rpt_spectral.npz").unlink()
    refused(report(run), "attack output rpt_spectral is missing")


def test_a_complete_run_is_not_flagged(run: Path) -> None:
    res = report(run)
    assert res.returncode == 0, res.stderr[-1500:]
    assert "incomplete" not in json.loads((run / "report.json").read_text())
