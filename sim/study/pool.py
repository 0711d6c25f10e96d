"""Executing a study's runs: a bounded pool of local worker processes, or tasks on Ray.

Local: `jobs` worker processes (`sim.study.worker`: forked from the sweep once it has imported
what a run needs, `sim.study.forking`, or else started as ``python -m
privrec.sim.study.worker``), each fed one run at a time over a pipe by a slot thread of the
sweep and answering one JSON line per run. A
worker lives for the whole sweep (imports and compiled kernels are paid once per worker, not
per run), in a session of its own (a Ctrl-C reaches the sweep alone, which stops the workers),
watching the sweep as a node watches its orchestrator (`shared.lifecycle`: a killed sweep, a
stopped worker, which stops its run's nodes, which watch the worker in turn),
and with the numeric libraries' thread counts set before it imports them (`thread_env`), so
that `jobs` workers share the cores instead of each spinning up a thread per core (numba gets
the worker's share, BLAS one thread as in every node: `thread_env`). A worker
that dies is reported as its run's failure and replaced.

Ray: one task per job (`sim.study.execute.execute`) with `jobs` in flight at most, each task
given one CPU and the same thread limits through its runtime environment; the run directories
must be on a filesystem every Ray node mounts at the same path (as for `--launcher ray`).

Both report events to the engine: ``("started", name)`` and ``("finished", outcome)``.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from privrec.shared.lifecycle import orchestrated_env
from privrec.shared.threads import (
    BLAS_THREAD_VARS,
    THREADS_ENV,
    thread_environment,
    usable_cores,
)
from privrec.sim.study.execute import outcome
from privrec.sim.study.forking import ForkedWorker, can_fork, fork_workers

logger = logging.getLogger(__name__)

THREAD_VARS = (THREADS_ENV, *BLAS_THREAD_VARS)
"""The thread counts a worker is started with (`thread_env`): numba's pool gets the worker's
share of the cores; BLAS and OpenMP one thread, as in every node process (`shared.threads`),
so a run's numbers are those of `privrec sim` bit for bit (a threaded BLAS sums in another
order) and BLAS never oversubscribes the cores."""
STOP_GRACE_S = 30.0
"""How long a stopped worker may take to stop its run's nodes before it is killed."""

Event = tuple[str, Any]
Worker = subprocess.Popen[bytes] | ForkedWorker
"""A worker process: started (a fresh interpreter) or forked (`sim.study.forking`)."""


CORES_ENV = "PRIVREC_CORES"
"""Set in a worker's environment: its share of the cores (a study a job starts in its turn,
e.g. a reproduction's grid, runs on that share)."""


def available_cores() -> int:
    """The cores this process may use: its affinity mask (`shared.threads.usable_cores`), or
    its share when it is a worker (`CORES_ENV`)."""
    cores = usable_cores()
    share = os.environ.get(CORES_ENV, "")
    return min(cores, int(share)) if share.isdigit() and int(share) >= 1 else cores


def _name(job: Mapping[str, Any]) -> str:
    return str(job["record"]["name"])


