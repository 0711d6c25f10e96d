"""`privrec audit MECHANISM [--param k=v ...]`: black-box privacy audit of one mechanism.

Draws many releases of two neighbouring profiles, picks the best distinguishing event on one
part of the samples and bounds its privacy loss on the rest with Clopper–Pearson intervals
(`shared.privacy.audit`). Prints ε_claimed, δ, ε_lcb, ε_tight (the exact ε of the mechanism
as configured), the conformance event and its ε_config, the sample count, the confidence and
the event. Exit status 0 when no violation is found, 1 when the audit proves the claim wrong or
the implementation leaking more than its parameters allow; bad arguments raise `ConfigError`
(the CLI's one-line error, exit status 2).
"""

from __future__ import annotations

import argparse
import json
import tomllib
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
from rich.table import Table

from privrec.shared.errors import ConfigError
from privrec.shared.mechanisms import MECHANISMS, make_mechanism

if TYPE_CHECKING:
    from privrec.shared.privacy.audit import AuditResult


def parse_params(pairs: list[str]) -> dict[str, Any]:
    """`["k=v", ...]` → dict; values are TOML literals (int, float, bool, string, array).

    A bare word that is not a TOML literal is kept as a string (`--param hash=blake2b`).

    Raises:
        ConfigError: a pair without "=", an empty key, or a key given twice.
    """
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--param: expected KEY=VALUE, got {pair!r}")
        if key in out:
            raise ConfigError(f"--param: {key!r} given twice")
        try:
            value: Any = tomllib.loads(f"v = {raw.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw.strip()
        out[key] = value
    return out


def add_audit_command(subparsers: Any) -> argparse.ArgumentParser:
    """Register `audit` on an argparse subparsers object; the handler is set as `func`."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "audit",
        help="black-box audit of a mechanism's claimed epsilon",
        description=(
            "Release two neighbouring profiles many times, choose the best distinguishing "
            "event on part of the samples, and report a Clopper-Pearson lower confidence "
            "bound eps_lcb on the privacy loss from the rest. eps_lcb > eps_claimed proves "
            "the claim wrong (exit status 1)."
        ),
    )
    p.add_argument("mechanism", help=f"mechanism name ({', '.join(sorted(MECHANISMS))})")
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a public parameter of the mechanism (repeatable; TOML literal values)",
    )
    p.add_argument(
        "--samples",
        type=int,
        default=None,
        metavar="N",
        help="releases of each neighbour (default: enough to catch the mechanism's 2x twin "
        "at its config's defaults, e.g. blip 50000, jlt 150000, oue 100000)",
    )
    p.add_argument(
        "--method",
        choices=("auto", "learned"),
        default="auto",
        help="auto: the mechanism's likelihood-ratio statistic when it has one (default); "
        "learned: learn a linear statistic from samples",
    )
    p.add_argument(
        "--confidence",
        type=float,
        default=0.999,
        metavar="C",
        help="probability that eps_lcb is a valid lower bound (default 0.999)",
    )
    p.add_argument("--seed", type=int, default=0, metavar="S", help="seed (default 0)")
    p.add_argument(
        "--n-items",
        type=int,
        default=100,
        metavar="M",
        help="catalogue size of the neighbouring profiles (default 100)",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run_audit)
    return p


def run_audit(args: argparse.Namespace) -> int:
    """Handler of `privrec audit`.

    Returns:
        0 if ε_lcb ≤ ε_claimed, 1 if the audit found a violation.

    Raises:
        ConfigError: unknown mechanism or parameter, a mechanism without a DP claim, or a bad
            option value.
    """
    # imported here: the audit's statistics import scipy.stats and dp-accounting (≈ 1.4 s),
    # which every other `privrec` command would otherwise pay at start-up
    from privrec.shared.privacy.audit import audit, default_samples

    if args.n_items < 2:
        raise ConfigError(f"--n-items must be >= 2, got {args.n_items!r}")
    mech = make_mechanism(args.mechanism, parse_params(args.param))
    stderr = Console(stderr=True)
    kwargs = {
        "n_samples": args.samples,
        "confidence": args.confidence,
        "seed": args.seed,
        "n_items": args.n_items,
        "method": args.method,
    }
    if args.json:
        result = audit(mech, **kwargs)
        print(json.dumps(result.to_dict(), indent=2, default=float, ensure_ascii=False))
    else:
        columns = ("{task.description}", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=stderr, transient=True) as bar:
            total = 2 * (args.samples or default_samples(mech))
            task = bar.add_task(f"auditing {mech.name}", total=total)
            result = audit(
                mech, progress=lambda done, _t: bar.update(task, completed=done), **kwargs
            )
        Console().print(result_table(result))
    return 0 if result.consistent and result.matches_parameters else 1


def result_table(result: AuditResult) -> Table:
    """The audit result as a rich table."""
    if not result.consistent:
        verdict = "[bold red]VIOLATION: eps_lcb > eps_claimed[/]"
    elif not result.matches_parameters:
        verdict = "[bold red]VIOLATION: leaks more than its parameters allow[/]"
    else:
        verdict = "[green]no violation found[/]"

    def fmt(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.4g}"

    table = Table(title=f"privacy audit of {result.mechanism}", show_header=False)
    table.add_column("", style="bold")
    table.add_column("")
    rows = [
        ("parameters", json.dumps(result.params, default=str)),
        ("ε claimed", f"{result.epsilon_claimed:.4g}"),
        ("δ", f"{result.delta:.3g}"),
        ("ε tight (as configured)", fmt(result.epsilon_tight)),
        ("ε lower bound (ε_lcb)", f"{result.epsilon_lcb:.4g}"),
        ("ε point estimate", f"{result.epsilon_hat:.4g}"),
        ("statistic", result.statistic),
        ("samples per neighbour", f"{result.n_samples} ({result.n_evaluation} evaluated)"),
        ("confidence", f"{result.confidence:g}"),
        ("neighbours", result.neighbours),
        ("event", result.event),
        ("conformance event", result.conformance_event or "n/a"),
        ("  ε_lcb on it", fmt(result.epsilon_lcb_conformance)),
        ("  ε_config on it (honest maximum)", fmt(result.epsilon_event_configured)),
        ("seed", str(result.seed)),
        ("verdict", verdict),
    ]
    for k, v in rows:
        table.add_row(k, v)
    return table


__all__ = ["add_audit_command", "parse_params", "result_table", "run_audit"]
