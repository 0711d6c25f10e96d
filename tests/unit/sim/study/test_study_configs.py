"""A reproduction's list of configurations as a study (issue 26, item 5)."""

from __future__ import annotations

import pytest

from privrec.shared.config import ExperimentConfig
from privrec.sim.study.configs import study_of
from privrec.sim.study.spec import run_name


def config(name: str, mechanism: str, params: dict[str, object]) -> ExperimentConfig:
    return ExperimentConfig.from_dict(
        {
            "run": {"name": name, "seed": 3},
            "data": {"dataset": "synthetic"},
            "mechanism": {"name": mechanism, "params": params},
        }
    )


def test_study_of_zips_the_keys_that_differ_and_gives_back_the_configs() -> None:
    """The differing keys (a name, a mechanism, its whole params table) become zipped axes;
    a repeated value in one axis is fine while the rows differ; the study's runs are the
    configurations given, with their own names (hashes)."""
    configs = [
        config("a", "blip", {"epsilon": 1.0}),
        config("b", "blip", {"epsilon": 2.0}),
        config("c", "jlt", {"epsilon": 2.0}),
    ]
    spec = study_of(configs)
    assert [a.key for a in spec.zipped] == ["run.name", "mechanism.name", "mechanism.params"]
    assert spec.seeds == (3,)
    assert [r.name for r in spec.runs()] == [run_name(c) for c in configs]


def test_study_of_refuses_mixed_seeds_and_repeated_configs() -> None:
    a = config("a", "blip", {})
    with pytest.raises(ValueError, match="share a seed"):
        study_of([a, a.replace("run", seed=4)])
    with pytest.raises(ValueError, match="given twice"):
        study_of([a, config("b", "blip", {}), a])
