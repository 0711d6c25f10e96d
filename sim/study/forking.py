"""Sweep workers forked from the sweep itself, once it has imported what a run needs.

A worker started as a fresh interpreter (``python -m privrec.sim.study.worker``) spends 2-3 s
of CPU importing numpy, scipy, numba, matplotlib, dp_accounting and privrec's modules before
its first run, and the sweep imports the same modules for its checks (`sim.run.preflight`)
at the same time: three processes importing on two cores, the largest part of a study's
fixed cost before its first run (bench/sweep.py; docs/decisions/studies.md). A forked worker
shares the sweep's imported modules and starts at once.

Forking is only safe in a process with one Python thread (a lock held by another thread
stays held in the child) whose numba thread pool has not started and where no OpenMP runtime
is loaded (GNU OpenMP's pool does not survive a fork), so `can_fork` checks these and
`sim.study.pool.LocalPool` starts fresh interpreters otherwise (a notebook's kernel, a worker
replaced from a slot thread). BLAS was loaded by the sweep with its own thread count: the
child limits it to one thread (threadpoolctl), as the environment does for a started worker,
so that a run's numbers are those of `privrec sim` bit for bit. A forked worker watches the
sweep, stops on SIGTERM and leaves with `os._exit` exactly as a started one
(`sim.study.worker`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import BinaryIO

POLL_S = 0.02


def can_fork() -> bool:
    """Whether workers may be forked from this process now (module docstring): one Python
    thread, numba's pool not started and no OpenMP runtime loaded (by numba or another library,
    e.g. scikit-learn's, in a program that calls `privrec.sweep`)."""
    if not hasattr(os, "fork") or threading.active_count() > 1:
        return False
    parallel = sys.modules.get("numba.np.ufunc.parallel")
    if parallel is not None and getattr(parallel, "_is_initialized", False):
        return False
    from threadpoolctl import threadpool_info

    return not any(lib["user_api"] == "openmp" for lib in threadpool_info())


class ForkedWorker:
    """A forked worker, driven as a `subprocess.Popen` of a started one: its protocol pipes
    (`stdin` for tasks, `stdout` for outcomes), `poll`, `wait`, `send_signal`, `kill`."""

    def __init__(self, pid: int, stdin: BinaryIO, stdout: BinaryIO) -> None:
        self.pid, self.stdin, self.stdout = pid, stdin, stdout
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """Its exit status, or None while it runs."""
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for it to exit and return its status.

        Raises:
            subprocess.TimeoutExpired: still running after `timeout` seconds.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"sweep worker {self.pid}", timeout or 0.0)
            time.sleep(POLL_S)
        return code

    def send_signal(self, signum: int) -> None:
        """Send it `signum` (nothing once it has exited)."""
        if self.poll() is None:
            os.kill(self.pid, signum)

    def kill(self) -> None:
        """SIGKILL it."""
        self.send_signal(signal.SIGKILL)


def fork_workers(n: int, env: Mapping[str, str], log_dir: Path) -> list[ForkedWorker]:
    """Import what a run needs here, then fork `n` workers (`sim.study.worker.forked`), each
    with `env` added to its environment and its output in ``log_dir/worker-N.log``."""
    import privrec.sim.run  # noqa: F401  (once, here: the workers share it)
    from privrec.sim.study.worker import forked

    log_dir.mkdir(parents=True, exist_ok=True)
    workers: list[ForkedWorker] = []
    ours: list[int] = []  # this process's ends of the earlier workers' pipes
    for slot in range(n):
        tasks_r, tasks_w = os.pipe()
        answers_r, answers_w = os.pipe()
        log = os.open(log_dir / f"worker-{slot}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        pid = os.fork()
        if pid == 0:  # the worker: never returns into the sweep's code
            try:
                for fd in (*ours, tasks_w, answers_r):
                    os.close(fd)  # (a pipe end kept open here would hide the sweep's EOF)
                forked(tasks_r, answers_w, log, env)
            finally:
                os._exit(1)
        for fd in (tasks_r, answers_w, log):
            os.close(fd)
        ours += [tasks_w, answers_r]
        workers.append(ForkedWorker(pid, os.fdopen(tasks_w, "wb"), os.fdopen(answers_r, "rb")))
    return workers


__all__ = ["ForkedWorker", "can_fork", "fork_workers"]
