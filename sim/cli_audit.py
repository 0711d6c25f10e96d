"""`privrec audit MECHANISM [--param k=v ...]`: black-box privacy audit of one mechanism.

Draws many releases of two neighbouring profiles, picks the best distinguishing event on one
part of the samples and bounds its privacy loss on the rest with Clopper–Pearson intervals
(`shared.privacy.audit`). Prints ε_claimed, δ, ε_lcb, the sample count, the confidence and the
event. Exit status 0 when ε_lcb ≤ ε_claimed, 1 when the audit proves the claim wrong; bad
arguments raise `ConfigError` (the CLI's one-line error, exit status 2).
"""

from __future__ import annotations

import argparse
import json
import tomllib
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
from rich.table import Table

from privrec.shared.errors import ConfigError
from privrec.shared.mechanisms import MECHANISMS, make_mechanism
from privrec.shared.privacy.audit import AuditResult, audit


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
        default=100_000,
        metavar="N",
        help="releases of each neighbour (default 100000)",
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
    if args.n_items < 2:
        raise ConfigError(f"--n-items must be >= 2, got {args.n_items!r}")
    mech = make_mechanism(args.mechanism, parse_params(args.param))
    stderr = Console(stderr=True)
    kwargs = {
        "n_samples": args.samples,
        "confidence": args.confidence,
        "seed": args.seed,
        "n_items": args.n_items,
    }
    if args.json:
        result = audit(mech, **kwargs)
        print(json.dumps(result.to_dict(), indent=2, default=float, ensure_ascii=False))
    else:
        columns = ("{task.description}", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=stderr, transient=True) as bar:
            task = bar.add_task(f"auditing {mech.name}", total=2 * args.samples)
            result = audit(
                mech, progress=lambda done, _t: bar.update(task, completed=done), **kwargs
            )
        Console().print(result_table(result))
    return 0 if result.consistent else 1


def result_table(result: AuditResult) -> Table:
    """The audit result as a rich table."""
    verdict = (
        "[green]no violation found[/]"
        if result.consistent
        else "[bold red]VIOLATION: eps_lcb > eps_claimed[/]"
    )
    table = Table(title=f"privacy audit of {result.mechanism}", show_header=False)
    table.add_column("", style="bold")
    table.add_column("")
    rows = [
        ("parameters", json.dumps(result.params, default=str)),
        ("ε claimed", f"{result.epsilon_claimed:.4g}"),
        ("δ", f"{result.delta:.3g}"),
        ("ε lower bound (ε_lcb)", f"{result.epsilon_lcb:.4g}"),
        ("ε point estimate", f"{result.epsilon_hat:.4g}"),
        ("samples per neighbour", f"{result.n_samples} ({result.n_evaluation} evaluated)"),
        ("confidence", f"{result.confidence:g}"),
        ("neighbours", result.neighbours),
        ("event", result.event),
        ("seed", str(result.seed)),
        ("verdict", verdict),
    ]
    for k, v in rows:
        table.add_row(k, v)
    return table


__all__ = ["add_audit_command", "parse_params", "result_table", "run_audit"]
