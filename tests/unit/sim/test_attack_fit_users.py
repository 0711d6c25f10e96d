"""Attacks fitted on a sample of users (`[adversary] fit_users`, issue 28 item 3).

Above ML-1M's size the attacks fit their population-level parameters on the releases of a
seeded sample of users that holds every attack target; up to it (and whenever the targets are
every user, or an attack is scored on other users than those it reads) they fit on everyone.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from privrec.adversary.attacks import make_attack
from privrec.adversary.knowledge import FIT_USERS, KNOWLEDGE_DIR, AdversaryKnowledge
from privrec.adversary.observations import Observations
from privrec.adversary.replay import observations_from_records
from privrec.shared.config import ExperimentConfig
from privrec.shared.data import make_synthetic
from privrec.shared.errors import ConfigError, DataError
from privrec.shared.mechanisms.base import Profile
from privrec.shared.mechanisms.rpt import RandomizedPerturbation
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.seeding import rng_for
from privrec.shared.serde import payload_to_proto
from privrec.sim.auxiliary import (
    SAMPLED_FIT_USERS,
    SAMPLED_TARGETS,
    attack_fit_rows,
    attack_target_rows,
    auxiliary_rows,
)
from privrec.sim.report import attack_target_facts
from tests.run_configs import make_run_config


def _config(**adversary: object) -> ExperimentConfig:
    return ExperimentConfig().replace("adversary", **adversary)


def test_no_sample_up_to_ml_1m_size_or_without_sampled_targets() -> None:
    """Paper-sized data, every user a target, or a fit sample as large as the population: every
    release is read (the theses' protocol and every published figure)."""
    assert attack_fit_rows(_config(), 6040) is None
    assert attack_fit_rows(_config(targets=100), 943) is None  # fit_users 0: everyone here
    assert attack_fit_rows(_config(targets=50_000), 50_000) is None  # every user a target
    assert attack_fit_rows(_config(fit_users=50_000), 50_000) is None
    assert "attack_fit_users" not in attack_target_facts(_config(targets=100), 943)


def test_default_sample_above_ml_1m_holds_every_target() -> None:
    n = 50_000
    rows, targets = attack_fit_rows(_config(), n), attack_target_rows(_config(), n)
    assert rows is not None and targets is not None
    assert rows.size == SAMPLED_FIT_USERS and targets.size == SAMPLED_TARGETS
    assert np.all(np.diff(rows) > 0) and np.all(np.isin(targets, rows))
    again = attack_fit_rows(_config(), n)
    other = attack_fit_rows(ExperimentConfig().replace("run", seed=1), n)
    assert again is not None and other is not None
    assert np.array_equal(rows, again) and not np.array_equal(rows, other)
    # the users beside the targets are uniform over the rest: their mean row is near the middle
    # (sd of the mean of 10,000 draws without replacement from 40,000 rows ≈ 100; 6 sd: false
    # failure < 1e-8)
    rest = np.setdiff1d(rows, targets)
    assert abs(rest.mean() - n / 2) < 6 * 100
    facts = attack_target_facts(_config(), n)
    assert facts["attack_fit_users"] == SAMPLED_FIT_USERS
    assert "sample of 20000 of the 50000 users" in facts["attack_fit_users_rule"]
    assert "the attacks are scored on these users" in facts["attack_targets_rule"]


def test_explicit_sample_keeps_the_targets_and_auxiliary_users() -> None:
    config = _config(targets=50, fit_users=120, auxiliary="popularity", auxiliary_users=30)
    rows, targets = attack_fit_rows(config, 943), attack_target_rows(config, 943)
    assert rows is not None and targets is not None
    assert rows.size == 120
    assert np.all(np.isin(targets, rows)) and np.all(np.isin(auxiliary_rows(943, 30, 0), rows))
    small = attack_fit_rows(_config(targets=50, fit_users=10), 943)  # never fewer than targets
    assert small is not None and small.size == 50


def test_attacks_scored_on_other_users_read_everyone() -> None:
    """The kNN sybil attack and membership inference are scored on users other than those
    whose releases they read: with either in the run, no fit sample."""
    assert not make_attack("knn_sybil").fits_on_sample
    assert not make_attack("membership_inference").fits_on_sample
    assert make_attack("rpt_bayes").fits_on_sample
    config = _config(attacks=["rpt_spectral", "knn_sybil"])
    assert attack_fit_rows(config, 50_000) is None


def test_fit_users_must_be_a_count() -> None:
    with pytest.raises(ConfigError, match=r"adversary\.fit_users: must be an int >= 0"):
        _config(fit_users=-1)


def test_knowledge_carries_the_fit_sample(tmp_path: Path) -> None:
    AdversaryKnowledge(attack_targets=("3",), fit_users=("3", "9")).write(tmp_path)
    assert AdversaryKnowledge.read(tmp_path).fit_users == ("3", "9")
    AdversaryKnowledge().write(tmp_path)
    assert AdversaryKnowledge.read(tmp_path).fit_users is None
    (tmp_path / KNOWLEDGE_DIR / FIT_USERS).write_text("{}")
    with pytest.raises(DataError, match=r"attack_fit_users\.json: malformed"):
        AdversaryKnowledge.read(tmp_path)


def _records(n_users: int) -> tuple[list[pb.TranscriptRecord], RandomizedPerturbation]:
    data = make_synthetic(n_users, 60, density=0.2, seed=3)
    mech = RandomizedPerturbation()
    records = []
    for u in range(data.n_users):
        items, ratings = data.user_row(u)
        uid = str(int(data.user_ids[u]))
        profile = Profile(items.astype(np.int64), ratings.astype(np.float64), 60)
        rel = pb.Release(user_id=uid, purpose=pb.PURPOSE_PROFILE)
        payload_to_proto(mech.payload_field, mech.release(profile, rng_for(3, "user", uid)), rel)
        records.append(
            pb.TranscriptRecord(seq=u + 1, method="SubmitStream", request=rel.SerializeToString())
        )
    return records, mech


def test_the_adversary_keeps_and_fits_only_the_sample() -> None:
    """With a fit sample the observations hold the sample's releases only, and an attack's
    estimates for the targets are those of a fit on exactly those releases."""
    records, mech = _records(120)
    run_config = make_run_config("rpt", mech.public_params(), 60)
    sample = tuple(str(u) for u in range(0, 120, 3))
    knowledge = AdversaryKnowledge(attack_targets=("3", "42"), fit_users=sample)
    obs = observations_from_records(records, run_config, knowledge=knowledge)
    assert list(obs.profiles) == sorted(sample)
    out = make_attack("rpt_bayes").fit(obs).output()
    assert list(out.per_user) == ["3", "42"]
    alone = Observations(
        run_config,
        {u: obs.profiles[u] for u in sorted(sample)},  # the canonical (user-id) order
        knowledge=AdversaryKnowledge(attack_targets=("3", "42")),
    )
    ref = make_attack("rpt_bayes").fit(alone).output()
    for uid in ("3", "42"):
        assert np.array_equal(out.per_user[uid].values, ref.per_user[uid].values)
    everyone = observations_from_records(records, run_config)
    assert len(everyone.profiles) == 120
