"""The untrusted aggregator's core: validation, storage, training and serving, without gRPC.

`server/servicer.py` is a thin gRPC adapter over this class and `--launcher inprocess` calls it
directly, so both transports run the same logic. Every method that receives client data takes
the request's raw bytes, exactly as they arrived, because the transcript stores them verbatim.

Validation happens once, here, before anything is stored: a bad request raises a
`shared.errors` exception naming the field (mapped to a gRPC status by the servicer) and leaves
the store untouched.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import io
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import scipy.sparse as sp
from google.protobuf.message import DecodeError
from privrec.server.models import make_model
from privrec.server.store import NewRelease, Store
from privrec.shared.errors import (
    AlreadyExistsError,
    AuthenticationError,
    ProtocolError,
    ResourceExhaustedError,
    ValidationError,
)
from privrec.shared.mechanisms.base import Mechanism, SparsePayload
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.protocol import PHASES, RELEASE_PHASE, fold_of, profile_nonce
from privrec.shared.serde import payload_from_proto

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
        model: the recommender name and its hyper-parameters.
        n_items: m, the catalogue size.
        dataset: the dataset name (public metadata).
        rating_scale: (lowest, highest) rating.
        n_folds, fold_seed: the public fold rule (`shared.protocol.fold_of`).
        max_release_bytes: largest accepted release.
        admin_token: secret for the Admin service.
        token_key: secret HMAC key for enrollment tokens.
        protocol: other public protocol facts (JSON-able), echoed in `GetRunConfig`.
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
    protocol: dict[str, Any] = dataclasses.field(default_factory=dict)


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
    """

    def __init__(self, spec: RunSpec, store: Store, observers: list[Observer] | None = None):
        self.spec = spec
        self.store = store
        self.observers = list(observers or [])
        self.counters = Counters()
        self._lock = threading.RLock()  # one writer; the gRPC adapter runs handlers on a loop
        self._phase = store.get_meta("phase") or "enroll"
        self._model: Any = None
        self._stage = ""  # what GetModel publishes: "", "public" or "final"
        self._round = 0  # two-tier collect round (the model of round r is
        # public + the private releases of rounds < r)
        self._published_users: list[str] = []
        self._round_models: dict[int, dict[str, np.ndarray]] = {}  # round → published arrays
        self._folded: list[str] = []  # private users already in the two-tier model
        self._binding: dict[str, float] = {}
        self._two_tier = bool(
            getattr(make_model(spec.model, spec.model_params), "uses_public_tier", False)
        )
        self._allowed = {pb.TIER_PRIVATE: spec.mechanism.payload_field}
        if self._two_tier:
            self._allowed[pb.TIER_PUBLIC] = "public_ratings"
        # user_id -> (token, tier): every enrollment, kept in memory (the store is the authority)
        self._tokens = {u: (t, tier) for u, t, tier in store.enrollments()}
        store.set_meta("run_config", json.dumps(self.public_config()))

    # ------------------------------------------------------------------ public configuration
    def public_config(self) -> dict[str, Any]:
        """The public run configuration as a dict (the adversary may know all of it)."""
        s = self.spec
        return {
            "run_id": s.run_id,
            "mechanism": s.mechanism.name,
            "public_params": s.mechanism.public_params(),
            "model": s.model,
            "model_params": s.model_params,
            "n_items": s.n_items,
            "dataset": s.dataset,
            "rating_scale": list(s.rating_scale),
            "n_folds": s.n_folds,
            "fold_seed": s.fold_seed,
            "max_release_bytes": s.max_release_bytes,
            "allowed_payloads": sorted(set(self._allowed.values())),
            "protocol": s.protocol
            | {
                "queries": make_model(s.model, s.model_params).answers_queries,
                "tiers": sorted(TIER_NAMES[t] for t in self._allowed),
                # two-tier runs (Xin & Jaakkola): users release their training ratings only and
                # predict their held-out ratings locally with the published model
                "local_prediction": self._two_tier,
            },
        }

    def run_config(self, req: pb.GetRunConfigRequest) -> pb.RunConfig:
        self._check_run(req.run_id, allow_empty=True)
        c = self.public_config()
        return pb.RunConfig(
            run_id=c["run_id"],
            phase=self._phase,
            mechanism=c["mechanism"],
            public_params_json=json.dumps(c["public_params"], sort_keys=True),
            model=c["model"],
            n_items=c["n_items"],
            dataset=c["dataset"],
            rating_min=c["rating_scale"][0],
            rating_max=c["rating_scale"][1],
            n_folds=c["n_folds"],
            max_release_bytes=c["max_release_bytes"],
            round=self._round,
            allowed_payloads=c["allowed_payloads"],
            protocol_json=json.dumps(
                {"fold_seed": c["fold_seed"], "model_params": c["model_params"], **c["protocol"]},
                sort_keys=True,
            ),
        )

    @property
    def phase(self) -> str:
        return self._phase

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
            if req.round and not (self._two_tier and req.phase == "collect"):
                raise ValidationError(
                    "round",
                    "only the collect phase of a two-tier run has "
                    f"rounds, got round {req.round} for {req.phase!r}",
                )
            if req.round and req.round < self._round:
                raise ProtocolError(
                    f"round: cannot go back from round {self._round} to {req.round}"
                )
            if self._two_tier and old < collect <= new:
                self.fit_public()
            if req.round > self._round:
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
                round=self._round,
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
    ) -> tuple[list[str], list[Any]]:
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

    def fit_public(self) -> None:
        """Fit and publish the public model of a two-tier run (Xin & Jaakkola Sec. 4: the server
        learns (µ, V) from the public users, then asks each private user once for M(r)); bind
        the server's copy of the mechanism to it, so private releases validate and de-bias
        against the model their senders used.

        Raises:
            ProtocolError: too few public users for the model's rank.
        """
        users, rows = self._profiles(pb.TIER_PUBLIC)
        model = make_model(self.spec.model, self.spec.model_params)
        if len(users) < model.k:
            raise ProtocolError(
                f"phase: the public model needs at least k = {model.k} public "
                f"users, {len(users)} submitted"
            )
        public = _stack(rows, self.spec.n_items)
        model.fit_public(public)
        mech = self.spec.mechanism
        self._binding = mech.public_binding(public, model.mu_, model.V_)  # type: ignore[attr-defined]
        mech.bind(model.mu_, model.V_, **self._binding)  # type: ignore[attr-defined]
        self._model, self._stage, self._published_users = model, "public", users
        self._round_models = {0: model.public_arrays()}
        logger.info("public model fitted on %d public users", len(users))

    def fold_private(self, new_round: int) -> None:
        """Start collect round `new_round` of a two-tier run: the private M-step over every
        private release so far, and the result published (Xin & Jaakkola Sec. 5: "the server
        updates (µ, V) every w = 20 private users", so that later private users complete their
        ratings with a better model). PMC's shared h stays the one of the public model."""
        users = self._fold_private()
        self._round = new_round
        self._round_models[new_round] = self._model.public_arrays()
        logger.info(
            "collect round %d: model refitted with %d private releases", new_round, len(users)
        )

    def _fold_private(self) -> list[str]:
        """The private M-step with the private releases not yet in the model
        (`TwoTierLowRank.add_private` on `Mechanism.estimate` of each, in user-id order);
        rebinds the server's mechanism to the new model. Returns every private user in it."""
        mech, m = self.spec.mechanism, self.spec.n_items
        done = set(self._folded)
        users, rows = self._profiles(pb.TIER_PRIVATE, exclude=done)
        if rows:
            self._model.add_private(np.stack([mech.estimate(r, m) for r in rows]))
            mech.bind(self._model.mu_, self._model.V_, **self._binding)  # type: ignore[attr-defined]
            self._folded += users
        return self._folded

    def train(self) -> None:
        """Fit the model on the stored profile releases (Bilge §1.4 step 2; for a two-tier
        model, the private M-step on top of the public model)."""
        t0 = time.perf_counter()
        mech, m = self.spec.mechanism, self.spec.n_items
        if self._two_tier:
            users = self._published_users + self._fold_private()
        else:
            users, rows = self._profiles()
            groups = np.array(
                [fold_of(u, self.spec.n_folds, self.spec.fold_seed) for u in users], dtype=np.int64
            )
            self._model = make_model(self.spec.model, self.spec.model_params)
            matrix: Any = (
                np.stack([mech.estimate(r, m) for r in rows])
                if self._model.input == "estimate"
                else _stack(rows, m)
            )
            self._model.fit(matrix, exclude_groups=groups)
        self._stage, self._published_users = "final", users
        self.counters.train_seconds = time.perf_counter() - t0
        logger.info(
            "trained %s on %d profiles in %.2fs",
            self.spec.model,
            len(users),
            self.counters.train_seconds,
        )

    def _check_query(self, rel_raw: bytes) -> tuple[pb.Release, SparsePayload, int]:
        if self._phase != "serve":
            raise ProtocolError(
                f"phase: queries are answered in phase 'serve', not {self._phase!r}"
            )
        if not self._model.answers_queries:
            raise ProtocolError(
                f"model: {self.spec.model} answers no queries; its result is "
                f"published through GetModel"
            )
        rel, _, _ = self._check_release(rel_raw, pb.PURPOSE_QUERY)
        _, payload = payload_from_proto(rel)
        if not isinstance(payload, SparsePayload):
            raise ValidationError("query.payload", "this model needs a sparse query vector")
        return rel, payload, fold_of(rel.user_id, self.spec.n_folds, self.spec.fold_seed)

    def predict(self, raw: bytes) -> pb.PredictResponse:
        """Answer P′ for each target item (Bilge §1.4 step 3; the client de-normalises)."""
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
            rel, q, fold = self._check_query(req.query.SerializeToString())
            scores, n_nb = self._model.predict(q.indices, q.values, items, exclude_group=fold)
            self._record_query(rel, "Predict", raw)
            return pb.PredictResponse(scores=scores.tolist(), n_neighbours=n_nb.tolist())

    def recommend(self, raw: bytes) -> pb.RecommendResponse:
        """Top-n items for a perturbed query vector."""
        with self._rejections():
            req = _parse(pb.RecommendRequest, raw, "RecommendRequest")
            if not 1 <= req.n <= 1000:
                raise ValidationError("n", f"must be in [1, 1000], got {req.n}")
            rel, q, fold = self._check_query(req.query.SerializeToString())
            items, scores = self._model.recommend(q.indices, q.values, req.n, exclude_group=fold)
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
        """The published model as an .npz archive (public: what every client may download);
        with `req.round`, the model a two-tier run published at the start of that collect round.
        """
        self._check_run(req.run_id)
        if not self._stage:
            raise ProtocolError(
                "model: nothing published yet (the public model of a two-tier "
                "run comes with phase 'collect', any other after 'train')"
            )
        stage, round_ = self._stage, self._round
        model_arrays = getattr(self._model, "public_arrays", dict)()
        if req.HasField("round"):
            if req.round not in self._round_models:
                raise ValidationError(
                    "round",
                    f"no model was published for collect round "
                    f"{req.round} (published: {sorted(self._round_models)})",
                )
            stage, round_ = ("public" if req.round == 0 else "round"), req.round
            model_arrays = self._round_models[req.round]
        arrays = {
            "name": np.array(self.spec.model),
            "params": np.array(json.dumps(self.spec.model_params)),
            "stage": np.array(stage),
            "round": np.array(round_),
            "binding": np.array(json.dumps(self._binding, sort_keys=True)),
            "n_profiles": np.array(len(self._published_users)),
            "user_ids": np.array(self._published_users, dtype=str),
        }
        arrays |= model_arrays
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        return buf.getvalue()

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


def _stack(rows: list[Any], n_items: int) -> sp.csr_matrix:
    """Profile payloads as one CSR matrix (filled cells stored, even a value of exactly 0)."""
    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([r.indices.size for r in rows])
    indices = np.concatenate([r.indices for r in rows]) if rows else np.zeros(0, np.int64)
    data = np.concatenate([r.values for r in rows]) if rows else np.zeros(0)
    return sp.csr_matrix((data, indices, indptr), shape=(len(rows), n_items))


__all__ = ["Aggregator", "Counters", "RunSpec"]
