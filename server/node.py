"""`privrec server`: the aggregator as its own OS process.

Builds the run's public `RunSpec` from the experiment config, opens the store in the run
directory (taking up a previous server's state after a crash: `Aggregator`), serves gRPC, and
(when a broker is given) publishes every accepted request on the observation feed and phase
changes as markers on it: one message (a `TranscriptBatch`) per accepted request or batch, so a
batch of 256 releases is one MQTT message, not 256. On a restart the feed is published again
from the transcript (every record after the last one this store knows was published), so a
live adversary, which keeps each seq once, misses nothing that the killed server stored but
had not yet sent.

Security (`ServerSecurity`): node authentication against the operator's allow-list and mutual
TLS, or `insecure` (both off, announced on every start). The ready file, which holds the admin
token, is created 0600.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import secrets
import signal
from pathlib import Path
from typing import Any

from privrec.server.aggregator import Aggregator, RunSpec
from privrec.server.auth import Authenticator, NodeVerifier
from privrec.server.models import MODELS, TwoTierModel, make_model
from privrec.server.models.features import needs_item_features
from privrec.server.servicer import start_server
from privrec.server.store import Store
from privrec.server.validation import Limits
from privrec.shared.config import ExperimentConfig
from privrec.shared.control import ControlPlane
from privrec.shared.data.dataset import RatingData
from privrec.shared.errors import ConfigError
from privrec.shared.identity import AllowList, write_private
from privrec.shared.mechanisms import MECHANISMS, make_mechanism
from privrec.shared.mechanisms.base import Mechanism
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.registry import parameter_names

logger = logging.getLogger(__name__)
STORE_NAME = "server.sqlite"
ADMIN_TOKEN_ENV = "PRIVREC_ADMIN_TOKEN"
INSECURE_WARNING = (
    "INSECURE: no TLS and no node authentication; anyone who can reach this port can act as "
    "any user, and everything travels in plaintext (--insecure)"
)


@dataclasses.dataclass(frozen=True)
class ServerSecurity:
    """How the server knows who is calling and protects the wire.

    Attributes:
        allow_list: the operator's node allow-list (`privrec keys`); None with `insecure`.
        tls_dir: a `privrec certs` directory (mutual TLS); None with `insecure`.
        insecure: both off (refused unless asked for explicitly).
        replay_window_s: accepted clock skew and nonce memory of node signatures.
    """

    allow_list: Path | None = None
    tls_dir: Path | None = None
    insecure: bool = False
    replay_window_s: float = 300.0

    def __post_init__(self) -> None:
        if not self.insecure and (self.allow_list is None or self.tls_dir is None):
            raise ConfigError(
                "server security: give --allow-list FILE and --tls-dir DIR (`privrec keys`, "
                "`privrec certs`), or --insecure to run without node authentication and TLS"
            )

    def authenticator(self) -> Authenticator | None:
        if self.allow_list is None:
            return None
        return NodeVerifier(AllowList.load(self.allow_list), window_s=self.replay_window_s)


def run_spec(
    config: ExperimentConfig, run_id: str, catalogue: RatingData, admin_token: str
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
    sybils = config.adversary.knn_targets or config.adversary.membership_candidates
    if sybils and not thesis:
        raise ConfigError(
            "evaluation.split: the sybil attacks (adversary.knn_targets, "
            "membership_candidates) place their crowd by the thesis protocol's fold rule; "
            f'use split = "thesis", got {config.evaluation.split!r}'
        )
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
    security: ServerSecurity | None = None,
) -> None:
    """Serve until SIGTERM/SIGINT."""
    security = security or ServerSecurity(insecure=True)
    if security.insecure:
        logger.warning(INSECURE_WARNING)
    admin_token = os.environ.get(ADMIN_TOKEN_ENV) or secrets.token_hex(16)
    core = open_aggregator(config, run_id, run_dir, catalogue, admin_token)
    resolved = run_dir / "config.toml"
    if not resolved.exists():  # a hand-started run: what `privrec report` and `replay` read
        resolved.write_text(config.to_toml())
    server, bound = await start_server(
        core, host, port, auth=security.authenticator(), tls_dir=security.tls_dir
    )
    logger.info(
        "aggregator %s listening on %s:%d (%s)",
        run_id,
        host,
        bound,
        "insecure" if security.insecure else "TLS, node authentication",
    )
    try:
        await _serve_until_stopped(core, server, bound, run_id, mqtt, ready_file, security)
    finally:  # also on an error (e.g. no broker at `mqtt`): no gRPC server outlives the loop
        await server.stop(grace=2.0)
        core.store.close()


async def _serve_until_stopped(
    core: Aggregator,
    server: Any,
    bound: int,
    run_id: str,
    mqtt: str | None,
    ready_file: Path | None,
    security: ServerSecurity,
) -> None:
    admin_token = core.spec.admin_token
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with contextlib.AsyncExitStack() as stack:
        if mqtt:
            control = await stack.enter_async_context(
                ControlPlane(mqtt, run_id=run_id, node="server", tls_dir=security.tls_dir)
            )
            queue: asyncio.Queue[list[pb.TranscriptRecord]] = asyncio.Queue()

            def feed(records: list[pb.TranscriptRecord]) -> None:
                loop.call_soon_threadsafe(queue.put_nowait, records)

            # one feed message per accepted request or batch (`feed_messages`); a restarted
            # server sends its transcript again (the adversary keeps each seq once), then the
            # current phase's marker
            core.add_batch_observer(
                feed, replay=core.phase != "enroll" or core.store.count("transcript") > 0
            )
            publisher = asyncio.create_task(_publish(control, queue), name="privrec[server].feed")
        if ready_file is not None:
            token = admin_token if ADMIN_TOKEN_ENV not in os.environ else ""
            write_private(ready_file, f"{bound}\n{token}".encode())
        await stop.wait()
        if mqtt:
            await queue.join()
            publisher.cancel()


FEED_MESSAGE_BYTES = 8 << 20
"""The most record bytes in one observation-feed message: an accepted batch is one message
unless it is larger (a restarted server's whole transcript is sent in such pieces)."""


def feed_messages(
    records: list[pb.TranscriptRecord], limit: int = FEED_MESSAGE_BYTES
) -> list[bytes]:
    """The serialized `TranscriptBatch` messages that carry `records`, in order: one, unless
    their bytes exceed `limit` (then consecutive pieces of at most `limit`, at least one
    record each)."""
    out: list[bytes] = []
    piece: list[pb.TranscriptRecord] = []
    size = 0
    for rec in records:
        n = rec.ByteSize()
        if piece and size + n > limit:
            out.append(pb.TranscriptBatch(records=piece).SerializeToString())
            piece, size = [], 0
        piece.append(rec)
        size += n
    if piece:
        out.append(pb.TranscriptBatch(records=piece).SerializeToString())
    return out


async def _publish(control: ControlPlane, queue: asyncio.Queue[list[pb.TranscriptRecord]]) -> None:
    while True:
        records = await queue.get()
        try:
            for message in feed_messages(records):
                await control.publish_observation(message)
        except Exception:
            logger.exception("observations from %d not published", records[0].seq)
        finally:
            queue.task_done()


__all__ = [
    "ADMIN_TOKEN_ENV",
    "FEED_MESSAGE_BYTES",
    "INSECURE_WARNING",
    "STORE_NAME",
    "ServerSecurity",
    "check_item_features",
    "check_tiers",
    "feed_messages",
    "model_params",
    "open_aggregator",
    "run_spec",
    "serve",
]
