"""The run's report: `report.json` (contract: README.md, "Run directory"), `report.md`, `plots/`.

`build_report` scores everything (each step reported to the progress callback and timed as
``report.STEP``), `write_report` draws the figures (`sim.figures`) and writes both files with
every step's time, and `summary_table` is what `privrec sim` and `privrec report` print.
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import json
import platform
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from privrec.adversary.replay import load_output
from privrec.server.store import Store
from privrec.shared.config import ExperimentConfig
from privrec.shared.data.dataset import RatingData
from privrec.shared.population import (
    THESIS_PROTOCOL_USERS,
    private_release_sizes,
    tested_user_count,
)
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.run_config import PublicRunConfig
from privrec.sim.auxiliary import attack_fit_rows, attack_target_rows
from privrec.sim.figures import build_figures, save_figures
from privrec.sim.progress import Progress, Steps
from privrec.sim.referee import score_attacks, stored_run_config
from privrec.sim.report_measures import privacy_measures
from privrec.sim.report_privacy import (  # re-exported: the report's public names
    epsilon_histogram,
    privacy_block,
)
from privrec.sim.report_text import (
    format_value,
    guarantee,
    headline_text,
    markdown,
    summary_table,
)
from privrec.sim.report_utility import UTILITY_STEPS, score_utility


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in (
        "privrec",
        "numpy",
        "scipy",
        "grpcio",
        "protobuf",
        "dp-accounting",
        "amqtt",
        "aiomqtt",
    ):
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            out[pkg] = "missing"
    return out


def public_run_config(out_dir: Path) -> PublicRunConfig:
    """The run's public configuration as the server stored it (`out_dir/server.sqlite`).

    Raises:
        DataError: the store holds none.
    """
    return stored_run_config(out_dir / "server.sqlite")


REPORT_STEPS = (*UTILITY_STEPS, "attacks", "privacy", "plots")
"""The steps of the report phase, each timed as ``report.STEP`` (and ``report.audit``)."""

POPULATION_COUNTS = (
    "enrolled",
    "profiles",
    "public_profiles",
    "releases_accepted",
    "releases_rejected",
    "duplicates",
    "queries",
)


def build_report(
    config: ExperimentConfig,
    run_id: str,
    data: RatingData,
    out_dir: Path,
    status: pb.RunStatus | Mapping[str, Any],
    timings: dict[str, float],
    nodes: dict[str, int],
    *,
    launcher: str,
    mqtt: str,
    started: float,
    audit: bool = False,
    progress: Progress | None = None,
    attack_dir: Path | None = None,
) -> dict[str, Any]:
    """Score everything and assemble the report dict.

    Each step is reported to `progress` (``report · scoring the clients' predictions``, …)
    and timed into `timings` as ``report.STEP``. `status` is the server's `RunStatus`, or the
    same counts as a mapping (a hand-started run rebuilt from its store, where a count the
    store does not keep is None). `attack_dir` holds the attack outputs (default
    `out_dir/adversary/live`).
    """
    steps = Steps("report", len(REPORT_STEPS) + int(audit), progress, timings)
    run_config = public_run_config(out_dir)
    scored = score_utility(config, data, out_dir, run_config, steps)
    source = attack_dir if attack_dir is not None else out_dir / "adversary" / "live"
    outputs = {p.stem: load_output(p) for p in sorted(source.glob("*.npz"))}
    with steps.step("attacks", f"scoring {len(outputs)} attack output(s) against the truth"):
        attacks = score_attacks(config, outputs, out_dir, data)
    with steps.step("privacy", "composing every user's releases in the privacy ledger"):
        privacy = privacy_block(run_config, out_dir)
        # each private user's genuine released ratings (Bilge's g)
        genuine = private_release_sizes(data, config, run_config.holdout).tolist()
        measures = privacy_measures(run_config, genuine, data.n_items)
        if measures is not None:
            privacy["measures"] = measures
    if audit:
        with steps.step("audit", f"auditing the DP claim of {run_config.mechanism_name}"):
            privacy["audit"] = _audit(run_config)

    def iso(t: float) -> str:
        return dt.datetime.fromtimestamp(t, dt.UTC).isoformat(timespec="seconds")

    def count(field: str) -> Any:
        return status.get(field) if isinstance(status, Mapping) else getattr(status, field)

    report = {
        "run": {
            "id": run_id,
            "seed": config.run.seed,
            "versions": _versions(),
            "start": iso(started),
            "end": iso(dt.datetime.now(dt.UTC).timestamp()),
            "launcher": launcher,
            "mqtt": mqtt,
            "dataset": data.name,
            "model": run_config.model_name,
            "nodes": nodes,
        },
        "population": {
            "users": data.n_users,
            "items": data.n_items,
            "shards": config.population.shards,
            **{field: count(field) for field in POPULATION_COUNTS},
            "sybils": _sybil_count(out_dir),
            **sampled_test_facts(config, data.n_users),
            **attack_target_facts(config, data.n_users),
        },
        "privacy": privacy,
        "utility": scored.utility,
        "attacks": attacks,
        "timings": timings | server_timings(out_dir),
    }
    if scored.evaluation:
        report["evaluation"] = scored.evaluation
    curve = scored.curve
    return report | ({"curves": {"utility_by_private_users": curve}} if curve else {})


def sampled_test_facts(config: ExperimentConfig, n_users: int) -> dict[str, Any]:
    """The population section's word on sampled test users (`[evaluation] test_users`):
    nothing when every user who can be tested is (the default up to ML-1M's size), else how
    many were drawn and how."""
    drawn = tested_user_count(config, n_users)
    if drawn == 0:
        return {}
    above = f"its default above {THESIS_PROTOCOL_USERS:,} users"
    default = f" ({above})" if config.evaluation.test_users == 0 else ""
    return {
        "sampled_test_users": drawn,
        "sampled_test_users_rule": (
            f"a seeded sample of at most {drawn} of the {n_users} users are test users "
            f"([evaluation] test_users = {config.evaluation.test_users}{default}); the others "
            "release their whole profile and are only training data"
        ),
    }


def attack_target_facts(config: ExperimentConfig, n_users: int) -> dict[str, Any]:
    """The population section's word on sampled attack targets (`[adversary] targets`) and on
    the sample the attacks fit on (`[adversary] fit_users`): nothing when every user is
    attacked (the theses' protocol, the default up to ML-1M's size), else how many users were
    scored and fitted on, and how they were chosen."""
    rows = attack_target_rows(config, n_users)
    if rows is None:
        return {}
    fit = attack_fit_rows(config, n_users)
    how = (
        "the attacks read every release and are scored on these users"
        if fit is None
        else "the attacks are scored on these users"
    )
    facts: dict[str, Any] = {
        "attack_targets": int(rows.size),
        "attack_targets_rule": (
            f"a seeded sample of {rows.size} of the {n_users} users "
            f"([adversary] targets = {config.adversary.targets}); {how}"
        ),
    }
    if fit is not None:
        facts |= {
            "attack_fit_users": int(fit.size),
            "attack_fit_users_rule": (
                f"the attacks fit their population-level parameters (item priors, bases, "
                f"factors, noise variances) on the releases of a seeded sample of {fit.size} "
                f"of the {n_users} users, every target among them ([adversary] fit_users = "
                f"{config.adversary.fit_users}); the other releases are not read"
            ),
        }
    return facts


def server_timings(out_dir: Path) -> dict[str, float]:
    """The aggregator's own clock, from the counters it stored at its last phase change:
    `server_train` (fitting the model, offline preprocessing included) and `server_answer`
    (the model answering Predict/Recommend: Bilge's online time T)."""
    store = Store(out_dir / "server.sqlite", read_only=True)
    try:
        stored = store.get_meta("counters")
    finally:
        store.close()
    counters = json.loads(stored) if stored else {}
    return {
        f"server_{k.removesuffix('_seconds')}": float(v)
        for k, v in counters.items()
        if k in ("train_seconds", "answer_seconds")
    }


def _sybil_count(out_dir: Path) -> int:
    """How many of the enrolled users were the adversary's sybils (`adversary.sybils`)."""
    from privrec.adversary.sybils import SybilPlan

    plan = SybilPlan.read(out_dir)
    return 0 if plan is None else len(plan.sybil_ids)


def _audit(run_config: PublicRunConfig) -> dict[str, Any]:
    from privrec.shared.privacy.audit import audit

    mech = run_config.mechanism()
    if mech.privacy().kind not in ("pure", "approximate"):
        return {"skipped": f"mechanism {mech.name} makes no DP claim; nothing to audit"}
    return audit(mech, seed=run_config.fold_seed).to_dict()


def write_report(
    out_dir: Path,
    report: dict[str, Any],
    *,
    progress: Progress | None = None,
    report_started: float | None = None,
) -> list[str]:
    """Draw the figures, then write report.json and report.md; returns the plots written.

    The figures are timed as ``report.plots``; given `report_started` (a `time.perf_counter()`
    reading from when the report phase began), the whole phase is timed as ``report``, so both
    files carry the time of every step.
    """
    timings = report["timings"]
    steps = Steps("report", len(REPORT_STEPS), progress, timings)
    steps.done = len(REPORT_STEPS) - 1
    with steps.step("plots", "drawing the figures"):
        plots = save_figures(build_figures(report), out_dir / "plots")
    if report_started is not None:
        timings["report"] = time.perf_counter() - report_started
    (out_dir / "report.json").write_text(json.dumps(report, indent=2))
    (out_dir / "report.md").write_text(markdown(report, plots))
    return plots


__all__ = [
    "REPORT_STEPS",
    "build_report",
    "epsilon_histogram",
    "format_value",
    "guarantee",
    "headline_text",
    "privacy_block",
    "public_run_config",
    "summary_table",
    "write_report",
]
