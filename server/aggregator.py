"""The untrusted aggregator's core: validation, storage, training and serving, without gRPC.

`server/servicer.py` is a thin gRPC adapter over this class and `--launcher inprocess` calls it
directly, so both transports run the same logic. Every method that receives client data takes
the request's raw bytes, exactly as they arrived, because the transcript stores them verbatim.

Validation happens once, here, before anything is stored: a bad request raises a
`shared.errors` exception naming the field (mapped to a gRPC status by `shared.rpc`) and leaves
the store untouched.

The core dispatches on what the run's model declares (`ModelCapabilities`), never on its name:
what `fit` receives (`server.training`), whether queries are answered, and — for a two-tier
model — the public phase and collect rounds (`server.two_tier`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
from google.protobuf.message import DecodeError

from privrec.server.models import MODELS, Model, Recommender, TwoTierModel
from privrec.server.store import NewRelease, Store
from privrec.server.training import TRAINING_INPUTS
from privrec.server.two_tier import TwoTierRounds
from privrec.shared.errors import (
    AlreadyExistsError,
    AuthenticationError,
    ProtocolError,
    ResourceExhaustedError,
    ValidationError,
)
from privrec.shared.mechanisms.base import Mechanism, Payload, SparsePayload
from privrec.shared.mechanisms.second_order import SecondOrderMechanism
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.protocol import PHASES, RELEASE_PHASE, fold_of, profile_nonce
from privrec.shared.run_config import PublicRunConfig
from privrec.shared.serde import PublishedModel, payload_from_proto

logger = logging.getLogger(__name__)
M = TypeVar("M")

MAX_ID_LEN = 128
MAX_QUERY_ITEMS = 10_000
# Which requests each phase admits (Enroll stays open in collect so a restarted shard re-enrolls).
ENROLL_PHASES = frozenset({"enroll", "public", "collect"})
TIER_NAMES = {pb.TIER_PRIVATE: "private", pb.TIER_PUBLIC: "public"}


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
        n_folds, fold_seed: the public fold rule (`shared.protocol.fold_of`).
        max_release_bytes: largest accepted release.
        admin_token: secret for the Admin service.
        token_key: secret HMAC key for enrollment tokens.
        withheld: ratings each test user withholds and predicts (a public protocol fact).
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
    token_key: bytes
    withheld: int = 5


@dataclasses.dataclass
class Counters:
    """What the server counts but does not store (rejections leave no trace in the store)."""

    rejected: int = 0
    duplicates: int = 0
    queries: int = 0
    train_seconds: float = 0.0


Observer = Callable[[pb.TranscriptRecord], None]


class Aggregator:
    """The aggregator of one run.

    Args:
        spec: the run's configuration.
        store: where accepted requests go.
        observers: called with each new transcript record (the observation feed).

    Raises:
        ConfigError: the spec names an unknown model.
        TypeError: a two-tier model without a second-order mechanism (`sim` and
            `server.node.check_tiers` refuse such a config first, with a config error).
    """

    def __init__(self, spec: RunSpec, store: Store, observers: list[Observer] | None = None):
        self.spec = spec
        self.store = store
        self.observers = list(observers or [])
        self.counters = Counters()
        self._lock = threading.RLock()  # one writer; the gRPC adapter runs handlers on a loop
        self._phase = store.get_meta("phase") or "enroll"
        self.capabilities = MODELS.lookup(spec.model).capabilities
        self._model: Model | None = None  # what answers or is published
        self._stage = ""  # what GetModel publishes: "", "public" or "final"
        self._published_users: list[str] = []
        self._rounds: TwoTierRounds | None = None
        self._allowed = {pb.TIER_PRIVATE: spec.mechanism.payload_field}
        if self.capabilities.public_tier:
            model = MODELS.build(spec.model, spec.model_params)
            if not isinstance(model, TwoTierModel) or (
                model.private_release == "second-order"
                and not isinstance(spec.mechanism, SecondOrderMechanism)
            ):
                raise TypeError("a two-tier run needs a TwoTierModel and a second-order mechanism")
            self._rounds = TwoTierRounds(model, spec.mechanism, spec.n_items)
            self._allowed[pb.TIER_PUBLIC] = "public_ratings"
        # user_id -> (token, tier): every enrollment, kept in memory (the store is the authority)
        self._tokens = {u: (t, tier) for u, t, tier in store.enrollments()}
        self.public = self._public_config()
        store.set_meta("run_config", self.public.to_json())

    # ------------------------------------------------------------------ public configuration
    def _public_config(self) -> PublicRunConfig:
        s = self.spec
        return PublicRunConfig(
            run_id=s.run_id,
            mechanism_name=s.mechanism.name,
            public_params=s.mechanism.public_params(),
            model_name=s.model,
            model_params=s.model_params,
            capabilities=self.capabilities,
            n_items=s.n_items,
            dataset=s.dataset,
            rating_scale=s.rating_scale,
            n_folds=s.n_folds,
            fold_seed=s.fold_seed,
            withheld=s.withheld,
            max_release_bytes=s.max_release_bytes,
            tiers=tuple(TIER_NAMES[t] for t in sorted(self._allowed)),
            allowed_payloads=tuple(sorted(set(self._allowed.values()))),
        )

    def public_config(self) -> PublicRunConfig:
        """The public run configuration (the adversary may know all of it)."""
        return self.public

    def run_config(self, req: pb.GetRunConfigRequest) -> pb.RunConfig:
        self._check_run(req.run_id, allow_empty=True)
        return self.public.to_proto(phase=self._phase, round_=self.round)

    @property
    def phase(self) -> str:
        return self._phase

    @property
    def round(self) -> int:
        """The current collect round of a two-tier run (0 otherwise)."""
        return self._rounds.round if self._rounds is not None else 0

    # ------------------------------------------------------------------ admin
    def set_phase(self, req: pb.SetPhaseRequest) -> pb.RunStatus:
        """Move to `req.phase`. Leaving "public" fits the public model of a two-tier run, a
        higher `req.round` in "collect" folds the private releases so far into it
        (`fold_private`), and entering "train" trains; all run synchronously, before the phase
        changes (if they fail, the phase stays where it was)."""
        self._check_admin(req.run_id, req.admin_token)
        if req.phase not in PHASES:
            raise ValidationError("phase", f"unknown phase {req.phase!r}; known: {PHASES}")
        with self._lock:
            old, new = PHASES.index(self._phase), PHASES.index(req.phase)
            if new < old:
                raise ProtocolError(
                    f"phase: cannot go back from {self._phase!r} to {req.phase!r}",
                    run_id=req.run_id,
                )
            collect, train = PHASES.index("collect"), PHASES.index("train")
            if req.round and not (self._rounds is not None and req.phase == "collect"):
                raise ValidationError(
                    "round",
                    "only the collect phase of a two-tier run has "
                    f"rounds, got round {req.round} for {req.phase!r}",
                )
            if req.round and req.round < self.round:
                raise ProtocolError(f"round: cannot go back from round {self.round} to {req.round}")
            if self._rounds is not None and old < collect <= new:
                self.fit_public()
            if req.round > self.round:
                self.fold_private(req.round)
            if old < train <= new:
                self.train()
            self._phase = req.phase
            self.store.set_meta("phase", self._phase)
            # a marker on the feed, after every record of the previous phase (same publisher,
            # same topic, so a live adversary sees it in order); never stored in the transcript
            self._notify(0, "Phase", self._phase.encode())
            self.store.set_meta("counters", json.dumps(dataclasses.asdict(self.counters)))
            logger.info("phase -> %s", self._phase)
        return self.status()

    def get_status(self, req: pb.GetStatusRequest) -> pb.RunStatus:
        self._check_admin(req.run_id, req.admin_token)
        return self.status()

    def status(self) -> pb.RunStatus:
        with self._lock:
            n_transcript, n_enrolled, n_releases = self.store.snapshot()
            return pb.RunStatus(
                run_id=self.spec.run_id,
                phase=self._phase,
                enrolled=n_enrolled,
                releases_accepted=n_releases,
                releases_rejected=self.counters.rejected,
                duplicates=self.counters.duplicates,
                queries=self.counters.queries,
                transcript_records=n_transcript,
                train_seconds=self.counters.train_seconds,
                profiles=self.store.profile_users(pb.PURPOSE_PROFILE),
                round=self.round,
                public_profiles=self.store.profile_users(pb.PURPOSE_PROFILE, pb.TIER_PUBLIC),
            )

    # ------------------------------------------------------------------ enrollment
    def enroll(self, raw: bytes) -> pb.EnrollResponse:
        """Enroll a user (idempotent: re-enrolling returns the same token)."""
        with self._rejections():
            req = _parse(pb.EnrollRequest, raw, "EnrollRequest")
            self._check_run(req.run_id)
            _check_id("user_id", req.user_id)
            if req.tier not in (pb.TIER_PRIVATE, pb.TIER_PUBLIC):
                raise ValidationError(
                    "tier", f"must be TIER_PRIVATE or TIER_PUBLIC, got {req.tier}"
                )
            if req.tier not in self._allowed:
                raise ValidationError(
                    "tier", f"this run has no public tier (model {self.spec.model!r} uses none)"
                )
            if self._phase not in ENROLL_PHASES:
                raise ProtocolError(f"phase: Enroll is not accepted in phase {self._phase!r}")
            with self._lock:
                known = self._tokens.get(req.user_id)
                if known is not None:
                    if known[1] != req.tier:
                        raise AlreadyExistsError(
                            f"user_id: {req.user_id!r} is already enrolled in another tier"
                        )
                    return pb.EnrollResponse(token=known[0], already_enrolled=True)
                token = self._token(req.user_id)
                seq = self.store.enroll(req.user_id, token, req.shard, req.tier, raw)
                self._tokens[req.user_id] = (token, req.tier)
            self._notify(seq, "Enroll", raw)
            return pb.EnrollResponse(token=token, already_enrolled=False)

    # ------------------------------------------------------------------ releases
    def submit(self, raw: bytes, method: str = "Submit") -> pb.SubmitResponse:
        """Accept one profile release."""
        seqs = self.submit_many([raw], method)
        return pb.SubmitResponse(seq=seqs[0] or 0, duplicate=seqs[0] is None)

    def submit_many(self, raws: list[bytes], method: str = "SubmitStream") -> list[int | None]:
        """Validate every release of a batch, then store them in one transaction.

        If any release is invalid the whole batch is refused and nothing is stored; the error
        names the release's position (`releases[i].…`).

        Returns:
            per release, its transcript seq, or None when it was a duplicate.
        """
        with self._rejections():
            if self._phase not in RELEASE_PHASE.values():
                raise ProtocolError(
                    f"phase: profile releases are accepted in phases "
                    f"{sorted(set(RELEASE_PHASE.values()))}, not "
                    f"{self._phase!r}"
                )
            batch: list[NewRelease] = []
            keys: list[tuple[str, str]] = []
            seen: set[tuple[str, str]] = set()
            for i, raw in enumerate(raws):
                where = f"releases[{i}]." if len(raws) > 1 else ""
                try:
                    rel, field, tier = self._check_release(raw, pb.PURPOSE_PROFILE)
                    want = RELEASE_PHASE[TIER_NAMES[tier]]
                    if self._phase != want:
                        raise ProtocolError(
                            f"phase: {TIER_NAMES[tier]}-tier releases are "
                            f"accepted in phase {want!r}, not "
                            f"{self._phase!r}"
                        )
                except (
                    ValidationError,
                    ProtocolError,
                    AuthenticationError,
                    AlreadyExistsError,
                    ResourceExhaustedError,
                ) as exc:
                    raise type(exc)(*_prefixed(exc, where)) from exc
                keys.append((rel.user_id, rel.nonce))
                if keys[-1] not in seen:  # the same release twice in a batch: store once
                    seen.add(keys[-1])
                    batch.append(NewRelease(rel.user_id, rel.nonce, rel.purpose, field, raw))
            with self._lock:
                seqs = self.store.add_releases(method, batch)
            for rel, seq in zip(batch, seqs, strict=True):
                if seq is not None:
                    self._notify(seq, method, rel.raw)
            stored = {(r.user_id, r.nonce): s for r, s in zip(batch, seqs, strict=True)}
            out = [stored.pop(key, None) for key in keys]  # repeats after the first: None
            self.counters.duplicates += sum(s is None for s in out)
            return out

    def _check_release(self, raw: bytes, purpose: int) -> tuple[pb.Release, str, int]:
        """Every check of one release; returns it parsed, its payload field and the tier."""
        if len(raw) > self.spec.max_release_bytes:
            raise ResourceExhaustedError(
                f"release: {len(raw)} bytes exceeds max_release_bytes {self.spec.max_release_bytes}"
            )
        rel = _parse(pb.Release, raw, "Release")
        self._check_run(rel.run_id)
        _check_id("user_id", rel.user_id)
        _check_id("nonce", rel.nonce)
        tier = self._authenticate(rel.user_id, rel.token)
        if rel.purpose != purpose:
            got = pb.Purpose.Name(rel.purpose) if rel.purpose in (0, 1, 2) else rel.purpose
            raise ValidationError("purpose", f"must be {pb.Purpose.Name(purpose)}, got {got}")
        if purpose == pb.PURPOSE_PROFILE and rel.nonce != profile_nonce():
            raise ValidationError(
                "nonce", f"a profile release has nonce {profile_nonce()!r}, got {rel.nonce!r}"
            )
        field = rel.WhichOneof("payload")
        if field is None:
            raise ValidationError("payload", "a release must carry a payload")
        if field != self._allowed[tier]:
            raise ValidationError(
                "payload",
                f"{field!r} is not accepted from a "
                f"{pb.Tier.Name(tier)} user in this run (expects "
                f"{self._allowed[tier]!r})",
            )
        _, payload = payload_from_proto(rel)
        if tier == pb.TIER_PRIVATE:
            self.spec.mechanism.validate(payload, self.spec.n_items)
        elif isinstance(payload, SparsePayload) and payload.dim != self.spec.n_items:
            raise ValidationError(
                "public_ratings.dim", f"must equal n_items {self.spec.n_items}, got {payload.dim}"
            )
        return rel, field, tier

    def _authenticate(self, user_id: str, token: str) -> int:
        cached = self._tokens.get(user_id)
        if cached is None:
            raise ProtocolError(f"user_id: {user_id!r} is not enrolled", user_id=user_id)
        if not hmac.compare_digest(cached[0], token):
            raise AuthenticationError(f"token: wrong enrollment token for user {user_id!r}")
        return cached[1]

    # ------------------------------------------------------------------ training and serving
    def _profiles(
        self, tier: int | None = None, exclude: set[str] | frozenset[str] = frozenset()
    ) -> tuple[list[str], list[Payload]]:
        """User ids and payloads of the stored profile releases (of `tier`, if given, and not of
        the users in `exclude`), in a canonical order (by user id), not arrival order, so that
        fitting does not depend on how the shards happened to be scheduled."""
        stored = sorted(
            (u, raw)
            for u, raw in self.store.releases_by_purpose(pb.PURPOSE_PROFILE)
            if u not in exclude
        )
        if tier is not None:
            stored = [(u, raw) for u, raw in stored if self._tokens[u][1] == tier]
        return (
            [u for u, _ in stored],
            [payload_from_proto(pb.Release.FromString(raw))[1] for _, raw in stored],
        )

    def _two_tier(self) -> TwoTierRounds:
        if self._rounds is None:
            raise ProtocolError(f"model: {self.spec.model} has no public tier")
        return self._rounds

    def fit_public(self) -> None:
        """Fit and publish the public model of a two-tier run (`TwoTierRounds.fit_public`).

        Raises:
            ProtocolError: too few public users for the model.
        """
        rounds = self._two_tier()
        rounds.fit_public(*self._profiles(pb.TIER_PUBLIC))
        self._model, self._stage = rounds.model, "public"
        self._published_users = rounds.published_users

    def fold_private(self, new_round: int) -> None:
        """Start collect round `new_round` of a two-tier run (`TwoTierRounds.start_round`)."""
        rounds = self._two_tier()
        rounds.start_round(new_round, *self._unfolded_private())

    def _unfolded_private(self) -> tuple[list[str], list[Payload]]:
        """The private profile releases not yet folded into the two-tier model."""
        return self._profiles(pb.TIER_PRIVATE, exclude=set(self._two_tier().folded))

    def train(self) -> None:
        """Fit the model on the stored profile releases (Bilge §1.4 step 2), fed as its
        `ModelCapabilities.consumes` says; for a two-tier model, the last private M-step on
        top of the public model."""
        t0 = time.perf_counter()
        if self._rounds is not None:
            users = self._rounds.published_users + self._rounds.fold(*self._unfolded_private())
        else:
            users, rows = self._profiles()
            groups = np.array(
                [fold_of(u, self.spec.n_folds, self.spec.fold_seed) for u in users], dtype=np.int64
            )
            model = MODELS.build(self.spec.model, self.spec.model_params)
            matrix = TRAINING_INPUTS[self.capabilities.consumes](
                rows, self.spec.mechanism, self.spec.n_items
            )
            model.fit(matrix, exclude_groups=groups)  # type: ignore[attr-defined]
            self._model = model
        self._stage, self._published_users = "final", users
        self.counters.train_seconds = time.perf_counter() - t0
        logger.info(
            "trained %s on %d profiles in %.2fs",
            self.spec.model,
            len(users),
            self.counters.train_seconds,
        )

    def _check_query(self, rel_raw: bytes) -> tuple[Recommender, pb.Release, SparsePayload, int]:
        if self._phase != "serve":
            raise ProtocolError(
                f"phase: queries are answered in phase 'serve', not {self._phase!r}"
            )
        if not isinstance(self._model, Recommender):
            raise ProtocolError(
                f"model: {self.spec.model} answers no queries; its result is "
                f"published through GetModel"
            )
        rel, _, _ = self._check_release(rel_raw, pb.PURPOSE_QUERY)
        _, payload = payload_from_proto(rel)
        if not isinstance(payload, SparsePayload):
            raise ValidationError("query.payload", "this model needs a sparse query vector")
        fold = fold_of(rel.user_id, self.spec.n_folds, self.spec.fold_seed)
        return self._model, rel, payload, fold

    def predict(self, raw: bytes) -> pb.PredictResponse:
        """Answer a score for each target item (Bilge §1.4 step 3; for z-score models the
        client de-normalises)."""
        with self._rejections():
            req = _parse(pb.PredictRequest, raw, "PredictRequest")
            items = np.fromiter(req.items, dtype=np.int64, count=len(req.items))
            if items.size == 0 or items.size > MAX_QUERY_ITEMS:
                raise ValidationError(
                    "items", f"must hold 1..{MAX_QUERY_ITEMS} items, got {items.size}"
                )
            if items.max() >= self.spec.n_items:
                raise ValidationError(
                    "items", f"item {int(items.max())} is out of range [0, {self.spec.n_items})"
                )
            model, rel, q, fold = self._check_query(req.query.SerializeToString())
            ((scores, n_nb),) = model.predict_block(
                [(q.indices, q.values)], [items], exclude_groups=[fold]
            )
            self._record_query(rel, "Predict", raw)
            return pb.PredictResponse(scores=scores.tolist(), n_neighbours=n_nb.tolist())

    def recommend(self, raw: bytes) -> pb.RecommendResponse:
        """Top-n items for a perturbed query vector."""
        with self._rejections():
            req = _parse(pb.RecommendRequest, raw, "RecommendRequest")
            if not 1 <= req.n <= 1000:
                raise ValidationError("n", f"must be in [1, 1000], got {req.n}")
            model, rel, q, fold = self._check_query(req.query.SerializeToString())
            ((items, scores),) = model.recommend_block(
                [(q.indices, q.values)], req.n, exclude_groups=[fold]
            )
            self._record_query(rel, "Recommend", raw)
            return pb.RecommendResponse(items=items.tolist(), scores=scores.tolist())

    def _record_query(self, rel: pb.Release, method: str, raw: bytes) -> None:
        with self._lock:
            seqs = self.store.add_releases(
                method,
                [
                    NewRelease(
                        rel.user_id, rel.nonce, rel.purpose, rel.WhichOneof("payload") or "", raw
                    )
                ],
            )
        if seqs[0] is None:
            self.counters.duplicates += 1  # a retried query: answered again, stored once
        else:
            self.counters.queries += 1
            self._notify(seqs[0], method, raw)

    def model_archive(self, req: pb.GetModelRequest) -> bytes:
        """The published model (`shared.serde.PublishedModel`, public: what every client may
        download); with `req.round`, the model a two-tier run published at the start of that
        collect round."""
        self._check_run(req.run_id)
        if not self._stage or self._model is None:
            raise ProtocolError(
                "model: nothing published yet (the public model of a two-tier "
                "run comes with phase 'collect', any other after 'train')"
            )
        stage, round_ = self._stage, self.round
        arrays = self._model.public_arrays()
        if req.HasField("round"):
            published = self._rounds.rounds() if self._rounds is not None else []
            if req.round not in published:
                raise ValidationError(
                    "round",
                    f"no model was published for collect round "
                    f"{req.round} (published: {published})",
                )
            assert self._rounds is not None
            stage, round_ = ("public" if req.round == 0 else "round"), req.round
            arrays = self._rounds.published(req.round)
        return PublishedModel(
            name=self.spec.model,
            params=self.spec.model_params,
            stage=stage,
            round=round_,
            binding=self._rounds.binding if self._rounds is not None else {},
            user_ids=tuple(self._published_users),
            arrays=arrays,
        ).to_bytes()

    # ------------------------------------------------------------------ helpers
    def _token(self, user_id: str) -> str:
        msg = f"{self.spec.run_id}\x00{user_id}".encode()
        return hmac.new(self.spec.token_key, msg, hashlib.sha256).hexdigest()[:32]

    def _check_run(self, run_id: str, *, allow_empty: bool = False) -> None:
        if run_id != self.spec.run_id and not (allow_empty and run_id == ""):
            raise ValidationError(
                "run_id", f"unknown run {run_id!r} (this server runs {self.spec.run_id!r})"
            )

    def _check_admin(self, run_id: str, token: str) -> None:
        self._check_run(run_id)
        if not hmac.compare_digest(token, self.spec.admin_token):
            raise AuthenticationError("admin_token: wrong admin token")

    def _notify(self, seq: int, method: str, raw: bytes) -> None:
        if not self.observers:
            return
        record = pb.TranscriptRecord(
            seq=seq, arrival_unix_ns=time.time_ns(), method=method, request=raw
        )
        for observer in self.observers:
            try:
                observer(record)
            except Exception:  # an observer must never break the protocol
                logger.exception("observer failed on record %d", seq)

    def _rejections(self) -> _RejectionCounter:
        return _RejectionCounter(self.counters)


class _RejectionCounter:
    """Counts requests refused with a privrec error (they are never stored)."""

    def __init__(self, counters: Counters) -> None:
        self.counters = counters

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        if exc_type is not None and issubclass(
            exc_type,
            ValidationError
            | ProtocolError
            | AuthenticationError
            | AlreadyExistsError
            | ResourceExhaustedError,
        ):
            self.counters.rejected += 1


def _parse(cls: type[M], raw: bytes, name: str) -> M:
    try:
        return cls.FromString(raw)  # type: ignore[attr-defined, no-any-return]
    except DecodeError as exc:
        raise ValidationError(name, f"cannot be decoded: {exc}") from exc


def _check_id(field: str, value: str) -> None:
    if not value or len(value) > MAX_ID_LEN:
        raise ValidationError(field, f"must be 1..{MAX_ID_LEN} characters, got {value!r}")


def _prefixed(exc: Exception, prefix: str) -> tuple[Any, ...]:
    if isinstance(exc, ValidationError):
        return (prefix + exc.field, str(exc).split(": ", 1)[1])
    return (prefix + str(exc),)


__all__ = ["Aggregator", "Counters", "RunSpec"]
