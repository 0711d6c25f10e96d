"""A sweep's local worker process: ``python -m privrec.sim.study.worker``, or forked.

It reads one run per line on its input (a `sim.study.execute.Task` as JSON), executes it and
writes one line with its outcome on its protocol output, which only this protocol uses (the
run's own output goes to stderr, the worker's log). It ends at the end of its input, on
SIGTERM (the run under way stops its nodes on the way out) and, watching the sweep as a node
watches its orchestrator, when the sweep that started it ends (`shared.lifecycle`).

Two ways to start one (`sim.study.pool.LocalPool`): a fresh interpreter (`main`: stdin and
stdout are the protocol), or a fork of the sweep once it has imported `sim.run` for its checks
(`forked`: two pipes are the protocol), which spares each worker the 2-3 s of importing numpy,
scipy, numba, matplotlib and dp_accounting again (`sim.study.forking`). Its log's first line
says the threads its runs get (`THREADS_LINE`).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
from collections.abc import Mapping
from types import FrameType
from typing import IO, NoReturn

from privrec.shared.lifecycle import exit_at_once

THREADS_LINE = "privrec sweep worker threads"


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds the run: its `finally` blocks stop its nodes


def _start(env: Mapping[str, str]) -> None:
    """What a worker does before its first run: watch the sweep, take its share of the cores
    (numba's threads; BLAS is on one thread), stop on SIGTERM."""
    from privrec.shared.lifecycle import watch_orchestrator
    from privrec.shared.threads import configure_threads
    from privrec.sim.study.pool import available_cores

    os.environ.update(env)
    watch_orchestrator()
    configure_threads(cores=available_cores())  # its share, before any kernel runs
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _serve(tasks: IO[str], protocol: IO[str]) -> NoReturn:
    """Execute each task of `tasks`, answer on `protocol`, and leave at the end of the input."""
    import numba
    from threadpoolctl import threadpool_info

    import privrec.sim.run  # noqa: F401  (imported now: the sweep is still checking the study)
    from privrec.sim.study.execute import execute

    blas = sorted({int(i["num_threads"]) for i in threadpool_info() if i["user_api"] == "blas"})
    print(  # its log's first line: the threads its runs get (tests/integration/test_sweep.py)
        f"{THREADS_LINE}: numba {numba.get_num_threads()}, BLAS {blas}",
        file=sys.stderr,
        flush=True,
    )
    for line in tasks:
        if line.strip():
            protocol.write(json.dumps(execute(json.loads(line))) + "\n")
            protocol.flush()
    # Every run has ended (its nodes stopped, its files written): the interpreter's teardown of
    # numba, llvmlite, scipy and matplotlib (~0.5-1 s) is skipped, as it would be the last
    # thing a study waits for.
    exit_at_once(0)


def main() -> NoReturn:
    """Entry point of a sweep worker process: run tasks until told to stop, then exit."""
    _start({})
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints go to the log
    _serve(sys.stdin, protocol)


def forked(tasks: int, answers: int, log: int, env: Mapping[str, str]) -> NoReturn:
    """The life of a worker forked from the sweep (called in the child, never returns).

    Args:
        tasks: the pipe's read end its tasks come on.
        answers: the pipe's write end its outcomes go to.
        log: the worker's log, which becomes its stdout and stderr.
        env: its environment's changes (`sim.study.pool.thread_env`, the sweep's pid).
    """
    try:
        os.setsid()  # a Ctrl-C reaches the sweep alone, as for a started worker
        os.dup2(log, sys.stdout.fileno())
        os.dup2(log, sys.stderr.fileno())
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1, user_api="blas")  # BLAS was loaded by the sweep
        _start(env)
        _serve(os.fdopen(tasks, "r"), os.fdopen(answers, "w"))
    except SystemExit as exc:  # SIGTERM between runs
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        logging.getLogger(__name__).exception("sweep worker failed")
        code = 1
    exit_at_once(code)


if __name__ == "__main__":
    main()
