"""Contract suite every attack passes (STYLE item 18), plus the registry.

The suite runs each attack on the releases of the mechanism family it applies to, built here
from synthetic users exactly as clients would release them (one fixture per family: RPT,
item-set, second-order), and checks what every attack must do: declare itself and what it may
use; refuse to give output before `fit` and to attack another mechanism's releases; estimate
only for users it observed, with finite values at strictly increasing items; give bit-identical
output for the same observations; and give the same output from a replayed transcript as from
the live feed, whatever order the records arrived in.

A new attack joins by adding a case (a subclass with `__test__ = True`, its `family` and
`make_attacks()`); the cases are discovered (`tests.family_cases`), and
`test_every_registered_attack_has_a_contract_case` fails until the new attack has one.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import ClassVar

import numpy as np
import pytest

from privrec.adversary.attacks import ATTACKS, Attack, make_attack
from privrec.adversary.attacks.base import AttackOutput
from privrec.adversary.observations import Observations
from privrec.adversary.replay import observations_from_records
from privrec.adversary.sybils import SybilSettings
from privrec.shared.config import ExperimentConfig
from privrec.shared.data.synthetic import make_synthetic
from privrec.shared.errors import ConfigError, NotFittedError, ValidationError
from privrec.shared.mechanisms import make_mechanism
from privrec.shared.mechanisms.base import Profile, SparsePayload
from privrec.shared.mechanisms.completion import fit_public_model, public_ratings_matrix
from privrec.shared.population import load_population, user_id_of
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.protocol import profile_nonce
from privrec.shared.seeding import rng_for
from privrec.shared.serde import payload_to_proto
from privrec.sim.adversary_knowledge import side_knowledge_plan
from privrec.sim.sybil_offline import answer_offline
from tests.family_cases import contract_cases, family_members
from tests.run_configs import make_run_config

SEED = 5
N_PUBLIC, N_PRIVATE, N_ITEMS = 60, 40, 40


# ------------------------------------------------------------------ one fixture per family
@functools.cache
def item_set_observations(mechanism: str = "blip") -> Observations:
    """Item-set releases (BLIP by default) of synthetic users, plus the raw profiles of
    N_PUBLIC other synthetic users as the declared auxiliary set (item popularity)."""
    data = make_synthetic(N_PRIVATE, N_ITEMS, density=0.2, seed=SEED)
    params = {
        "blip": {"epsilon": 4.0, "n_bits": 64, "n_hashes": 2},
        "oue": {"epsilon": 2.0},
        "jlt": {"epsilon": 3.0, "dim": 32, "sigma_rule": "balu2016", "n_items": N_ITEMS},
    }
    mech = make_mechanism(mechanism, params.get(mechanism, {}))
    profiles = {}
    for u in range(data.n_users):
        items, ratings = data.user_row(u)
        uid = f"u{u:03d}"
        profile = Profile(items.astype(np.int64), ratings.astype(np.float64), N_ITEMS)
        profiles[uid] = mech.release(profile, rng_for(SEED, "user", uid, "release"))
    aux = make_synthetic(N_PUBLIC, N_ITEMS, density=0.2, seed=SEED + 1)
    aux = dataclasses.replace(aux, user_ids=aux.user_ids + 10_000)  # ids no release uses
    return Observations(
        make_run_config(mechanism, mech.public_params(), N_ITEMS), profiles, auxiliary=aux
    )


@functools.cache
def second_order_observations(mechanism: str = "pmc") -> Observations:
    """Public users' shared ratings and one second-order release per private user."""
    data = make_synthetic(N_PUBLIC + N_PRIVATE, N_ITEMS, rank=3, density=0.3, seed=SEED)
    rows = []
    for u in range(data.n_users):
        items, ratings = data.user_row(u)
        rows.append((f"u{u:03d}", items.astype(np.int64), ratings.astype(np.float64)))
    public = {uid: SparsePayload(N_ITEMS, i, r) for uid, i, r in rows[:N_PUBLIC]}
    model = {"k": 3, "em_iters": 2}
    csr = public_ratings_matrix(public, N_ITEMS)
    mu, V = fit_public_model(csr, rank=3, n_iter=2)
    mech = make_mechanism(mechanism, {})
    mech.bind(mu, V, **mech.public_binding(csr, mu, V))  # type: ignore[attr-defined]
    profiles = {
        uid: mech.release(Profile(i, r, N_ITEMS), rng_for(SEED, "user", uid, "release"))
        for uid, i, r in rows[N_PUBLIC:]
    }
    run_config = make_run_config(
        mechanism,
        mech.public_params(),
        N_ITEMS,
        model="two_tier_lowrank",
        model_params=model,
    )
    return Observations(run_config, profiles, public)


