"""The adversary's sybil clients: fake users enrolled through the real protocol.

Active attacks need answers the aggregator gives to users, not just what it stores. The
adversary enrolls sybils exactly as a client shard enrolls users (Enroll, SubmitStream,
Recommend/Predict over gRPC, or the in-process transport in `--launcher inprocess`); their
releases are releases like any other (stored verbatim in the transcript, counted in the privacy
ledger), and what they are answered is the adversary's own record
(``RUN_DIR/adversary/sybils/record.json``), which the attacks read live and in `replay` alike.

Two kinds of probes, planned deterministically (`plan_sybils`) from the side knowledge
(`adversary.knowledge`) and the public run config:

* **kNN (Zhu 2014 §2.3, after Calandrino et al. 2011).** For each target with m known ratings:
  a *crowd* of sybils (default k − 1, the model's k) whose profile is the m known items plus
  every other item at zero deviation, released in "collect"; and one *querying* sybil (no
  profile) that sends the m known items to `Recommend` in "serve". Calandrino's sybils hold
  only the m items because his kNN picks a user's k nearest neighbours first; privrec's kNN
  (Bilge §6.2, `server.models.knn`) picks them among the raters of each item, so a sybil that
  rated only the m items is never anybody's neighbour for another item. The crowd therefore
  rates every item with a known contribution of 0 (z = 0 on a z-score model, the sybil's own
  mean on a rating model) and, weighing more than anybody (its m values are the query's,
  scaled by `crowd_scale` on a z-score model; identical to the query on a rating model, where
  Pearson is 1 and the sybils win ties by sorting first), fills k − 1 of each item's k slots:
  the last slot goes to the best real rater of the item, for the target's items the target
  herself when her weight with the query is the largest among the item's raters.
* **Membership.** For each candidate with known ratings: `probe_items` of them are held back,
  and sybils in `membership_folds` distinct folds each send the rest to `Predict` for the held
  back items (a fold excludes the users of the querying user's fold from the answer, so at
  least one fold's answer comes from a model that could have seen the candidate).

Sybil ids start with "!" (it sorts before digits and letters): the server orders its rows by
user id, and ties in weight go to the lower row. Each sybil's fold (`shared.protocol.fold_of`,
public) is chosen by trying ids: the querying sybil never shares the target's fold, and the
crowd never shares the querying sybil's.

Mechanisms: the sybils send sparse payloads directly (the aggregator cannot tell a crafted
release from a perturbed one): "rpt" (z-score models; the query is the z-scores of the known
ratings) and "raw" (rating models; the known ratings as they are).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from privrec.adversary.knowledge import AdversaryKnowledge, KnownProfile
from privrec.shared.capabilities import ScoreKind
from privrec.shared.config import AdversarySection
from privrec.shared.errors import ConfigError, DataError
from privrec.shared.files import write_private
from privrec.shared.mechanisms.base import SparsePayload
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.protocol import fold_of, profile_nonce, query_nonce
from privrec.shared.run_config import PublicRunConfig
from privrec.shared.seeding import rng_for
from privrec.shared.serde import payload_to_proto
from privrec.shared.types import FloatArray, IntArray
from privrec.shared.zscores import denormalise, zscore

logger = logging.getLogger(__name__)

SYBIL_PREFIX = "!sybil"
RECORD_PATH = Path("adversary") / "sybils" / "record.json"
"""The sybils' record, relative to the run directory."""
SYBIL_MECHANISMS = ("rpt", "raw")
"""Mechanisms whose releases the sybils can craft (sparse values at chosen items)."""
PhaseWaiter = Callable[[str], Awaitable[str]]


@dataclasses.dataclass(frozen=True)
class SybilSettings:
    """How many sybils and probes (the `[adversary]` keys of the same names).

    Attributes:
        knn_sybils: crowd size per target; 0 = the model's k − 1.
        knn_recommend: n of each Recommend query.
        knn_queries: Recommend queries per target (more than one only helps against a
            randomised model).
        crowd_scale: factor on the crowd's m values on a z-score model (module docstring).
        membership_probe_items: known ratings held back and asked for, per candidate.
        membership_folds: querying sybils per candidate, in distinct folds.
    """

    knn_sybils: int = 0
    knn_recommend: int = 50
    knn_queries: int = 1
    crowd_scale: float = 10.0
    membership_probe_items: int = 5
    membership_folds: int = 2

    @classmethod
    def from_section(cls, section: AdversarySection) -> SybilSettings:
        """The settings of the `[adversary]` section."""
        return cls(
            knn_sybils=section.knn_sybils,
            knn_recommend=section.knn_recommend,
            knn_queries=section.knn_queries,
            membership_probe_items=section.membership_probe_items,
        )


