"""Compile the default scenario's kernels once, at set-up, into numba's on-disk cache.

Every numba kernel of privrec is compiled with ``cache=True``: the first process that calls it
compiles it and writes the machine code beside its module (``__pycache__/*.nbi``, ``*.nbc``);
every later process loads it in milliseconds. Without a set-up step the first `privrec sim`
after a clean clone paid for all of that compilation inside its phases (issue 28: the attack
phase 306 s of which `rpt_bayes` 184 s, against 30 s for the whole run once cached).

`make demo` and `make bench` therefore run ``python -m privrec.sim.kernel_cache`` after
installing: the default scenario (`ExperimentConfig()`: ML-100K, RPT, PPCF, the three RPT
attacks, the referee's Pearson baseline) on its first `WARM_USERS` users, in one process
(``--launcher inprocess``, no broker). The kernels are the same functions with the same
argument types as in the full run, so the full run finds every one of them cached. Models and
attacks outside the default scenario compile on their first use and are cached from then on.
The run's figures are thrown away; nothing of it is kept but the cache. The kNN blocks'
two weight passes are compiled besides (`knn_block.compile_kernels`): which one a block takes
depends on its size, so a 60-user run may not reach both.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

WARM_USERS = 60  # enough for five folds of test users, each with ratings to withhold


def compile_default_kernels() -> float:
    """Run the default scenario on `WARM_USERS` users in this process; returns the seconds."""
    from privrec.server.models import knn_block
    from privrec.shared.config import ExperimentConfig
    from privrec.sim.run import SimOptions, simulate

    config = ExperimentConfig()
    config = config.replace("data", max_users=WARM_USERS)
    t = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="privrec-kernels-") as out:
        simulate(config, SimOptions(out_dir=Path(out), launcher="inprocess", mqtt="none"))
    knn_block.compile_kernels()
    return time.perf_counter() - t


def main() -> int:
    """`python -m privrec.sim.kernel_cache`: compile and cache; one line on stdout."""
    seconds = compile_default_kernels()
    print(f"privrec: the default scenario's kernels are compiled and cached ({seconds:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
