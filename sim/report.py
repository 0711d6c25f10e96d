"""The run's report: `report.json` (the contract in DESIGN.md), `report.md` and `plots/`.

`build_report` scores everything (each step reported to the progress callback and timed as
``report.STEP``), `write_report` draws the figures (`sim.figures`) and writes both files with
every step's time, and `summary_table` is what `privrec sim` and `privrec report` print.
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import itertools
import json
import math
import platform
import statistics
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from privrec.adversary.replay import load_output
from privrec.server.models import OutputPrivacy, make_model
from privrec.server.store import Store
from privrec.shared.accounting import PrivacyLedger
from privrec.shared.capabilities import Serving
from privrec.shared.config import ExperimentConfig
from privrec.shared.data.dataset import RatingData
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.protocol import fold_of
from privrec.shared.run_config import PublicRunConfig
from privrec.shared.serde import payload_from_proto
from privrec.sim.auxiliary import attack_target_rows
from privrec.sim.figures import attack_headlines, build_figures, is_count, save_figures
from privrec.sim.progress import Progress, Steps
from privrec.sim.referee import (
    PUBLISHED_SCORERS,
    score_all_public_baseline,
    score_attacks,
    score_baseline,
    score_predictions,
    score_rounds,
    stored_run_config,
)

DELTA = 1e-6  # δ at which per-user composed ε is stated
HISTOGRAM_BINS = 20  # at most this many bars in a per-user ε histogram


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


def privacy_block(run_config: PublicRunConfig, out_dir: Path) -> dict[str, Any]:
    """The mechanism's statement and the per-user composition of every stored release of the
    private tier. Public-tier users share their ratings openly: they are counted apart, not
    composed (their ε would be infinite by construction)."""
    mech = run_config.mechanism()
    statement = mech.privacy()
    ledger = PrivacyLedger()
    store = Store(out_dir / "server.sqlite", read_only=True)
    try:
        tiers = store.tiers()
        public = {u for u, t in tiers.items() if t == pb.TIER_PUBLIC}
        event = mech.event()  # one event object for every user: the ledger flattens it once
        for user, purpose, count in store.release_counts():
            if user not in public:
                ledger.record(
                    user,
                    event,
                    count=count,
                    purpose=pb.Purpose.Name(pb.Purpose.ValueType(purpose)),
                )
    finally:
        store.close()
    tiers_block: dict[str, Any] = {"private": len(tiers) - len(public)}
    if public:
        tiers_block["public"] = len(public)
        tiers_block["public_statement"] = (
            "public-tier users share their (training) ratings "
            "openly: no privacy (Xin & Jaakkola Sec. 4)"
        )
    block = {
        "mechanism": mech.name,
        "public_params": mech.public_params(),
        "kind": statement.kind,
        "epsilon": statement.epsilon,
        "delta": statement.delta,
        "neighbouring": statement.neighbouring,
        "notes": statement.notes,
        "flags": list(statement.flags),
        "per_user": _with_histogram(ledger, ledger.summary(DELTA, statement)),
        "tiers": tiers_block,
    }
    model = model_privacy_block(run_config, [u for u in tiers if u not in public], out_dir)
    return block | ({"model": model} if model else {})


def model_privacy_block(
    run_config: PublicRunConfig, training_users: list[str], out_dir: Path
) -> dict[str, Any] | None:
    """The model's output-privacy claim (`Model.output_privacy`) composed per training user:
    its fit event once (or once per fold state she is in, `fit_per_fold`), its answer event
    once per answered query (or, `answer_scope = "raters"`, once per predicted item she rated,
    see `_per_user_charges`); None without a claim."""
    claim = make_model(run_config.model_name, run_config.model_params).output_privacy()
    if claim is None:
        return None
    store = Store(out_dir / "server.sqlite", read_only=True)
    try:
        answered = sum(c for _, purpose, c in store.release_counts() if purpose == pb.PURPOSE_QUERY)
        per_user = _per_user_charges(claim, run_config, training_users, store, answered)
    finally:
        store.close()
    s = claim.statement
    return {
        "model": run_config.model_name,
        "kind": s.kind,
        "epsilon": s.epsilon,
        "delta": s.delta,
        "neighbouring": s.neighbouring,
        "notes": s.notes,
        "flags": list(s.flags),
        "answers": answered,
        "answer_scope": claim.answer_scope,
        "fit_per_fold": claim.fit_per_fold,
        "guarantee": "output privacy against other users and observers, not against the aggregator",
        "per_user": _per_user_summary(claim, [per_user[u] for u in training_users]),
    }


def epsilon_histogram(values: list[float]) -> dict[str, list[float] | list[int]]:
    """A compact histogram of per-user ε: ``{values, counts}`` when there are at most
    `HISTOGRAM_BINS` distinct values (exact; the common case, where users released alike),
    else ``{edges, counts}`` over `HISTOGRAM_BINS` equal bins."""
    eps = np.asarray(values, dtype=np.float64)
    distinct, counts = np.unique(eps, return_counts=True)
    if distinct.size <= HISTOGRAM_BINS:
        return {"values": distinct.tolist(), "counts": counts.tolist()}
    binned, edges = np.histogram(eps, bins=HISTOGRAM_BINS)
    return {"edges": edges.tolist(), "counts": binned.tolist()}


def _with_histogram(ledger: PrivacyLedger, summary: dict[str, Any]) -> dict[str, Any]:
    """The ledger summary plus the histogram of its per-user ε when it states ε (the ledger
    caches each composition: nothing is composed twice)."""
    if "per_user_epsilon" not in summary or not summary.get("users"):
        return summary
    eps = [ledger.epsilon(u, summary["delta"]) for u in ledger.users()]
    if not all(math.isfinite(e) for e in eps):
        return summary
    return summary | {"histogram": epsilon_histogram(eps)}


REPORT_STEPS = ("utility", "baseline", "attacks", "privacy", "plots")
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


def _record(ledger: PrivacyLedger, key: str, claim: OutputPrivacy, fits: int, answers: int) -> None:
    if claim.fit_event is not None and fits:
        ledger.record(key, claim.fit_event, count=fits, purpose="model-fit")
    if claim.answer_event is not None and answers:
        ledger.record(key, claim.answer_event, count=answers, purpose="model-answer")


def _per_user_summary(claim: OutputPrivacy, charges: list[tuple[int, int]]) -> dict[str, Any]:
    """`PrivacyLedger.summary` over the training users' (fits, answers) charges, composing
    only what the max and the median need.

    A user's composed ε grows with each of her two counts, so when the distinct (fits,
    answers) pairs form a chain (always so for one varying count) the max is the largest pair's
    ε and the median the middle pair's: two or three PLD compositions instead of one per user
    (a PNCF user can be charged thousands of predictions). Otherwise every distinct pair is
    composed. Users charged nothing count with ε = 0.
    """
    if not charges:
        return {"users": 0}
    ordered = sorted(charges)
    distinct = sorted(set(ordered))
    chain = all(a[1] <= b[1] for a, b in itertools.pairwise(distinct))
    n = len(ordered)
    needed = {ordered[-1], ordered[(n - 1) // 2], ordered[n // 2]} if chain else set(distinct)
    probe = PrivacyLedger()  # one release of each event: the summary's kind and accountant
    _record(probe, "probe", claim, 1, 1)
    if not len(probe):
        return {"users": n, "per_user_epsilon": {"max": 0.0, "median": 0.0}}
    base = probe.summary(DELTA, claim.statement)
    if base.get("kind") == "none":  # no ε to compose: the full ledger's reason is cheap
        everyone = PrivacyLedger()
        for i, (fits, answers) in enumerate(charges):
            _record(everyone, str(i), claim, fits, answers)
        return everyone.summary(DELTA, claim.statement) | {"users": n}
    ledger = PrivacyLedger()
    for fits, answers in set(distinct):
        _record(ledger, f"{fits}/{answers}", claim, fits, answers)
    recorded = set(ledger.users())

    def eps(pair: tuple[int, int], naive: bool = False) -> float:
        key = f"{pair[0]}/{pair[1]}"
        if key not in recorded:
            return 0.0
        return ledger.naive_epsilon(key, DELTA) if naive else ledger.epsilon(key, DELTA)

    composed = {pair: eps(pair) for pair in needed}
    naive = {pair: eps(pair, naive=True) for pair in distinct}
    middle = ordered[(n - 1) // 2], ordered[n // 2]
    median = (
        (composed[middle[0]] + composed[middle[1]]) / 2
        if chain
        else statistics.median(composed[p] for p in ordered)
    )
    return base | {
        "per_user_epsilon": {"max": max(composed.values()), "median": median},
        "naive_sum": {
            "max": max(naive.values()),
            "median": statistics.median(naive[p] for p in ordered),
        },
        "users": n,
    }


def _per_user_charges(
    claim: OutputPrivacy,
    run_config: PublicRunConfig,
    training_users: list[str],
    store: Store,
    answered: int,
) -> dict[str, tuple[int, int]]:
    """user → (fit events, answer events) charged to her (`OutputPrivacy` says how).

    * fits: 1, or with `fit_per_fold` the number of fold states she is in: every fold present
      among the training users but her own (`server.models.foldwise`).
    * answers: with `answer_scope = "all"` every answered query; with "raters" one per
      distinct item each query predicted (a Predict's items; a Recommend's every item absent
      from its query) that she has a stored cell at, counting only queries from other folds
      (the querier's fold is left out of her answer, `shared.protocol.fold_of`).
    """
    folds = {u: fold_of(u, run_config.n_folds, run_config.fold_seed) for u in training_users}
    fits = 1
    if claim.fit_per_fold:
        fits = max(len(set(folds.values())) - 1, 0)
    if claim.answer_scope == "all" or not training_users:
        return {u: (fits, answered) for u in training_users}
    m = run_config.n_items
    # predicted[f, i]: how many queries of fold f had item i predicted
    predicted = np.zeros((run_config.n_folds, m))
    for row in store.transcript():
        if row.method == "Predict":
            req = pb.PredictRequest.FromString(row.request)
            query, items = req.query, np.unique(np.array(req.items, dtype=np.int64))
        elif row.method == "Recommend":
            query = pb.RecommendRequest.FromString(row.request).query
            unseen = np.ones(m, dtype=bool)
            unseen[_cells(query)] = False
            items = np.flatnonzero(unseen)
        else:
            continue
        predicted[fold_of(query.user_id, run_config.n_folds, run_config.fold_seed), items] += 1
    index = {u: i for i, u in enumerate(training_users)}
    rows, cols = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
    for user, raw in store.releases_by_purpose(pb.PURPOSE_PROFILE):
        if user in index:
            cells = _cells(pb.Release.FromString(raw))
            rows.append(np.full(cells.size, index[user]))
            cols.append(cells)
    r, c = np.concatenate(rows), np.concatenate(cols)
    rated = sp.csr_matrix((np.ones(r.size), (r, c)), shape=(len(training_users), m))
    by_fold = np.asarray(rated @ predicted.T)  # training user × querier's fold
    return {
        user: (fits, round(float(by_fold[i].sum() - by_fold[i, folds[user]])))
        for user, i in index.items()
    }


def _cells(release: pb.Release) -> np.ndarray:
    """The item indices a sparse release fills (empty for a dense one)."""
    _, payload = payload_from_proto(release)
    return np.asarray(getattr(payload, "indices", np.zeros(0)), dtype=np.int64)


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
    curve = None
    if run_config.capabilities.serving is not Serving.PUBLISHED:
        with steps.step("utility", "scoring the clients' predictions"):
            utility = score_predictions(config, data, out_dir)
            curve = score_rounds(config, data, out_dir)
        with steps.step("baseline", "the non-private reference on the true ratings"):
            if config.model.baseline and run_config.two_tier:
                utility |= score_all_public_baseline(config, data, run_config)
            elif config.model.baseline:
                utility |= score_baseline(config, data)
    else:
        publishes = run_config.capabilities.publishes
        with steps.step("utility", f"scoring the published {publishes}"):
            utility = PUBLISHED_SCORERS[publishes](config, data, out_dir, run_config)
        with steps.step("baseline", "(none: the published result is scored against the truth)"):
            pass
    source = attack_dir if attack_dir is not None else out_dir / "adversary" / "live"
    outputs = {p.stem: load_output(p) for p in sorted(source.glob("*.npz"))}
    with steps.step("attacks", f"scoring {len(outputs)} attack output(s) against the truth"):
        attacks = score_attacks(config, outputs, out_dir, data)
    with steps.step("privacy", "composing every user's releases in the privacy ledger"):
        privacy = privacy_block(run_config, out_dir)
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
            **attack_target_facts(config, data.n_users),
        },
        "privacy": privacy,
        "utility": utility,
        "attacks": attacks,
        "timings": timings | server_timings(out_dir),
    }
    return report | ({"curves": {"utility_by_private_users": curve}} if curve else {})


def attack_target_facts(config: ExperimentConfig, n_users: int) -> dict[str, Any]:
    """The population section's word on sampled attack targets (`[adversary] targets`):
    nothing when every user is attacked (the theses' protocol, the default up to ML-1M's size),
    else how many users were scored and how they were chosen."""
    rows = attack_target_rows(config, n_users)
    if rows is None:
        return {}
    return {
        "attack_targets": int(rows.size),
        "attack_targets_rule": (
            f"a seeded sample of {rows.size} of the {n_users} users "
            f"([adversary] targets = {config.adversary.targets}); the attacks read every "
            "release and are scored on these users"
        ),
    }


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
    (out_dir / "report.md").write_text(_markdown(report, plots))
    return plots


def format_value(key: str, v: Any) -> str:
    """A value for a table: counts as integers (``4715``), other numbers to 4 decimals,
    None as "n/a"."""
    if isinstance(v, float) and v.is_integer() and is_count(key):
        return str(int(v))
    if isinstance(v, float):
        return f"{v:.4f}"
    return "n/a" if v is None else str(v)


def guarantee(p: Mapping[str, Any]) -> str:
    """The formal guarantee in words: ``ε = 1 (pure DP, …)`` or "no formal DP guarantee"."""
    if p.get("kind") == "element-wise":
        return "element-wise privacy only, no formal DP guarantee"
    if p.get("kind") == "none" or p.get("epsilon") is None:
        return "no formal DP guarantee"
    delta = p.get("delta")
    at = f", δ = {delta:g}" if delta else ""
    return f"ε = {p['epsilon']:.3g}{at} ({p['kind']} DP; neighbouring: {p.get('neighbouring')})"


def _composed(per_user: Mapping[str, Any], notes: str = "") -> str:
    if "per_user_epsilon" not in per_user:
        reason = str(per_user.get("reason", "")).replace(notes, "").strip() or "no ε"
        return f"per user: {reason} ({per_user.get('users', 0)} users)"
    eps = per_user["per_user_epsilon"]
    return (
        f"composed per user at δ = {per_user['delta']:g}: median ε = {eps['median']:.4g}, "
        f"max ε = {eps['max']:.4g} over {per_user['users']} users "
        f"({per_user.get('accountant', '?')} accountant)"
    )


def headline_text(attack: Mapping[str, Any], sep: str = "; ") -> str:
    """Each headline metric beside its references:
    ``rmse_z 0.664 (naive ẑ = z′ 1.17, know-nothing ẑ = 0 0.978)``."""
    m = attack["metrics"]
    parts = []
    for h in attack_headlines(attack.get("kind"), m):
        refs = ", ".join(f"{lab} {m[k]:.3g}" for k, lab in h.references if k in m)
        parts.append(f"{h.metric} {m[h.metric]:.3g}" + (f" ({refs})" if refs else ""))
    return sep.join(parts)


def _markdown(report: dict[str, Any], plots: list[str]) -> str:
    r, p = report["run"], report["privacy"]
    lines = [
        f"# privrec run {r['id']}",
        "",
        f"seed {r['seed']} · dataset {r['dataset']} · launcher {r['launcher']} · "
        f"mqtt {r['mqtt']} · {r['start']} → {r['end']}",
        "",
        "## Utility",
        "",
        "| metric | value |",
        "|---|---|",
    ]
    lines += [f"| {k} | {format_value(k, v)} |" for k, v in report["utility"].items()]
    lines += [
        "",
        "## Privacy",
        "",
        f"mechanism **{p['mechanism']}** `{json.dumps(p['public_params'])}`: **{guarantee(p)}**",
        "",
        _composed(p["per_user"], p["notes"]),
        "",
        p["notes"],
        "",
    ]
    if "public" in p["tiers"]:
        lines += [
            f"tiers: {p['tiers']['public']} public users ({p['tiers']['public_statement']}), "
            f"{p['tiers']['private']} private",
            "",
        ]
    if "model" in p:
        m = p["model"]
        lines += [
            f"model output ({m['model']}; {m['guarantee']}): **{guarantee(m)}**; "
            + _composed(m["per_user"], m.get("notes", "")),
            "",
        ]
    lines += [
        "## Attacks",
        "",
        "| attack | knowledge | headline, beside its baselines | all metrics |",
        "|---|---|---|---|",
    ]
    for a in report["attacks"]:
        every = ", ".join(f"{k}={format_value(k, v)}" for k, v in a["metrics"].items())
        lines.append(f"| {a['name']} | {a['knowledge']} | {headline_text(a, '<br>')} | {every} |")
    lines += ["", "## Population", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {format_value(k, v)} |" for k, v in report["population"].items()]
    lines += ["", "## Timings (s)", "", "| step | seconds |", "|---|---|"]
    lines += [f"| {k} | {v:.2f} |" for k, v in report["timings"].items()]
    lines += ["", *[f"![{Path(x).stem}]({x})" for x in plots], ""]
    return "\n".join(lines)


def summary_table(report: dict[str, Any]) -> Any:
    """A rich table of the headline figures (printed by `privrec sim` and `privrec report`):
    every utility metric, the formal guarantee, and each attack's headline metrics beside
    their baselines (report.md lists every metric)."""
    from rich.table import Table

    table = Table(title=f"privrec run {report['run']['id']}")
    table.add_column("section")
    table.add_column("metric", overflow="fold")
    table.add_column("value", justify="right")
    table.add_column("beside")
    for k, v in report["utility"].items():
        table.add_row("utility", k, format_value(k, v), "")
    p = report["privacy"]
    table.add_row("privacy", p["mechanism"], guarantee(p), "")
    if "per_user_epsilon" in p["per_user"]:
        eps = p["per_user"]["per_user_epsilon"]
        table.add_row("privacy", "ε per user", f"{eps['median']:.3g}", f"max {eps['max']:.3g}")
    if "model" in p:
        table.add_row("privacy", f"model output ({p['model']['model']})", guarantee(p["model"]), "")
    for a in report["attacks"]:
        m = a["metrics"]
        for h in attack_headlines(a.get("kind"), m):
            refs = ", ".join(f"{lab} {m[k]:.3f}" for k, lab in h.references if k in m)
            table.add_row(
                "attack", f"{a['name']}: {h.metric}", format_value(h.metric, m[h.metric]), refs
            )
    pop = report["population"]
    table.add_row(
        "population",
        "enrolled / accepted / rejected",
        " / ".join(
            format_value(k, pop[k]) for k in ("enrolled", "releases_accepted", "releases_rejected")
        ),
        "",
    )
    return table


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