@functools.cache
def sybil_observations() -> Observations:
    """RPT releases with σ_max → 0 (the non-private z-score kNN of Bilge Eq 2.3) of synthetic
    users, the adversary's side knowledge (kNN targets; membership candidates in and out of
    the run) and its sybils' answers, computed as the aggregator computes them
    (`sim.sybil_offline`)."""
    config = ExperimentConfig.from_dict(
        {
            "run": {"seed": SEED},
            "data": {
                "dataset": "synthetic",
                "synthetic_users": 160,
                "synthetic_items": 60,
                "max_users": 130,
            },
            "model": {"k": 5},
            "adversary": {
                "knn_targets": 3,
                "knn_known_items": 5,
                "knn_recommend": 20,
                "membership_candidates": 6,
                "membership_known_items": 8,
                "membership_probe_items": 3,
            },
        }
    )
    data = load_population(config.data, SEED)
    knowledge, _ = side_knowledge_plan(config, data)
    mech = make_mechanism("rpt", {"sigma_max": 1e-6, "beta_max": 0})
    releases = {}
    for u in range(data.n_users):
        items, ratings = data.user_row(u)
        uid = user_id_of(data, u)
        profile = Profile(items.astype(np.int64), ratings.astype(np.float64), data.n_items)
        releases[uid] = mech.release(profile, rng_for(SEED, "user", uid, "release"))
    run_config = make_run_config("rpt", mech.public_params(), data.n_items, model_params={"k": 5})
    plan = answer_offline(
        releases, run_config, knowledge, SybilSettings.from_section(config.adversary)
    )
    return Observations(
        run_config, dict(sorted(releases.items())), knowledge=knowledge, sybils=plan
    )


def as_records(obs: Observations) -> list[pb.TranscriptRecord]:
    """The transcript a server would hold for these observations (each release verbatim)."""
    records = []
    tiers = [("public_ratings", obs.public), (obs.run_config.mechanism_name, obs.profiles)]
    for field, payloads in tiers:
        for uid, payload in payloads.items():
            rel = pb.Release(
                run_id=obs.run_config.run_id,
                user_id=uid,
                nonce=profile_nonce(),
                purpose=pb.PURPOSE_PROFILE,
            )
            payload_to_proto(field, payload, rel)
            records.append(
                pb.TranscriptRecord(
                    seq=len(records) + 1, method="SubmitStream", request=rel.SerializeToString()
                )
            )
    return records


def _same_output(a: AttackOutput, b: AttackOutput) -> None:
    assert (a.attack, a.kind, a.knowledge) == (b.attack, b.kind, b.knowledge)
    assert list(a.per_user) == list(b.per_user)
    for uid, est in a.per_user.items():
        np.testing.assert_array_equal(est.indices, b.per_user[uid].indices)
        np.testing.assert_array_equal(est.values, b.per_user[uid].values)
    assert a.diagnostics == b.diagnostics
    assert a.set_sizes == b.set_sizes


