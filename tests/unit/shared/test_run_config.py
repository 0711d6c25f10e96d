"""The typed public run configuration (`shared.run_config.PublicRunConfig`)."""

from __future__ import annotations

import dataclasses

import pytest

from privrec.shared.errors import ValidationError
from privrec.shared.mechanisms import RandomizedPerturbation
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.run_config import PublicRunConfig
from tests.run_configs import make_run_config


def example() -> PublicRunConfig:
    return dataclasses.replace(
        make_run_config("rpt", {"sigma_max": 1.5, "beta_max": 10}, 42, model_params={"k": 7}),
        allowed_payloads=("rpt",),
    )


def test_proto_round_trip_with_phase_and_round() -> None:
    """to_proto → bytes → from_proto gives the same config; phase and round ride beside it."""
    cfg = example()
    rc = pb.RunConfig.FromString(cfg.to_proto(phase="collect", round_=2).SerializeToString())
    assert (rc.phase, rc.round) == ("collect", 2)
    assert PublicRunConfig.from_proto(rc) == cfg


def test_json_round_trip() -> None:
    """The stored JSON reads back to the same config."""
    cfg = example()
    assert PublicRunConfig.from_json(cfg.to_json()) == cfg


def test_mechanism_is_rebuilt_from_the_public_parameters() -> None:
    """`.mechanism()` gives a fresh mechanism with exactly the published parameters."""
    mech = example().mechanism()
    assert isinstance(mech, RandomizedPerturbation)
    assert mech.public_params() == {"sigma_max": 1.5, "beta_max": 10}
    assert example().mechanism() is not mech


def test_derived_facts_follow_the_capabilities() -> None:
    """PPCF answers queries in z-scores; the two-tier model predicts locally."""
    cfg = example()
    assert cfg.answers_queries and not cfg.local_prediction and not cfg.two_tier
    assert str(cfg.score_kind) == "zscore"
    tt = make_run_config("pmc", {}, 10, model="two_tier_lowrank", model_params={"k": 2})
    assert tt.local_prediction and tt.two_tier and not tt.answers_queries


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda rc: setattr(rc, "public_params_json", "{not json"), "public_params_json"),
        (lambda rc: setattr(rc, "public_params_json", "[1, 2]"), "public_params_json"),
        (lambda rc: setattr(rc.model_info, "params_json", "3"), "model_info.params_json"),
        (lambda rc: setattr(rc.model_info, "serving", "telepathy"), "model_info"),
    ],
)
def test_from_proto_names_a_malformed_field(mutate: object, field: str) -> None:
    """A malformed published field is a ValidationError naming it."""
    rc = example().to_proto()
    mutate(rc)  # type: ignore[operator]
    with pytest.raises(ValidationError) as info:
        PublicRunConfig.from_proto(rc)
    assert info.value.field == field


def test_from_json_refuses_missing_fields() -> None:
    """Stored JSON without a required field names what is missing."""
    with pytest.raises(ValidationError, match="missing fields"):
        PublicRunConfig.from_json('{"run_id": "r"}')
    with pytest.raises(ValidationError, match="not JSON"):
        PublicRunConfig.from_json("{")
