"""A run's processes end with it (issue 27, finding 5).

`privrec sim` runs as a user starts it (a subprocess in its own session) and is sent SIGTERM (as
`timeout`, a batch scheduler or a supervisor send it), SIGINT (Ctrl-C) or SIGKILL (the machine's
OOM killer, `kill -9`) while its nodes run: the broker, the server, the adversary and both
shards. Afterwards no process it started may be left: with SIGTERM/SIGINT the orchestrator stops
them itself and exits non-zero; with SIGKILL each node notices that its orchestrator is gone and
exits within seconds. A node started by hand does not exit when the shell that started it does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

RUN = {
    "run": {"name": "lifecycle", "seed": 1},
    "data": {"dataset": "synthetic", "synthetic_users": 3000, "synthetic_items": 400},
    "population": {"shards": 2, "batch_size": 16},
    "model": {"k": 10},
}
NODES = 5  # broker, server, adversary, shard-0, shard-1
NOTICE_S = 10.0  # a node whose orchestrator was killed exits within this


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process, None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return fields[0], int(fields[1])


def alive(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")  # a zombie has exited


def descendants(root: int) -> set[int]:
    """Every living process below `root`."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None and stat[0] not in ("Z", "X"):
                children.setdefault(stat[1], []).append(int(entry.name))
    out: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def start_sim(tmp_path: Path) -> tuple[subprocess.Popen[bytes], set[int]]:
    """`privrec sim` in its own session; returns it once all its nodes run, with their pids."""
    config = tmp_path / "run.toml"
    config.write_text(
        "\n".join(
            f"[{section}]\n" + "\n".join(f"{k} = {json.dumps(v)}" for k, v in values.items())
            for section, values in RUN.items()
        )
    )
    log = (tmp_path / "sim.log").open("wb")
    # SIGINT as in a terminal's foreground process (the user's Ctrl-C): a suite started as a
    # background job of a non-interactive shell (`make test &`, a CI script) has SIGINT ignored,
    # a disposition that a child inherits and `privrec sim` rightly keeps; a handled signal is
    # reset to its default in the child instead
    ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    if ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    sim = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "privrec",
            "sim",
            "--config",
            str(config),
            "--out",
            str(tmp_path / "run"),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    if ignored:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    deadline = time.monotonic() + 120
    while True:
        nodes = {p for p in descendants(sim.pid) if "privrec" in cmdline(p)}
        if len(nodes) >= NODES and all("shard" in cmdline(p) or True for p in nodes):
            shards = [p for p in nodes if "--shard" in cmdline(p)]
            if len(shards) == 2:
                return sim, nodes
        if sim.poll() is not None or time.monotonic() > deadline:
            sim.kill()
            pytest.fail(f"the run did not start its nodes: {(tmp_path / 'sim.log').read_text()}")
        time.sleep(0.2)


def wait_gone(pids: set[int], timeout: float) -> set[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = {p for p in pids if alive(p)}
        if not left:
            return set()
        time.sleep(0.1)
    return {p for p in pids if alive(p)}


def kill_left(pids: set[int]) -> None:
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signalled_sim_stops_every_node_and_exits_non_zero(
    tmp_path: Path, sig: signal.Signals, status: int
) -> None:
    """Regression: #27 (5) SIGTERM to `privrec sim` left the broker, server, adversary and both
    shards running, holding their ports and files."""
    sim, nodes = start_sim(tmp_path)
    try:
        sim.send_signal(sig)
        code = sim.wait(60)
        left = {p: cmdline(p) for p in nodes if alive(p)}
        assert left == {}, left
        assert code == status, (tmp_path / "sim.log").read_text()[-2000:]
    finally:
        sim.kill()
        kill_left(nodes)


def test_nodes_notice_a_killed_orchestrator(tmp_path: Path) -> None:
    """Regression: #27 (5) an orchestrator killed without a word (SIGKILL) left its nodes
    running (one such server stayed up for almost two hours)."""
    sim, nodes = start_sim(tmp_path)
    try:
        sim.kill()
        sim.wait(10)
        t0 = time.monotonic()
        left = wait_gone(nodes, NOTICE_S)
        assert not left, {p: cmdline(p) for p in left}
        assert time.monotonic() - t0 < NOTICE_S
    finally:
        kill_left(nodes)


def test_a_node_started_by_hand_outlives_its_shell(tmp_path: Path) -> None:
    """The watchdog is for nodes an orchestrator started: a broker started from a shell that
    then exits keeps running."""
    ready = tmp_path / "broker.ready"
    shell = subprocess.run(
        [
            "sh",
            "-c",
            f"{sys.executable} -m privrec broker --port 0 --ready-file {ready} "
            f">{tmp_path / 'broker.log'} 2>&1 & echo $!",
        ],
        capture_output=True,
        text=True,
        check=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("PRIVREC_")},
    )
    pid = int(shell.stdout.strip())
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ready.exists()
        time.sleep(3.0)  # well past the watchdog's polling interval
        assert alive(pid)
    finally:
        kill_left({pid})
