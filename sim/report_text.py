"""The report as text: report.md and the summary table `privrec sim` and `privrec report`
print, both from the report dict (the contract of report.json)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from privrec.sim.figures import attack_headlines, is_count
from privrec.sim.figures_utility import FIGURE_FAMILIES, utility_bars
from privrec.sim.report_measures import measure_rows, measures_text
from privrec.sim.utility_keys import RANKING, parse_utility_key


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


def markdown(report: dict[str, Any], plots: list[str]) -> str:
    """The run's report as Markdown, linking the plot files `plots`."""
    r, p = report["run"], report["privacy"]
    lines = [
        f"# privrec run {r['id']}",
        "",
        f"seed {r['seed']} · dataset {r['dataset']} · launcher {r['launcher']} · "
        f"mqtt {r['mqtt']} · {r['start']} → {r['end']}",
        "",
        "## Utility",
        "",
        *utility_markdown(report),
        *evaluation_markdown(report),
    ]
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
    if "measures" in p:
        lines += [measures_text(p["measures"]), ""]
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
    lines += ["## Attacks", ""]
    if report["attacks"]:
        lines += [
            "| attack | knowledge | headline, beside its baselines | all metrics |",
            "|---|---|---|---|",
        ]
    else:
        lines.append("No attack ran: `[adversary] attacks` is empty in this run's config.")
    for a in report["attacks"]:
        every = ", ".join(f"{k}={format_value(k, v)}" for k, v in a["metrics"].items())
        lines.append(f"| {a['name']} | {a['knowledge']} | {headline_text(a, '<br>')} | {every} |")
    lines += ["", "## Population", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {format_value(k, v)} |" for k, v in report["population"].items()]
    lines += ["", "## Timings (s)", "", "| step | seconds |", "|---|---|"]
    lines += [f"| {k} | {v:.2f} |" for k, v in report["timings"].items()]
    lines += ["", *[f"![{Path(x).stem}]({x})" for x in plots], ""]
    return "\n".join(lines)


Group = tuple[str, str, list[tuple[str, str, float]]]
"""(family, panel title, [(role, label, value), …]): one panel of a utility figure."""
_REFERENCES = ("reference", "trivial", "chance")


def utility_groups(utility: Mapping[str, Any], model: str) -> list[Group]:
    """The utility metrics grouped as the figures group them (`sim.figures_utility`), family
    by family, each panel's entries in the figures' order; counts are left out."""
    out: list[Group] = []
    for families in FIGURE_FAMILIES.values():
        for family in families:
            for title, (_, bars, _) in utility_bars(utility, model, (family,)).items():
                out.append((family, title, [(role, label, value) for label, value, role in bars]))
    return out


def _smallest_k(utility: Mapping[str, Any]) -> int | None:
    ks = [
        p.k
        for key in utility
        if (p := parse_utility_key(key)) is not None and p.family == RANKING and p.k
    ]
    return min(ks) if ks else None


def utility_rows(report: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(metric, value, beside) rows of the summary: each figure of the model (and of each
    variant) beside its non-private counterpart, the trivial predictors and chance; the
    ranking metrics at the smallest K only (report.md lists every K); then every value that
    is in no figure (counts, neighbour coverage)."""
    utility = report["utility"]
    model = report.get("run", {}).get("model", "this run")
    k = _smallest_k(utility)
    rows = []
    for family, panel, entries in utility_groups(utility, model):
        if family == RANKING and not panel.endswith(f"@{k}"):
            continue
        refs = _beside([(role, label, v) for role, label, v in entries if role in _REFERENCES])
        for role, label, v in entries:
            if role in ("model", "variant"):
                rows.append((f"{label}: {panel}", f"{v:.4f}", refs if role == "model" else ""))
    drawn = {key for key in utility if parse_utility_key(key) is not None}
    rows += [(key, format_value(key, v), "") for key, v in utility.items() if key not in drawn]
    return rows


def _beside(entries: list[tuple[str, str, float]]) -> str:
    """``non-private: pearson knn 0.830; trivial: global mean 0.882, user mean 0.878``."""
    parts: dict[str, list[str]] = {}
    for _, label, v in entries:
        head, _, name = label.rpartition(": ")
        parts.setdefault(head, []).append(f"{name} {v:.3f}")
    return "; ".join(
        f"{head}: {', '.join(x)}" if head else ", ".join(x) for head, x in parts.items()
    )


def utility_markdown(report: Mapping[str, Any]) -> list[str]:
    """The utility section of report.md: one table per family (a row per metric, a column per
    model, variant, counterpart, trivial predictor and chance), then every other value."""
    utility = report["utility"]
    model = report.get("run", {}).get("model", "this run")
    groups = utility_groups(utility, model)
    lines: list[str] = []
    for family in dict.fromkeys(f for f, _, _ in groups):
        rows = [(panel, entries) for f, panel, entries in groups if f == family]
        columns = list(dict.fromkeys(label for _, entries in rows for _, label, _ in entries))
        lines += [
            f"**{family}**",
            "",
            "| metric | " + " | ".join(columns) + " |",
            "|---|" + "---|" * len(columns),
        ]
        for panel, entries in rows:
            value = {label: v for _, label, v in entries}
            cells = [f"{value[c]:.4f}" if c in value else "" for c in columns]
            lines.append(f"| {panel} | " + " | ".join(cells) + " |")
        lines.append("")
    drawn = {key for key in utility if parse_utility_key(key) is not None}
    rest = [(key, v) for key, v in utility.items() if key not in drawn]
    if rest:
        lines += ["| value | |", "|---|---|"]
        lines += [f"| {key} | {format_value(key, v)} |" for key, v in rest]
        lines.append("")
    return lines


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
    for metric, value, beside in utility_rows(report):
        table.add_row("utility", metric, value, beside)
    p = report["privacy"]
    table.add_row("privacy", p["mechanism"], guarantee(p), "")
    if "per_user_epsilon" in p["per_user"]:
        eps = p["per_user"]["per_user_epsilon"]
        table.add_row("privacy", "ε per user", f"{eps['median']:.3g}", f"max {eps['max']:.3g}")
    if "model" in p:
        table.add_row("privacy", f"model output ({p['model']['model']})", guarantee(p["model"]), "")
    split = (report.get("evaluation") or {}).get("split")
    if split:
        table.add_row(
            "evaluation",
            f"split {split['name']}: test users / cells",
            f"{split['test_users']} / {split['test_cells']}",
            f"fingerprint {split['fingerprint'][:16]}…",
        )
    for metric, value, beside in measure_rows(p.get("measures")):
        table.add_row("privacy", metric, value, beside)
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


def evaluation_markdown(report: Mapping[str, Any]) -> list[str]:
    """How the test set was made and ranked (the report's `evaluation` block), in words."""
    ev = report.get("evaluation") or {}
    lines = []
    if "split" in ev:
        sp = ev["split"]
        params = ", ".join(f"{k} {v}" for k, v in sp["params"].items())
        lines += [
            f"Test set: split **{sp['name']}** ({params or 'no parameters'}; seed {sp['seed']}): "
            f"{sp['test_users']} test users, {sp['test_cells']} test cells, "
            f"{sp['released_training_cells']} ratings released for training"
            + (f", {sp['set_aside_cells']} set aside" if sp["set_aside_cells"] else "")
            + ("; each test user's fold left out of her answers" if sp["fold_left_out"] else "")
            + f". Fingerprint (SHA-256 of the test cells and the seed): `{sp['fingerprint']}`.",
            "",
        ]
    if "ranking" in ev:
        r = ev["ranking"]
        sample = (
            f"her test items and {r['negatives']} items she never rated, drawn per user "
            f"(sample SHA-256 `{r['sample_sha256'][:16]}…`)"
            if r["candidates"] == "sampled"
            else "every item she has not rated in training (full ranking)"
        )
        lines += [
            f"Ranking: {r['ranked_users']} test users ranked over {sample}, "
            f"{r['mean_candidates']:.0f} candidates on average; relevant = a withheld rating "
            f"≥ {r['relevance_threshold']:g}; K = {', '.join(map(str, r['k']))}; "
            f"{r['users_without_relevant_item']} test users without a relevant item not "
            "ranked.",
            "",
        ]
    return lines


__all__ = [
    "evaluation_markdown",
    "format_value",
    "guarantee",
    "headline_text",
    "markdown",
    "summary_table",
    "utility_markdown",
    "utility_rows",
]
