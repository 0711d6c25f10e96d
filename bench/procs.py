"""The processes of a run as the benchmarks see them (from /proc): their roles, peak memory, and
CPU seconds, in all and per phase of the run. Shared by `bench/population.py` and
`bench/neighbourhood.py`.

CPU seconds are utime + stime, sampled every `SAMPLE_S`; the CPU a process used between two
samples is counted in the phase current at the later one (so a phase boundary blurs by one
sample interval). CPU seconds per process and phase show the parallel fraction on any machine:
a phase whose CPU seconds are near its wall time used one core.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

SAMPLE_S = 0.2


def _children() -> dict[int, list[int]]:
    """Parent pid → child pids of every process (from /proc)."""
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        tree.setdefault(ppid, []).append(int(entry))
    return tree


def _descendants(root: int) -> list[int]:
    tree, out, todo = _children(), [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(tree.get(pid, []))
    return out


def _role(pid: int) -> str | None:
    """A readable name of a process of the run from its command line (None: not ours)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return None
    if "privrec.sim.broker" in argv:  # the embedded MQTT broker relays the observation feed
        return "broker"
    if "privrec.sim.cli" not in argv and not any(a.endswith("privrec") for a in argv):
        return None
    if "sim" in argv:  # with --mqtt none it also runs the adversary (a transcript replay)
        return "orchestrator+referee+adversary"
    for node in ("server", "adversary"):
        if node in argv:
            return node
    if "clients" in argv and "--shard" in argv:
        return f"shard {argv[argv.index('--shard') + 1]}"
    return "other:" + " ".join(argv[2:4])


def _memory_kib(pid: int) -> tuple[int, int] | None:
    """(VmHWM, VmRSS) of `pid` in KiB: its peak and its current resident memory."""
    found: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("VmHWM:", "VmRSS:")):
                    found[line[:5]] = int(line.split()[1])
    except OSError:
        return None
    if len(found) < 2:
        return None
    return found["VmHWM"], found["VmRSS"]


def _cpu_seconds(pid: int) -> float | None:
    """utime + stime of `pid` so far (from /proc/PID/stat)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class PeakSampler(threading.Thread):
    """Samples every process under `root` until stopped: its role (re-read every time: a child
    shows its parent's command line between fork and exec), its peak resident memory (VmHWM)
    and its CPU seconds; `stop` returns them per role (a role's processes summed). It also
    keeps `together`, the largest sum of the processes' current resident memory (VmRSS) seen
    in one sample: what the run held at once (the sum of peaks bounds it from above), and
    `by_phase`: (phase, role) → CPU seconds, with the phase told by `phase()` at each sample.

    Args:
        root: the run's top process (it and its descendants are sampled).
        phase: the run's current phase (default: one phase, "run").
        root_role: the role of `root` when its command line is not a `privrec` one (a bench
            that runs `simulate` in its own process).
    """

    def __init__(
        self,
        root: int,
        phase: Callable[[], str] = lambda: "run",
        root_role: str | None = None,
    ) -> None:
        super().__init__(daemon=True)
        self.root, self.phase, self.root_role = root, phase, root_role
        self._halt = threading.Event()
        self._seen: dict[int, tuple[str, int, float]] = {}  # pid → (role, peak bytes, cpu s)
        self.together = 0  # bytes
        self.by_phase: dict[tuple[str, str], float] = {}

    def _sample(self) -> None:
        now = 0
        phase = self.phase()
        for pid in _descendants(self.root):
            role = _role(pid) or (self.root_role if pid == self.root else None)
            kib, cpu = _memory_kib(pid), _cpu_seconds(pid)
            if role is None or kib is None or cpu is None:
                continue
            _, peak, before = self._seen.get(pid, (role, 0, 0.0))
            self._seen[pid] = (role, max(peak, kib[0] * 1024), cpu)
            key = (phase, role)
            self.by_phase[key] = self.by_phase.get(key, 0.0) + cpu - before
            now += kib[1] * 1024
        self.together = max(self.together, now)

    def run(self) -> None:
        while not self._halt.is_set():
            self._sample()
            self._halt.wait(SAMPLE_S)

    def stop(self) -> tuple[dict[str, int], dict[str, float]]:
        self._halt.set()
        self.join()
        self._sample()  # the CPU of the last interval (processes still alive)
        peaks: dict[str, int] = {}
        cpu: dict[str, float] = {}
        for role, peak, seconds in self._seen.values():
            peaks[role] = peaks.get(role, 0) + peak
            cpu[role] = cpu.get(role, 0.0) + seconds
        return peaks, cpu


def cpu_table(by_phase: dict[tuple[str, str], float], wall: dict[str, float]) -> list[str]:
    """Lines of a table: per phase, its wall seconds (when known) and each role's CPU seconds.
    The phases in the order first seen, the roles sorted."""
    phases = list(dict.fromkeys(p for p, _ in by_phase))
    roles = sorted({r for _, r in by_phase})
    head = f"  {'phase':10s} {'wall':>8s} " + " ".join(f"{r[:14]:>14s}" for r in roles)
    lines = [head]
    for p in phases:
        w = f"{wall[p]:8.1f}" if p in wall else f"{'':8s}"
        cells = " ".join(f"{by_phase.get((p, r), 0.0):14.1f}" for r in roles)
        lines.append(f"  {p:10s} {w} {cells}")
    totals = " ".join(
        f"{sum(v for (_, r), v in by_phase.items() if r == rr):14.1f}" for rr in roles
    )
    lines.append(f"  {'all':10s} {'':8s} {totals}")
    return lines


__all__ = ["SAMPLE_S", "PeakSampler", "cpu_table"]
