"""The run's report: `report.json` (the contract in DESIGN.md), `report.md` and `plots/`."""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import json
import platform
from pathlib import Path
from typing import Any

from privrec.adversary.replay import load_output
from privrec.server.models import make_model
from privrec.server.store import Store
from privrec.shared.accounting import PrivacyLedger
from privrec.shared.capabilities import Serving
from privrec.shared.config import ExperimentConfig
from privrec.shared.data.dataset import RatingData
from privrec.shared.errors import DataError
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.run_config import PublicRunConfig
from privrec.sim.referee import (
    PUBLISHED_SCORERS,
    score_all_public_baseline,
    score_attacks,
    score_baseline,
    score_predictions,
    score_rounds,
)

DELTA = 1e-6  # δ at which per-user composed ε is stated


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
    """The run's public configuration as the server stored it.

    Raises:
        DataError: the store holds none.
    """
    store = Store(out_dir / "server.sqlite", read_only=True)
    try:
        stored = store.get_meta("run_config")
    finally:
        store.close()
    if stored is None:
        raise DataError(f"{out_dir / 'server.sqlite'} holds no run configuration")
    return PublicRunConfig.from_json(stored)


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
        for user, purpose, count in store.release_counts():
            if user not in public:
                ledger.record(user, mech.event(), count=count, purpose=pb.Purpose.Name(purpose))
    finally:
        store.close()
    tiers_block = {"private": len(tiers) - len(public)}
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
        "per_user": ledger.summary(DELTA, statement),
        "tiers": tiers_block,
    }
    model = model_privacy_block(run_config, [u for u in tiers if u not in public], out_dir)
    return block | ({"model": model} if model else {})


def model_privacy_block(
    run_config: PublicRunConfig, training_users: list[str], out_dir: Path
) -> dict[str, Any] | None:
    """The model's output-privacy claim (`Model.output_privacy`) composed per training user:
    its fit event once, its answer event once per answered query; None without a claim."""
    claim = make_model(run_config.model_name, run_config.model_params).output_privacy()
    if claim is None:
        return None
    store = Store(out_dir / "server.sqlite", read_only=True)
    try:
        answered = sum(c for _, purpose, c in store.release_counts() if purpose == pb.PURPOSE_QUERY)
    finally:
        store.close()
    ledger = PrivacyLedger()
    for user in training_users:
        if claim.fit_event is not None:
            ledger.record(user, claim.fit_event, purpose="model-fit")
        if claim.answer_event is not None and answered:
            ledger.record(user, claim.answer_event, count=answered, purpose="model-answer")
    s = claim.statement
    return {
        "model": run_config.model_name,
        "kind": s.kind,
        "epsilon": s.epsilon,
        "delta": s.delta,
        "neighbouring": s.neighbouring,
        "notes": s.notes,
        "answers": answered,
        "guarantee": "output privacy against other users and observers, not against the aggregator",
        "per_user": ledger.summary(DELTA, s) if len(ledger) else {"users": 0},
    }


def build_report(
    config: ExperimentConfig,
    run_id: str,
    data: RatingData,
    out_dir: Path,
    status: pb.RunStatus,
    timings: dict[str, float],
    nodes: dict[str, int],
    *,
    launcher: str,
    mqtt: str,
    started: float,
    audit: bool = False,
) -> dict[str, Any]:
    """Score everything and assemble the report dict."""
    run_config = public_run_config(out_dir)
    if run_config.capabilities.serving is not Serving.PUBLISHED:
        utility = score_predictions(config, data, out_dir)
        curve = score_rounds(config, data, out_dir)
        if config.model.baseline and run_config.two_tier:
            utility |= score_all_public_baseline(config, data, run_config)
        elif config.model.baseline:
            utility |= score_baseline(config, data)
    else:
        scorer = PUBLISHED_SCORERS[run_config.capabilities.publishes]
        utility = scorer(config, data, out_dir, run_config)
        curve = None
    outputs = {
        p.stem: load_output(p) for p in sorted((out_dir / "adversary" / "live").glob("*.npz"))
    }
    attacks = score_attacks(config, outputs, out_dir, data)
    privacy = privacy_block(run_config, out_dir)
    if audit:
        privacy["audit"] = _audit(run_config)

    def iso(t: float) -> str:
        return dt.datetime.fromtimestamp(t, dt.UTC).isoformat(timespec="seconds")

    return {
        "run": {
            "id": run_id,
            "seed": config.run.seed,
            "versions": _versions(),
            "start": iso(started),
            "end": iso(dt.datetime.now(dt.UTC).timestamp()),
            "launcher": launcher,
            "mqtt": mqtt,
            "dataset": data.name,
            "nodes": nodes,
        },
        "population": {
            "users": data.n_users,
            "items": data.n_items,
            "shards": config.population.shards,
            "enrolled": status.enrolled,
            "profiles": status.profiles,
            "public_profiles": status.public_profiles,
            "releases_accepted": status.releases_accepted,
            "releases_rejected": status.releases_rejected,
            "duplicates": status.duplicates,
            "queries": status.queries,
            "sybils": _sybil_count(out_dir),
        },
        "privacy": privacy,
        "utility": utility,
        "attacks": attacks,
        "timings": dict(timings),
    } | ({"curves": {"utility_by_private_users": curve}} if curve else {})


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


