"""privrec: distributed, privacy-preserving recommendation protocols, simulated end to end.

The product's code lives in five subpackages, one per node of the design
(docs/architecture.md): `privrec.shared` (what every node uses), `privrec.server` (the
untrusted aggregator), `privrec.client` (user agents and shards), `privrec.adversary`
(observation tap, replay, attacks) and `privrec.sim` (orchestrator, referee, reports, the
`privrec` command).

The main entry points are importable from here (lazily, so that `import privrec` stays light)::

    import privrec
    report = privrec.simulate("configs/blip.toml", privrec.SimOptions(out_dir="runs/blip"))
    report.utility, report.attack("balu_single")

`simulate` and `sweep` (a study: a grid of runs × seeds) work from a script and inside a
running event loop (a notebook); `simulate_async` and `sweep_async` are their awaitable twins
(`privrec.sim.api`).
"""

from __future__ import annotations

import importlib.metadata

from privrec.shared.lazy import deferred_names

try:
    __version__ = importlib.metadata.version("privrec")
except importlib.metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"

_ENTRY_POINTS = {
    "ExperimentConfig": "privrec.shared.config",
    "SimOptions": "privrec.sim.run",
    "Report": "privrec.sim.results",
    "simulate": "privrec.sim.api",
    "simulate_async": "privrec.sim.api",
    "sweep": "privrec.sim.api",
    "sweep_async": "privrec.sim.api",
    "Study": "privrec.sim.results",
    "main": "privrec.sim.cli",
    "make_mechanism": "privrec.shared.mechanisms",
    "make_model": "privrec.server.models",
    "make_attack": "privrec.adversary.attacks",
    "MECHANISMS": "privrec.shared.mechanisms",
    "MODELS": "privrec.server.models",
    "ATTACKS": "privrec.adversary.attacks",
}


__getattr__, __dir__ = deferred_names(__name__, _ENTRY_POINTS)

__all__ = [  # noqa: RUF022 (the version first, then the entry points as listed above)
    "__version__",
    "ExperimentConfig",
    "SimOptions",
    "Report",
    "simulate",
    "simulate_async",
    "sweep",
    "sweep_async",
    "Study",
    "main",
    "make_mechanism",
    "make_model",
    "make_attack",
    "MECHANISMS",
    "MODELS",
    "ATTACKS",
]
