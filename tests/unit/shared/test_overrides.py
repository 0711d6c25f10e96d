"""`KEY=VALUE` overrides (`privrec sim --set`, the sweep's axes): typed and validated exactly
like the TOML file (issue 26, item 1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from privrec.shared.config import ExperimentConfig
from privrec.shared.errors import ConfigError
from privrec.shared.overrides import (
    override,
    override_texts,
    parse_assignment,
    parse_value,
    split_values,
)
from privrec.sim import cli

QUICKSTART = Path(__file__).parents[3] / "configs" / "quickstart.toml"


def test_parse_value_reads_toml_and_bare_words() -> None:
    """Numbers, booleans, quoted strings and arrays are TOML's; a bare word is a string."""
    assert parse_value("2") == 2 and isinstance(parse_value("2"), int)
    assert parse_value("0.5") == 0.5
    assert parse_value("true") is True
    assert parse_value('"blip"') == "blip"
    assert parse_value("blip") == "blip"
    assert parse_value('["rpt_bayes", "rpt_spectral"]') == ["rpt_bayes", "rpt_spectral"]
    assert parse_value("True") == "True"  # not TOML: a string, which a bool key then refuses


def test_split_values_keeps_arrays_and_quotes_whole() -> None:
    """Commas inside brackets or quotes do not split; an empty text has no values."""
    assert split_values("0.5,1, 2") == ["0.5", "1", "2"]
    assert split_values('["a","b"],["c"]') == ['["a","b"]', '["c"]']
    assert split_values('"x,y",z') == ['"x,y"', "z"]
    assert split_values("") == []
    assert split_values("   ") == []


def test_override_sets_typed_values_and_params() -> None:
    """A section key and a mechanism parameter, as the file would set them."""
    config = override_texts(
        ExperimentConfig(),
        ["mechanism.params.epsilon=2", "model.k=50", "mechanism.name=blip", "model.clip=false"],
    )
    assert config.mechanism.name == "blip"
    assert config.mechanism.params == {"epsilon": 2}
    assert config.model.k == 50
    assert config.model.clip is False


def test_override_keeps_the_files_other_params() -> None:
    """An override of one parameter leaves the others of the file's table in place."""
    base = ExperimentConfig.from_dict({"mechanism": {"params": {"sigma_max": 2, "beta_max": 10}}})
    config = override(base, {"mechanism.params.sigma_max": 0.5})
    assert config.mechanism.params == {"sigma_max": 0.5, "beta_max": 10}
    assert base.mechanism.params == {"sigma_max": 2, "beta_max": 10}  # not mutated


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("model.kk=3", "model.kk: unknown key"),
        ("modle.k=3", "modle.k: unknown section [modle]"),
        ("model.k=abc", "model.k: expected int, got 'abc'"),
        ("model.k=2.5", "model.k: expected int, got 2.5"),
        ("model.clip=True", "model.clip: expected bool, got 'True'"),
        ("data.n_folds=1", "data.n_folds: must be an int >= 2, got 1"),
        ("data.n_folds.x=1", "data.n_folds.x: data.n_folds is not a table"),
        ("model.k", "--set: expected KEY=VALUE"),
        ("=3", "--set: expected KEY=VALUE"),
    ],
)
def test_override_refuses_what_the_file_refuses(text: str, message: str) -> None:
    """Each bad key or value names the key and echoes the value, as a TOML file would."""
    with pytest.raises(ConfigError, match="^" + message.replace("[", r"\[").replace("(", r"\(")):
        override_texts(ExperimentConfig(), [text])


def test_parse_assignment_splits_at_the_first_equals() -> None:
    """A value may itself hold "=" (a TOML inline table)."""
    assert parse_assignment("mechanism.params={ epsilon = 1 }") == (
        "mechanism.params",
        "{ epsilon = 1 }",
    )


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("model.kk=3", "model.kk: unknown key"),
        ("model.k=x", "model.k: expected int, got 'x'"),
        ("mechanism.params.sigma_maxx=1", "sigma_maxx"),
        ("mechanism.params.sigma_max=-1", "sigma_max"),
    ],
)
def test_cli_sim_set_bad_input_is_one_line_and_writes_nothing(
    setting: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`privrec sim --set` with an unknown key or a bad value: one error line naming it,
    status 2, and no run directory (the mechanism's own parameters are checked before the run
    starts, like the file's)."""
    out = tmp_path / "run"
    argv = ["sim", "--config", str(QUICKSTART), "--set", setting, "--out", str(out)]
    assert cli.main([*argv, "--launcher", "inprocess", "--mqtt", "none"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("privrec: error: ") and message in err
    assert err.count("\n") == 1
    assert not out.exists()
