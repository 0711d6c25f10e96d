"""Nodes rejoin in any phase (issue 27, finding 3).

`privrec sim --launcher processes` with `SimOptions(faults=...)` naming client shards and the
adversary: the orchestrator kills each with SIGKILL at the named moment and starts it again
with the same command line, as a supervisor would. A restarted shard learns from the server
which of its users are enrolled and released and continues where the run is; a restarted
adversary keeps its record, catches up from the server's transcript and, restarted in the
attack phase, finds that phase without the marker it missed. The run must finish with the
figures of an uninterrupted run of the same seed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from privrec.shared.config import ExperimentConfig
from privrec.sim.faults import Fault
from privrec.sim.run import SimOptions, simulate
from tests.integration.test_restart import ONE_TIER, figures, fired

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_shards_and_adversary_killed_in_every_phase_finish_with_the_same_figures(
    tmp_path: Path,
) -> None:
    """Regression: #27 (3) a shard SIGKILLed and restarted in train or serve tried to enroll
    again, was refused and exited 2; a restarted adversary deleted its record at start, then
    found no profile or, restarted in the attack phase, waited forever for the marker."""
    config = ExperimentConfig.from_dict(ONE_TIER)
    reference = simulate(config, SimOptions(tmp_path / "ref", launcher="inprocess", mqtt="none"))
    n_queries = reference["population"]["queries"]
    faults = (
        Fault("collect", "profiles", 60, node="shard-0"),
        Fault("train", node="shard-1"),
        Fault("serve", "queries", n_queries // 4, node="shard-0"),
        Fault("serve", "queries", n_queries // 2, node="adversary"),
        Fault("attack", node="adversary"),
    )
    out = tmp_path / "killed"
    killed = simulate(config, SimOptions(out, launcher="processes", mqtt="embedded", faults=faults))
    assert [note.split("node=")[1].split(")")[0] for note in fired(out)] == [
        "'shard-0'", "'shard-1'", "'shard-0'", "'adversary'", "'adversary'",
    ]  # fmt: skip
    assert figures(killed) == figures(reference)
    summary = json.loads((out / "adversary" / "live" / "summary.json").read_text())
    assert summary["profiles"] == reference["population"]["profiles"]
    assert summary["queries"] == n_queries
    shard_0, shard_1 = ((out / "logs" / f"shard-{i}.log").read_text() for i in (0, 1))
    assert "profiles already stored (a restart)" in shard_0  # killed in collect
    assert "answers from before a restart" in shard_0  # and again mid-serve
    assert "120 profiles already stored (a restart)" in shard_1  # killed in train
    assert "records from before a restart" in (out / "logs" / "adversary.log").read_text()
