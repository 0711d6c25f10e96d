"""`privrec report RUN_DIR`: the report of a run directory, rebuilt from what it holds.

A run started by hand (`privrec broker`, `server`, `adversary`, `clients`, `admin`; README,
"A run by hand") has no orchestrator to write its report. The referee needs only what the run
directory holds and what it can rebuild itself:

* the experiment configuration, `RUN_DIR/config.toml` (the server writes it when it starts in
  a directory without one; `--config` names another), from which the referee reloads the
  dataset and rebuilds the truth (`shared.population`), exactly as `privrec sim` does;
* the server's store (`server.sqlite`): the public run configuration, the releases for the
  privacy ledger and the counts of the population block, and the transcript's arrival times,
  from which the enroll, collect and serve timings are read (rejected requests and duplicates
  are counted only in the server's memory: the store cannot say, so they are None);
* the clients' predictions (`predictions/`) and the live adversary's outputs
  (`adversary/live/`); without live outputs, the configured attacks replay the transcript;
* for a model that publishes one result (`Serving.PUBLISHED`), the result itself
  (`model.npz`), downloaded from the server with `--server` if the directory holds none.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from privrec.adversary.replay import STORE_NAME, replay
from privrec.server.store import Store
from privrec.shared.capabilities import Serving
from privrec.shared.config import ExperimentConfig
from privrec.shared.errors import ConfigError, DataError
from privrec.shared.population import load_population
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.sim.completeness import missing_outputs
from privrec.sim.phases import attack_progress
from privrec.sim.progress import Progress, label
from privrec.sim.report import build_report, public_run_config, write_report

CONFIG_NAME = "config.toml"
TRANSCRIPT_PHASES = {
    "Enroll": "enroll",
    "Submit": "collect",
    "SubmitStream": "collect",
    "Predict": "serve",
    "Recommend": "serve",
}
"""Transcript method → the phase whose duration its arrival times span (a hand-started run)."""


def run_config_path(run_dir: Path, override: str | Path | None = None) -> Path:
    """The experiment configuration of a run directory: `override`, else RUN_DIR/config.toml.

    Raises:
        ConfigError: neither exists (the message says how to name one).
    """
    if not run_dir.is_dir():
        raise ConfigError(f"RUN_DIR: {run_dir} is not a directory")
    path = Path(override) if override is not None else run_dir / CONFIG_NAME
    if not path.is_file():
        raise ConfigError(
            f"config file not found: {path} (RUN_DIR has no {CONFIG_NAME}: pass --config FILE, "
            "the experiment file the nodes ran with; a server started in RUN_DIR writes it)"
        )
    return path


def status_from_store(run_dir: Path) -> dict[str, int | None]:
    """The population counts of `build_report` from the store alone (no server needed)."""
    store = Store(run_dir / STORE_NAME, read_only=True)
    try:
        counts = store.release_counts()
        # the server saves its in-memory counters with every write and at each phase change
        stored = store.get_meta("counters")
        counters = json.loads(stored) if stored else {}
        return {
            "enrolled": store.count("enrollments"),
            "profiles": store.profile_users(pb.PURPOSE_PROFILE),
            "public_profiles": store.profile_users(pb.PURPOSE_PROFILE, pb.TIER_PUBLIC),
            "releases_accepted": store.count("releases"),
            "releases_rejected": counters.get("rejected"),
            "duplicates": counters.get("duplicates"),
            "queries": sum(n for _, purpose, n in counts if purpose == pb.PURPOSE_QUERY),
        }
    finally:
        store.close()


def timings_from_transcript(run_dir: Path) -> tuple[dict[str, float], float | None]:
    """Each phase's span of arrival times in the transcript (first to last request of the
    methods of `TRANSCRIPT_PHASES`), and the first arrival (Unix seconds; None if empty)."""
    spans: dict[str, list[int]] = {}
    store = Store(run_dir / STORE_NAME, read_only=True)
    try:
        for row in store.transcript():
            phase = TRANSCRIPT_PHASES.get(row.method)
            if phase is not None:
                span = spans.setdefault(phase, [row.arrival_ns, row.arrival_ns])
                span[0], span[1] = min(span[0], row.arrival_ns), max(span[1], row.arrival_ns)
    finally:
        store.close()
    first = min((s[0] for s in spans.values()), default=None)
    ordered = [p for p in ("enroll", "collect", "serve") if p in spans]
    return {p: (spans[p][1] - spans[p][0]) / 1e9 for p in ordered}, (
        first / 1e9 if first is not None else None
    )


def _download_model(server: str, run_id: str, path: Path) -> None:
    from privrec.client.transport import GrpcTransport

    async def fetch() -> bytes:
        async with GrpcTransport(server, run_id) as transport:
            return await transport.model_archive()

    path.write_bytes(asyncio.run(fetch()))


def report_run(
    run_dir: Path,
    *,
    config_file: str | Path | None = None,
    server: str | None = None,
    audit: bool = False,
    progress: Progress | None = None,
    allow_incomplete: bool = False,
) -> dict[str, Any]:
    """Score a run directory and write its report.json, report.md and plots/.

    Args:
        run_dir: the directory the server (and shards, adversary) ran in.
        config_file: the experiment configuration, if not RUN_DIR/config.toml.
        server: HOST:PORT of the still-running server, to download a published result.
        audit: also audit the mechanism's DP claim.
        progress: told each step (``report · …``, ``attack · …``).
        allow_incomplete: score a run whose predictions or attack outputs are incomplete
            (`sim.completeness`), flagging it (``report["incomplete"]``), instead of refusing.

    Returns:
        The report (also written).

    Raises:
        ConfigError: no configuration, or one that does not match the run's.
        DataError: the directory holds no store, or no published result and no `server`.
    """
    t0 = time.perf_counter()
    config = ExperimentConfig.load(run_config_path(run_dir, config_file))
    if not (run_dir / STORE_NAME).exists():
        raise DataError(f"{run_dir} has no server store ({STORE_NAME}); was a server run there?")
    run_config = public_run_config(run_dir)
    for what, ours, theirs in (
        ("mechanism.name", config.mechanism.name, run_config.mechanism_name),
        ("model.name", config.model.name, run_config.model_name),
    ):
        if ours != theirs:
            raise ConfigError(
                f"{what}: the configuration says {ours!r} but the run's server ran {theirs!r}; "
                "pass --config with the file the nodes ran with"
            )
    tell = progress or (lambda _label, _done, _total: None)
    tell(label("load", f"dataset {config.data.dataset}"), 0, 1)
    data = load_population(config.data, config.run.seed)
    tell(label("load", f"{data.name}: {data.n_users} users, {data.n_items} items"), 1, 1)
    timings, first = timings_from_transcript(run_dir)
    timings["load"] = time.perf_counter() - t0
    model_file = run_dir / "model.npz"
    if run_config.capabilities.serving is Serving.PUBLISHED and not model_file.exists():
        if server is None:
            raise DataError(
                f"{model_file}: the model publishes its result "
                f"({run_config.capabilities.publishes}) and the run directory holds no copy; "
                "run `privrec report` with --server HOST:PORT while the server still runs"
            )
        _download_model(server, run_config.run_id, model_file)
    live = run_dir / "adversary" / "live"
    attack_dir = live
    if config.adversary.attacks and not list(live.glob("*.npz")):
        attack_dir = run_dir / "adversary" / "replay"
        t = time.perf_counter()
        seconds: dict[str, float] = {}
        replay(
            run_dir, config.adversary.attacks, attack_dir, None, attack_progress(progress), seconds
        )
        timings["attack"] = time.perf_counter() - t
        timings |= {f"attack.{name}": s for name, s in seconds.items()}
    missing = missing_outputs(config, data, run_dir, run_config, attack_dir)
    if missing and not allow_incomplete:
        raise DataError(
            f"{run_dir}: the run is incomplete ({'; '.join(missing)}); a report of part of it "
            "needs --allow-incomplete (it is then flagged as such)"
        )
    t = time.perf_counter()
    report = build_report(
        config,
        run_config.run_id,
        data,
        run_dir,
        status_from_store(run_dir),
        timings,
        {},
        launcher="by hand",
        mqtt="n/a",
        started=first if first is not None else time.time(),
        audit=audit,
        progress=progress,
        attack_dir=attack_dir,
    )
    report["run"]["attack_outputs"] = str(attack_dir.relative_to(run_dir))
    if missing:
        report["incomplete"] = missing
    write_report(run_dir, report, progress=progress, report_started=t)
    return report


__all__ = ["report_run", "run_config_path", "status_from_store", "timings_from_transcript"]
