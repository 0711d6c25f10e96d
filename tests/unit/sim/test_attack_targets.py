"""Sampled attack targets (`[adversary] targets`, issue 28 item 2).

The attacks read every release and output estimates only for the sampled targets; the default
keeps the theses' protocol (every user attacked) up to ML-1M's size.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from privrec.adversary.attacks import make_attack
from privrec.adversary.attacks.base import AttackOutput, PackedEstimates, UserEstimate
from privrec.adversary.knowledge import ATTACK_TARGETS, KNOWLEDGE_DIR, AdversaryKnowledge
from privrec.adversary.observations import Observations
from privrec.shared.config import ExperimentConfig
from privrec.shared.data import make_synthetic
from privrec.shared.errors import ConfigError, DataError
from privrec.shared.mechanisms.base import Profile
from privrec.shared.mechanisms.rpt import RandomizedPerturbation
from privrec.shared.population import THESIS_PROTOCOL_USERS
from privrec.shared.seeding import rng_for
from privrec.sim.auxiliary import SAMPLED_TARGETS, attack_target_rows, auxiliary_rows
from privrec.sim.report import attack_target_facts
from tests.run_configs import make_run_config


def _config(targets: int = 0, seed: int = 0, **adversary: object) -> ExperimentConfig:
    config = ExperimentConfig().replace("run", seed=seed)
    return config.replace("adversary", targets=targets, **adversary)


def test_default_attacks_every_user_up_to_ml_1m_size() -> None:
    """The theses' protocol is the default for paper-sized data: no sample, no report line."""
    for n in (943, THESIS_PROTOCOL_USERS):
        assert attack_target_rows(_config(), n) is None
        assert attack_target_facts(_config(), n) == {}


def test_default_samples_above_ml_1m_size() -> None:
    n = 50_000
    rows = attack_target_rows(_config(), n)
    assert rows is not None
    assert rows.size == SAMPLED_TARGETS == np.unique(rows).size
    assert np.all(np.diff(rows) > 0) and rows[0] >= 0 and rows[-1] < n
    facts = attack_target_facts(_config(), n)
    assert facts["attack_targets"] == SAMPLED_TARGETS
    assert "seeded sample of 10000 of the 50000 users" in facts["attack_targets_rule"]


def test_explicit_targets_are_a_seeded_uniform_sample() -> None:
    a = attack_target_rows(_config(300), 943)
    b = attack_target_rows(_config(300), 943)
    c = attack_target_rows(_config(300, seed=1), 943)
    assert a is not None and b is not None and c is not None
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert a.size == 300
    # uniform: the sample's mean row is near the middle (sd of the mean of 300 draws without
    # replacement from 0..942 is ≈ 13.3; 5 sd: false failure < 1e-6)
    assert abs(a.mean() - 471) < 5 * 13.3
    assert attack_target_rows(_config(943), 943) is None  # N >= population: everyone


def test_targets_leave_out_the_auxiliary_users() -> None:
    config = _config(200, auxiliary="popularity", auxiliary_users=600)
    rows = attack_target_rows(config, 943)
    assert rows is not None and rows.size == 200
    assert not set(rows.tolist()) & set(auxiliary_rows(943, 600, 0).tolist())
    # 343 attackable users: asking for more attacks all of them, as without `targets`
    assert attack_target_rows(_config(343, auxiliary="popularity"), 943) is None


def test_targets_must_be_a_count() -> None:
    with pytest.raises(ConfigError, match=r"adversary\.targets: must be an int >= 0"):
        _config(-1)


def test_knowledge_carries_the_targets(tmp_path: Path) -> None:
    AdversaryKnowledge(attack_targets=("3", "17")).write(tmp_path)
    assert AdversaryKnowledge.read(tmp_path).attack_targets == ("3", "17")
    AdversaryKnowledge().write(tmp_path)  # a later run without sampling leaves no stale list
    assert AdversaryKnowledge.read(tmp_path).attack_targets is None
    (tmp_path / KNOWLEDGE_DIR / ATTACK_TARGETS).write_text('[3, "17"]')
    with pytest.raises(DataError, match=r"attack_targets\.json: malformed"):
        AdversaryKnowledge.read(tmp_path)


