"""What a model declares (`shared.capabilities.ModelCapabilities`)."""

from __future__ import annotations

import pytest

from privrec.shared.capabilities import ModelCapabilities, ModelInput, ScoreKind, Serving


def test_strings_become_enums_and_round_trip() -> None:
    """Strings are accepted (the wire form) and `to_dict`/`from_dict` invert each other."""
    caps = ModelCapabilities("releases", "queries", "zscore")  # type: ignore[arg-type]
    assert caps.consumes is ModelInput.RELEASES and caps.scores is ScoreKind.ZSCORE
    assert ModelCapabilities.from_dict(caps.to_dict()) == caps
    assert caps.answers_queries and not caps.public_tier


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"consumes": "rumours", "serving": Serving.QUERIES}, "`consumes` must be one of"),
        ({"consumes": ModelInput.RELEASES, "serving": Serving.LOCAL}, "local_predictor"),
        (
            {"consumes": ModelInput.ESTIMATES, "serving": Serving.QUERIES, "publishes": "g"},
            "publishes",
        ),
    ],
)
def test_inconsistent_declarations_are_refused(kwargs: dict, needle: str) -> None:  # type: ignore[type-arg]
    """Unknown values and a rule/result without the matching serving are ValueErrors."""
    with pytest.raises(ValueError, match=needle):
        ModelCapabilities(**kwargs)
