"""`privrec server`: the aggregator as its own OS process.

Builds the run's public `RunSpec` from the experiment config, opens the store in the run
directory, serves gRPC, and (when a broker is given) publishes every accepted request on the
observation feed and phase changes as markers on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import signal
from pathlib import Path
from typing import Any

from privrec.server.aggregator import Aggregator, RunSpec
from privrec.server.models import MODELS, TwoTierModel, make_model
from privrec.server.servicer import start_server
from privrec.server.store import Store
from privrec.shared.config import ExperimentConfig
from privrec.shared.control import ControlPlane
from privrec.shared.data.dataset import RatingData
from privrec.shared.errors import ConfigError
from privrec.shared.mechanisms import MECHANISMS, make_mechanism
from privrec.shared.mechanisms.base import Mechanism
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.registry import parameter_names

logger = logging.getLogger(__name__)
STORE_NAME = "server.sqlite"
ADMIN_TOKEN_ENV = "PRIVREC_ADMIN_TOKEN"


def run_spec(
    config: ExperimentConfig, run_id: str, catalogue: RatingData, admin_token: str
) -> RunSpec:
    """The server's spec. From the dataset it reads only the public catalogue facts
    (number of items, rating scale), never a rating.

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
    return RunSpec(
        run_id=run_id,
        mechanism=mechanism,
        model=config.model.name,
        model_params=params_of_model,
        n_items=catalogue.n_items,
        dataset=catalogue.name,
        rating_scale=catalogue.rating_scale,
        n_folds=config.data.n_folds,
        fold_seed=config.run.seed,
        max_release_bytes=config.transport.max_release_bytes,
        admin_token=admin_token,
        token_key=secrets.token_bytes(32),
        withheld=config.data.withheld,
    )


def model_params(config: ExperimentConfig) -> dict[str, Any]:
    """The model's constructor parameters: `[model.params]`, plus `[model].k` (the model's
    size: neighbours, or rank) for a model that takes a `k`."""
    accepted = parameter_names(MODELS.lookup(config.model.name))
    size = {"k": config.model.k} if accepted is None or "k" in accepted else {}
    return size | dict(config.model.params)


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


def open_aggregator(
    config: ExperimentConfig, run_id: str, run_dir: Path, catalogue: RatingData, admin_token: str
) -> Aggregator:
    """An aggregator over the run directory's store (shared by both launchers)."""
    store = Store(run_dir / STORE_NAME)
    return Aggregator(run_spec(config, run_id, catalogue, admin_token), store)


async def serve(
    config: ExperimentConfig,
    run_id: str,
    run_dir: Path,
    catalogue: RatingData,
    *,
    host: str,
    port: int,
    mqtt: str | None,
    ready_file: Path | None,
) -> None:
    """Serve until SIGTERM/SIGINT or until the phase "done" is set."""
    admin_token = os.environ.get(ADMIN_TOKEN_ENV) or secrets.token_hex(16)
    core = open_aggregator(config, run_id, run_dir, catalogue, admin_token)
    server, bound = await start_server(core, host, port)
    logger.info("aggregator %s listening on %s:%d", run_id, host, bound)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with contextlib.AsyncExitStack() as stack:
        if mqtt:
            control = await stack.enter_async_context(
                ControlPlane(mqtt, run_id=run_id, node="server")
            )
            queue: asyncio.Queue[pb.TranscriptRecord] = asyncio.Queue()
            core.observers.append(lambda rec: loop.call_soon_threadsafe(queue.put_nowait, rec))
            publisher = asyncio.create_task(_publish(control, queue), name="privrec[server].feed")
        if ready_file is not None:
            tmp = ready_file.with_suffix(".tmp")
            tmp.write_text(f"{bound}\n{admin_token if ADMIN_TOKEN_ENV not in os.environ else ''}")
            tmp.replace(ready_file)
        await stop.wait()
        if mqtt:
            await queue.join()
            publisher.cancel()
        await server.stop(grace=2.0)
    core.store.close()


async def _publish(control: ControlPlane, queue: asyncio.Queue[pb.TranscriptRecord]) -> None:
    while True:
        rec = await queue.get()
        try:
            await control.publish_observation(rec.SerializeToString())
        except Exception:
            logger.exception("observation %d not published", rec.seq)
        finally:
            queue.task_done()


__all__ = [
    "ADMIN_TOKEN_ENV",
    "STORE_NAME",
    "check_tiers",
    "model_params",
    "open_aggregator",
    "run_spec",
    "serve",
]
