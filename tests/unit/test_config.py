"""Experiment config: defaults, round trip, and errors that name the key."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from privrec.shared.config import ExperimentConfig
from privrec.shared.errors import ConfigError


def test_config_defaults_round_trip_through_toml() -> None:
    """The resolved TOML reads back to the same config."""
    c = ExperimentConfig()
    assert ExperimentConfig.from_dict(tomllib.loads(c.to_toml())) == c


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        ({"model": {"kk": 1}}, "model.kk: unknown key"),
        ({"modle": {}}, "unknown section [modle]"),
        ({"model": {"k": "ten"}}, "model.k: expected int"),
        ({"model": {"k": 0}}, "model.k: must be an int >= 1, got 0"),
        ({"run": {"seed": -1}}, "run.seed"),
        ({"control": {"mqtt": "tcp://x"}}, "control.mqtt"),
        ({"adversary": {"auxiliary": "all"}}, "adversary.auxiliary"),
        (
            {"adversary": {"auxiliary": "popularity", "outside_users": 10}},
            "adversary.outside_users: the auxiliary profiles come from one place",
        ),
        ({"data": {"n_folds": 1}}, "data.n_folds"),
    ],
)
def test_config_errors_name_the_key(raw: dict, needle: str) -> None:
    """A bad key or value raises ConfigError whose message names it."""
    with pytest.raises(ConfigError) as info:
        ExperimentConfig.from_dict(raw)
    assert needle in str(info.value)


def test_config_load_reports_file_problems(tmp_path: Path) -> None:
    """Missing files and invalid TOML name the file."""
    with pytest.raises(ConfigError, match="not found"):
        ExperimentConfig.load(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[run\nseed=1")
    with pytest.raises(ConfigError, match=r"bad\.toml: not valid TOML"):
        ExperimentConfig.load(bad)


def test_config_mechanism_params_are_a_table(tmp_path: Path) -> None:
    """[mechanism.params] is read as a table and written back."""
    p = tmp_path / "c.toml"
    p.write_text('[mechanism]\nname = "rpt"\n[mechanism.params]\nsigma_max = 1.0\nbeta_max = 5\n')
    c = ExperimentConfig.load(p)
    assert c.mechanism.params == {"sigma_max": 1.0, "beta_max": 5}
    assert "[mechanism.params]" in c.to_toml()


def test_config_evaluation_test_users() -> None:
    """[evaluation] test_users: 0 by default (every user), an int >= 0 otherwise."""
    assert ExperimentConfig().evaluation.test_users == 0
    sampled = ExperimentConfig.from_dict({"evaluation": {"test_users": 50}})
    assert sampled.evaluation.test_users == 50
    with pytest.raises(ConfigError, match=r"evaluation.test_users: must be an int >= 0"):
        ExperimentConfig.from_dict({"evaluation": {"test_users": -1}})
