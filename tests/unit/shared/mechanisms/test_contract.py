"""Contract suite run for every registered mechanism (STYLE item 18).

Each family lists a few configurations; every test below runs on each of them. A new mechanism
must add a family here (`test_every_registered_mechanism_has_a_contract` enforces it).
"""

from __future__ import annotations

import dataclasses
import json
import math

import dp_accounting
import numpy as np
import pytest

from privrec.shared.accounting import event_epsilon
from privrec.shared.errors import ConfigError, NotFittedError, ValidationError
from privrec.shared.mechanisms import (
    MECHANISMS,
    Blip,
    ExactSecondOrder,
    JohnsonLindenstrauss,
    LaplaceSecondOrder,
    Mechanism,
    OptimisedUnaryEncoding,
    PrivateContinuous,
    PrivateDiscrete,
    RandomizedPerturbation,
    RandomizedResponseGroups,
    RawRatings,
    SecondOrderMechanism,
    estimate_shared_h,
    fit_public_model,
    make_mechanism,
)
from privrec.shared.mechanisms.base import BitPayload, DensePayload, Payload, Profile, SparsePayload
from privrec.shared.proto.privrec.v1 import aggregator_pb2
from tests.family_cases import contract_cases

from ._helpers import (
    assert_payload_equal,
    payload_arrays,
    public_matrix,
    random_profiles,
    rngs,
)

N_ITEMS = 40
PAYLOAD_MESSAGE = {
    SparsePayload: "SparseVector",
    DensePayload: "DenseVector",
    BitPayload: "BitVector",
}
_PUBLIC = public_matrix(7, 30, N_ITEMS)
_MU, _V = fit_public_model(_PUBLIC, 3)
_H = estimate_shared_h(_PUBLIC, _MU, _V)


def _corrupt(payload: Payload) -> Payload:
    """A payload of the right wire type but the wrong shape."""
    if isinstance(payload, SparsePayload):
        return dataclasses.replace(payload, dim=payload.dim + 1)
    if isinstance(payload, DensePayload):
        return DensePayload(payload.values[:-1])
    assert isinstance(payload, BitPayload)
    return BitPayload(payload.bits[:-1])


