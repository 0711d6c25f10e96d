"""A client shard: one OS process hosting a slice of the population, multiplexed with asyncio.

`run_shard` follows the phases: enroll its users, submit their profile releases (in batches on
SubmitStream), and in the serve phase send each test user's freshly perturbed query and
de-normalise the answers locally. Its predictions go to the experimenter's run directory (not to
the server) for the referee. A shard killed at any point can be started again: enrollment is
idempotent and every release carries a fixed nonce, so nothing is stored twice.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np

from client.agent import UserAgent, choose_withheld
from client.population import load_population, profile_of, shard_rows, user_id_of
from client.transport import Transport
from shared.config import ExperimentConfig
from shared.data.dataset import RatingData
from shared.errors import ProtocolError
from shared.mechanisms import make_mechanism
from shared.mechanisms.base import Mechanism
from shared.protocol import PHASES

logger = logging.getLogger(__name__)
T = TypeVar("T")
PhaseWaiter = Callable[[str], Awaitable[str]]


def polling_waiter(transport: Transport, poll_s: float, timeout: float = 3600.0) -> PhaseWaiter:
    """Wait for a phase by polling `GetRunConfig` (works without any broker)."""

    async def wait(name: str) -> str:
        target = PHASES.index(name)
        deadline = time.monotonic() + timeout
        while True:
            phase = (await transport.run_config()).phase
            if PHASES.index(phase) >= target:
                return phase
            if time.monotonic() > deadline:
                raise TimeoutError(f"phase {name!r} not reached within {timeout}s")
            await asyncio.sleep(poll_s)

    return wait


@dataclasses.dataclass
class ShardResult:
    """What a shard did (also written as JSON next to its predictions)."""

    shard: int
    users: int
    enrolled: int = 0
    accepted: int = 0
    duplicates: int = 0
    queries: int = 0
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)


def make_agents(data: RatingData, rows: Sequence[int], config: ExperimentConfig
                ) -> list[UserAgent]:
    """The agents of `rows`, each with her withheld test items (every user is tested once)."""
    seed = config.run.seed
    agents = []
    for row in rows:
        uid = user_id_of(data, row)
        profile = profile_of(data, row)
        agents.append(UserAgent(uid, profile, seed,
                                choose_withheld(profile.items, config.data.withheld, seed, uid)))
    return agents


async def _bounded(limit: int, jobs: Sequence[Callable[[], Awaitable[T]]]) -> list[T]:
    sem = asyncio.Semaphore(limit)

    async def one(job: Callable[[], Awaitable[T]]) -> T:
        async with sem:
            return await job()

    return list(await asyncio.gather(*(one(j) for j in jobs)))


async def run_shard(config: ExperimentConfig, transport: Transport, shard: int, n_shards: int,
                    out_dir: Path, wait_phase: PhaseWaiter,
                    data: RatingData | None = None) -> ShardResult:
    """Run one shard through enroll → collect → serve and write its predictions.

    Args:
        config: the experiment configuration (the shard reads only [run], [data],
            [population] and [model].clip; the mechanism comes from the server's PUBLIC
            run config, as it would for a real client).
        transport: gRPC or in-process.
        shard, n_shards: which slice of the population this is.
        out_dir: the run directory; predictions go to `out_dir/predictions/shard-{shard}.npz`.
        wait_phase: how to wait for a phase (MQTT or polling).
        data: the population, if the caller already loaded it.
    """
    t0 = time.perf_counter()
    data = data if data is not None else load_population(config.data, config.run.seed)
    agents = make_agents(data, shard_rows(data.n_users, shard, n_shards), config)
    result = ShardResult(shard=shard, users=len(agents))
    run_config = await transport.run_config()
    run_id = run_config.run_id
    mechanism = make_mechanism(run_config.mechanism, json.loads(run_config.public_params_json))
    clip = (run_config.rating_min, run_config.rating_max) if config.model.clip else None
    pop = config.population
    label = f"{shard}/{n_shards}"

    await wait_phase("enroll")
    responses = await _bounded(pop.concurrency, [
        (lambda a=a: transport.enroll(a.enroll_request(run_id, label))) for a in agents])
    for agent, resp in zip(agents, responses, strict=True):
        agent.token = resp.token
    result.enrolled = len(responses)
    result.seconds["enroll"] = time.perf_counter() - t0

    t1 = time.perf_counter()
    if await wait_phase("collect") == "collect":
        counts = await _submit_profiles(transport, agents, run_id, mechanism, pop.batch_size,
                                        max(1, pop.concurrency // pop.batch_size))
        result.accepted = sum(c[0] for c in counts)
        result.duplicates = sum(c[1] for c in counts)
    else:
        logger.warning("shard %s joined after collection; not submitting", label)
    result.seconds["collect"] = time.perf_counter() - t1

    await wait_phase("serve")
    t2 = time.perf_counter()
    # a model that answers no queries (e.g. the sketch kNN graph) publishes its result instead
    answers = json.loads(run_config.protocol_json or "{}").get("queries", True)
    testers = [a for a in agents if a.withheld.size] if answers else []
    replies = await _bounded(pop.concurrency, [
        (lambda a=a: transport.predict(a.query_request(run_id, mechanism))) for a in testers])
    result.queries = len(replies)
    result.seconds["serve"] = time.perf_counter() - t2
    _write_predictions(out_dir, shard, testers, replies, clip)
    (out_dir / "predictions" / f"shard-{shard}.json").write_text(
        json.dumps(dataclasses.asdict(result), indent=2))
    return result


async def _submit_profiles(transport: Transport, agents: list[UserAgent], run_id: str,
                           mechanism: Mechanism, batch_size: int, in_flight: int
                           ) -> list[tuple[int, int]]:
    batches = [agents[i:i + batch_size] for i in range(0, len(agents), batch_size)]

    def job(batch: list[UserAgent]) -> Callable[[], Awaitable[tuple[int, int]]]:
        return lambda: transport.submit_batch([a.profile_release(run_id, mechanism)
                                               for a in batch])

    try:
        return await _bounded(in_flight, [job(b) for b in batches])
    except ProtocolError:
        logger.exception("profile submission refused")
        raise


def _write_predictions(out_dir: Path, shard: int, testers: list[UserAgent],
                       answers: Sequence[object], clip: tuple[float, float] | None) -> None:
    users, items, scores, preds, n_nb = [], [], [], [], []
    for agent, resp in zip(testers, answers, strict=True):
        s = np.asarray(resp.scores, dtype=np.float64)  # type: ignore[attr-defined]
        users += [agent.user_id] * agent.withheld.size
        items.append(agent.withheld)
        scores.append(s)
        preds.append(agent.denormalise(s, clip))
        n_nb.append(np.asarray(resp.n_neighbours, dtype=np.int64))  # type: ignore[attr-defined]
    path = out_dir / "predictions" / f"shard-{shard}.npz"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, user_ids=np.array(users, dtype=str), items=_concat(items, np.int64),
             scores=_concat(scores, np.float64), predictions=_concat(preds, np.float64),
             n_neighbours=_concat(n_nb, np.int64))
    tmp.replace(path)



def _concat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)


__all__ = ["ShardResult", "make_agents", "polling_waiter", "run_shard"]
