"""The run's server specification from its experiment configuration: pure functions, no I/O.

`run_spec` turns an `ExperimentConfig` and the public catalogue facts into the `RunSpec` an
aggregator is started with; `model_params` is what the model is constructed with; `check_tiers`
and `check_item_features` refuse a mechanism, model and population that cannot work together.
The server process (`server.node`), the orchestrator (`sim.run`), the reproduce runner
(`sim.reproduce.protocol_run`), the referee and the adversary's planning all read them here.
"""

from __future__ import annotations

import dataclasses
import secrets
from typing import Any

import numpy as np

from privrec.server.models import MODELS, TwoTierModel, make_model
from privrec.server.models.features import needs_item_features
from privrec.server.validation import Limits
from privrec.shared.config import ExperimentConfig
from privrec.shared.data.dataset import RatingData
from privrec.shared.errors import ConfigError
from privrec.shared.mechanisms import MECHANISMS, make_mechanism
from privrec.shared.mechanisms.base import Mechanism
from privrec.shared.registry import parameter_names


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """What the server is started with. All but the two secrets is public (`GetRunConfig`).

    Attributes:
        run_id: the run's id; requests for another run are refused.
        mechanism: the private tier's release mechanism.
        model: the model's registry name.
        model_params: its hyper-parameters.
        n_items: m, the catalogue size.
        dataset: the dataset name (public metadata).
        rating_scale: (lowest, highest) rating.
        n_folds, fold_seed: the public fold rule (`shared.protocol.fold_of`; 0 folds under
            a named split: nobody's fold is left out, `shared.protocol.excluded_fold`).
        max_release_bytes: largest accepted release.
        admin_token: secret for the Admin service.
        token_key: key of the enrollment receipts (`EnrollResponse.token`, public once issued).
        withheld: ratings each test user withholds and predicts (a public protocol fact).
        limits: byte limits per request kind and the admission bound (`server.validation`).
        item_features: the catalogue's public item features (genre flags, shape
            (n_items, n_features)) for models that need them (`ItemFeatureModel`), or None.
        control_keys: who signs the run's control messages (`PublicRunConfig.control_keys`).
    """

    run_id: str
    mechanism: Mechanism
    model: str
    model_params: dict[str, Any]
    n_items: int
    dataset: str
    rating_scale: tuple[float, float]
    n_folds: int
    fold_seed: int
    max_release_bytes: int
    admin_token: str
    token_key: bytes = b""
    withheld: int = 5
    limits: Limits = dataclasses.field(default_factory=Limits)
    item_features: np.ndarray | None = None
    control_keys: dict[str, str] = dataclasses.field(default_factory=dict)


def run_spec(
    config: ExperimentConfig,
    run_id: str,
    catalogue: RatingData,
    admin_token: str,
    control_keys: dict[str, str] | None = None,
) -> RunSpec:
    """The server's spec. From the dataset it reads only the public catalogue facts
    (number of items, rating scale, item features such as genres), never a rating.

    Raises:
        ConfigError: a bad mechanism or model parameter, or a mechanism, model and population
            that do not fit together (see `check_tiers`).
    """
    mech = config.mechanism
    params = dict(mech.params)
    accepted = parameter_names(MECHANISMS.lookup(mech.name))
    if accepted is None or "n_items" in accepted:
        params.setdefault("n_items", catalogue.n_items)  # a public fact of the catalogue (JLT)
    mechanism = make_mechanism(mech.name, params)
    params_of_model = model_params(config)
    make_model(config.model.name, params_of_model)  # refuses a bad value now, naming it
    check_tiers(config, mechanism)
    check_item_features(config, catalogue)
    thesis = config.evaluation.split == "thesis"
    return RunSpec(
        run_id=run_id,
        mechanism=mechanism,
        model=config.model.name,
        model_params=params_of_model,
        n_items=catalogue.n_items,
        dataset=catalogue.name,
        rating_scale=catalogue.rating_scale,
        # a named split releases training ratings only: no fold to leave out (n_folds 0)
        n_folds=config.data.n_folds if thesis else 0,
        fold_seed=config.run.seed,
        max_release_bytes=config.transport.max_release_bytes,
        admin_token=admin_token,
        token_key=secrets.token_bytes(32),
        withheld=config.data.withheld if thesis else 0,
        limits=Limits(
            batch_bytes=max(config.transport.max_batch_bytes, config.transport.max_release_bytes),
            max_in_flight=config.transport.max_in_flight,
        ),
        item_features=catalogue.genres,
        control_keys=dict(control_keys or {}),
    )


