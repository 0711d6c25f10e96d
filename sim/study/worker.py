"""A sweep's local worker process: ``python -m privrec.sim.study.worker``.

It reads one run per line on stdin (a `sim.study.execute.Task` as JSON), executes it and
writes one line with its outcome on the original stdout, which only this protocol uses (the
run's own output goes to stderr, the worker's log). It ends at the end of its input, on
SIGTERM (the run under way stops its nodes on the way out) and, watching the sweep as a node
watches its orchestrator, when the sweep that started it ends (`shared.lifecycle`).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
from types import FrameType
from typing import NoReturn


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds the run: its `finally` blocks stop its nodes


def main() -> NoReturn:
    """Entry point of a sweep worker process: run tasks until told to stop, then exit."""
    from privrec.shared.lifecycle import watch_orchestrator
    from privrec.shared.threads import configure_threads
    from privrec.sim.study.pool import available_cores

    watch_orchestrator()
    configure_threads(cores=available_cores())  # its share, before any kernel runs
    signal.signal(signal.SIGTERM, _terminate)
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints go to the log
    import privrec.sim.run  # noqa: F401  (imported now: the sweep is still checking the study)
    from privrec.sim.study.execute import execute

    for line in sys.stdin:
        if line.strip():
            protocol.write(json.dumps(execute(json.loads(line))) + "\n")
            protocol.flush()
    # Every run has ended (its nodes stopped, its files written): the interpreter's teardown of
    # numba, llvmlite, scipy and matplotlib (~0.5-1 s) is skipped, as it would be the last
    # thing a study waits for.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
