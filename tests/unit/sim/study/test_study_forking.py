"""When a sweep may fork its workers (`sim.study.forking.can_fork`): not with another thread
running, nor once numba's pool (GNU OpenMP) has started; a fork with either would leave the
child waiting on a lock or a thread that did not come with it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

from privrec.sim.study.forking import can_fork

SCRIPT = textwrap.dedent(
    """
    from privrec.shared.threads import configure_threads

    configure_threads()  # as `privrec` does first: the layer (OpenMP), numba not yet imported
    import numba
    import numpy as np

    import privrec.sim.run
    from privrec.sim.study.forking import can_fork

    before = can_fork()  # what `privrec sweep` sees before it forks

    @numba.njit(parallel=True)
    def total(x):
        s = 0.0
        for i in numba.prange(x.size):
            s += x[i]
        return s

    total(np.ones(1000))
    print(before, can_fork())
    """
)


def test_not_once_numbas_pool_has_started() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300, check=True
    )
    assert done.stdout.split() == ["True", "False"]


def test_not_while_another_thread_runs() -> None:
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert not can_fork()
    finally:
        stop.set()
        other.join()
