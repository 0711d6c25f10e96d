"""`privrec sim --set`: the overrides reach the run and its resolved config.toml (issue 26)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from privrec.sim import cli

TINY = """
[run]
name = "tiny"
[data]
dataset = "synthetic"
synthetic_users = 60
synthetic_items = 80
[model]
k = 10
[adversary]
attacks = []
"""


def test_cli_sim_set_is_recorded_in_the_resolved_config(tmp_path: Path) -> None:
    """Each --set lands in the run's config.toml with the file's types, and the server used
    it (the report's public parameters)."""
    config = tmp_path / "tiny.toml"
    config.write_text(TINY)
    out = tmp_path / "run"
    argv = ["sim", "--config", str(config), "--out", str(out), "--launcher", "inprocess"]
    sets = ["--set", "mechanism.params.sigma_max=0.5", "--set", "model.k=7", "--set", "run.seed=3"]
    assert cli.main([*argv, "--mqtt", "none", *sets]) == 0
    resolved = tomllib.loads((out / "config.toml").read_text())
    assert resolved["mechanism"]["params"] == {"sigma_max": 0.5}
    assert resolved["model"]["k"] == 7
    assert resolved["run"]["seed"] == 3
    report = json.loads((out / "report.json").read_text())
    assert report["privacy"]["public_params"]["sigma_max"] == 0.5
    assert report["run"]["seed"] == 3