def threads_per_worker(jobs: int, cores: int | None = None) -> int:
    """The numeric threads each of `jobs` concurrent workers gets: the cores shared out,
    at least one."""
    return max(1, (cores or available_cores()) // jobs)


def thread_env(threads: int) -> dict[str, str]:
    """A worker's environment: a node's (`shared.threads.thread_environment`: BLAS on one
    thread, numba's layer and OpenMP's wait policy), numba on `threads` threads, and its share
    of the cores (`CORES_ENV`; the worker passes it to `configure_threads`)."""
    return thread_environment() | {THREADS_ENV: str(threads), CORES_ENV: str(threads)}


class Backend(Protocol):
    """What the engine drives: submit runs, collect events, stop."""

    def submit(self, task: Mapping[str, Any]) -> None:
        """Queue a run."""

    def events(self, timeout: float) -> list[Event]:
        """The events that came within `timeout` seconds."""

    def stop(self) -> None:
        """Stop: drop the queued runs and end the running ones."""


class LocalPool:
    """`jobs` local worker processes (module docstring).

    Args:
        jobs: the number of workers (runs at once).
        threads: numeric threads per worker.
        log_dir: where each worker's output goes (``worker-N.log``); the workers start at
            once, before the study's directory may be written to, so the engine gives a
            scratch directory and keeps the logs when the study is done (`keep_logs`).
        fork: fork the workers from this process (`sim.study.forking`) or start them;
            None: fork when it is safe here (`can_fork`).
    """

    def __init__(self, jobs: int, threads: int, log_dir: Path, fork: bool | None = None) -> None:
        self.jobs, self.threads, self.log_dir = jobs, threads, log_dir
        self._tasks: queue.Queue[Mapping[str, Any] | None] = queue.Queue()
        self._events: queue.Queue[Event] = queue.Queue()
        self._procs: dict[int, Worker] = {}
        self._stopping = threading.Event()
        if can_fork() if fork is None else fork:  # before any thread of this pool starts
            env = orchestrated_env(thread_env(threads))
            self._procs.update(enumerate(fork_workers(jobs, env, log_dir)))
        self._slots = [
            threading.Thread(target=self._slot, args=(i,), name=f"privrec-sweep-slot-{i}")
            for i in range(jobs)
        ]
        for slot in self._slots:
            slot.start()

    def _start_worker(self, slot: int) -> subprocess.Popen[bytes]:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        env = orchestrated_env({**os.environ, **thread_env(self.threads)})  # ends with the sweep
        with (self.log_dir / f"worker-{slot}.log").open("ab") as log:
            return subprocess.Popen(
                [sys.executable, "-m", "privrec.sim.study.worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=env,
                start_new_session=True,
            )

    def _slot(self, slot: int) -> None:
        """One worker's life: forked, or started at once (it imports while the sweep checks
        the study), fed runs one at a time, replaced (started) if it dies."""
        if slot not in self._procs:
            self._procs[slot] = self._start_worker(slot)
        proc: Worker | None = self._procs[slot]
        try:
            while (task := self._tasks.get()) is not None:
                if self._stopping.is_set():
                    continue
                if proc is None or proc.poll() is not None:
                    proc = self._start_worker(slot)
                    self._procs[slot] = proc
                assert proc.stdin is not None and proc.stdout is not None
                self._events.put(("started", _name(task)))
                try:
                    proc.stdin.write(json.dumps(task).encode() + b"\n")
                    proc.stdin.flush()
                    line = proc.stdout.readline()
                except OSError:
                    line = b""
                if line:
                    self._events.put(("finished", json.loads(line)))
                    continue
                code = proc.wait()
                why = (
                    "stopped"
                    if self._stopping.is_set()
                    else f"its worker exited with status {code}; see logs/worker-{slot}.log"
                )
                self._events.put(("finished", outcome(_name(task), ok=False, error=why)))
                proc = None
        finally:
            if proc is not None:
                _finish(proc)

    def submit(self, task: Mapping[str, Any]) -> None:
        """Queue a run for the workers."""
        self._tasks.put(task)

    def events(self, timeout: float) -> list[Event]:
        """The events that came within `timeout` seconds (at least one wait)."""
        out: list[Event] = []
        try:
            out.append(self._events.get(timeout=timeout))
            while True:
                out.append(self._events.get_nowait())
        except queue.Empty:
            return out

    def stop(self) -> None:
        """Stop at once: queued runs are dropped, each worker gets SIGTERM (it stops its
        run's nodes) and SIGKILL after `STOP_GRACE_S`; returns when all have exited."""
        self._stopping.set()
        for proc in list(self._procs.values()):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        self.close()

    def close(self) -> None:
        """Let the workers finish (each ends at the end of its input) and wait for them."""
        for _ in self._slots:
            self._tasks.put(None)
        deadline = time.monotonic() + STOP_GRACE_S
        for slot in self._slots:
            slot.join(max(0.1, deadline - time.monotonic()))
        for proc in list(self._procs.values()):
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def keep_logs(scratch: Path, log_dir: Path) -> None:
    """Append each worker log of `scratch` to the one of the same name in `log_dir`."""
    logs = sorted(scratch.glob("worker-*.log"))
    if logs:
        log_dir.mkdir(parents=True, exist_ok=True)
    for log in logs:
        with (log_dir / log.name).open("ab") as out:
            out.write(log.read_bytes())


def _finish(proc: Worker) -> None:
    """End a worker: close its input (it exits after its current run), wait, then kill."""
    try:
        if proc.stdin is not None:
            proc.stdin.close()
    except OSError:
        pass
    try:
        proc.wait(STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class InlineBackend:
    """One job, executed in this process when the engine asks for events (no worker to
    start for a lone job: a reproduction's single repeat, a study's last run). Its run's nodes
    watch this process as a worker's watch the worker."""

    def __init__(self) -> None:
        self._queued: list[Mapping[str, Any]] = []
        self._announced = False

    def submit(self, task: Mapping[str, Any]) -> None:
        """Queue a run."""
        self._queued.append(task)

    def events(self, timeout: float) -> list[Event]:
        """Run the next queued run here and return its events."""
        if not self._queued:
            return []
        if not self._announced:  # told first, so the progress shows it running
            self._announced = True
            return [("started", _name(self._queued[0]))]
        task = self._queued.pop(0)
        self._announced = False
        from privrec.sim.study.execute import execute

        return [("finished", execute(task))]

    def stop(self) -> None:
        """Drop the queued runs."""
        self._queued.clear()

    def close(self) -> None:
        """Nothing runs in the background."""


class RayPool:
    """Runs as Ray tasks, at most `jobs` in flight (module docstring).

    Args:
        ray: the imported, initialised `ray` module.
        jobs: runs in flight at most.
        threads: numeric threads per task.
    """

    def __init__(self, ray: Any, jobs: int, threads: int) -> None:
        from privrec.sim.study.execute import execute

        self.ray, self.jobs = ray, jobs
        self._remote = ray.remote(execute).options(
            num_cpus=1,
            max_retries=0,
            runtime_env={"env_vars": thread_env(threads)},
        )
        self._queued: list[Mapping[str, Any]] = []
        self._in_flight: dict[Any, str] = {}

    def submit(self, task: Mapping[str, Any]) -> None:
        """Queue a run."""
        self._queued.append(task)

    def _fill(self) -> list[Event]:
        started: list[Event] = []
        while self._queued and len(self._in_flight) < self.jobs:
            task = self._queued.pop(0)
            self._in_flight[self._remote.remote(dict(task))] = _name(task)
            started.append(("started", _name(task)))
        return started

    def events(self, timeout: float) -> list[Event]:
        """Launch what fits, then the events of the first task done within `timeout`."""
        out = self._fill()
        if not self._in_flight:
            return out
        ready, _ = self.ray.wait(list(self._in_flight), num_returns=1, timeout=timeout)
        for ref in ready:
            name = self._in_flight.pop(ref)
            try:
                result = self.ray.get(ref)
            except Exception as exc:  # the task's worker died, or Ray failed it
                result = outcome(name, ok=False, error=f"Ray task failed: {exc}".splitlines()[0])
            out.append(("finished", result))
        return out + self._fill()

    def stop(self) -> None:
        """Drop the queued runs and cancel those in flight."""
        self._queued.clear()
        for ref in list(self._in_flight):
            try:
                self.ray.cancel(ref, force=True)
            except Exception:  # already finished
                logger.debug("Ray task %s already finished", ref)
        self._in_flight.clear()

    def close(self) -> None:
        """Nothing to wait for: every task has reported by the time the engine closes."""


__all__ = [
    "CORES_ENV",
    "THREAD_VARS",
    "Backend",
    "InlineBackend",
    "LocalPool",
    "RayPool",
    "available_cores",
    "keep_logs",
    "thread_env",
    "threads_per_worker",
]
