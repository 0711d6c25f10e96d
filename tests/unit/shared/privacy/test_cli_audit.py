"""Tests of `privrec audit` (sim.cli_audit)."""

from __future__ import annotations

import argparse
import json

import pytest

from privrec.shared.errors import ConfigError
from privrec.sim.cli_audit import add_audit_command, parse_params, run_audit


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="privrec")
    add_audit_command(p.add_subparsers(dest="command"))
    return p


def test_parse_params_toml_literals() -> None:
    """Values are TOML literals; bare words stay strings."""
    got = parse_params(
        ["epsilon=2", "delta=1e-3", "relation=add-remove", "flag=true", 'name="x y"', "grid=[1, 2]"]
    )
    assert got == {
        "epsilon": 2,
        "delta": 1e-3,
        "relation": "add-remove",
        "flag": True,
        "name": "x y",
        "grid": [1, 2],
    }


@pytest.mark.parametrize("bad", [["epsilon"], ["=3"], ["a=1", "a=2"]])
def test_parse_params_errors(bad: list[str]) -> None:
    """Malformed --param values are ConfigErrors naming --param."""
    with pytest.raises(ConfigError, match="--param"):
        parse_params(bad)


def test_audit_command_json(capsys: pytest.CaptureFixture[str]) -> None:
    """`privrec audit oue --param epsilon=1 --json` prints the result and exits 0."""
    args = parser().parse_args(
        [
            "audit",
            "oue",
            "--param",
            "epsilon=1",
            "--samples",
            "4000",
            "--n-items",
            "10",
            "--seed",
            "3",
            "--json",
        ]
    )
    assert args.func is run_audit
    assert args.func(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mechanism"] == "oue" and out["epsilon_claimed"] == 1.0
    assert out["n_samples"] == 4000 and out["confidence"] == 0.999 and out["seed"] == 3
    assert out["epsilon_lcb"] <= 1.0 and out["consistent"] is True


def test_audit_command_table(capsys: pytest.CaptureFixture[str]) -> None:
    """Without --json a rich table shows ε claimed, δ, ε_lcb, samples, confidence, event."""
    args = parser().parse_args(
        [
            "audit",
            "blip",
            "--param",
            "epsilon=2",
            "--param",
            "n_bits=64",
            "--param",
            "n_hashes=2",
            "--samples",
            "4000",
        ]
    )
    assert args.func(args) == 0
    out = capsys.readouterr().out
    for label in (
        "ε claimed",
        "δ",
        "ε_lcb",
        "samples per neighbour",
        "confidence",
        "event",
        "no violation found",
    ):
        assert label in out


@pytest.mark.parametrize("name", ["rpt", "exact_second_order"])
def test_audit_command_no_claim(name: str) -> None:
    """Mechanisms without a DP claim: one clear ConfigError line."""
    args = parser().parse_args(["audit", name])
    with pytest.raises(
        ConfigError, match=f"^mechanism {name} makes no DP claim; nothing to audit$"
    ):
        args.func(args)


def test_audit_command_unknown_parameter() -> None:
    """An unknown mechanism parameter is a ConfigError naming it."""
    args = parser().parse_args(["audit", "oue", "--param", "epsilonn=1"])
    with pytest.raises(ConfigError, match="epsilonn"):
        args.func(args)