class MechanismContract:
    __test__ = False
    cls: type[Mechanism]

    def make_mechanisms(self) -> list[Mechanism]:
        raise NotImplementedError

    def prepare(self, mech: Mechanism) -> Mechanism:
        """Attach whatever a mechanism needs besides its public parameters (the model)."""
        return mech

    def ready(self) -> list[Mechanism]:
        return [self.prepare(m) for m in self.make_mechanisms()]

    @staticmethod
    def profiles() -> list[Profile]:
        return random_profiles(11, 6, N_ITEMS, low=1, high=N_ITEMS - 1)

    def test_registered_under_its_name(self) -> None:
        """The family is in the registry and builds from an empty config."""
        assert MECHANISMS[self.cls.name] is self.cls
        assert isinstance(make_mechanism(self.cls.name, {}), self.cls)

    def test_payload_field_is_a_oneof_field_of_the_right_type(self) -> None:
        """payload_field names a Release.payload field whose message matches the payload."""
        oneof = aggregator_pb2.Release.DESCRIPTOR.oneofs_by_name["payload"]
        fields = {f.name: f.message_type.name for f in oneof.fields}
        for mech in self.ready():
            payload = mech.release(self.profiles()[0], rngs(1, 1)[0])
            assert fields[mech.payload_field] == PAYLOAD_MESSAGE[type(payload)]

    def test_same_seed_same_output(self) -> None:
        """Two releases from equal seeds are identical."""
        for mech in self.ready():
            for p, (r1, r2) in zip(
                self.profiles(), zip(rngs(3, 6), rngs(3, 6), strict=True), strict=True
            ):
                assert_payload_equal(mech.release(p, r1), mech.release(p, r2))

    def test_different_seeds_differ(self) -> None:
        """Releases of one profile vary with the seed (the mechanism is randomised)."""
        for mech in self.ready():
            p = self.profiles()[0]
            outs = [mech.release(p, r) for r in rngs(4, 8)]
            assert any(
                any(
                    not np.array_equal(x, y)
                    for x, y in zip(payload_arrays(outs[0]), payload_arrays(o), strict=True)
                )
                for o in outs[1:]
            )

    def test_release_many_matches_release(self) -> None:
        """release_many gives the same numbers as release with the same generators."""
        for mech in self.ready():
            ps = self.profiles()
            many = mech.release_many(ps, rngs(5, len(ps)))
            one = [mech.release(p, r) for p, r in zip(ps, rngs(5, len(ps)), strict=True)]
            assert len(many) == len(one)
            for a, b in zip(many, one, strict=True):
                assert_payload_equal(a, b)
            with pytest.raises(ValueError, match="generators"):
                mech.release_many(ps, rngs(5, len(ps) - 1))

    def test_estimate_many_matches_estimate(self) -> None:
        """estimate_many gives the rows of estimate, bit for bit (the server trains on it)."""
        for mech in self.ready():
            payloads = mech.release_many(self.profiles(), rngs(9, len(self.profiles())))
            rows = np.stack([mech.estimate(p, N_ITEMS) for p in payloads])
            np.testing.assert_array_equal(mech.estimate_many(payloads, N_ITEMS), rows)
            assert mech.estimate_many([], N_ITEMS).shape == (0, N_ITEMS)

    def test_public_params_round_trip(self) -> None:
        """public_params is JSON-able and cls(**public_params) is an equal mechanism."""
        for mech in self.ready():
            pp = json.loads(json.dumps(mech.public_params()))
            twin = self.prepare(type(mech)(**pp))
            assert twin.public_params() == mech.public_params()
            assert twin.privacy() == mech.privacy()
            assert twin.event() == mech.event()
            p = self.profiles()[1]
            assert_payload_equal(mech.release(p, rngs(6, 1)[0]), twin.release(p, rngs(6, 1)[0]))

    def test_unknown_parameter_is_a_config_error(self) -> None:
        """make_mechanism names the mechanism when a parameter is unknown."""
        with pytest.raises(ConfigError, match=f"mechanism.{self.cls.name}"):
            make_mechanism(self.cls.name, {"no_such_parameter": 1})

    def test_validate_accepts_own_releases(self) -> None:
        """Every release passes the server-side check."""
        for mech in self.ready():
            for p, r in zip(self.profiles(), rngs(7, 6), strict=True):
                mech.validate(mech.release(p, r), N_ITEMS)

    def test_validate_rejects_corrupted_release(self) -> None:
        """A wrong shape or a wrong wire type is rejected, naming the payload field."""
        for mech in self.ready():
            payload = mech.release(self.profiles()[0], rngs(8, 1)[0])
            with pytest.raises(ValidationError) as info:
                mech.validate(_corrupt(payload), N_ITEMS)
            assert info.value.field.startswith(mech.payload_field)
            wrong = (
                DensePayload(np.zeros(N_ITEMS))
                if not isinstance(payload, DensePayload)
                else BitPayload(np.zeros(N_ITEMS, dtype=bool))
            )
            with pytest.raises(ValidationError) as info:
                mech.validate(wrong, N_ITEMS)
            assert info.value.field == mech.payload_field

    def test_privacy_statement_consistent_with_event(self) -> None:
        """kind, ε, δ agree with what the dp-accounting event certifies."""
        for mech in self.ready():
            st, ev = mech.privacy(), mech.event()
            assert st.neighbouring
            assert json.dumps(st.to_dict())
            if st.kind == "none":
                assert st.epsilon is None and st.delta is None
                assert isinstance(ev, dp_accounting.NonPrivateDpEvent)
            elif st.kind == "element-wise":
                assert st.epsilon is None and st.delta is None
                assert isinstance(ev, dp_accounting.UnsupportedDpEvent)
                assert "not-differentially-private" in st.flags
            elif st.kind == "pure":
                assert st.delta == 0.0 and st.epsilon is not None
                # Pure ε-DP: the event's exact ε at δ = 0 equals the stated ε, and the PLD at a
                # tiny δ (δ = 0 is infinite after PLD tail truncation) is within the
                # discretisation error (≤ 1e-4 per composed leaf) below it.
                assert event_epsilon(ev, 0.0) == pytest.approx(st.epsilon, rel=1e-12, abs=1e-12)
                assert event_epsilon(ev, 1e-12) <= st.epsilon + 5e-3
            else:
                assert st.kind == "approximate"
                assert st.epsilon is not None and st.delta is not None
                assert 0.0 < st.delta < 1.0
                assert event_epsilon(ev, st.delta) <= st.epsilon + 1e-9


class TestRpt(MechanismContract):
    __test__ = True
    cls = RandomizedPerturbation

    def make_mechanisms(self) -> list[Mechanism]:
        return [RandomizedPerturbation(), RandomizedPerturbation(sigma_max=1.0, beta_max=0)]


class TestRrt(MechanismContract):
    __test__ = True
    cls = RandomizedResponseGroups

    def make_mechanisms(self) -> list[Mechanism]:
        return [RandomizedResponseGroups(), RandomizedResponseGroups(0.5, 7, 2.5)]


class TestBlip(MechanismContract):
    __test__ = True
    cls = Blip

    def make_mechanisms(self) -> list[Mechanism]:
        return [
            Blip(),
            Blip(epsilon=0.0),
            Blip(epsilon=17.0, n_bits=300, n_hashes=5, hash_key=2**100),
        ]


class TestJlt(MechanismContract):
    __test__ = True
    cls = JohnsonLindenstrauss

    def make_mechanisms(self) -> list[Mechanism]:
        return [
            JohnsonLindenstrauss(n_items=N_ITEMS),
            JohnsonLindenstrauss(6.0, sigma_rule="balu2016", n_items=N_ITEMS, dim=100),
            JohnsonLindenstrauss(0.5, 1e-3, dim=50, codebook_seed=3, n_items=N_ITEMS),
        ]


