"""Every registered mechanism × model pair and every attack × mechanism pair either runs end to
end on a tiny population or is refused before launch; none fails mid-run (issue 24).

A pair is run with `simulate` (in-process launcher, no broker): a refusal must be a one-line
`ConfigError` raised before the run folder exists, anything else a finished run with figures.
The lists come from the registries, so a new mechanism, model or attack is enumerated here
without editing this file. A few dozen pairs run (≈ 1 s each); the rest are refused at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from privrec.adversary.attacks import ATTACKS
from privrec.adversary.attacks.base import SideKnowledge
from privrec.server.models import MODELS
from privrec.shared.config import ExperimentConfig
from privrec.shared.errors import ConfigError
from privrec.shared.mechanisms import MECHANISMS
from privrec.sim.compatibility import models_for, refusals
from privrec.sim.run import SimOptions, simulate

pytestmark = pytest.mark.timeout(900)

TINY: dict[str, Any] = {
    "data": {
        "dataset": "synthetic",
        "synthetic_users": 80,
        "synthetic_items": 60,
        "synthetic_genres": 4,  # the feature-based models need the catalogue's genres
        "max_users": 70,  # membership inference needs candidates outside the run
    },
    "population": {"shards": 1},
}
GRANTS: dict[SideKnowledge, dict[str, Any]] = {
    SideKnowledge.AUXILIARY: {"auxiliary": "popularity", "auxiliary_users": 20},
    SideKnowledge.KNN_TARGETS: {"knn_targets": 1, "knn_known_items": 5},
    SideKnowledge.MEMBERSHIP_CANDIDATES: {
        "membership_candidates": 2,
        "membership_known_items": 6,
        "membership_probe_items": 2,
    },
}
"""The [adversary] keys that grant each side knowledge in the tiny population."""


def tiny_config(
    name: str, mechanism: str, model: str, adversary: dict[str, Any]
) -> ExperimentConfig:
    public = 20 if MODELS.lookup(model).capabilities.public_tier else 0
    return ExperimentConfig.from_dict(
        {
            **TINY,
            "run": {"name": name, "seed": 1},
            "population": {**TINY["population"], "public_users": public},
            "mechanism": {"name": mechanism},
            "model": {"name": model, "k": 5, "baseline": False},
            "adversary": {"live": False, **adversary},
        }
    )


def run_or_refusal(config: ExperimentConfig, out: Path) -> dict[str, Any] | str:
    """The report of a finished run, or the refusal's message (checked to come before the
    run folder is made: nothing started)."""
    try:
        return simulate(config, SimOptions(out_dir=out, launcher="inprocess", mqtt="none"))
    except ConfigError as exc:
        assert not out.exists(), f"refused after the run started: {exc}"
        message = str(exc)
        assert "\n" not in message and message.split(":", 1)[0] in (
            "model.name",
            "mechanism.name",
            "adversary.attacks",
        ), message
        return message


PAIRS = [(mech, model) for mech, _ in MECHANISMS.items() for model, _ in MODELS.items()]


@pytest.mark.parametrize(("mechanism", "model"), PAIRS, ids=[f"{a}-{b}" for a, b in PAIRS])
def test_every_mechanism_model_pair_runs_or_is_refused(
    mechanism: str, model: str, tmp_path: Path
) -> None:
    outcome = run_or_refusal(
        tiny_config(f"m-{mechanism}-{model}", mechanism, model, {"attacks": []}), tmp_path / "run"
    )
    if isinstance(outcome, str):
        assert model in outcome and mechanism in outcome  # names both sides
        assert model not in models_for(mechanism)  # refused: its declaration says so
    else:
        assert model in models_for(mechanism)  # ran: its declaration says it reads them
        assert outcome["utility"], f"{mechanism} × {model} ran but scored nothing"


def _query_model(mechanism: str) -> str:
    """A model for `mechanism`'s releases, one that answers queries if any does (the sybil
    attacks ask it)."""
    readers = models_for(mechanism)
    answering = [m for m in readers if MODELS.lookup(m).capabilities.answers_queries]
    single_tier = [m for m in answering if not MODELS.lookup(m).capabilities.public_tier]
    return (single_tier or answering or readers)[0]


MECHANISM_NAMES = [name for name, _ in MECHANISMS.items()]


@pytest.mark.parametrize("mechanism", MECHANISM_NAMES)
def test_every_attack_runs_on_its_mechanisms_and_is_refused_on_the_others(
    mechanism: str, tmp_path: Path
) -> None:
    """One run per mechanism with every attack that applies to it (its side knowledge
    granted): each is scored. Every other attack is refused before launch, naming it and the
    mechanism."""
    applying = [n for n, a in ATTACKS.items() if mechanism in a.applies_to]
    others = [n for n, _ in ATTACKS.items() if n not in applying]
    model = _query_model(mechanism)
    for i, attack in enumerate(others):
        outcome = run_or_refusal(
            tiny_config("a-refused", mechanism, model, {"attacks": [attack]}), tmp_path / f"r{i}"
        )
        assert isinstance(outcome, str) and attack in outcome and mechanism in outcome
    if not applying:
        return
    grants: dict[str, Any] = {}
    for attack in applying:
        for need in ATTACKS.lookup(attack).needs:
            grants |= GRANTS[need]
    report = run_or_refusal(
        tiny_config(f"a-{mechanism}", mechanism, model, {"attacks": applying, **grants}),
        tmp_path / "run",
    )
    assert isinstance(report, dict), report
    scored = {a["name"]: a for a in report["attacks"]}
    assert set(scored) == set(applying)
    assert all(a["metrics"] for a in scored.values())


NEEDS = sorted({(n, need) for n, a in ATTACKS.items() for need in a.needs})


@pytest.mark.parametrize(("attack", "need"), NEEDS, ids=[f"{a}-{n}" for a, n in NEEDS])
def test_an_attack_without_its_side_knowledge_is_refused(
    attack: str, need: SideKnowledge, tmp_path: Path
) -> None:
    mechanism = ATTACKS.lookup(attack).applies_to[0]
    others = {k: v for n in ATTACKS.lookup(attack).needs if n != need for k, v in GRANTS[n].items()}
    outcome = run_or_refusal(
        tiny_config("needs", mechanism, _query_model(mechanism), {"attacks": [attack], **others}),
        tmp_path / "run",
    )
    assert isinstance(outcome, str) and attack in outcome and "[adversary]" in outcome


CONFIGS = sorted((Path(__file__).parents[2] / "configs").glob("*.toml"))


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_every_shipped_config_is_compatible(path: Path) -> None:
    assert refusals(ExperimentConfig.load(path)) == []
