"""Every ready-made scenario in configs/ loads, names registered attacks that apply to its
mechanism, and asks for side knowledge its model and mechanism can serve."""

from __future__ import annotations

from pathlib import Path

import pytest

from privrec.adversary.attacks import ATTACKS
from privrec.shared.config import ExperimentConfig
from privrec.sim.adversary_knowledge import check_side_knowledge

CONFIGS = sorted((Path(__file__).resolve().parents[3] / "configs").glob("*.toml"))


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_config_attacks_apply(path: Path) -> None:
    """Each listed attack is registered and applies to the config's mechanism."""
    config = ExperimentConfig.load(path)
    for name in config.adversary.attacks:
        assert name in ATTACKS, name
        assert config.mechanism.name in ATTACKS[name].applies_to, (name, config.mechanism.name)
    check_side_knowledge(config)


def test_the_attack_configs_exist() -> None:
    """The scenarios of issue 11 part B are there."""
    stems = {p.stem for p in CONFIGS}
    assert {"knn_sybil", "knn_sybil_ppcf", "rpt_attacks"} <= stems
