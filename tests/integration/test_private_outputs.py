"""Run outputs that hold per-user data are the run owner's alone (issue 27, finding 6).

Another local account (uid 65534, "nobody") tries to read what a run left behind in a folder
every account may enter: each user's withheld items and predicted ratings, the adversary's copy
of the feed and its per-user estimates, the store. It may read the report.
"""

from __future__ import annotations

import os
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from privrec.shared.config import ExperimentConfig
from privrec.sim.run import SimOptions, simulate

NOBODY = 65534
RUN = {
    "run": {"name": "private", "seed": 2},
    "data": {"dataset": "synthetic", "synthetic_users": 80, "synthetic_items": 60},
    "population": {"shards": 2},
    "model": {"k": 10},
    "adversary": {"attacks": ["rpt_fake_detection"]},
}
PER_USER = [
    "predictions/shard-0.npz",
    "predictions/shard-1.npz",
    "adversary/record.bin",
    "adversary/live/rpt_fake_detection.npz",
    "server.sqlite",
]


@pytest.fixture(scope="module")
def run_dir() -> Iterator[Path]:
    """A run in a folder any account may enter (as a shared scratch or home folder is)."""
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        out = Path(tmp) / "run"
        os.chmod(tmp, 0o755)
        simulate(
            ExperimentConfig.from_dict(RUN), SimOptions(out, launcher="inprocess", mqtt="none")
        )
        yield out


@pytest.mark.parametrize("name", PER_USER)
def test_per_user_outputs_are_the_owners_alone(run_dir: Path, name: str) -> None:
    """Regression: #27 (6) `predictions/` (each user's withheld items and predicted ratings)
    was world-readable."""
    path = run_dir / name
    assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, oct(path.stat().st_mode)


def read_as_nobody(path: Path) -> int:
    """Exit status of reading `path` as another local account (0: it could)."""
    return subprocess.run(
        ["head", "-c", "1", str(path)],
        user=NOBODY,
        capture_output=True,
        check=False,
        timeout=60,
    ).returncode


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another account")
def test_another_local_account_reads_the_report_and_nothing_per_user(run_dir: Path) -> None:
    os.chmod(run_dir, 0o755)  # the owner shares the folder: the report is meant to be read
    assert read_as_nobody(run_dir / "report.json") == 0
    for name in PER_USER:
        assert read_as_nobody(run_dir / name) != 0, name


def test_the_adversarys_side_knowledge_is_written_0600(tmp_path: Path) -> None:
    """The auxiliary users' raw profiles and the kNN targets' known ratings."""
    import numpy as np
    import scipy.sparse as sp

    from privrec.adversary.knowledge import KNOWLEDGE_DIR, AdversaryKnowledge, KnownProfile
    from privrec.shared.data.dataset import RatingData

    ratings = sp.csr_matrix(np.array([[5.0, 0.0], [0.0, 3.0]]))
    aux = RatingData("aux", ratings, np.array([1, 2]), np.array([1, 2]), (1.0, 5.0))
    target = KnownProfile("7", np.array([0, 1]), np.array([4.0, 2.0]))
    AdversaryKnowledge(auxiliary=aux, targets=(target,)).write(tmp_path)
    folder = tmp_path / KNOWLEDGE_DIR
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for name in ("auxiliary.npz", "targets.json"):
        assert stat.S_IMODE((folder / name).stat().st_mode) == 0o600, name