# ------------------------------------------------------------------ the contract
class AttackContract:
    """Subclasses name the mechanism family and list attacks (fast settings)."""

    __test__ = False
    family: ClassVar[str]
    """"rpt", "item-set", "rrt", "second-order" or "sybil": which fixture the attacks run on."""

    def make_attacks(self) -> list[Attack]:
        raise NotImplementedError

    @pytest.fixture
    def observations(self, disguised: Callable[[float, int], object]) -> Observations:
        if self.family == "rpt":
            return disguised(1.0, 10).observations  # type: ignore[attr-defined,no-any-return]
        if self.family == "item-set":
            return item_set_observations()
        if self.family == "item-set-jlt":
            return item_set_observations("jlt")
        if self.family == "item-set-oue":
            return item_set_observations("oue")
        if self.family == "rrt":
            return item_set_observations("rrt")
        if self.family == "sybil":
            return sybil_observations()
        return second_order_observations()

    def test_declares_itself(self, observations: Observations) -> None:
        """name is registered, knowledge is one non-empty line, the family's mechanism is
        supported."""
        for attack in self.make_attacks():
            assert ATTACKS[attack.name] is type(attack)
            assert attack.knowledge and "\n" not in attack.knowledge
            assert observations.run_config.mechanism_name in attack.applies_to

    def test_output_before_fit_raises(self) -> None:
        """output() before fit() raises NotFittedError."""
        for attack in self.make_attacks():
            with pytest.raises(NotFittedError):
                attack.output()

    def test_estimates_only_observed_users(self, observations: Observations) -> None:
        """Estimates for observed (private) users, or for the users its stated side knowledge
        names (kNN targets, membership candidates), only; finite, at strictly increasing
        items."""
        known = observations.knowledge.targets + observations.knowledge.candidates
        allowed = set(observations.profiles) | {k.label for k in known}
        for attack in self.make_attacks():
            out = attack.fit(observations).output()
            assert out.attack == attack.name and out.knowledge
            assert set(out.per_user) <= allowed
            assert out.per_user
            for est in out.per_user.values():
                assert est.values.shape == est.indices.shape
                assert np.all(np.isfinite(est.values))
                assert np.all(np.diff(est.indices) > 0)
                assert est.indices.size == 0 or (
                    est.indices[0] >= 0 and est.indices[-1] < observations.n_items
                )

    def test_same_input_same_output(self, observations: Observations) -> None:
        """Fitting twice gives bit-identical outputs (randomness only from a fixed seed)."""
        for a, b in zip(self.make_attacks(), self.make_attacks(), strict=True):
            _same_output(a.fit(observations).output(), b.fit(observations).output())

    def test_replay_equals_live(self, observations: Observations) -> None:
        """Observations decoded from the transcript give the same output whatever order the
        records arrived in (the live feed's order versus the store's)."""
        records = as_records(observations)
        shuffled = [records[i] for i in np.random.default_rng(0).permutation(len(records))]
        side = {
            "knowledge": observations.knowledge,
            "sybils": observations.sybils,
        }
        aux = observations.auxiliary
        live = observations_from_records(shuffled, observations.run_config, aux, **side)
        replayed = observations_from_records(records, observations.run_config, aux, **side)
        for a, b in zip(self.make_attacks(), self.make_attacks(), strict=True):
            _same_output(a.fit(live).output(), b.fit(replayed).output())

    def test_rejects_other_mechanisms(self, observations: Observations) -> None:
        """An attack refuses releases of a mechanism it does not apply to."""
        for attack in self.make_attacks():
            other = next(name for name in ("jlt", "rpt", "oue") if name not in attack.applies_to)
            config = dataclasses.replace(observations.run_config, mechanism_name=other)
            with pytest.raises(ValidationError) as info:
                attack.fit(Observations(config, observations.profiles, observations.public))
            assert info.value.field == "run_config.mechanism"


class TestRptAttacks(AttackContract):
    __test__ = True
    family = "rpt"

    def make_attacks(self) -> list[Attack]:
        return [
            make_attack("rpt_spectral"),
            make_attack("rpt_bayes", n_iter=2),
            make_attack("rpt_fake_detection", n_iter=2, popularity="observed"),
            make_attack("rpt_rating_recovery", n_iter=1, max_rank=5),
        ]

    def test_covers_exactly_the_filled_cells(self, observations: Observations) -> None:
        """One finite estimate per filled cell of every observed user, nothing else."""
        for attack in self.make_attacks():
            out = attack.fit(observations).output()
            assert set(out.per_user) == set(observations.profiles)
            for uid, est in out.per_user.items():
                np.testing.assert_array_equal(
                    est.indices,
                    observations.profiles[uid].indices,  # type: ignore[union-attr]
                )


class TestSecondOrderAttacks(AttackContract):
    __test__ = True
    family = "second-order"

    def make_attacks(self) -> list[Attack]:
        return [
            make_attack("second_order_reconstruction", n_folds=2),
            make_attack("second_order_signs", n_folds=2),
        ]


class TestBaluAttacksBlip(AttackContract):
    __test__ = True
    family = "item-set"

    def make_attacks(self) -> list[Attack]:
        return [
            make_attack("balu_single"),
            make_attack("balu_popularity"),
            make_attack("balu_mcmc", burn_in=20, samples=200),
            make_attack("balu_mcmc_flat", burn_in=20, samples=200),
        ]

    def test_item_set_outputs_carry_a_size_per_user(self, observations: Observations) -> None:
        """Kind "item_set", one ĉ ≥ 1 per attacked user, no auxiliary user attacked."""
        for attack in self.make_attacks():
            out = attack.fit(observations).output()
            assert out.kind == "item_set"
            assert set(out.set_sizes) == set(out.per_user) == set(observations.targets())
            assert min(out.set_sizes.values()) >= 1


class TestBaluAttacksJlt(TestBaluAttacksBlip):
    family = "item-set-jlt"


