"""Contract suite every attack passes (STYLE item 18), plus the registry."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from privrec.adversary.attacks import ATTACKS, Attack, make_attack
from privrec.adversary.observations import Observations
from privrec.shared.errors import ConfigError, NotFittedError, ValidationError


class AttackContract:
    """Subclasses list attacks (fast settings) that run on the σ_max = 1, β_max = 10 release."""

    __test__ = False

    def make_attacks(self) -> list[Attack]:
        raise NotImplementedError

    def test_declares_itself(self) -> None:
        """name is registered, knowledge is one non-empty line, and RPT is supported."""
        for attack in self.make_attacks():
            assert ATTACKS[attack.name] is type(attack)
            assert attack.knowledge and "\n" not in attack.knowledge
            assert "rpt" in attack.applies_to

    def test_output_before_fit_raises(self) -> None:
        """output() before fit() raises NotFittedError."""
        for attack in self.make_attacks():
            with pytest.raises(NotFittedError):
                attack.output()

    def test_covers_exactly_the_filled_cells(self, disguised) -> None:  # type: ignore[no-untyped-def]
        """One finite estimate per filled cell of every observed user, nothing else."""
        obs = disguised(1.0, 10).observations
        for attack in self.make_attacks():
            out = attack.fit(obs).output()
            assert out.attack == attack.name
            assert set(out.per_user) == set(obs.profiles)
            for uid, est in out.per_user.items():
                np.testing.assert_array_equal(est.indices, obs.profiles[uid].indices)
                assert est.values.shape == est.indices.shape
                assert np.all(np.isfinite(est.values))

    def test_same_input_same_output(self, disguised) -> None:  # type: ignore[no-untyped-def]
        """Fitting twice gives bit-identical outputs (no hidden randomness)."""
        obs = disguised(1.0, 10).observations
        for a, b in zip(self.make_attacks(), self.make_attacks(), strict=True):
            out_a, out_b = a.fit(obs).output(), b.fit(obs).output()
            for uid in out_a.per_user:
                np.testing.assert_array_equal(
                    out_a.per_user[uid].values, out_b.per_user[uid].values
                )

    def test_rejects_other_mechanisms(self, disguised) -> None:  # type: ignore[no-untyped-def]
        """An attack refuses releases of a mechanism it does not apply to."""
        obs = disguised(1.0, 10).observations
        other = Observations(
            dataclasses.replace(obs.run_config, mechanism_name="jlt"), obs.profiles
        )
        for attack in self.make_attacks():
            with pytest.raises(ValidationError) as info:
                attack.fit(other)
            assert info.value.field == "run_config.mechanism"


class TestRptAttacks(AttackContract):
    __test__ = True

    def make_attacks(self) -> list[Attack]:
        return [
            make_attack("rpt_spectral"),
            make_attack("rpt_bayes", n_iter=2),
            make_attack("rpt_fake_detection", n_iter=2, popularity="observed"),
        ]


def test_registry_names_every_attack() -> None:
    """ATTACKS maps each class's name to it."""
    assert set(ATTACKS) == {
        "rpt_spectral",
        "rpt_bayes",
        "rpt_fake_detection",
        "second_order_reconstruction",
    }
    assert all(cls.name == name for name, cls in ATTACKS.items())


@pytest.mark.parametrize(
    ("name", "params", "needle"),
    [
        ("nope", {}, "unknown attack 'nope'"),
        ("rpt_spectral", {"max_rank": 0}, "max_rank"),
        ("rpt_bayes", {"bogus": 1}, "bogus"),
        ("rpt_fake_detection", {"popularity": "psychic"}, "popularity"),
    ],
)
def test_make_attack_errors_name_the_problem(name: str, params: dict, needle: str) -> None:  # type: ignore[type-arg]
    """Unknown attacks and bad parameters are ConfigErrors that say what is wrong."""
    with pytest.raises(ConfigError, match=needle):
        make_attack(name, **params)
