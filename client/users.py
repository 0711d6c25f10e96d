"""The users a client shard hosts: who they are at once, their ratings chunk by chunk.

A shard hosts a contiguous range of the population's rows (`shared.population.shard_rows`).
When each user's plan follows from her own ratings (`shared.population.plan_is_local`) and the
population can be made a range of users at a time (`generated_by_rows`: synthetic data), the
shard knows its users' ids and tiers without any rating: it enrolls them at once, while a worker
thread, started with the shard, makes their ratings and plans `CHUNK_USERS` users at a time
(only the generator's blocks that hold them: `shared.population.population_rows`); the collect
phase releases each chunk as it arrives. Enrollment and collection thus overlap the generation,
and no shard makes another shard's users. Otherwise (a data set file, a two-tier run, a named
split) the shard loads the population, or takes the one its caller loaded, and plans its users
at once, as every node does; the chunks are then slices of that plan.

Either way the agents are the same: `local_plans` gives each user the plan
`population_plan` gives her.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import AsyncIterator, Iterator

import numpy as np

from privrec.client.agent import UserAgent
from privrec.shared.config import ExperimentConfig
from privrec.shared.data.dataset import RatingData
from privrec.shared.population import (
    collect_rounds,
    generated_by_rows,
    load_population,
    local_plans,
    local_test_users,
    plan_is_local,
    population_plan,
    population_rows,
    population_size,
    shard_rows,
)
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb

logger = logging.getLogger(__name__)

CHUNK_USERS = 4096
"""Users made at a time by a shard that generates its own (about 200,000 ratings: a few tens
of milliseconds of generation, then the plans)."""

_DONE = object()
"""Put on the chunk queue after the last chunk."""


class ShardUsers:
    """The users of one shard: `user_ids` and `tiers` at once, agents chunk by chunk.

    Attributes:
        rows: the population rows the shard hosts.
        user_ids: their ids on the wire, in row order.
        tiers: their enrollment tiers, aligned with `user_ids`.
        user_rounds: their collect rounds, aligned with `user_ids`.
        rounds: how many collect rounds the run has (the population's, not only this
            shard's users': every shard takes part in every round, and its predictions carry
            one row per round's model).
        tokens: user id → enrollment token, filled by the shard as it enrolls (or rejoins).
        generated: True when the shard makes its users itself, chunk by chunk.
    """

    def __init__(
        self,
        rows: range,
        user_ids: list[str],
        tiers: list[int],
        user_rounds: list[int],
        rounds: int,
        agents: list[UserAgent] | None,
        chunks: Iterator[list[UserAgent]] | None,
    ) -> None:
        self.rows, self.user_ids, self.tiers = rows, user_ids, tiers
        self.user_rounds, self.rounds = user_rounds, rounds
        self.tokens: dict[str, str] = {}
        self.generated = agents is None
        self._agents = agents
        self._testers: list[UserAgent] = [] if agents is None else _testers(agents)
        self._queue: queue.Queue[object] = queue.Queue()
        self._consumed = False
        if chunks is not None:
            self._worker = threading.Thread(
                target=self._produce, args=(chunks,), name="privrec-shard-users", daemon=True
            )
            self._worker.start()

    @classmethod
    def open(
        cls,
        config: ExperimentConfig,
        shard: int,
        n_shards: int,
        data: RatingData | None = None,
    ) -> ShardUsers:
        """The users of shard `shard` of `n_shards`: generated chunk by chunk when that is
        possible and `data` (the population, if the caller loaded it) is None, else planned
        from the loaded population."""
        if data is None and plan_is_local(config) and generated_by_rows(config.data):
            n_users = population_size(config.data)
            rows = shard_rows(n_users, shard, n_shards)
            ids = [str(r) for r in rows]  # a synthetic user's id is her row
            tested = local_test_users(config, n_users)
            chunks = _chunks(config, rows, tested)
            return cls(rows, ids, [pb.TIER_PRIVATE] * len(ids), [0] * len(ids), 1, None, chunks)
        data = data if data is not None else load_population(config.data, config.run.seed)
        rows = shard_rows(data.n_users, shard, n_shards)
        plans = population_plan(data, config, rows)
        agents = [UserAgent.from_plan(plan, config.run.seed) for plan in plans]
        ids = [a.user_id for a in agents]
        rounds = max([*collect_rounds(data, config.population, config.run.seed), 0]) + 1
        return cls(
            rows, ids, [a.tier for a in agents], [a.round for a in agents], rounds, agents, None
        )

    def _produce(self, chunks: Iterator[list[UserAgent]]) -> None:
        try:
            for chunk in chunks:
                self._testers.extend(_testers(chunk))
                self._queue.put(chunk)
        except BaseException as exc:  # handed to the consumer, which raises it
            self._queue.put(exc)
        self._queue.put(_DONE)

    def waiting(self, tier: int, round_: int, released: set[str]) -> int:
        """How many enrolled users of `tier` and collect round `round_` have not released."""
        return sum(
            t == tier and r == round_ and u in self.tokens and u not in released
            for u, t, r in zip(self.user_ids, self.tiers, self.user_rounds, strict=True)
        )

    def public_agents(self) -> list[UserAgent]:
        """The public-tier users, each with her token (none when the shard generates its
        users: one tier)."""
        return self._with_tokens([a for a in self._agents or [] if a.tier == pb.TIER_PUBLIC])

    async def chunks(self) -> AsyncIterator[list[UserAgent]]:
        """Every agent, in row order, a chunk at a time, each with her token (if she has
        one). Generated users come once: a second pass (a second collect round, which a shard
        generating its users never has) is refused."""
        if not self.generated:
            agents = self._agents or []
            for start in range(0, len(agents), CHUNK_USERS):
                yield self._with_tokens(agents[start : start + CHUNK_USERS])
            return
        if self._consumed:
            raise RuntimeError("a shard's generated users are made once")
        self._consumed = True
        while (item := await asyncio.to_thread(self._queue.get)) is not _DONE:
            if isinstance(item, BaseException):
                raise item
            yield self._with_tokens(item)  # type: ignore[arg-type]

    async def testers(self) -> list[UserAgent]:
        """The test users (with items to predict), in row order, each with her token: once
        every chunk is made (a shard that did not collect, e.g. restarted later, goes through
        the chunks first)."""
        if self.generated and not self._consumed:
            async for _ in self.chunks():
                pass
        return self._with_tokens(self._testers)

    def _with_tokens(self, agents: list[UserAgent]) -> list[UserAgent]:
        for a in agents:
            a.token = self.tokens.get(a.user_id, a.token)
        return agents


def _testers(agents: list[UserAgent]) -> list[UserAgent]:
    return [a for a in agents if a.withheld.size]


def _chunks(
    config: ExperimentConfig, rows: range, tested: np.ndarray | None
) -> Iterator[list[UserAgent]]:
    """The agents of `rows`, `CHUNK_USERS` at a time, each chunk's users generated alone."""
    seed = config.run.seed
    for start in range(rows.start, rows.stop, CHUNK_USERS):
        chunk = population_rows(
            config.data, seed, range(start, min(rows.stop, start + CHUNK_USERS))
        )
        yield [UserAgent.from_plan(p, seed) for p in local_plans(chunk, start, config, tested)]


__all__ = ["CHUNK_USERS", "ShardUsers"]
