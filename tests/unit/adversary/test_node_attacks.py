"""The adversary node's attack step (`adversary.node`): it never starves the node's event loop
(regression: #14, Mosquitto dropped the adversary for missing its 15 s keep-alive while the
attacks ran on the loop), and it says which attack runs and how long each took."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from privrec.adversary import node
from privrec.adversary.node import (
    RecordFile,
    attack_in_worker,
    attack_record,
    progress_file,
    read_progress,
)
from tests.run_configs import make_run_config

BUSY_S = 1.5  # the fake attack's pure-Python work (it holds the GIL between switches)
TICK_S = 0.02


def busy_attacks(obs: Any, names: Any, progress: Any = None, seconds: Any = None) -> dict:
    """Stands in for `run_attacks`: pure-Python work, no GIL release but the interpreter's."""
    deadline = time.perf_counter() + BUSY_S
    n = 0
    while time.perf_counter() < deadline:
        n += 1
    if seconds is not None:
        seconds["busy"] = BUSY_S
    return {}


async def longest_gap_while(work: Any) -> float:
    """The longest time the event loop went without running a 20 ms ticker during `work`."""
    gaps: list[float] = []
    stop = asyncio.Event()

    async def ticker() -> None:
        last = time.perf_counter()
        while not stop.is_set():
            await asyncio.sleep(TICK_S)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    await work()
    stop.set()
    await task
    return max(gaps)


@pytest.fixture
def record(tmp_path: Path) -> Path:
    path = tmp_path / "record.bin"
    RecordFile(path).close()
    return path


async def test_attacks_in_a_worker_keep_the_event_loop_running(
    record: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While 1.5 s of attack work runs, the loop never waits half of it (a keep-alive of
    15 s tolerates 22 s); run on the loop, the same work blocks it for the full 1.5 s."""
    monkeypatch.setattr(node, "run_attacks", busy_attacks)
    run_config = make_run_config("rpt", {"sigma_max": 2.0, "beta_max": 25}, n_items=10)

    async def in_worker() -> None:
        await attack_in_worker(record, run_config, ["x"], tmp_path / "live")

    async def on_loop() -> None:  # the broken variant the node used to run
        attack_record(record, run_config, ["x"], tmp_path / "live")

    assert await longest_gap_while(in_worker) < BUSY_S / 2
    assert await longest_gap_while(on_loop) >= BUSY_S * 0.9
    summary = json.loads((tmp_path / "live" / "summary.json").read_text())
    assert summary["seconds"] == {"busy": BUSY_S}


def test_progress_file_tells_which_attack_runs(tmp_path: Path) -> None:
    """What the node writes, the orchestrator reads back; no file reads as None."""
    path = tmp_path / "adversary" / "progress.json"
    assert read_progress(path) is None
    tell = progress_file(path)
    tell("rpt_bayes", 1, 3)
    state = read_progress(path)
    assert state is not None
    assert (state["attack"], state["done"], state["total"]) == ("rpt_bayes", 1, 3)
    path.write_text("{not json")
    assert read_progress(path) is None
