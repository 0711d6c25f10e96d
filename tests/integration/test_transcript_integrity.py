"""A damaged transcript is refused, never used (issue 27, finding 4).

The damage is done the way a failing disk or an interrupted copy does it: bytes of the store
file flipped in place (inside stored releases, where SQLite's own structure checks see nothing)
and files cut short. `privrec replay` and `privrec report` run as the user runs them, as
subprocesses, and must answer with one `privrec: error:` line and exit status 2.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from privrec.server.store import Store
from privrec.shared.config import ExperimentConfig
from privrec.shared.errors import DataError
from privrec.sim.run import SimOptions, simulate

TINY = {
    "run": {"name": "integrity", "seed": 3},
    "data": {"dataset": "synthetic", "synthetic_users": 60, "synthetic_items": 80},
    "population": {"shards": 2, "batch_size": 16},
    "model": {"k": 10},
    "adversary": {"attacks": ["rpt_fake_detection"]},
}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("integrity")
    simulate(ExperimentConfig.from_dict(TINY), SimOptions(out, launcher="inprocess", mqtt="none"))
    return out


def privrec(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "privrec", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def assert_one_line_error(res: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert res.returncode == 2, (res.returncode, res.stderr[-2000:])
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("privrec: error:")]
    assert len(errors) == 1, res.stderr[-2000:]
    assert "Traceback" not in res.stderr
    for needle in needles:
        assert needle in errors[0], errors[0]


def flip_release_bytes(store: Path, count: int) -> list[int]:
    """Flip the sign bit of the last value of `count` stored profile releases in the file
    itself (the value changes, stays finite, the message still decodes); returns their
    seqs."""
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    rows = db.execute(
        "SELECT seq, request FROM transcript WHERE method IN ('Submit', 'SubmitStream') "
        "ORDER BY seq"
    ).fetchall()
    db.close()
    data = bytearray(store.read_bytes())
    flipped = []
    for seq, request in rows:
        at = data.find(bytes(request))
        if at < 0 or data.find(bytes(request), at + 1) >= 0:
            continue  # on an overflow page, or not unique: take another
        data[at + len(request) - 1] ^= 0x80  # the sign of the last value
        flipped.append(int(seq))
        if len(flipped) == count:
            break
    assert len(flipped) == count
    store.write_bytes(bytes(data))
    return flipped


@pytest.fixture
def damaged(run_dir: Path, tmp_path: Path) -> tuple[Path, list[int]]:
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    db = sqlite3.connect(run / "server.sqlite")
    db.execute("SELECT COUNT(*) FROM transcript").fetchone()
    db.close()  # the last connection folds the WAL into the file and removes it
    for wal in ("server.sqlite-wal", "server.sqlite-shm"):
        assert not (run / wal).exists()  # everything is in the file we damage
    shutil.rmtree(run / "adversary" / "live")
    return run, flip_release_bytes(run / "server.sqlite", 10)


def test_flipped_release_bytes_pass_sqlite_structure_checks(damaged) -> None:
    """The damage is invisible to SQLite: only the stored digests can tell."""
    run, _ = damaged
    db = sqlite3.connect(run / "server.sqlite")
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    db.close()


def test_replay_refuses_a_transcript_with_flipped_bytes(damaged) -> None:
    """Regression: #27 (4) `privrec replay` used 10 damaged releases and exited 0."""
    run, flipped = damaged
    res = privrec("replay", str(run))
    assert_one_line_error(res, f"seq {flipped[0]}", "digest")


def test_report_refuses_a_transcript_with_flipped_bytes(damaged) -> None:
    """Regression: #27 (4) `privrec report` scored the damaged transcript and exited 0."""
    run, flipped = damaged
    res = privrec("report", str(run))
    assert_one_line_error(res, f"seq {flipped[0]}", "digest")


def test_store_reader_names_the_first_damaged_record(damaged) -> None:
    run, flipped = damaged
    store = Store(run / "server.sqlite", read_only=True)
    try:
        with pytest.raises(DataError, match=rf"seq {flipped[0]}\b.*SHA-256"):
            list(store.transcript())
    finally:
        store.close()


def test_an_intact_store_reads_through(run_dir: Path) -> None:
    """Every record of an intact run carries a digest that matches it."""
    store = Store(run_dir / "server.sqlite", read_only=True)
    try:
        rows = list(store.transcript())
    finally:
        store.close()
    assert len(rows) > 120


@pytest.mark.parametrize("command", ["replay", "report"])
def test_truncated_store_gives_one_line(run_dir: Path, tmp_path: Path, command: str) -> None:
    """Regression: #27 (4) a store cut short gave a Python traceback (exit 1)."""
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    shutil.rmtree(run / "adversary" / "live")
    store = run / "server.sqlite"
    with store.open("r+b") as f:
        f.truncate(store.stat().st_size // 2)
    res = privrec(command, str(run))
    assert_one_line_error(res, "server.sqlite")


def test_garbage_store_gives_one_line(run_dir: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    (run / "server.sqlite").write_bytes(os.urandom(8192))
    res = privrec("replay", str(run))
    assert_one_line_error(res, "server.sqlite")


def test_truncated_prediction_file_gives_one_line(run_dir: Path, tmp_path: Path) -> None:
    """Regression: #27 (4) a prediction file cut short gave a Python traceback (exit 1)."""
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    pred = run / "predictions" / "shard-1.npz"
    with pred.open("r+b") as f:
        f.truncate(pred.stat().st_size // 2)
    res = privrec("report", str(run))
    assert_one_line_error(res, "shard-1.npz")


def test_truncated_attack_output_gives_one_line(run_dir: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    out = run / "adversary" / "live" / "rpt_fake_detection.npz"
    with out.open("r+b") as f:
        f.truncate(out.stat().st_size // 3)
    res = privrec("report", str(run))
    assert_one_line_error(res, "rpt_fake_detection.npz")