def check_item_features(config: ExperimentConfig, catalogue: RatingData) -> None:
    """A model that needs the catalogue's item features (Bilge's feature-based profiles) runs
    only on a catalogue that has them."""
    name = config.model.name
    if needs_item_features(MODELS.lookup(name)) and catalogue.genres is None:
        raise ConfigError(
            f"data.dataset: model {name} needs the catalogue's item features (genres); "
            f"{catalogue.name!r} has none (ML-100K and ML-1M have genres; for synthetic data "
            "set data.synthetic_genres)"
        )


def model_params(config: ExperimentConfig) -> dict[str, Any]:
    """The model's constructor parameters: `[model.params]`, plus `[model].k` (the model's
    size: neighbours, or rank) for a model that takes a `k`, plus the mechanism's public
    parameters the model names in `Model.mechanism_params` and, for a model with its own
    randomness, `random_state = [run].seed` (unless `[model.params]` sets them)."""
    accepted = parameter_names(MODELS.lookup(config.model.name))
    size = {"k": config.model.k} if accepted is None or "k" in accepted else {}
    wanted = [p for p in MODELS.lookup(config.model.name).mechanism_params if p not in size]
    if wanted:
        public = make_mechanism(
            config.mechanism.name, dict(config.mechanism.params)
        ).public_params()
        size |= {p: public[p] for p in wanted if p in public}
    # a model with its own randomness (the DP models) draws from the run's seed unless set
    seed = {"random_state": config.run.seed} if accepted and "random_state" in accepted else {}
    return size | seed | dict(config.model.params)


def check_tiers(config: ExperimentConfig, mechanism: Mechanism) -> None:
    """A two-tier model (Xin & Jaakkola) goes with a mechanism that binds to its public model
    and with a public tier of at least the model's size; any other model with neither."""
    name = config.model.name
    model_cls = MODELS.lookup(name)
    two_tier = model_cls.capabilities.public_tier
    binds = mechanism.binds_public_model
    n_public = config.population.public_users
    sends_ratings = two_tier and getattr(model_cls, "private_release", "") == "ratings"
    if sends_ratings and mechanism.name != "raw":
        raise ConfigError(
            f"model.name: {name}'s private users send their ratings (mechanism 'raw'), got "
            f"{mechanism.name!r}"
        )
    if two_tier and not binds and not sends_ratings:
        raise ConfigError(
            f"model.name: {name} needs a second-order mechanism "
            f"({', '.join(n for n, c in MECHANISMS.items() if c.binds_public_model)}), got "
            f"{mechanism.name!r}"
        )
    if binds and not two_tier:
        two_tier_models = [n for n, c in MODELS.items() if c.capabilities.public_tier]
        raise ConfigError(
            f"mechanism.name: {mechanism.name} releases need the public model of "
            f"a two-tier model ({', '.join(two_tier_models)}), got {name!r}"
        )
    if n_public and not two_tier:
        raise ConfigError(
            f"population.public_users: model {name} has no public tier; set it to 0, got {n_public}"
        )
    if config.population.private_round_size and not two_tier:
        raise ConfigError(
            f"population.private_round_size: only a two-tier model has collect "
            f"rounds, got {config.population.private_round_size} with {name!r}"
        )
    if two_tier:
        model = make_model(name, model_params(config))
        assert isinstance(model, TwoTierModel)
        if n_public < model.min_public_users:
            raise ConfigError(
                f"population.public_users: the public model of rank model.k = "
                f"{config.model.k} needs at least that many public users, got "
                f"{n_public}"
            )


__all__ = ["RunSpec", "check_item_features", "check_tiers", "model_params", "run_spec"]
