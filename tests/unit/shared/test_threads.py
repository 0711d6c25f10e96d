"""numba's threads as privrec sets them up (`shared.threads`): layer, wait policy, count.

Each case runs in a fresh interpreter: numba fixes its layer and pool size once per process,
and this test process has long started its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from privrec.shared.threads import (
    BLAS_THREAD_VARS,
    DEFAULT_LAYER,
    LAYER_ENV,
    THREADS_ENV,
    WAIT_POLICY_ENV,
    configure_threads,
    thread_environment,
)

# run one parallel kernel, then report what numba used
PROBE = """
import json, os, sys
from privrec.shared.threads import configure_threads
n = configure_threads({cores})
import numba, numpy as np

@numba.njit(parallel=True)
def ids(n):
    out = np.zeros(n, np.int64)
    for i in numba.prange(n):
        out[i] = numba.get_thread_id()
    return out

ids(64)
print(json.dumps({{"returned": n, "layer": numba.threading_layer(),
    "threads": numba.get_num_threads(), "pool": numba.config.NUMBA_NUM_THREADS,
    "wait": os.environ.get("OMP_WAIT_POLICY")}}))
"""

CLEAN = (LAYER_ENV, WAIT_POLICY_ENV, THREADS_ENV)


def _probe(cores: int | None = None, env: dict[str, str] | None = None, *, one_core: bool = False):
    base = {k: v for k, v in os.environ.items() if k not in CLEAN}

    def pin() -> None:  # pragma: no cover - runs in the child
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(cores=cores)],
        capture_output=True,
        text=True,
        check=True,
        env={**base, **(env or {})},
        preexec_fn=pin if one_core else None,
    ).stdout
    return json.loads(out.splitlines()[-1])


def test_configure_threads_chooses_openmp_with_a_passive_wait() -> None:
    """With nothing set, a kernel runs on the measured choice: OpenMP, idle workers asleep."""
    seen = _probe()
    assert seen["layer"] == DEFAULT_LAYER == "omp"
    assert seen["wait"] == "passive"
    assert seen["threads"] == seen["returned"] == len(os.sched_getaffinity(0))


def test_configure_threads_keeps_the_users_layer() -> None:
    """NUMBA_THREADING_LAYER and OMP_WAIT_POLICY set by the user win."""
    seen = _probe(env={LAYER_ENV: "workqueue", WAIT_POLICY_ENV: "active"})
    assert seen["layer"] == "workqueue"
    assert seen["wait"] == "active"


def test_configure_threads_follows_the_affinity_mask() -> None:
    """A process allowed one core (taskset, a CI job's cgroup) gets one thread, not cpu_count."""
    seen = _probe(one_core=True)
    assert seen["returned"] == seen["threads"] == seen["pool"] == 1


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to share")
def test_configure_threads_gives_a_worker_its_share() -> None:
    """A sweep worker's share sizes numba's pool when given before numba is imported (and
    reaches the nodes it starts through NUMBA_NUM_THREADS)."""
    seen = _probe(cores=1)
    assert seen["returned"] == seen["threads"] == seen["pool"] == 1


def test_configure_threads_refuses_a_bad_share() -> None:
    for bad in (0, -1, 1.5):
        with pytest.raises(ValueError, match="`cores` must be an int >= 1"):
            configure_threads(bad)  # type: ignore[arg-type]


def test_thread_environment_keeps_what_the_caller_set(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in (*BLAS_THREAD_VARS, *CLEAN):
        monkeypatch.delenv(var, raising=False)
    assert thread_environment() == {
        **dict.fromkeys(BLAS_THREAD_VARS, "1"),
        LAYER_ENV: "omp",
        WAIT_POLICY_ENV: "passive",
    }
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")
    monkeypatch.setenv(LAYER_ENV, "tbb")
    env = thread_environment()
    assert "OPENBLAS_NUM_THREADS" not in env
    assert LAYER_ENV not in env


def test_in_process_nodes_run_blas_on_one_thread_and_restore_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In-process nodes get the BLAS of a node process (one thread), the caller its own after."""
    import numpy as np  # noqa: F401 (BLAS is loaded with numpy)
    from threadpoolctl import threadpool_info

    from privrec.sim.inprocess import node_blas_threads

    for var in BLAS_THREAD_VARS:
        monkeypatch.delenv(var, raising=False)

    def blas_threads() -> list[int]:
        return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]

    before = blas_threads()
    assert before
    with node_blas_threads():
        assert set(blas_threads()) == {1}
    assert blas_threads() == before
