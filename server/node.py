"""`privrec server`: the aggregator as its own OS process.

Builds the run's public `RunSpec` from the experiment config, opens the store in the run
directory, serves gRPC, and (when a broker is given) publishes every accepted request on the
observation feed and phase changes as markers on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import secrets
import signal
from pathlib import Path

from server.aggregator import Aggregator, RunSpec
from server.servicer import start_server
from server.store import Store
from shared.config import ExperimentConfig
from shared.data.dataset import RatingData
from shared.mechanisms import MECHANISMS, make_mechanism
from shared.proto.privrec.v1 import aggregator_pb2 as pb

logger = logging.getLogger(__name__)
STORE_NAME = "server.sqlite"
ADMIN_TOKEN_ENV = "PRIVREC_ADMIN_TOKEN"


def run_spec(config: ExperimentConfig, run_id: str, catalogue: RatingData,
             admin_token: str) -> RunSpec:
    """The server's spec. From the dataset it reads only the public catalogue facts
    (number of items, rating scale), never a rating."""
    mech = config.mechanism
    params = dict(mech.params)
    if "n_items" in inspect.signature(MECHANISMS.get(mech.name, object)).parameters:
        params.setdefault("n_items", catalogue.n_items)  # a public fact of the catalogue (JLT)
    return RunSpec(
        run_id=run_id,
        mechanism=make_mechanism(mech.name, params),
        model=config.model.name,
        model_params={"k": config.model.k},
        n_items=catalogue.n_items,
        dataset=catalogue.name,
        rating_scale=catalogue.rating_scale,
        n_folds=config.data.n_folds,
        fold_seed=config.run.seed,
        max_release_bytes=config.transport.max_release_bytes,
        admin_token=admin_token,
        token_key=secrets.token_bytes(32),
        protocol={"withheld": config.data.withheld},
    )


def open_aggregator(config: ExperimentConfig, run_id: str, run_dir: Path,
                    catalogue: RatingData, admin_token: str) -> Aggregator:
    """An aggregator over the run directory's store (shared by both launchers)."""
    store = Store(run_dir / STORE_NAME)
    return Aggregator(run_spec(config, run_id, catalogue, admin_token), store)


async def serve(config: ExperimentConfig, run_id: str, run_dir: Path, catalogue: RatingData,
                *, host: str, port: int, mqtt: str | None, ready_file: Path | None) -> None:
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
            from sim.control import ControlPlane

            control = await stack.enter_async_context(
                ControlPlane(mqtt, run_id=run_id, node="server"))
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


async def _publish(control: object, queue: asyncio.Queue[pb.TranscriptRecord]) -> None:
    while True:
        rec = await queue.get()
        try:
            await control.publish_observation(rec.SerializeToString())  # type: ignore[attr-defined]
        except Exception:
            logger.exception("observation %d not published", rec.seq)
        finally:
            queue.task_done()


__all__ = ["ADMIN_TOKEN_ENV", "STORE_NAME", "open_aggregator", "run_spec", "serve"]