@dataclasses.dataclass(frozen=True)
class CrowdSybil:
    """A sybil that releases a crafted profile in "collect" (kNN crowd)."""

    sybil_id: str
    subject: str
    profile: SparsePayload


@dataclasses.dataclass(frozen=True)
class Probe:
    """One query a sybil sends in "serve", and (once run) what it was answered.

    Attributes:
        purpose: "knn" or "membership".
        subject: the target's id or the candidate's label.
        sybil_id: the querying sybil.
        index: the query's index for this sybil (its nonce is query-{index}).
        method: "Recommend" or "Predict".
        query: the sparse query payload.
        n: Recommend's n (0 for Predict).
        items: Predict's target items (empty for Recommend).
        answer_items: Recommend: the items answered, best first; Predict: `items`.
        answer_scores: the answered scores, as the server sent them.
        answer_ratings: the scores as ratings: de-normalised with the query's own mean and
            deviation on a z-score model (Bilge Eq 2.5, as a client would), else as sent.
    """

    purpose: str
    subject: str
    sybil_id: str
    index: int
    method: str
    query: SparsePayload
    n: int = 0
    items: IntArray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))
    answer_items: IntArray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))
    answer_scores: FloatArray = dataclasses.field(default_factory=lambda: np.zeros(0))
    answer_ratings: FloatArray = dataclasses.field(default_factory=lambda: np.zeros(0))

    def to_json(self) -> dict[str, Any]:
        """The probe as JSON: purpose, subject, sybil, its query and the answer it received."""
        return {
            "purpose": self.purpose,
            "subject": self.subject,
            "sybil": self.sybil_id,
            "index": self.index,
            "method": self.method,
            "dim": self.query.dim,
            "query_items": self.query.indices.tolist(),
            "query_values": self.query.values.tolist(),
            "n": self.n,
            "items": self.items.tolist(),
            "answer_items": self.answer_items.tolist(),
            "answer_scores": self.answer_scores.tolist(),
            "answer_ratings": self.answer_ratings.tolist(),
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Probe:
        """Read a probe written by `to_json`."""
        query = SparsePayload(
            int(raw["dim"]),
            np.asarray(raw["query_items"], dtype=np.int64),
            np.asarray(raw["query_values"], dtype=np.float64),
        )
        return cls(
            str(raw["purpose"]),
            str(raw["subject"]),
            str(raw["sybil"]),
            int(raw["index"]),
            str(raw["method"]),
            query,
            int(raw["n"]),
            np.asarray(raw["items"], dtype=np.int64),
            np.asarray(raw["answer_items"], dtype=np.int64),
            np.asarray(raw["answer_scores"], dtype=np.float64),
            np.asarray(raw["answer_ratings"], dtype=np.float64),
        )


@dataclasses.dataclass(frozen=True)
class SybilPlan:
    """Every sybil and probe of a run (`plan_sybils`); once run, the probes carry answers."""

    crowd: tuple[CrowdSybil, ...] = ()
    probes: tuple[Probe, ...] = ()
    settings: SybilSettings = dataclasses.field(default_factory=SybilSettings)

    @property
    def sybil_ids(self) -> list[str]:
        """Every sybil, crowd first, each once, in a fixed order."""
        ids = [c.sybil_id for c in self.crowd] + [p.sybil_id for p in self.probes]
        return list(dict.fromkeys(ids))

    @property
    def empty(self) -> bool:
        """True when the plan enrolls no sybil."""
        return not self.crowd and not self.probes

    def of(self, purpose: str) -> list[Probe]:
        """The probes made for one purpose (e.g. "knn" or "membership")."""
        return [p for p in self.probes if p.purpose == purpose]

    def to_json(self) -> dict[str, Any]:
        """The plan as JSON: settings, crowd and probes."""
        return {
            "settings": dataclasses.asdict(self.settings),
            "crowd": [{"sybil": c.sybil_id, "subject": c.subject} for c in self.crowd],
            "probes": [p.to_json() for p in self.probes],
        }

    def write(self, run_dir: Path) -> Path:
        """Write the plan to the run's record file (0600) and return its path."""
        path = run_dir / RECORD_PATH
        write_private(path, json.dumps(self.to_json(), indent=1).encode())  # answers per sybil
        return path

    @classmethod
    def read(cls, run_dir: Path) -> SybilPlan | None:
        """The recorded plan with its answers, or None when the run had no sybils. The
        crowd's profiles are not in the record (they are in the transcript, as released):
        the crowd comes back with ids and subjects and empty payloads.

        Raises:
            DataError: a malformed record.
        """
        path = run_dir / RECORD_PATH
        if not path.exists():
            return None
        try:
            raw = json.loads(path.read_text())
            settings = SybilSettings(**raw["settings"])
            probes = tuple(Probe.from_json(p) for p in raw["probes"])
            crowd = tuple(
                CrowdSybil(str(c["sybil"]), str(c["subject"]), SparsePayload(0, _EMPTY_I, _EMPTY_F))
                for c in raw["crowd"]
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"{path}: malformed sybil record ({exc})") from exc
        return cls(crowd, probes, settings)


_EMPTY_I: IntArray = np.zeros(0, np.int64)
_EMPTY_F: FloatArray = np.zeros(0)


# ---------------------------------------------------------------------------- planning
def _sybil_id(label: str, n_folds: int, seed: int, want: Callable[[int], bool]) -> str:
    """The first id `{SYBIL_PREFIX}-{label}-{t}` whose public fold satisfies `want`."""
    for t in range(10_000):
        uid = f"{SYBIL_PREFIX}-{label}-{t}"
        if want(fold_of(uid, n_folds, seed)):
            return uid
    raise ConfigError(f"no sybil id with the wanted fold for {label!r}")  # pragma: no cover


def _not_in(folds: set[int]) -> Callable[[int], bool]:
    """The wish "a fold outside `folds`"."""

    def want(fold: int) -> bool:
        return fold not in folds

    return want


def _query_values(run_config: PublicRunConfig, ratings: FloatArray) -> FloatArray:
    """What a sybil sends for known ratings: z-scores on a z-score model, else the ratings."""
    if run_config.score_kind is ScoreKind.ZSCORE:
        return zscore(ratings).z
    return np.asarray(ratings, dtype=np.float64).copy()


def model_k(run_config: PublicRunConfig) -> int | None:
    """The model's neighbourhood size k, when its parameters have one."""
    k = run_config.model_params.get("k")
    return int(k) if isinstance(k, int | float) and not isinstance(k, bool) else None


def crowd_size(settings: SybilSettings, k: int | None) -> int:
    """The kNN crowd per target: `settings.knn_sybils`, or k − 1 (at least 1)."""
    if settings.knn_sybils:
        return settings.knn_sybils
    return max(1, (k or 2) - 1)


def check_sybil_run(run_config: PublicRunConfig) -> None:
    """Sybils need a model that answers queries and a mechanism whose releases they can craft.

    Raises:
        ConfigError: naming the key at fault.
    """
    if not run_config.answers_queries:
        raise ConfigError(
            f"adversary: sybil probes need a model that answers queries; "
            f"{run_config.model_name!r} does not"
        )
    if run_config.mechanism_name not in SYBIL_MECHANISMS:
        raise ConfigError(
            f"adversary: sybils can craft {list(SYBIL_MECHANISMS)} releases, "
            f"not {run_config.mechanism_name!r}"
        )
    if run_config.n_folds == 0:
        raise ConfigError(
            "adversary: the sybils place their crowd and probes by the fold rule of the "
            'thesis protocol; set [evaluation] split = "thesis" for a sybil attack'
        )


def crowd_scale(settings: SybilSettings, values: np.ndarray, bound: float) -> float:
    """The factor on a crowd's known z-scores: `settings.crowd_scale`, lowered so that no value
    passes the mechanism's published `value_bound` (the server refuses a release beyond it,
    and the adversary knows the bound as everyone does). On ML-100K with RPT the bound is 65
    and the default factor 10 fits; a tiny catalogue can need less."""
    top = float(np.max(np.abs(values))) if values.size else 0.0
    if top == 0.0:
        return settings.crowd_scale
    return min(settings.crowd_scale, 0.999 * bound / top)  # 0.999: no rounding past the bound


def plan_sybils(
    knowledge: AdversaryKnowledge, run_config: PublicRunConfig, settings: SybilSettings
) -> SybilPlan:
    """Every sybil and probe (module docstring), deterministic in its inputs.

    Raises:
        ConfigError: the run cannot host sybils (`check_sybil_run`), or a candidate knows
            too few ratings for its probes.
    """
    if not knowledge.targets and not knowledge.candidates:
        return SybilPlan(settings=settings)
    check_sybil_run(run_config)
    m, n_folds, seed = run_config.n_items, run_config.n_folds, run_config.fold_seed
    crowd: list[CrowdSybil] = []
    probes: list[Probe] = []
    size = crowd_size(settings, model_k(run_config))
    zmodel = run_config.score_kind is ScoreKind.ZSCORE
    bound = run_config.mechanism().value_bound(m)
    for t, target in enumerate(knowledge.targets):
        f_target = fold_of(target.label, n_folds, seed)
        q_id = _sybil_id(f"knn{t}-q", n_folds, seed, _not_in({f_target}))
        f_q = fold_of(q_id, n_folds, seed)
        values = _query_values(run_config, target.ratings)
        query = SparsePayload(m, target.items.copy(), values)
        fill = np.zeros(m) if zmodel else np.full(m, float(np.mean(target.ratings)))
        fill[target.items] = crowd_scale(settings, values, bound) * values if zmodel else values
        profile = SparsePayload(m, np.arange(m, dtype=np.int64), fill)
        for c in range(size):
            c_id = _sybil_id(f"knn{t}-c{c}", n_folds, seed, _not_in({f_q}))
            crowd.append(CrowdSybil(c_id, target.label, profile))
        for i in range(settings.knn_queries):
            probes.append(
                Probe("knn", target.label, q_id, i, "Recommend", query, n=settings.knn_recommend)
            )
    h = settings.membership_probe_items
    for c, cand in enumerate(knowledge.candidates):
        if cand.items.size < h + 2:
            raise ConfigError(
                f"adversary.membership_probe_items: candidate {cand.label!r} knows "
                f"{cand.items.size} ratings, fewer than {h} probes + 2"
            )
        rng = rng_for(seed, "adversary", "membership", cand.label)
        held = np.sort(rng.choice(cand.items.size, size=h, replace=False))
        keep = np.setdiff1d(np.arange(cand.items.size), held)
        query = SparsePayload(
            m, cand.items[keep].copy(), _query_values(run_config, cand.ratings[keep])
        )
        used: set[int] = set()
        for r in range(min(settings.membership_folds, n_folds)):
            s_id = _sybil_id(f"mi{c}-{r}", n_folds, seed, _not_in(set(used)))
            used.add(fold_of(s_id, n_folds, seed))
            probes.append(
                Probe("membership", cand.label, s_id, 0, "Predict", query, items=cand.items[held])
            )
    return SybilPlan(tuple(crowd), tuple(probes), settings)


def sybil_counts(
    knowledge: AdversaryKnowledge, settings: SybilSettings, k: int | None
) -> tuple[int, int]:
    """(sybils that enroll, crowd profiles they release) for the orchestrator's counts."""
    crowd = len(knowledge.targets) * crowd_size(settings, k)
    queriers = len(knowledge.targets) + len(knowledge.candidates) * settings.membership_folds
    return crowd + queriers, crowd


# ---------------------------------------------------------------------------- running
class SybilTransport(Protocol):
    """What the sybils call on the aggregator (`GrpcTransport`, `sim.inprocess`)."""

    async def run_config(self) -> pb.RunConfig:
        """The run's public configuration."""

    async def enroll(self, req: pb.EnrollRequest) -> pb.EnrollResponse:
        """Enroll one sybil."""

    async def submit_batch(self, releases: list[pb.Release]) -> tuple[int, int]:
        """Submit releases; (accepted, duplicates)."""

    async def predict(self, req: pb.PredictRequest) -> pb.PredictResponse:
        """Ask one prediction query."""

    async def recommend(self, req: pb.RecommendRequest) -> pb.RecommendResponse:
        """Ask one recommendation query."""


def _release(
    run_config: PublicRunConfig, uid: str, token: str, nonce: str, purpose: int, p: SparsePayload
) -> pb.Release:
    rel = pb.Release(
        run_id=run_config.run_id,
        user_id=uid,
        token=token,
        nonce=nonce,
        purpose=purpose,  # type: ignore[arg-type]
    )
    payload_to_proto(run_config.mechanism().payload_field, p, rel)
    return rel


async def run_sybils(
    transport: SybilTransport,
    knowledge: AdversaryKnowledge,
    settings: SybilSettings,
    run_dir: Path,
    wait_phase: PhaseWaiter,
    *,
    batch_size: int = 16,
) -> SybilPlan:
    """Enroll, release and query as the plan says; write and return the plan with answers.

    Follows the phases: enroll (every sybil), collect (the crowd's profiles), serve (the
    probes). A phase already passed is skipped with a warning (a late start).
    """
    run_config = PublicRunConfig.from_proto(await transport.run_config())
    plan = plan_sybils(knowledge, run_config, settings)
    if plan.empty:
        return plan
    tokens: dict[str, str] = {}
    if await wait_phase("enroll") == "enroll":
        for uid in plan.sybil_ids:
            resp = await transport.enroll(
                pb.EnrollRequest(
                    run_id=run_config.run_id, user_id=uid, shard="adversary", tier=pb.TIER_PRIVATE
                )
            )
            tokens[uid] = resp.token
    else:
        logger.warning("sybils started after enrollment; nothing to do")
        return plan
    if await wait_phase("collect") == "collect":
        rels = [
            _release(
                run_config,
                c.sybil_id,
                tokens[c.sybil_id],
                profile_nonce(),
                pb.PURPOSE_PROFILE,
                c.profile,
            )
            for c in plan.crowd
        ]
        for i in range(0, len(rels), batch_size):
            await transport.submit_batch(rels[i : i + batch_size])
    await wait_phase("serve")
    answered = []
    for probe in plan.probes:
        rel = _release(
            run_config,
            probe.sybil_id,
            tokens[probe.sybil_id],
            query_nonce(probe.index),
            pb.PURPOSE_QUERY,
            probe.query,
        )
        if probe.method == "Recommend":
            rec = await transport.recommend(pb.RecommendRequest(query=rel, n=probe.n))
            items = np.asarray(rec.items, dtype=np.int64)
            scores = np.asarray(rec.scores, dtype=np.float64)
        else:
            pred = await transport.predict(pb.PredictRequest(query=rel, items=probe.items.tolist()))
            items = probe.items.copy()
            scores = np.asarray(pred.scores, dtype=np.float64)
        answered.append(
            dataclasses.replace(
                probe,
                answer_items=items,
                answer_scores=scores,
                answer_ratings=scores_as_ratings(run_config, probe, scores, knowledge),
            )
        )
    done = dataclasses.replace(plan, probes=tuple(answered))
    done.write(run_dir)
    logger.info(
        "sybils: %d enrolled, %d crowd profiles, %d probes answered",
        len(tokens),
        len(plan.crowd),
        len(answered),
    )
    return done


def scores_as_ratings(
    run_config: PublicRunConfig, probe: Probe, scores: FloatArray, knowledge: AdversaryKnowledge
) -> FloatArray:
    """Answered scores as ratings: a z-score answer is de-normalised with the mean and
    deviation of the known ratings the query was made of (Bilge Eq 2.5, as a client does)."""
    if run_config.score_kind is not ScoreKind.ZSCORE:
        return scores.copy()
    known = _known_ratings(knowledge, probe)
    stats = zscore(known)
    return np.asarray(denormalise(scores, stats.mean, stats.std, clip=run_config.rating_scale))


def _known_ratings(knowledge: AdversaryKnowledge, probe: Probe) -> FloatArray:
    rows: Sequence[KnownProfile] = (
        knowledge.targets if probe.purpose == "knn" else knowledge.candidates
    )
    for row in rows:
        if row.label == probe.subject:
            keep = np.isin(row.items, probe.query.indices)
            return row.ratings[keep]
    raise DataError(f"no known ratings for {probe.subject!r}")  # pragma: no cover


__all__ = [
    "RECORD_PATH",
    "SYBIL_MECHANISMS",
    "SYBIL_PREFIX",
    "CrowdSybil",
    "Probe",
    "SybilPlan",
    "SybilSettings",
    "SybilTransport",
    "check_sybil_run",
    "crowd_scale",
    "crowd_size",
    "model_k",
    "plan_sybils",
    "run_sybils",
    "scores_as_ratings",
    "sybil_counts",
]
