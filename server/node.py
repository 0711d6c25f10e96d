"""`privrec server`: the aggregator as its own OS process.

Builds the run's `RunSpec` from the experiment config (`server.spec.run_spec`), opens the store
in the run directory (taking up a previous server's state after a crash: `Aggregator`), serves
gRPC, and (when a broker is given) publishes every accepted request on the observation feed and
phase changes as markers on it: one message (a `TranscriptBatch`) per accepted request or
batch, so a batch of 256 releases is one MQTT message, not 256. On a restart the feed is
published again from the transcript (every record after the last one this store knows was
published), so a live adversary, which keeps each seq once, misses nothing that the killed
server stored but had not yet sent.

Security (`ServerSecurity`): node authentication against the operator's allow-list and mutual
TLS, or `insecure` (both off, announced on every start). The ready file, which holds the admin
token, is created 0600.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import logging
import os
import secrets
import signal
from pathlib import Path
from typing import Any

from privrec.server.aggregator import Aggregator
from privrec.server.auth import Authenticator, NodeVerifier, UsedNonces
from privrec.server.servicer import start_server
from privrec.server.spec import run_spec
from privrec.server.store import Store
from privrec.shared.config import ExperimentConfig
from privrec.shared.control import ControlPlane
from privrec.shared.data.dataset import RatingData
from privrec.shared.errors import ConfigError
from privrec.shared.identity import AllowList, write_private
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb

logger = logging.getLogger(__name__)
STORE_NAME = "server.sqlite"
NONCES_NAME = "nonces.sqlite"
"""The nonces of the signed requests the run's servers accepted (`server.auth.UsedNonces`)."""
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

    def authenticator(self, run_dir: Path | None = None) -> Authenticator | None:
        """The node verifier; with `run_dir`, its used nonces persist there (`NONCES_NAME`),
        so that no incarnation of the server accepts a captured request twice."""
        if self.allow_list is None:
            return None
        used = UsedNonces(run_dir / NONCES_NAME) if run_dir is not None else None
        return NodeVerifier(
            AllowList.load(self.allow_list), window_s=self.replay_window_s, used=used
        )

    def control_keys(self) -> dict[str, str]:
        """The allow-list's control keys, published in the run's public configuration (every
        node verifies the orchestrator's phase announcements with them)."""
        if self.allow_list is None:
            return {}
        return AllowList.load(self.allow_list).control_public()


def open_aggregator(
    config: ExperimentConfig,
    run_id: str,
    run_dir: Path,
    catalogue: RatingData,
    admin_token: str,
    control_keys: dict[str, str] | None = None,
) -> Aggregator:
    """An aggregator over the run directory's store (shared by both launchers)."""
    store = Store(run_dir / STORE_NAME)
    return Aggregator(run_spec(config, run_id, catalogue, admin_token, control_keys), store)


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
    core = open_aggregator(config, run_id, run_dir, catalogue, admin_token, security.control_keys())
    resolved = run_dir / "config.toml"
    if not resolved.exists():  # a hand-started run: what `privrec report` and `replay` read
        resolved.write_text(config.to_toml())
    server, bound = await start_server(
        core, host, port, auth=security.authenticator(run_dir), tls_dir=security.tls_dir
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
        # what start-up made (modules, the spec, a restarted store's index) lives until the
        # end: out of the cyclic collector's full passes, which otherwise walk it all again
        # every few thousand requests (≈ 2 µs of CPU per ingested release; issue 28)
        gc.freeze()
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
    "feed_messages",
    "open_aggregator",
    "serve",
]
