"""Studies: many runs of one experiment, compared (`privrec sweep`, `privrec.sweep`).

`spec` (what a study is: a base config, axes, seeds, and the runs they expand to), `store` (its
directory and which runs are finished), `engine` (check, run what is left, summarise), `pool`
and `execute` (where a job runs: local workers, this process, or Ray tasks), `results` with
`table`, `stats`, `metrics` and `plots` (summary.csv, study.json, study.md, the figures),
`drawing` (the figures saved here or by the sweep's idle workers), `configs` (a reproduction's
list of configs as a study).
"""

from __future__ import annotations

from privrec.shared.lazy import deferred_names

_NAMES = {
    "StudySpec": "privrec.sim.study.spec",
    "SweepOptions": "privrec.sim.study.engine",
    "StudyStatus": "privrec.sim.study.engine",
    "run_study": "privrec.sim.study.engine",
    "write_results": "privrec.sim.study.results",
}

__getattr__, __dir__ = deferred_names(__name__, _NAMES)

__all__ = ["StudySpec", "StudyStatus", "SweepOptions", "run_study", "write_results"]