def write_report(out_dir: Path, report: dict[str, Any]) -> None:
    """report.json, report.md and the plots."""
    (out_dir / "report.json").write_text(json.dumps(report, indent=2))
    plots = _plots(out_dir, report)
    (out_dir / "report.md").write_text(_markdown(report, plots))


def _fmt(v: Any) -> str:
    return f"{v:.4f}" if isinstance(v, float) else str(v)


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
    lines += [f"| {k} | {_fmt(v)} |" for k, v in report["utility"].items()]
    lines += [
        "",
        "## Privacy",
        "",
        f"mechanism **{p['mechanism']}** "
        f"`{json.dumps(p['public_params'])}` — kind **{p['kind']}**, ε = {p['epsilon']}, "
        f"δ = {p['delta']}, neighbouring: {p['neighbouring']}",
        "",
        f"per user: `{json.dumps(p['per_user'])}`",
        "",
        p["notes"],
        "",
        *(
            [
                f"tiers: {p['tiers']['public']} public users ({p['tiers']['public_statement']})"
                f", {p['tiers']['private']} private",
                "",
            ]
            if "public" in p["tiers"]
            else []
        ),
        "## Attacks",
        "",
        "| attack | knowledge | metrics |",
        "|---|---|---|",
    ]
    for a in report["attacks"]:
        m = ", ".join(f"{k}={_fmt(v)}" for k, v in a["metrics"].items())
        lines.append(f"| {a['name']} | {a['knowledge']} | {m} |")
    lines += ["", "## Population", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in report["population"].items()]
    lines += ["", "## Timings (s)", "", "| phase | seconds |", "|---|---|"]
    lines += [f"| {k} | {v:.2f} |" for k, v in report["timings"].items()]
    lines += ["", *[f"![{Path(x).stem}]({x})" for x in plots], ""]
    return "\n".join(lines)


def _plots(out_dir: Path, report: dict[str, Any]) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    (out_dir / "plots").mkdir(exist_ok=True)
    written = []
    u = report["utility"]
    maes = {k: v for k, v in u.items() if k.endswith("_mae") or "_mae_" in k}
    if maes:
        fig, ax = plt.subplots(figsize=(6, 3.2))
        names = list(maes)
        ax.barh(
            names,
            [maes[n] for n in names],
            color=["#888" if n.startswith("baseline") else "#3572b0" for n in names],
        )
        for i, n in enumerate(names):
            ax.text(maes[n], i, f" {maes[n]:.3f}", va="center")
        ax.set_xlabel("MAE (lower is better)")
        ax.set_title("Prediction error with and without privacy")
        ax.set_xlim(0, max(maes.values()) * 1.2)
        fig.tight_layout()
        fig.savefig(out_dir / "plots" / "mae.png", dpi=110)
        plt.close(fig)
        written.append("plots/mae.png")
    if report["attacks"]:
        fig, axes = plt.subplots(
            1, len(report["attacks"]), figsize=(4 * len(report["attacks"]), 3.2), squeeze=False
        )
        for ax, a in zip(axes[0], report["attacks"], strict=True):
            m = a["metrics"]
            ax.bar(list(m), list(m.values()), color="#b03535")
            ax.set_title(a["name"])
            ax.tick_params(axis="x", rotation=30, labelsize=7)
        fig.tight_layout()
        fig.savefig(out_dir / "plots" / "attacks.png", dpi=110)
        plt.close(fig)
        written.append("plots/attacks.png")
    curve = report.get("curves", {}).get("utility_by_private_users")
    if curve:  # Xin & Jaakkola Fig. 2: test RMSE as a function of the private users folded in
        fig, ax = plt.subplots(figsize=(6, 3.2))
        ax.plot(
            curve["private_users"],
            curve["rmse"],
            marker=".",
            color="#3572b0",
            label=report["privacy"]["mechanism"],
        )
        ref = u.get("baseline_all_public_rmse")
        if ref is not None:
            ax.axhline(ref, color="#888", linestyle="--", label="every user public")
        ax.set_xlabel("private users folded into the model")
        ax.set_ylabel("test RMSE")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out_dir / "plots" / "rmse_by_private_users.png", dpi=110)
        plt.close(fig)
        written.append("plots/rmse_by_private_users.png")
    return written


def summary_table(report: dict[str, Any]) -> Any:
    """A rich table of the headline figures (printed by `privrec sim`)."""
    from rich.table import Table

    table = Table(title=f"privrec run {report['run']['id']}")
    table.add_column("section")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for k, v in report["utility"].items():
        table.add_row("utility", k, _fmt(v))
    p = report["privacy"]
    table.add_row(
        "privacy",
        f"{p['mechanism']} ({p['kind']})",
        "no DP guarantee" if p["epsilon"] is None else f"ε={p['epsilon']:.3g}",
    )
    for a in report["attacks"]:
        for k, v in a["metrics"].items():
            table.add_row("attack", f"{a['name']}: {k}", _fmt(v))
    pop = report["population"]
    table.add_row(
        "population",
        "enrolled / accepted / rejected",
        f"{pop['enrolled']} / {pop['releases_accepted']} / {pop['releases_rejected']}",
    )
    return table


__all__ = ["build_report", "privacy_block", "summary_table", "write_report"]
