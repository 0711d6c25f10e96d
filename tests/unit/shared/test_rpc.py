"""The one mapping between privrec errors and gRPC status codes (`shared.rpc`)."""

from __future__ import annotations

import grpc
import pytest

from privrec.shared.errors import (
    AlreadyExistsError,
    AuthenticationError,
    ConfigError,
    PrivrecError,
    ProtocolError,
    ResourceExhaustedError,
    ValidationError,
)
from privrec.shared.rpc import STATUS_OF, error_from_status, status_of


@pytest.mark.parametrize(
    "exc",
    [
        ValidationError("items", "must hold 1..10 items"),
        ProtocolError("phase: not now"),
        AuthenticationError("token: wrong"),
        AlreadyExistsError("user_id: taken"),
        ResourceExhaustedError("release: too big"),
    ],
)
def test_round_trip_keeps_the_class(exc: PrivrecError) -> None:
    """status_of then error_from_status gives back the same class (and the field)."""
    back = error_from_status(status_of(exc), str(exc))
    assert type(back) is type(exc)
    if isinstance(exc, ValidationError):
        assert isinstance(back, ValidationError) and back.field == exc.field


def test_each_refusal_has_its_own_status() -> None:
    """Five classes, five distinct statuses; anything else is INTERNAL both ways."""
    assert len(set(STATUS_OF.values())) == len(STATUS_OF) == 5
    assert status_of(ConfigError("x")) == grpc.StatusCode.INTERNAL
    other = error_from_status(grpc.StatusCode.UNAVAILABLE, "down")
    assert type(other) is PrivrecError and "UNAVAILABLE" in str(other)
