"""A run's processes end with it: signals to the orchestrator, and a watchdog in each node.

Two halves (docs/decisions/trust.md, "A run's processes end with it"):

* **The orchestrator** (`privrec sim`, and any command that starts nodes) treats SIGTERM like
  SIGINT (`stop_on_sigterm`): the running work is cancelled, every ``finally`` that stops a node
  runs (shards first, then the adversary, the server and the broker), and the command exits with
  ``128 + signal`` (143 for SIGTERM, 130 for SIGINT), as a shell reports a signalled process.
  Inside ``asyncio.run`` SIGINT cancels the main task (the asyncio runner's own handler), so a
  SIGTERM is passed to that same handler.
* **A node started by an orchestrator** (`orchestrated_env` puts the orchestrator's pid in its
  environment) watches its parent (`watch_orchestrator`): when the orchestrator is gone (killed
  with SIGKILL, which it cannot pass on) the node's parent changes, and the node sends itself
  SIGTERM within `POLL_S` seconds, and exits hard `GRACE_S` seconds later if that did not end it.
  A node started by hand has no such variable and is never watched. A thread polling
  ``getppid()`` is used rather than Linux's parent-death signal (``PR_SET_PDEATHSIG``), which fires
  when the *thread* that forked the child ends, not the process (a node restarted from a worker
  thread would be killed at once), and which exists on Linux only.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping, MutableMapping
from types import FrameType
from typing import NoReturn

logger = logging.getLogger(__name__)

ORCHESTRATOR_ENV = "PRIVREC_ORCHESTRATOR_PID"
"""Environment variable naming the pid of the orchestrator that started a node."""
POLL_S = 0.5
"""How often a watched node looks at its parent."""
GRACE_S = 10.0
"""How long a node whose orchestrator is gone has to stop after its SIGTERM."""

_received: list[int] = []


def orchestrated_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a node this process starts: `env` (default: this process's) with this
    process named as its orchestrator."""
    return {**(os.environ if env is None else env), ORCHESTRATOR_ENV: str(os.getpid())}


def _interrupt(signum: int, frame: FrameType | None) -> None:
    _received.append(signum)
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler) and handler is not _interrupt:
        handler(signal.SIGINT, frame)  # asyncio's runner: cancel the main task
    else:
        raise KeyboardInterrupt


def stop_on_sigterm() -> None:
    """Make SIGTERM stop this (main-thread) command as SIGINT does."""
    signal.signal(signal.SIGTERM, _interrupt)


def exit_status_of_interrupt() -> int:
    """128 + the signal that interrupted this process (SIGINT when none was recorded)."""
    return 128 + (_received[0] if _received else int(signal.SIGINT))


def watch_orchestrator(env: MutableMapping[str, str] | None = None) -> bool:
    """If an orchestrator started this node, end the node when the orchestrator ends.

    Reads (and removes, so that nothing this node starts inherits it) `ORCHESTRATOR_ENV`. When
    the parent is already another process the orchestrator died before the node got here, and
    the node is stopped at once.

    Args:
        env: the environment to read (default `os.environ`).

    Returns:
        Whether the node is watched (False when started by hand).
    """
    raw = (os.environ if env is None else env).pop(ORCHESTRATOR_ENV, None)
    if not raw or not raw.isdigit():
        return False
    orchestrator = int(raw)
    thread = threading.Thread(
        target=_watch, args=(orchestrator,), name="privrec-orchestrator-watchdog", daemon=True
    )
    thread.start()
    return True


def _watch(orchestrator: int) -> None:
    while os.getppid() == orchestrator:
        time.sleep(POLL_S)
    logger.warning(
        "the orchestrator (pid %d) is gone; this node stops (SIGTERM, then exit in %.0f s)",
        orchestrator,
        GRACE_S,
    )
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(GRACE_S)
    logging.shutdown()
    os._exit(1)


def exit_at_once(status: int) -> NoReturn:
    """End this process with `status` once its logs and output are out, without the
    interpreter's teardown (unloading numba, llvmlite, scipy and matplotlib takes 0.5-1 s):
    for a process whose work is done and whose files are closed (a sweep, its workers)."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


__all__ = [
    "GRACE_S",
    "ORCHESTRATOR_ENV",
    "POLL_S",
    "exit_at_once",
    "exit_status_of_interrupt",
    "orchestrated_env",
    "stop_on_sigterm",
    "watch_orchestrator",
]
