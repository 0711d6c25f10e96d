"""A client shard: one OS process hosting a slice of the population, multiplexed with asyncio.

`run_shard` follows the phases: enroll its users; in a two-tier run, submit its public users'
ratings in phase "public" and download the public model (µ, V) before its private users release;
submit the private users' profile releases (in batches on SubmitStream); and in the serve phase
either send each test user's freshly perturbed query and de-normalise the answers locally, or,
when the model answers no queries but publishes (µ, V), predict locally with it. Its predictions
go to the experimenter's run directory (not to the server) for the referee. A shard killed at
any point can be started again: enrollment is idempotent and every release carries a fixed
nonce, so nothing is stored twice.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np

from privrec.client.agent import UserAgent, profile_releases
from privrec.client.journal import AnswerJournal
from privrec.client.transport import Transport, all_users
from privrec.client.users import ShardUsers
from privrec.shared.capabilities import ScoreKind
from privrec.shared.config import ExperimentConfig, PopulationSection
from privrec.shared.data.dataset import RatingData
from privrec.shared.errors import ProtocolError
from privrec.shared.files import private_dir
from privrec.shared.mechanisms.base import Mechanism
from privrec.shared.mechanisms.second_order import SecondOrderMechanism
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.protocol import ENROLL_PHASES, PHASES
from privrec.shared.run_config import PublicRunConfig
from privrec.shared.serde import PublishedModel, write_npz

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

    def add(self, counts: list[tuple[int, int]]) -> None:
        """Count the (accepted, duplicates) of submitted batches."""
        self.accepted += sum(c[0] for c in counts)
        self.duplicates += sum(c[1] for c in counts)


async def wait_round(
    transport: Transport, round_: int, poll_s: float, timeout: float = 3600.0
) -> bool:
    """Wait until the server publishes the model of collect round `round_` (polling
    `GetRunConfig`); False when the run left "collect" first."""
    deadline = time.monotonic() + timeout
    while True:
        rc = await transport.run_config()
        if rc.phase != "collect":
            return False
        if rc.round >= round_:
            return True
        if time.monotonic() > deadline:
            raise TimeoutError(f"collect round {round_} not reached within {timeout}s")
        await asyncio.sleep(poll_s)


def bind_published(mechanism: Mechanism, model: PublishedModel) -> None:
    """Bind a second-order mechanism to the published public model (µ, V and, e.g., PMC's
    shared h), as a private user does before she releases (Xin & Jaakkola Sec. 4)."""
    if isinstance(mechanism, SecondOrderMechanism):
        mechanism.bind(model.arrays["mu"], model.arrays["V"], **model.binding)


async def _query_batches(
    transport: Transport,
    testers: Sequence[UserAgent],
    run_id: str,
    mechanism: Mechanism,
    batch_size: int,
    in_flight: int,
    journal: AnswerJournal,
    ticker: _Ticker | None = None,
) -> int:
    """Every tester's freshly disguised query, `batch_size` users' queries per PredictBatch
    call (each still her own release; built when its batch's turn comes); each batch's
    answers go to the `journal` as they come. Returns how many were answered."""
    batches = [testers[i : i + batch_size] for i in range(0, len(testers), batch_size)]

    def job(batch: Sequence[UserAgent]) -> Callable[[], Awaitable[int]]:
        async def send() -> int:
            answers = await transport.predict_batch(
                [a.query_request(run_id, mechanism) for a in batch]
            )
            journal.add([a.user_id for a in batch], answers)
            if ticker is not None:
                ticker.add(len(batch))
            return len(answers)

        return send

    return sum(await _bounded(in_flight, [job(b) for b in batches]))


LOG_EVERY_S = 5.0
"""A shard logs how far it is in a phase at most this often (and when the phase is done)."""


class _Ticker:
    """Logs ``shard I/N: WHAT done/total`` at most every `LOG_EVERY_S` seconds, and once at
    the end with the phase's time: a hand-started shard is never silent for long."""

    def __init__(self, shard: str, what: str, total: int) -> None:
        self.shard, self.what, self.total = shard, what, total
        self.done = 0
        self.t0 = self.last = time.monotonic()

    def add(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if self.done >= self.total:
            logger.info(
                "shard %s: %s %d/%d (%.1f s)",
                self.shard,
                self.what,
                self.done,
                self.total,
                now - self.t0,
            )
        elif now - self.last >= LOG_EVERY_S:
            self.last = now
            logger.info("shard %s: %s %d/%d", self.shard, self.what, self.done, self.total)


async def _bounded(
    limit: int, jobs: Sequence[Callable[[], Awaitable[T]]], ticker: _Ticker | None = None
) -> list[T]:
    sem = asyncio.Semaphore(limit)

    async def one(job: Callable[[], Awaitable[T]]) -> T:
        async with sem:
            out = await job()
        if ticker is not None:
            ticker.add()
        return out

    return list(await asyncio.gather(*(one(j) for j in jobs)))


async def run_shard(
    config: ExperimentConfig,
    transport: Transport,
    shard: int,
    n_shards: int,
    out_dir: Path,
    wait_phase: PhaseWaiter,
    data: RatingData | None = None,
    poll_s: float = 0.05,
) -> ShardResult:
    """Run one shard through enroll → public → collect → serve and write its predictions.

    Args:
        config: the experiment configuration (the shard reads only [run], [data],
            [population] and [model].clip; the mechanism comes from the server's PUBLIC
            run config, as it would for a real client).
        transport: gRPC or in-process.
        shard, n_shards: which slice of the population this is.
        out_dir: the run directory; predictions go to `out_dir/predictions/shard-{shard}.npz`.
        wait_phase: how to wait for a phase (MQTT or polling).
        data: the population, if the caller already loaded it.
        poll_s: how often to poll for the next collect round of a two-tier run.
    """
    t0 = time.perf_counter()
    users = ShardUsers.open(config, shard, n_shards, data)
    result = ShardResult(shard=shard, users=len(users.user_ids))
    run_config = PublicRunConfig.from_proto(await transport.run_config())
    run_id = run_config.run_id
    mechanism = run_config.mechanism()
    clip = run_config.rating_scale if config.model.clip else None
    pop = config.population
    label = f"{shard}/{n_shards}"
    in_flight = max(1, pop.concurrency // pop.batch_size)

    how = " (generated here, chunk by chunk)" if users.generated else ""
    logger.info("shard %s: %d users%s; waiting for the enroll phase", label, result.users, how)
    await wait_phase("enroll")
    released = await _join(transport, users, run_id, label, pop)
    result.enrolled = len(users.tokens)
    result.seconds["enroll"] = time.perf_counter() - t0

    def going_on(a: UserAgent, tier: pb.Tier.ValueType) -> bool:
        """She has this tier, is enrolled and has not released her profile yet."""
        return a.tier == tier and a.user_id in users.tokens and a.user_id not in released

    def releases_in(round_: int, a: UserAgent) -> bool:
        """She is a private user who releases in collect round `round_` and has not yet."""
        return a.round == round_ and going_on(a, pb.TIER_PRIVATE)

    t1 = time.perf_counter()
    local = run_config.local_prediction
    public = [a for a in users.public_agents() if going_on(a, pb.TIER_PUBLIC)]
    if await wait_phase("public") == "public" and public:
        result.add(
            await _submit(
                transport,
                _one(public),
                lambda batch: [a.public_release(run_id) for a in batch],
                pop.batch_size,
                in_flight,
                _Ticker(label, "public ratings shared", len(public)),
            )
        )
    elif public:
        logger.warning("shard %s joined after the public phase; not submitting", label)
    result.seconds["public"] = time.perf_counter() - t1

    t1 = time.perf_counter()
    round_models: list[PublishedModel] = []  # the model each round's users bound to
    private = sum(users.waiting(pb.TIER_PRIVATE, r, released) for r in range(users.rounds))
    if await wait_phase("collect") == "collect":
        for r in range(users.rounds):
            if run_config.two_tier:
                if not await wait_round(transport, r, poll_s):
                    logger.warning("shard %s: collect ended before round %d", label, r)
                    break
                round_models.append(PublishedModel.from_bytes(await transport.model_archive(r)))
                bind_published(mechanism, round_models[-1])
            where = f" (round {r + 1}/{users.rounds})" if users.rounds > 1 else ""
            releasing = _releasing(users.chunks(), functools.partial(releases_in, r))
            result.add(
                await _submit(
                    transport,
                    releasing,
                    functools.partial(
                        profile_releases,
                        run_id=run_id,
                        mechanism=mechanism,
                        holdout=run_config.holdout,
                    ),
                    pop.batch_size,
                    in_flight,
                    _Ticker(
                        label,
                        f"profiles released{where}",
                        users.waiting(pb.TIER_PRIVATE, r, released),
                    ),
                )
            )
    elif private:
        logger.warning("shard %s joined after collection; not submitting", label)
    result.seconds["collect"] = time.perf_counter() - t1

    logger.info("shard %s: waiting for the serve phase", label)
    serving = await wait_phase("serve") == "serve"
    t2 = time.perf_counter()
    testers = await users.testers()
    if local:  # the model publishes its parameters: every user predicts herself
        final = PublishedModel.from_bytes(await transport.model_archive())
        rule = run_config.capabilities.local_predictor
        predictions = _local_predictions(testers, rule, final, round_models, clip)
    else:
        # a model that answers no queries (e.g. the sketch kNN graph) publishes its result
        testers = testers if run_config.answers_queries else []
        journal = AnswerJournal(private_dir(out_dir / "predictions") / f"shard-{shard}.answers")
        asking = [a for a in testers if a.user_id not in journal.answers]
        if len(asking) < len(testers):
            logger.info("shard %s: %d answers from before a restart", label, len(journal.answers))
        if asking and not serving:
            raise ProtocolError(
                f"shard {label}: the run left 'serve' before {len(asking)} of its users were "
                "answered; their predictions are missing"
            )
        result.queries = await _query_batches(
            transport,
            asking,
            run_id,
            mechanism,
            pop.batch_size,
            in_flight,
            journal,
            _Ticker(label, "queries answered", len(asking)),
        )
        replies = [journal.answers[a.user_id] for a in testers]
        predictions = _query_predictions(testers, replies, run_config.score_kind, clip)
    result.seconds["serve"] = time.perf_counter() - t2
    _write_predictions(out_dir, shard, predictions)
    (out_dir / "predictions" / f"shard-{shard}.json").write_text(
        json.dumps(dataclasses.asdict(result), indent=2)
    )
    return result


async def _join(
    transport: Transport,
    users: ShardUsers,
    run_id: str,
    label: str,
    pop: PopulationSection,
) -> set[str]:
    """The shard's users as the server holds them (a restarted shard continues from there):
    enroll them while the run enrolls (idempotent), else take their receipts from `ListUsers`
    (users never enrolled take no part); fills `users.tokens` (the users who can go on) and
    returns the ids whose profile is already stored."""
    known = await all_users(transport)
    if (await transport.run_config()).phase in ENROLL_PHASES:
        await _enroll(
            transport,
            users,
            run_id,
            label,
            pop.batch_size,
            max(1, pop.concurrency // pop.batch_size),
            _Ticker(label, "users enrolled", len(users.user_ids)),
        )
    else:
        users.tokens.update({u: known[u].token for u in users.user_ids if u in known})
        missing = len(users.user_ids) - len(users.tokens)
        if missing:
            logger.warning(
                "shard %s: %d users were never enrolled and the run no longer enrolls",
                label,
                missing,
            )
    released = {u for u, state in known.items() if state.profile}
    if released:
        logger.info("shard %s: %d profiles already stored (a restart)", label, len(released))
    return released


async def _enroll(
    transport: Transport,
    users: ShardUsers,
    run_id: str,
    shard: str,
    batch_size: int,
    in_flight: int,
    ticker: _Ticker | None = None,
) -> int:
    """Enroll the users in batches of `batch_size` on EnrollBatch (`in_flight` at once), each
    batch's requests built when its turn comes, and keep each user's token in `users.tokens`;
    returns how many were enrolled (half a million requests and answers held at once would
    stay in the shard's memory for the rest of the run). Enrolling needs only ids and tiers:
    a shard that generates its users enrolls them while it makes their ratings."""
    order = list(zip(users.user_ids, users.tiers, strict=True))
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]

    def job(batch: Sequence[tuple[str, int]]) -> Callable[[], Awaitable[int]]:
        async def send() -> int:
            answers = await transport.enroll_batch(
                [
                    pb.EnrollRequest(run_id=run_id, user_id=u, shard=shard, tier=tier)  # type: ignore[arg-type]
                    for u, tier in batch
                ]
            )
            for (user_id, _), answer in zip(batch, answers, strict=True):
                users.tokens[user_id] = answer.token
            if ticker is not None:
                ticker.add(len(batch))
            return len(answers)

        return send

    return sum(await _bounded(in_flight, [job(b) for b in batches]))


async def _one(agents: list[UserAgent]) -> AsyncIterator[list[UserAgent]]:
    """`agents` as a single chunk (for `_submit`)."""
    yield agents


async def _releasing(
    chunks: AsyncIterator[list[UserAgent]], keep: Callable[[UserAgent], bool]
) -> AsyncIterator[list[UserAgent]]:
    """The agents of each chunk that `keep` selects."""
    async for chunk in chunks:
        yield [a for a in chunk if keep(a)]


async def _submit(
    transport: Transport,
    chunks: AsyncIterator[list[UserAgent]],
    build: Callable[[Sequence[UserAgent]], list[pb.Release]],
    batch_size: int,
    in_flight: int,
    ticker: _Ticker | None = None,
) -> list[tuple[int, int]]:
    """Submit the agents' releases in batches of `batch_size` on SubmitStream, `in_flight` at
    once, each batch's built (`build`) when its turn comes. The chunks are taken as they come
    (a shard generating its users makes the next chunk meanwhile); a batch never spans two."""
    sem = asyncio.Semaphore(in_flight)
    sent: list[asyncio.Task[tuple[int, int]]] = []

    async def send(batch: Sequence[UserAgent]) -> tuple[int, int]:
        try:
            counts = await transport.submit_batch(build(batch))
        finally:
            sem.release()
        if ticker is not None:
            ticker.add(len(batch))
        return counts

    try:
        async for chunk in chunks:
            for i in range(0, len(chunk), batch_size):
                await sem.acquire()
                if failed := [t for t in sent if t.done() and t.exception() is not None]:
                    await failed[0]  # raises its error: stop at the first refused batch
                sent.append(asyncio.create_task(send(chunk[i : i + batch_size])))
        return list(await asyncio.gather(*sent))
    except ProtocolError:
        logger.exception("profile submission refused")
        raise
    finally:
        for task in sent:
            task.cancel()


Predictions = dict[str, np.ndarray]


def _query_predictions(
    testers: list[UserAgent],
    answers: Sequence[pb.PredictResponse],
    kind: ScoreKind,
    clip: tuple[float, float] | None,
) -> Predictions:
    """Predictions from the server's answers: z-scores P′ de-normalised by each user (Bilge
    Eq 2.5), or ratings used as they are (clipped when `clip` is set)."""
    users, items, scores, preds, n_nb = [], [], [], [], []
    for agent, resp in zip(testers, answers, strict=True):
        s = np.asarray(resp.scores, dtype=np.float64)
        users += [agent.user_id] * agent.withheld.size
        items.append(agent.withheld)
        scores.append(s)
        if kind is ScoreKind.ZSCORE:
            preds.append(agent.denormalise(s, clip))
        elif kind is ScoreKind.PROBABILITY:  # a classifier: she reads the class (like = 1)
            preds.append((s > 0.5).astype(np.float64))
        else:
            preds.append(np.clip(s, *clip) if clip else s)
        n_nb.append(np.asarray(resp.n_neighbours, dtype=np.int64))
    return {
        "user_ids": np.array(users, dtype=str),
        "items": _concat(items, np.int64),
        "scores": _concat(scores, np.float64),
        "predictions": _concat(preds, np.float64),
        "n_neighbours": _concat(n_nb, np.int64),
        "score_kind": np.array(str(kind)),
    }


def _local_predictions(
    testers: list[UserAgent],
    rule: str,
    final: PublishedModel,
    round_models: list[PublishedModel],
    clip: tuple[float, float] | None,
) -> Predictions:
    """Predictions each user computes herself with the published parameters and the model's
    local rule (`shared.local_prediction`); `scores` are the unclipped predictions. With the
    models of the collect rounds at hand (round 0: the public model alone) also what each would
    have predicted, for the utility-versus-private-users curve (`round_predictions`, shape
    (rounds, predictions))."""

    def complete(model: PublishedModel) -> np.ndarray:
        return _concat([a.local_predictions(rule, model.arrays) for a in testers], np.float64)

    def clipped(scores: np.ndarray) -> np.ndarray:
        return np.clip(scores, *clip) if clip else scores

    scores = complete(final)
    out = {
        "user_ids": np.array([a.user_id for a in testers for _ in a.withheld], dtype=str),
        "items": _concat([a.withheld for a in testers], np.int64),
        "scores": scores,
        "predictions": clipped(scores),
        "n_neighbours": np.zeros(scores.size, np.int64),
        "score_kind": np.array(str(ScoreKind.RATING)),
    }
    if round_models:
        out["round_predictions"] = np.stack([clipped(complete(m)) for m in round_models])
    return out


def _write_predictions(out_dir: Path, shard: int, predictions: Predictions) -> None:
    path = private_dir(out_dir / "predictions") / f"shard-{shard}.npz"
    write_npz(path, predictions, private=True)  # each user's withheld items and predictions


def _concat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)


__all__ = ["ShardResult", "polling_waiter", "run_shard"]