class TestOueDecoder(AttackContract):
    __test__ = True
    family = "item-set-oue"

    def make_attacks(self) -> list[Attack]:
        return [make_attack("oue_decoder")]

    def test_outputs_the_candidates_of_the_top_c(self, observations: Observations) -> None:
        """Per user: every set bit, plus her ĉ unset items of highest prior (their scores
        increasing with the prior), so the ĉ top-scored output items are the Bayes top ĉ."""
        out = self.make_attacks()[0].fit(observations).output()
        assert out.kind == "item_set" and set(out.set_sizes) == set(observations.targets())
        for uid, est in out.per_user.items():
            bits = np.asarray(observations.profiles[uid].bits)  # type: ignore[union-attr]
            set_items = np.flatnonzero(bits)
            assert np.isin(set_items, est.indices).all()
            n_unset = observations.n_items - set_items.size
            assert est.indices.size == set_items.size + min(out.set_sizes[uid], n_unset)


class TestRrtAttacks(AttackContract):
    __test__ = True
    family = "rrt"

    def make_attacks(self) -> list[Attack]:
        return [make_attack("rrt_flip_inference", n_iter=5)]

    def test_covers_exactly_the_released_cells(self, observations: Observations) -> None:
        """One probability in [0, 1] per released (rated) cell of every user."""
        out = self.make_attacks()[0].fit(observations).output()
        assert set(out.per_user) == set(observations.profiles)
        for uid, est in out.per_user.items():
            rel = observations.profiles[uid]
            np.testing.assert_array_equal(est.indices, rel.indices)  # type: ignore[union-attr]
            assert np.all((est.values >= 0) & (est.values <= 1))


class TestSybilAttacks(AttackContract):
    __test__ = True
    family = "sybil"

    def make_attacks(self) -> list[Attack]:
        return [make_attack("knn_sybil"), make_attack("membership_inference")]

    def test_needs_its_sybils(self, observations: Observations) -> None:
        """Without the sybils' record the attacks say what is missing."""
        bare = Observations(observations.run_config, observations.profiles)
        for attack in self.make_attacks():
            with pytest.raises(ValidationError) as info:
                attack.fit(bare)
            assert info.value.field == "sybils"


CONTRACT_CASES = contract_cases(AttackContract)
FAMILIES = {
    "rpt": ("rpt",),
    "item-set": ("blip", "jlt", "oue", "rrt"),
    "item-set-jlt": ("jlt",),
    "item-set-oue": ("oue",),
    "rrt": ("rrt",),
    "second-order": ("pmd", "pmc", "laplace_second_order", "exact_second_order"),
    "sybil": ("rpt", "raw"),
}


def test_every_registered_attack_has_a_contract_case() -> None:
    """An attack registered without a case here fails this test (add one above)."""
    covered = {a.name for case in CONTRACT_CASES for a in case().make_attacks()}
    assert covered == set(ATTACKS), f"no contract case for {sorted(set(ATTACKS) - covered)}"


def test_each_case_runs_on_a_family_its_attacks_apply_to() -> None:
    """A case's family fixture is one its attacks understand."""
    for case in CONTRACT_CASES:
        for attack in case().make_attacks():
            assert set(FAMILIES[case.family]) & set(attack.applies_to)


def test_item_set_fixture_is_a_valid_family() -> None:
    """The item-set fixture (for the item-set attacks) holds one BLIP release per user."""
    obs = item_set_observations()
    assert obs.run_config.mechanism_name == "blip" and len(obs.profiles) == N_PRIVATE


def test_registry_names_every_attack() -> None:
    """Every attack class of `privrec.adversary.attacks` is registered under its `name`."""
    import privrec.adversary.attacks as package

    assert family_members(package, Attack) == dict(ATTACKS.items())


@pytest.mark.parametrize(
    ("name", "params", "needle"),
    [
        ("nope", {}, "unknown attack 'nope'"),
        ("rpt_spectral", {"max_rank": 0}, "max_rank"),
        ("rpt_bayes", {"bogus": 1}, "bogus"),
        ("rpt_fake_detection", {"popularity": "psychic"}, "popularity"),
        ("balu_mcmc", {"prior": "psychic"}, "prior"),
        ("balu_mcmc_flat", {"samples": 0}, "samples"),
    ],
)
def test_make_attack_errors_name_the_problem(name: str, params: dict, needle: str) -> None:  # type: ignore[type-arg]
    """Unknown attacks and bad parameters are ConfigErrors that say what is wrong."""
    with pytest.raises(ConfigError, match=needle):
        make_attack(name, **params)
