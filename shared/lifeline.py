"""A child process that ends when its parent does (Linux `PR_SET_PDEATHSIG`).

A sweep's workers and the nodes a worker's run starts must not outlive the sweep, however it
ends: Ctrl-C, SIGTERM, or SIGKILL, after which nothing runs in the sweep to clean up. The
kernel can do it: `die_with_parent(pid)` asks for SIGTERM when the parent goes, so the child
stops as it does on a SIGTERM (a worker's run stops its own nodes on the way out). The parent
opts its children in with `CHILD_ENV` (`lifeline_env`); `honour_lifeline` in the child's entry
point acts on it. Elsewhere than Linux these are no-ops (the parent's own shutdown remains).

The signal is tied to the parent *thread* that started the child: a process started from a
thread that ends early would be stopped with it, so only long-lived threads start children
under a lifeline (the sweep's worker slots; a run's main thread).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import sys

PARENT_ENV = "PRIVREC_PARENT_PID"
"""Set in a child's environment: the pid of the parent it must not outlive."""
CHILD_ENV = "PRIVREC_LIFELINE"
"""Set (to "1") in a process whose own children must not outlive it."""
_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int, sig: int = signal.SIGTERM) -> bool:
    """Have the kernel send `sig` to this process when `parent` ends; if it has ended
    already (this process was re-parented before the call), exit now. Returns whether the
    kernel took the request (False off Linux)."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        return False
    if os.getppid() != parent:  # the parent died before the request: the signal never comes
        os._exit(128 + int(sig))
    return True


def lifeline_env() -> dict[str, str]:
    """What to add to a child's environment: this pid as its parent, when this process was
    asked to keep its children on a lifeline (`CHILD_ENV`)."""
    return {PARENT_ENV: str(os.getpid())} if os.environ.get(CHILD_ENV) == "1" else {}


def honour_lifeline() -> None:
    """In a child's entry point: if its environment names a parent (`PARENT_ENV`), end with
    it. Its own children then get a lifeline to it in turn."""
    parent = os.environ.pop(PARENT_ENV, "")
    with contextlib.suppress(ValueError):
        if parent and die_with_parent(int(parent)):
            os.environ[CHILD_ENV] = "1"


__all__ = ["CHILD_ENV", "PARENT_ENV", "die_with_parent", "honour_lifeline", "lifeline_env"]