class TestOue(MechanismContract):
    __test__ = True
    cls = OptimisedUnaryEncoding

    def make_mechanisms(self) -> list[Mechanism]:
        return [
            OptimisedUnaryEncoding(),
            OptimisedUnaryEncoding(1.0, "add-remove"),
            OptimisedUnaryEncoding(0.0),
        ]


class TestRaw(MechanismContract):
    __test__ = True
    cls = RawRatings

    def make_mechanisms(self) -> list[Mechanism]:
        return [RawRatings()]

    def test_different_seeds_differ(self) -> None:
        """The identity release ignores its generator: the same ratings whatever the seed."""
        for mech in self.ready():
            p = self.profiles()[0]
            outs = [mech.release(p, r) for r in rngs(4, 3)]
            for o in outs:
                assert_payload_equal(o, outs[0])
                np.testing.assert_array_equal(o.values, p.ratings)  # type: ignore[union-attr]


class _SecondOrderContract(MechanismContract):
    def prepare(self, mech: Mechanism) -> Mechanism:
        assert isinstance(mech, SecondOrderMechanism)
        if isinstance(mech, PrivateContinuous) and mech.h_mode == "shared":
            return mech.bind(_MU, _V, shared_h=_H)
        return mech.bind(_MU, _V)


class TestPmd(_SecondOrderContract):
    __test__ = True
    cls = PrivateDiscrete

    def make_mechanisms(self) -> list[Mechanism]:
        return [PrivateDiscrete(), PrivateDiscrete([0.5 * k for k in range(1, 11)], 1, 2, 0.5)]


class TestPmc(_SecondOrderContract):
    __test__ = True
    cls = PrivateContinuous

    def make_mechanisms(self) -> list[Mechanism]:
        return [PrivateContinuous(), PrivateContinuous("shared", ridge=2.0)]


class TestLaplaceSecondOrder(_SecondOrderContract):
    __test__ = True
    cls = LaplaceSecondOrder

    def make_mechanisms(self) -> list[Mechanism]:
        return [LaplaceSecondOrder(), LaplaceSecondOrder(5.0, 0.5, 5.0)]


class TestExactSecondOrder(_SecondOrderContract):
    __test__ = True
    cls = ExactSecondOrder

    def make_mechanisms(self) -> list[Mechanism]:
        return [ExactSecondOrder(), ExactSecondOrder(ridge=0.1)]


def test_every_registered_mechanism_has_a_contract() -> None:
    """Each registry entry is covered by a family above."""
    covered = {c.cls.name for c in contract_cases(MechanismContract)}
    assert covered == set(MECHANISMS)


def test_make_mechanism_unknown_name() -> None:
    """An unknown mechanism name is a ConfigError listing the known ones."""
    with pytest.raises(ConfigError, match=r"mechanism\.name: unknown mechanism 'nope'"):
        make_mechanism("nope")


@pytest.mark.parametrize(
    ("name", "params", "key"),
    [
        ("blip", {"epsilon": -1.0}, "epsilon"),
        ("blip", {"n_bits": 0}, "n_bits"),
        ("blip", {"n_hashes": 2.5}, "n_hashes"),
        ("rrt", {"theta": 0.3}, "theta"),
        ("rrt", {"n_groups": 0}, "n_groups"),
        ("jlt", {"delta": 1.0}, "delta"),
        ("jlt", {"sigma_rule": "balu2016", "epsilon": 0.3}, "epsilon"),
        ("jlt", {"sigma": 3.0}, "sigma"),
        ("oue", {"relation": "swap"}, "relation"),
        ("pmd", {"rating_values": [1.0]}, "rating_values"),
        ("pmc", {"h_mode": "global"}, "h_mode"),
        ("laplace_second_order", {"rating_min": 5.0}, "rating_max"),
        ("exact_second_order", {"ridge": 0.0}, "ridge"),
    ],
)
def test_make_mechanism_invalid_value_names_the_parameter(
    name: str, params: dict[str, object], key: str
) -> None:
    """Invalid values are ConfigErrors that name the parameter."""
    with pytest.raises(ConfigError, match=f"mechanism.{name}: .*`{key}`"):
        make_mechanism(name, params)


def test_unbound_second_order_mechanism_raises_not_fitted() -> None:
    """Releasing before bind(mu, V) is a NotFittedError, not a silent default."""
    p = random_profiles(1, 1, N_ITEMS)[0]
    for cls in (PrivateDiscrete, PrivateContinuous, LaplaceSecondOrder, ExactSecondOrder):
        with pytest.raises(NotFittedError, match="bind"):
            cls().release(p, rngs(1, 1)[0])


def test_jlt_without_n_items_releases_but_cannot_account() -> None:
    """Without n_items the codebook's sensitivity is unknown: event() refuses, privacy() flags."""
    mech = JohnsonLindenstrauss()
    p = random_profiles(1, 1, N_ITEMS)[0]
    assert mech.release(p, rngs(1, 1)[0]).values.shape == (1000,)
    assert "n-items-unset" in mech.privacy().flags
    with pytest.raises(ValueError, match="n_items"):
        mech.event()
    assert math.isinf(event_epsilon(dp_accounting.NonPrivateDpEvent(), 0.1))
