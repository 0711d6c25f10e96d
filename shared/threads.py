"""numba's worker threads: which threading layer, how idle workers wait, and how many there are.

privrec's compiled kernels (`prange` loops in the RPT attacks, the kNN blocks, the referee's
passes) run on numba's thread pool. Three things about that pool decide whether a kernel beats
numpy on a machine whose cores are shared (a CI job, a sweep running several runs at once, a
workstation; docs/decisions/compute.md):

* **the threading layer.** numba picks OpenMP when libgomp is present. GNU OpenMP's workers
  spin for a while after each parallel region (``OMP_WAIT_POLICY`` unset: ≈ 300,000 spins), so
  between the many short regions of an EM iteration they keep their cores busy and, when the
  machine has more runnable threads than cores, take them from the thread doing the work.
  ``configure_threads`` chooses OpenMP with a *passive* wait (workers sleep at once), the
  fastest of the three layers measured under load (`bench/attacks.py --busy`); a user's own
  ``NUMBA_THREADING_LAYER`` or ``OMP_WAIT_POLICY`` is kept.
* **the thread count** follows the cores this process may run on (``os.sched_getaffinity``),
  or the share it is given: a sweep running R runs side by side on C cores calls
  ``configure_threads(cores=C // R)`` in each worker (`sim` nodes and `privrec sweep` workers
  use this one function).
* **when it is set.** The layer and the wait policy must be set before the first parallel
  kernel starts the pool (GNU OpenMP reads its environment when it is loaded); the count may be
  changed at any time, and is a per-thread setting in numba (set it in the thread that calls
  the kernels).

Nothing here changes a result: every parallel kernel of privrec writes each output element
from one thread in a fixed order, so its output does not depend on the layer or the count
(`tests/unit/adversary/test_attacks_rpt_kernels.py` compares one and three threads byte for
byte).
"""

from __future__ import annotations

import ctypes
import os
import sys

LAYER_ENV = "NUMBA_THREADING_LAYER"
WAIT_POLICY_ENV = "OMP_WAIT_POLICY"
THREADS_ENV = "NUMBA_NUM_THREADS"

#: BLAS's own thread pools (OpenBLAS, GNU OpenMP, MKL): one thread in every privrec node. A run
#: puts several nodes on few cores and threaded BLAS in each oversubscribes them (a 100 × 1682
#: SVD went from 4 ms to 1.4 s that way on 2 cores); OpenBLAS's idle threads also spin.
BLAS_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")

#: The layer chosen by measurement (docs/decisions/compute.md, "Threading layer").
DEFAULT_LAYER = "omp"
#: Idle OpenMP workers sleep instead of spinning: a spinning worker takes a shared core.
DEFAULT_WAIT_POLICY = "passive"


def usable_cores() -> int:
    """The number of cores this process may run on (its affinity mask; at least 1)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - platforms without affinity masks
        return max(1, os.cpu_count() or 1)


def thread_environment() -> dict[str, str]:
    """The variables a node process is started with, each unless the environment sets it:
    BLAS on one thread, numba's threading layer and OpenMP's wait policy. A benchmark that
    times privrec's code as its nodes run it applies them before numpy is imported."""
    wanted = {var: "1" for var in BLAS_THREAD_VARS}
    wanted[LAYER_ENV] = DEFAULT_LAYER
    wanted[WAIT_POLICY_ENV] = DEFAULT_WAIT_POLICY
    return {var: value for var, value in wanted.items() if var not in os.environ}


def _load_tbb() -> None:
    """Load the TBB runtime of the `tbb` wheel, which installs it in the environment's lib/
    where the dynamic loader does not look; numba then finds it loaded by its soname."""
    path = os.path.join(sys.prefix, "lib", "libtbb.so.12")
    if os.path.exists(path):
        ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)


def configure_layer() -> None:
    """Choose numba's threading layer and OpenMP's wait policy for this process, unless the
    environment already chose them. Call before the first parallel kernel runs; later calls
    cannot change a layer numba has started (numba reads ``numba.config.THREADING_LAYER`` once).
    Does not import numba when it is not yet imported (a shard never needs it)."""
    os.environ.setdefault(WAIT_POLICY_ENV, DEFAULT_WAIT_POLICY)
    layer = os.environ.setdefault(LAYER_ENV, DEFAULT_LAYER)
    if layer == "tbb":
        _load_tbb()
    config = sys.modules.get("numba.core.config")
    if config is not None:  # numba read the environment when imported: tell it directly
        setattr(config, "THREADING_LAYER", layer)  # noqa: B010 (a module mypy cannot see into)


def configure_threads(cores: int | None = None) -> int:
    """Set up numba's threads for this process: the layer (`configure_layer`) and the count.

    Args:
        cores: the cores this process may use, e.g. a sweep worker's share of the machine;
            None: every core of its affinity mask. Capped at the pool's size (numba fixes it
            at import from ``NUMBA_NUM_THREADS``, by default the affinity mask).

    Returns:
        The number of threads the kernels will use (in the calling thread).

    Raises:
        ValueError: `cores` is not an int >= 1.
    """
    if cores is not None and not (isinstance(cores, int) and cores >= 1):
        raise ValueError(f"`cores` must be an int >= 1, got {cores!r}")
    want = usable_cores() if cores is None else cores
    if cores is not None and THREADS_ENV not in os.environ:
        # a share given before numba is imported also sizes the pool (no idle workers)
        os.environ[THREADS_ENV] = str(want)
    configure_layer()
    numba = sys.modules.get("numba")
    if numba is None:
        return min(want, int(os.environ.get(THREADS_ENV, want)))
    n = min(want, int(numba.config.NUMBA_NUM_THREADS))
    numba.set_num_threads(n)
    return n


__all__ = [
    "BLAS_THREAD_VARS",
    "DEFAULT_LAYER",
    "DEFAULT_WAIT_POLICY",
    "configure_layer",
    "configure_threads",
    "thread_environment",
    "usable_cores",
]