def _rpt_observations(n_users: int, targets: tuple[str, ...] | None) -> Observations:
    data = make_synthetic(n_users, 60, density=0.2, seed=3)
    mech = RandomizedPerturbation()
    profiles = {}
    for u in range(data.n_users):
        items, ratings = data.user_row(u)
        uid = str(int(data.user_ids[u]))
        profile = Profile(items.astype(np.int64), ratings.astype(np.float64), 60)
        profiles[uid] = mech.release(profile, rng_for(3, "user", uid, "rpt"))
    return Observations(
        make_run_config("rpt", mech.public_params(), 60),
        profiles,
        knowledge=AdversaryKnowledge(attack_targets=targets),
    )


@pytest.mark.parametrize("attack", ["rpt_spectral", "rpt_bayes"])
def test_an_attack_reads_everyone_and_outputs_the_targets(attack: str) -> None:
    """The targets' estimates are those of the unrestricted fit, bit for bit (the fit saw
    every release), and nobody else's is output."""
    everyone = make_attack(attack).fit(_rpt_observations(120, None)).output()
    obs = _rpt_observations(120, ("7", "42", "99"))
    assert list(obs.targets()) == ["7", "42", "99"]
    assert len(obs.profiles) == 120
    sampled = make_attack(attack).fit(obs).output()
    assert list(sampled.per_user) == ["7", "42", "99"]
    for uid in sampled.per_user:
        assert np.array_equal(sampled.per_user[uid].indices, everyone.per_user[uid].indices)
        assert np.array_equal(sampled.per_user[uid].values, everyone.per_user[uid].values)
    assert sampled.diagnostics == everyone.diagnostics


def test_packed_subset_equals_the_rows_it_takes() -> None:
    packed = PackedEstimates.of(
        {
            "1": UserEstimate(np.array([0, 4]), np.array([0.5, -1.0])),
            "2": UserEstimate(np.array([1]), np.array([2.0])),
            "3": UserEstimate(np.array([], dtype=np.int64), np.array([])),
        }
    )
    sub = packed.subset(["3", "1"])
    assert list(sub) == ["3", "1"]
    assert sub["1"].indices.tolist() == [0, 4] and sub["1"].values.tolist() == [0.5, -1.0]
    assert sub["3"].indices.size == 0


def test_outputs_keyed_by_labels_are_not_restricted() -> None:
    """A membership output is keyed by candidate labels, not attacked users: left whole."""
    from privrec.adversary.attacks.base import restrict_to_targets

    out = AttackOutput(
        "membership_inference",
        "membership",
        "k",
        {"candidate-001": UserEstimate(np.array([1]), np.array([3.0]))},
    )
    assert restrict_to_targets(out, frozenset({"5"})) is out


def test_a_run_scores_its_attacks_on_the_sampled_targets(tmp_path: Path) -> None:
    """End to end (in-process): the live output holds the targets only, the referee scores
    them, the population section says so, and replay from the transcript agrees."""
    from privrec.adversary.replay import load_output, replay
    from privrec.sim.run import SimOptions, simulate

    config = ExperimentConfig.from_dict(
        {
            "data": {"dataset": "synthetic", "synthetic_users": 150, "synthetic_items": 80},
            "model": {"k": 10, "baseline": False},
            "adversary": {"attacks": ["rpt_spectral"], "targets": 40},
        }
    )
    out = tmp_path / "run"
    report = simulate(config, SimOptions(out_dir=out, launcher="inprocess", mqtt="none"))
    assert report["population"]["attack_targets"] == 40
    live = load_output(out / "adversary" / "live" / "rpt_spectral.npz")
    assert len(live.per_user) == 40
    metrics = report["attacks"][0]["metrics"]
    assert 0 < metrics["n_users"] <= 40
    again = replay(out, ["rpt_spectral"], tmp_path / "replay")["rpt_spectral"]
    assert list(again.per_user) == list(live.per_user)
