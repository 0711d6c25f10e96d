"""The untrusted aggregator's core: validation, storage, training and serving, without gRPC.

`server/servicer.py` is a thin gRPC adapter over this class and `--launcher inprocess` calls it
directly, so both transports run the same logic. Every method that receives client data takes
the request's raw bytes, exactly as they arrived, because the transcript stores them verbatim.

Validation happens once, here, before anything is stored: a bad request raises a
`shared.errors` exception naming the field (mapped to a gRPC status by `shared.rpc`) and leaves
the store untouched. Every request kind has a byte limit and unknown fields are refused
(`server.validation`); echoed values are cut short.

**Authority.** A user belongs to the node that enrolled her (the `node` each user method is
called with: the signer the gRPC adapter verified, `server.auth`). No other node can enroll,
submit or query as her; to any other node she looks exactly like a user who was never enrolled
("not enrolled by this node"), and a second enrollment of her id by another node is refused with
nothing about her in the answer. The enrollment token is a public receipt, not a credential: it
is in the transcript and proves nothing by itself.

**Records.** Every accepted profile and every answered query is a release in the store, keyed by
(user, nonce) with the SHA-256 of its request: a retry (same bytes) is acknowledged and stored
once, a different content under a used nonce is refused (ALREADY_EXISTS), and the nonce
``profile`` is reserved for the profile. So each answer the server gives is in the transcript and
in the per-user privacy ledger.

**Concurrency.** The gRPC adapter calls these methods from worker threads. One lock serialises
the writers (store transactions, phase changes) and feed notifications, so the feed is in
transcript order; training runs outside it, after the phase has moved to "train" (late releases
are refused, never acknowledged and dropped), so status and reads stay live.

**Restarts.** The phase, the round, every published model, the fitted model and the counters are
in the store (`Store.commit_state`), written in the same transaction as the change they belong
to. A new `Aggregator` over the same store takes up where the last one stopped; if it stopped
while training, `resume()` fits again from the stored releases (deterministic, canonical order).

The core dispatches on what the run's model declares (`ModelCapabilities`), never on its name:
what `fit` receives (`server.training`), whether queries are answered, and — for a two-tier
model — the public phase and collect rounds (`server.two_tier`).
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
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple, TypeVar

import numpy as np

from privrec.server.fitting import (
    FitRecipe,
    answer_predicts,
    answer_recommends,
    canonical_order,
)
from privrec.server.models import MODELS, Model, Recommender, TwoTierModel
from privrec.server.models.persistence import load_model, save_model
from privrec.server.spec import RunSpec
from privrec.server.store import NewRelease, Store
from privrec.server.training import StoredPayloads
from privrec.server.two_tier import TwoTierRounds
from privrec.server.validation import (
    MAX_ID_LEN,
    MAX_SHARD_LEN,
    check_id,
    check_size,
    parse,
    short,
)
from privrec.shared.errors import (
    AlreadyExistsError,
    AuthenticationError,
    ProtocolError,
    ResourceExhaustedError,
    ValidationError,
)
from privrec.shared.mechanisms.base import Payload, SparsePayload
from privrec.shared.mechanisms.second_order import SecondOrderMechanism
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.protocol import PHASES, RELEASE_PHASE, profile_nonce
from privrec.shared.run_config import PublicRunConfig
from privrec.shared.serde import PublishedModel, payload_from_proto
from privrec.shared.types import IntArray

logger = logging.getLogger(__name__)
M = TypeVar("M")

MAX_QUERY_ITEMS = 10_000
MAX_PREDICT_BATCH = 4096
"""At most this many queries in one PredictBatch."""
# Which requests each phase admits (Enroll stays open in collect so a restarted shard re-enrolls).
ENROLL_PHASES = frozenset({"enroll", "public", "collect"})
TIER_NAMES: dict[pb.Tier.ValueType, str] = {pb.TIER_PRIVATE: "private", pb.TIER_PUBLIC: "public"}
REFUSALS = (
    ValidationError,
    ProtocolError,
    AuthenticationError,
    AlreadyExistsError,
    ResourceExhaustedError,
)


@dataclasses.dataclass
class Counters:
    """What the server counts but does not store as records (rejections leave no trace in the
    store's tables; the counts are saved in `meta` with the next write and at phase changes)."""

    rejected: int = 0
    duplicates: int = 0
    queries: int = 0  # kept for compatibility; the status counts stored queries instead
    train_seconds: float = 0.0
    answer_seconds: float = 0.0  # the model's time answering Predict/Recommend (Bilge's T)


class Enrollment(NamedTuple):
    """One enrolled user: her receipt, tier and owning node."""

    token: str
    tier: pb.Tier.ValueType
    node: str


Observer = Callable[[pb.TranscriptRecord], None]
BatchObserver = Callable[[list[pb.TranscriptRecord]], None]


class Aggregator:
    """The aggregator of one run.

    Args:
        spec: the run's configuration.
        store: where accepted requests go (an existing store is taken up where it stopped).
        observers: called with each new transcript record (the observation feed), in seq
            order, from whichever thread stored it.

    Raises:
        ConfigError: the spec names an unknown model.
        TypeError: a two-tier model without a second-order mechanism (`sim` and
            `server.spec.check_tiers` refuse such a config first, with a config error).
    """

    def __init__(self, spec: RunSpec, store: Store, observers: list[Observer] | None = None):
        self.spec = spec
        self.store = store
        self.observers = list(observers or [])
        self.batch_observers: list[BatchObserver] = []
        self._lock = threading.RLock()  # the one writer: store, phase, feed order
        self._phase_lock = threading.Lock()  # one phase change at a time
        self._train_lock = threading.Lock()  # one fit at a time
        self.capabilities = MODELS.lookup(spec.model).capabilities
        self.recipe = FitRecipe.of_spec(spec)  # how the model is fitted and asked
        self._model: Model | None = None  # what answers or is published
        self._stage = ""  # what GetModel publishes: "", "public" or "final"
        self._published_users: list[str] = []
        self._rounds: TwoTierRounds | None = None
        self._allowed: dict[pb.Tier.ValueType, str] = {
            pb.TIER_PRIVATE: spec.mechanism.payload_field
        }
        if self.capabilities.public_tier:
            model = MODELS.build(spec.model, spec.model_params)
            if not isinstance(model, TwoTierModel) or (
                model.private_release == "second-order"
                and not isinstance(spec.mechanism, SecondOrderMechanism)
            ):
                raise TypeError("a two-tier run needs a TwoTierModel and a second-order mechanism")
            self._rounds = TwoTierRounds(model, spec.mechanism, spec.n_items)
            self._allowed[pb.TIER_PUBLIC] = "public_ratings"
        # every enrollment, kept in memory (the store is the authority)
        self._users: dict[str, Enrollment] = {
            u: Enrollment(t, pb.Tier.ValueType(tier), node) for u, t, tier, node in store.owners()
        }
        self.public = self._public_config()
        store.set_meta("run_config", self.public.to_json())
        self._phase = store.get_meta("phase") or "enroll"
        self.counters = Counters(**json.loads(store.get_meta("counters") or "{}"))
        self._restore()

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

    def run_config(self, req: pb.GetRunConfigRequest | bytes) -> pb.RunConfig:
        if isinstance(req, bytes):
            check_size(req, self.spec.limits.small_bytes, "GetRunConfigRequest")
            req = parse(pb.GetRunConfigRequest, req, "GetRunConfigRequest")
        self._check_run(req.run_id, allow_empty=True)
        return self.public.to_proto(phase=self._phase, round_=self.round)

    @property
    def phase(self) -> str:
        return self._phase

    @property
    def round(self) -> int:
        """The current collect round of a two-tier run (0 otherwise)."""
        return self._rounds.round if self._rounds is not None else 0

    @property
    def trained(self) -> bool:
        return self._stage == "final"

    # ------------------------------------------------------------------ persistence
    def _restore(self) -> None:
        """Take up the stored state: the published and fitted models of the phase reached."""
        trained = self.store.get_meta("trained") == "1"
        if self._rounds is not None:
            keys = self.store.state_keys("two_tier/")
            if keys:
                blobs = {k: self.store.get_state(k) or b"" for k in keys}
                self._rounds.restore(blobs)
                self._model, self._stage = self._rounds.model, "public"
                self._published_users = self._rounds.published_users
        elif trained:
            blob = self.store.get_state("final/model")
            if blob is not None:
                self._model = load_model(blob, MODELS)
        if trained:
            users = self.store.get_state("final/users")
            self._published_users = json.loads(users) if users else []
            self._stage = "final"
        if self._phase != "enroll":
            logger.info(
                "store taken up: phase %s, round %d, %d users, %s",
                self._phase,
                self.round,
                len(self._users),
                "trained" if self.trained else "not trained",
            )

    def needs_training(self) -> bool:
        """The phase is "train" or later but no fitted model is stored (a restart during a
        fit): `resume` fits it."""
        return PHASES.index(self._phase) >= PHASES.index("train") and not self.trained

    def resume(self) -> None:
        """Finish what a previous server left undone: fit the model when `needs_training`.
        Blocking; the gRPC adapter runs it in a worker at start-up."""
        if self.needs_training():
            self._ensure_trained()

    def _counters_meta(self) -> dict[str, str]:
        return {"counters": json.dumps(dataclasses.asdict(self.counters))}

    # ------------------------------------------------------------------ admin
    def set_phase(self, req: pb.SetPhaseRequest | bytes) -> pb.RunStatus:
        """Move to `req.phase`. Leaving "public" fits the public model of a two-tier run, a
        higher `req.round` in "collect" folds the private releases so far into it
        (`fold_private`), and entering "train" trains. Each step is stored with what it
        published before the next begins; the phase moves to "train" before the fit, so no
        release is accepted while (or after) the model is fitted. Setting the current phase
        again is a no-op (a retried call after a restart), except that it waits for a fit in
        progress."""
        if isinstance(req, bytes):
            check_size(req, self.spec.limits.small_bytes, "SetPhaseRequest")
            req = parse(pb.SetPhaseRequest, req, "SetPhaseRequest")
        self._check_admin(req.run_id, req.admin_token)
        if req.phase not in PHASES:
            raise ValidationError("phase", f"unknown phase {short(req.phase)}; known: {PHASES}")
        with self._phase_lock:
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
                self._move_to("train")
            if new >= train:
                self._ensure_trained()
            if req.phase != self._phase:
                self._move_to(req.phase)
        return self.status()

    def _move_to(self, phase: str, blobs: dict[str, bytes] | None = None) -> None:
        """Set and store the phase (with `blobs`, in one transaction) and put its marker on
        the feed: after every record of the previous phase (same lock, same publisher), never
        stored in the transcript."""
        with self._lock:
            self._phase = phase
            self.store.commit_state({"phase": phase, **self._counters_meta()}, blobs)
            self._notify(0, "Phase", phase.encode())
        logger.info("phase -> %s", phase)

    def get_status(self, req: pb.GetStatusRequest | bytes) -> pb.RunStatus:
        if isinstance(req, bytes):
            check_size(req, self.spec.limits.small_bytes, "GetStatusRequest")
            req = parse(pb.GetStatusRequest, req, "GetStatusRequest")
        self._check_admin(req.run_id, req.admin_token)
        return self.status()

    def status(self) -> pb.RunStatus:
        with self._lock:
            tally = self.store.tally  # kept by the store's writes: no table scan per poll
            return pb.RunStatus(
                run_id=self.spec.run_id,
                phase=self._phase,
                enrolled=tally.enrollments,
                releases_accepted=tally.releases,
                releases_rejected=self.counters.rejected,
                duplicates=self.counters.duplicates,
                queries=tally.by_purpose[pb.PURPOSE_QUERY],
                transcript_records=tally.transcript,
                train_seconds=self.counters.train_seconds,
                profiles=tally.users_with(pb.PURPOSE_PROFILE),
                round=self.round,
                public_profiles=tally.users_with(pb.PURPOSE_PROFILE, pb.TIER_PUBLIC),
            )

    # ------------------------------------------------------------------ enrollment
    def enroll(self, raw: bytes, node: str = "") -> pb.EnrollResponse:
        """Enroll a user for `node` (idempotent for that node; refused for any other)."""
        return self.enroll_many([raw], node)[0]

    def enroll_many(self, raws: list[bytes], node: str = "") -> list[pb.EnrollResponse]:
        """Enroll a batch of users for `node` (`EnrollBatch`): every request is checked
        first, then the new ones are stored in one transaction, each its own transcript record
        ("Enroll", its bytes verbatim) as if it had come alone. Idempotent per user
        (`already_enrolled`); if any request is refused the whole batch is, and the error
        names its position (`requests[i].…`) and the user."""
        with self.refusals():
            reqs = []
            for i, raw in enumerate(raws):
                try:
                    reqs.append(self._check_enroll(raw))
                except REFUSALS as exc:
                    raise type(exc)(*_prefixed(exc, _where("requests", i, raws))) from exc
            with self._lock:
                out: list[pb.EnrollResponse] = []
                new: dict[str, tuple[int, str, int]] = {}  # user -> (position, token, tier)
                for i, req in enumerate(reqs):
                    try:
                        known = self._known_enrollment(req, node, new)
                    except REFUSALS as exc:
                        raise type(exc)(*_prefixed(exc, _where("requests", i, raws))) from exc
                    if known is None:
                        token = self._token(req.user_id, node)
                        new[req.user_id] = (i, token, req.tier)
                        known = pb.EnrollResponse(token=token, already_enrolled=False)
                    out.append(known)
                rows = [
                    (reqs[i].user_id, token, reqs[i].shard, tier, raws[i])
                    for i, token, tier in new.values()
                ]
                seqs = self.store.enroll_many(rows, node, self._counters_meta()) if rows else []
                for (user, token, _, tier, _), _seq in zip(rows, seqs, strict=True):
                    self._users[user] = Enrollment(token, pb.Tier.ValueType(tier), node)
                self._notify_many(
                    [(seq, "Enroll", row[4]) for row, seq in zip(rows, seqs, strict=True)]
                )
            return out

    def _check_enroll(self, raw: bytes) -> pb.EnrollRequest:
        """Every check of one EnrollRequest that needs no lock."""
        check_size(raw, self.spec.limits.enroll_bytes, "EnrollRequest")
        req = parse(pb.EnrollRequest, raw, "EnrollRequest")
        self._check_run(req.run_id)
        check_id("user_id", req.user_id)
        if len(req.shard) > MAX_SHARD_LEN or not req.shard.isprintable():
            raise ValidationError("shard", f"must be at most {MAX_SHARD_LEN} printable characters")
        if req.tier not in (pb.TIER_PRIVATE, pb.TIER_PUBLIC):
            raise ValidationError("tier", f"must be TIER_PRIVATE or TIER_PUBLIC, got {req.tier}")
        if req.tier not in self._allowed:
            raise ValidationError(
                "tier", f"this run has no public tier (model {self.spec.model!r} uses none)"
            )
        if self._phase not in ENROLL_PHASES:
            raise ProtocolError(f"phase: Enroll is not accepted in phase {self._phase!r}")
        return req

    def _known_enrollment(
        self, req: pb.EnrollRequest, node: str, new: dict[str, tuple[int, str, int]]
    ) -> pb.EnrollResponse | None:
        """The answer for a user enrolled before (by this node), None for a new one; refuses
        another node's user and a second tier (also against an earlier request of the batch,
        `new`: user -> (position, token, tier))."""
        known = self._users.get(req.user_id)
        if known is None and req.user_id in new:
            known = Enrollment(new[req.user_id][1], pb.Tier.ValueType(new[req.user_id][2]), node)
        if known is None:
            return None
        if known.node != node:
            # nothing about her: not her tier, her node or her receipt
            raise AlreadyExistsError("user_id: this id cannot be enrolled by this node")
        if known.tier != req.tier:
            raise AlreadyExistsError(
                f"user_id: {short(req.user_id)} is already enrolled in another tier"
            )
        return pb.EnrollResponse(token=known.token, already_enrolled=True)

    # ------------------------------------------------------------------ releases
    def submit(self, raw: bytes, method: str = "Submit", node: str = "") -> pb.SubmitResponse:
        """Accept one profile release."""
        seqs = self.submit_many([raw], method, node)
        return pb.SubmitResponse(seq=seqs[0] or 0, duplicate=seqs[0] is None)

    def submit_many(
        self, raws: list[bytes], method: str = "SubmitStream", node: str = ""
    ) -> list[int | None]:
        """Validate every release of a batch, then store them in one transaction.

        If any release is invalid the whole batch is refused and nothing is stored; the error
        names the release's position (`releases[i].…`).

        Returns:
            per release, its transcript seq, or None when it was a duplicate.
        """
        with self.refusals():
            batch: list[NewRelease] = []
            keys: list[tuple[str, str]] = []
            seen: dict[tuple[str, str], bytes] = {}
            checked = []
            for i, raw in enumerate(raws):  # every check of the content first, then the phase
                where = f"releases[{i}]." if len(raws) > 1 else ""
                try:
                    checked.append(self._check_release(raw, pb.PURPOSE_PROFILE, node))
                except REFUSALS as exc:
                    raise type(exc)(*_prefixed(exc, where)) from exc
            for i, (raw, (rel, field, tier)) in enumerate(zip(raws, checked, strict=True)):
                where = f"releases[{i}]." if len(raws) > 1 else ""
                try:
                    self._check_release_phase(tier)
                    digest = hashlib.sha256(raw).digest()
                    key = (rel.user_id, rel.nonce)
                    if key in seen and seen[key] != digest:
                        raise AlreadyExistsError(
                            f"nonce: {rel.nonce!r} appears twice in this batch for one user "
                            f"with different contents"
                        )
                except REFUSALS as exc:
                    raise type(exc)(*_prefixed(exc, where)) from exc
                keys.append(key)
                if key not in seen:  # the same release twice in a batch: store once
                    seen[key] = digest
                    batch.append(
                        NewRelease(rel.user_id, rel.nonce, rel.purpose, field, raw, digest)
                    )
            with self._lock:
                # again under the writer lock: the phase may have moved on since the checks
                for i, new in enumerate(batch):
                    where = f"releases[{i}]." if len(raws) > 1 else ""
                    try:
                        self._check_release_phase(self._users[new.user_id].tier)
                        self._check_conflict(new.user_id, new.nonce, new.digest)
                    except REFUSALS as exc:
                        raise type(exc)(*_prefixed(exc, where)) from exc
                stored_before = [self.store.has_release(r.user_id, r.nonce) for r in batch]
                n_dup = len(keys) - len(batch) + sum(stored_before)
                self.counters.duplicates += n_dup
                try:
                    seqs = self.store.add_releases(method, batch, self._counters_meta())
                except BaseException:
                    self.counters.duplicates -= n_dup
                    raise
                self._notify_many(
                    [
                        (seq, method, new.raw)
                        for new, seq in zip(batch, seqs, strict=True)
                        if seq is not None
                    ]
                )
            stored = {(r.user_id, r.nonce): s for r, s in zip(batch, seqs, strict=True)}
            return [stored.pop(key, None) for key in keys]  # repeats after the first: None

    def _check_release_phase(self, tier: pb.Tier.ValueType) -> None:
        if self._phase not in RELEASE_PHASE.values():
            raise ProtocolError(
                f"phase: profile releases are accepted in phases "
                f"{sorted(set(RELEASE_PHASE.values()))}, not {self._phase!r}"
            )
        want = RELEASE_PHASE[TIER_NAMES[tier]]
        if self._phase != want:
            raise ProtocolError(
                f"phase: {TIER_NAMES[tier]}-tier releases are accepted in phase {want!r}, "
                f"not {self._phase!r}"
            )

    def _check_conflict(self, user_id: str, nonce: str, digest: bytes | None) -> None:
        stored, old = self.store.release_digest(user_id, nonce)
        if stored and old is not None and digest is not None and old != digest:
            raise AlreadyExistsError(
                f"nonce: {short(nonce)} was already used by this user with a different content"
            )

    def _check_release(
        self, raw: bytes, purpose: pb.Purpose.ValueType, node: str, name: str = "Release"
    ) -> tuple[pb.Release, str, pb.Tier.ValueType]:
        """Every check of one release; returns it parsed, its payload field and the tier."""
        if len(raw) > self.spec.max_release_bytes:
            raise ResourceExhaustedError(
                f"release: {len(raw)} bytes exceeds max_release_bytes {self.spec.max_release_bytes}"
            )
        rel = parse(pb.Release, raw, name)
        self._check_run(rel.run_id)
        check_id("user_id", rel.user_id)
        check_id("nonce", rel.nonce)
        tier = self._authenticate(rel.user_id, rel.token, node)
        if rel.purpose != purpose:
            got = pb.Purpose.Name(rel.purpose) if rel.purpose in (0, 1, 2) else rel.purpose
            raise ValidationError("purpose", f"must be {pb.Purpose.Name(purpose)}, got {got}")
        if purpose == pb.PURPOSE_PROFILE and rel.nonce != profile_nonce():
            raise ValidationError(
                "nonce", f"a profile release has nonce {profile_nonce()!r}, got {short(rel.nonce)}"
            )
        if purpose == pb.PURPOSE_QUERY and rel.nonce == profile_nonce():
            raise ValidationError(
                "nonce", f"{profile_nonce()!r} is the profile's nonce; a query needs its own"
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

    def _authenticate(self, user_id: str, token: str, node: str) -> pb.Tier.ValueType:
        """The user's tier, if `node` enrolled her. To any other node she is not enrolled
        (the same answer as for an id nobody enrolled: no existence oracle)."""
        known = self._users.get(user_id)
        if known is None or known.node != node:
            raise ProtocolError(
                f"user_id: {short(user_id)} is not enrolled by this node", user_id=user_id[:64]
            )
        if not hmac.compare_digest(known.token.encode(), token.encode()):
            raise AuthenticationError(
                f"token: does not match the enrollment receipt of user {short(user_id)}"
            )
        return known.tier

    # ------------------------------------------------------------------ training and serving
    def _profiles(
        self, tier: int | None = None, exclude: set[str] | frozenset[str] = frozenset()
    ) -> tuple[list[str], list[Payload]]:
        """User ids and payloads of the stored profile releases (of `tier`, if given, and not of
        the users in `exclude`), in a canonical order (by user id), not arrival order, so that
        fitting does not depend on how the shards happened to be scheduled."""
        users, stored = self._stored_profiles(tier, exclude)
        return users, stored[:]

    def _stored_profiles(
        self, tier: int | None = None, exclude: set[str] | frozenset[str] = frozenset()
    ) -> tuple[list[str], StoredPayloads]:
        """`_profiles` with the payloads left as stored bytes, decoded on access."""
        with self._lock:
            rows = list(self.store.releases_by_purpose(pb.PURPOSE_PROFILE))
        users, raws = canonical_order(
            (u, raw)
            for u, raw in rows
            if u not in exclude and (tier is None or self._users[u].tier == tier)
        )
        del rows
        return users, StoredPayloads(raws)

    def _two_tier(self) -> TwoTierRounds:
        if self._rounds is None:
            raise ProtocolError(f"model: {self.spec.model} has no public tier")
        return self._rounds

    def fit_public(self) -> None:
        """Fit and publish the public model of a two-tier run (`TwoTierRounds.fit_public`),
        and move to "collect" with it stored. Holds the writer lock throughout, so no public
        release arrives after the fit read the public releases.

        Raises:
            ProtocolError: too few public users for the model.
        """
        rounds = self._two_tier()
        with self._lock:
            rounds.fit_public(*self._profiles(pb.TIER_PUBLIC))
            self._model, self._stage = rounds.model, "public"
            self._published_users = rounds.published_users
            self._move_to("collect", rounds.state())

    def fold_private(self, new_round: int) -> None:
        """Start collect round `new_round` of a two-tier run (`TwoTierRounds.start_round`),
        stored with the model it publishes."""
        rounds = self._two_tier()
        with self._lock:
            rounds.start_round(new_round, *self._unfolded_private())
            self.store.commit_state({"round": str(new_round)}, rounds.state())

    def _unfolded_private(self) -> tuple[list[str], list[Payload]]:
        """The private profile releases not yet folded into the two-tier model."""
        return self._profiles(pb.TIER_PRIVATE, exclude=set(self._two_tier().folded))

    def _ensure_trained(self) -> None:
        """Fit the model unless it is fitted (waits for a fit in progress)."""
        with self._train_lock:
            if not self.trained:
                self.train()

    def train(self) -> None:
        """Fit the model on the stored profile releases (Bilge §1.4 step 2), fed as its
        `ModelCapabilities.consumes` says; for a two-tier model, the last private M-step on
        top of the public model. The fitted model is stored (`server.models.persistence`)
        before it is published."""
        t0 = time.perf_counter()
        blobs: dict[str, bytes]
        if self._rounds is not None:
            users = self._rounds.published_users + self._rounds.fold(*self._unfolded_private())
            model: Model = self._rounds.model
            blobs = self._rounds.state()
        else:
            users, rows = self._stored_profiles()  # decoded block by block where the input can
            model = self.recipe.fit(users, rows)
            buf = io.BytesIO()
            save_model(model, buf)
            blobs = {"final/model": buf.getvalue()}
        blobs["final/users"] = json.dumps(users).encode()
        with self._lock:
            self.counters.train_seconds = time.perf_counter() - t0
            self.store.commit_state({"trained": "1", **self._counters_meta()}, blobs)
            self._model, self._stage, self._published_users = model, "final", users
        logger.info(
            "trained %s on %d profiles in %.2fs",
            self.spec.model,
            len(users),
            self.counters.train_seconds,
        )

    def _check_query(
        self, rel_raw: bytes, node: str
    ) -> tuple[Recommender, pb.Release, SparsePayload, int]:
        rel, _, _ = self._check_release(rel_raw, pb.PURPOSE_QUERY, node, name="query")
        if self._phase != "serve":
            raise ProtocolError(
                f"phase: queries are answered in phase 'serve', not {self._phase!r}"
            )
        model = self._model
        if not isinstance(model, Recommender) or not self.trained:
            raise ProtocolError(
                f"model: {self.spec.model} answers no queries; its result is "
                f"published through GetModel"
            )
        _, payload = payload_from_proto(rel)
        if not isinstance(payload, SparsePayload):
            raise ValidationError("query.payload", "this model needs a sparse query vector")
        return model, rel, payload, self.recipe.fold(rel.user_id)

    def _query_limit(self) -> int:
        return self.spec.max_release_bytes + self.spec.limits.query_extra_bytes

    def predict(self, raw: bytes, node: str = "") -> pb.PredictResponse:
        """Answer a score for each target item (Bilge §1.4 step 3; for z-score models the
        client de-normalises). The query is stored (a recorded release) before the answer
        leaves; a retry gets the same answer and is stored once."""
        with self.refusals():
            check_size(raw, self._query_limit(), "PredictRequest")
            req = parse(pb.PredictRequest, raw, "PredictRequest")
            return self._answer_predicts([(req, raw)], node)[0]

    def predict_batch(self, raw: bytes, node: str = "") -> pb.PredictBatchResponse:
        """Answer several users' Predict queries in one model block (`predict_block`).

        Each query is validated, answered and recorded exactly as `predict` would (one
        "Predict" transcript record per query with that PredictRequest's bytes), so the
        transcript, the adversary's view and a replay do not tell a batch from single calls.
        All or nothing: a malformed query (named by its position) refuses the whole batch
        before anything is recorded."""
        with self.refusals():
            check_size(raw, self.spec.limits.batch_bytes, "PredictBatchRequest")
            batch = parse(pb.PredictBatchRequest, raw, "PredictBatchRequest")
            n = len(batch.requests)
            if not 1 <= n <= MAX_PREDICT_BATCH:
                raise ValidationError(
                    "requests", f"must hold 1..{MAX_PREDICT_BATCH} queries, got {n}"
                )
            parts = []
            for i, req in enumerate(batch.requests):
                sub = req.SerializeToString()
                try:
                    check_size(sub, self._query_limit(), "PredictRequest")
                except REFUSALS as exc:
                    raise type(exc)(*_prefixed(exc, f"requests[{i}].")) from None
                parts.append((req, sub))
            return pb.PredictBatchResponse(responses=self._answer_predicts(parts, node))

    def _answer_predicts(
        self, requests: list[tuple[pb.PredictRequest, bytes]], node: str
    ) -> list[pb.PredictResponse]:
        """Validate, answer (one model block) and record Predict queries; `requests` holds
        each parsed PredictRequest with its bytes (what the transcript records)."""
        checked = []
        for i, (req, raw) in enumerate(requests):
            try:
                checked.append(self._check_predict(req, raw, node))
            except REFUSALS as exc:
                if len(requests) == 1:
                    raise
                raise type(exc)(*_prefixed(exc, f"requests[{i}].")) from None
        model = checked[0][0]
        t0 = time.perf_counter()
        answers = answer_predicts(
            model,
            [(q.indices, q.values) for _, _, q, _, _, _ in checked],
            [items for *_, items, _ in checked],
            [fold for _, _, _, fold, _, _ in checked],
        )
        self.counters.answer_seconds += time.perf_counter() - t0
        self._record_queries(
            [
                (rel, "Predict", raw, digest)
                for (_, rel, *_, digest), (_, raw) in zip(checked, requests, strict=True)
            ]
        )
        return [
            pb.PredictResponse(scores=scores.tolist(), n_neighbours=n_nb.tolist())
            for scores, n_nb in answers
        ]

    def _check_predict(
        self, req: pb.PredictRequest, raw: bytes, node: str
    ) -> tuple[Recommender, pb.Release, SparsePayload, int, IntArray, bytes]:
        items = np.fromiter(req.items, dtype=np.int64, count=len(req.items))
        if items.size == 0 or items.size > MAX_QUERY_ITEMS:
            raise ValidationError(
                "items", f"must hold 1..{MAX_QUERY_ITEMS} items, got {items.size}"
            )
        if items.max() >= self.spec.n_items:
            raise ValidationError(
                "items", f"item {int(items.max())} is out of range [0, {self.spec.n_items})"
            )
        if not req.HasField("query"):
            raise ValidationError("query", "a PredictRequest must carry its query release")
        model, rel, q, fold = self._check_query(req.query.SerializeToString(), node)
        digest = hashlib.sha256(raw).digest()
        self._check_conflict(rel.user_id, rel.nonce, digest)
        return model, rel, q, fold, items, digest

    def recommend(self, raw: bytes, node: str = "") -> pb.RecommendResponse:
        """Top-n items for a perturbed query vector (recorded as `predict` records)."""
        with self.refusals():
            check_size(raw, self._query_limit(), "RecommendRequest")
            req = parse(pb.RecommendRequest, raw, "RecommendRequest")
            if not 1 <= req.n <= 1000:
                raise ValidationError("n", f"must be in [1, 1000], got {req.n}")
            if not req.HasField("query"):
                raise ValidationError("query", "a RecommendRequest must carry its query release")
            model, rel, q, fold = self._check_query(req.query.SerializeToString(), node)
            digest = hashlib.sha256(raw).digest()
            self._check_conflict(rel.user_id, rel.nonce, digest)
            ((items, scores),) = answer_recommends(model, [(q.indices, q.values)], req.n, [fold])
            self._record_query(rel, "Recommend", raw, digest)
            return pb.RecommendResponse(items=items.tolist(), scores=scores.tolist())

    def _record_query(self, rel: pb.Release, method: str, raw: bytes, digest: bytes) -> None:
        self._record_queries([(rel, method, raw, digest)])

    def _record_queries(self, queries: list[tuple[pb.Release, str, bytes, bytes]]) -> None:
        """Store answered queries, each its own release and transcript record (in one
        transaction per method); a retried query is answered again but stored once."""
        with self._lock:
            if self._phase != "serve":
                raise ProtocolError(
                    f"phase: queries are answered in phase 'serve', not {self._phase!r}"
                )
            by_method: dict[str, list[tuple[NewRelease, bytes]]] = {}
            seen: set[tuple[str, str]] = set()
            for rel, method, raw, digest in queries:
                self._check_conflict(rel.user_id, rel.nonce, digest)
                new = NewRelease(
                    rel.user_id,
                    rel.nonce,
                    rel.purpose,
                    rel.WhichOneof("payload") or "",
                    raw,
                    digest,
                )
                key = (rel.user_id, rel.nonce)
                if key in seen or self.store.has_release(*key):
                    self.counters.duplicates += 1  # a retried query: answered again, stored once
                seen.add(key)
                by_method.setdefault(method, []).append((new, raw))
            for method, rows in by_method.items():
                seqs = self.store.add_releases(method, [r for r, _ in rows], self._counters_meta())
                for seq, (_, raw) in zip(seqs, rows, strict=True):
                    if seq is not None:
                        self.counters.queries += 1
                        self._notify(seq, method, raw)

    def model_archive(self, req: pb.GetModelRequest | bytes) -> bytes:
        """The published model (`shared.serde.PublishedModel`, public: what every client may
        download); with `req.round`, the model a two-tier run published at the start of that
        collect round."""
        if isinstance(req, bytes):
            check_size(req, self.spec.limits.small_bytes, "GetModelRequest")
            req = parse(pb.GetModelRequest, req, "GetModelRequest")
        self._check_run(req.run_id)
        if req.name and req.name != self.spec.model:
            raise ValidationError(
                "name", f"this run publishes model {self.spec.model!r}, not {short(req.name)}"
            )
        with self._lock:  # a consistent (stage, model, round) while a fit may replace them
            model, stage, round_, users = (
                self._model,
                self._stage,
                self.round,
                tuple(self._published_users),
            )
            if not stage or model is None:
                raise ProtocolError(
                    "model: nothing published yet (the public model of a two-tier "
                    "run comes with phase 'collect', any other after 'train')"
                )
            arrays = model.public_arrays()
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
            binding = dict(self._rounds.binding) if self._rounds is not None else {}
        return PublishedModel(
            name=self.spec.model,
            params=self.spec.model_params,
            stage=stage,
            round=round_,
            binding=binding,
            user_ids=users,
            arrays=arrays,
        ).to_bytes()

    # ------------------------------------------------------------------ helpers
    def _token(self, user_id: str, node: str) -> str:
        """The public enrollment receipt of (run, user, node)."""
        msg = f"{self.spec.run_id}\x00{user_id}\x00{node}".encode()
        return hmac.new(self.spec.token_key, msg, hashlib.sha256).hexdigest()[:32]

    def _check_run(self, run_id: str, *, allow_empty: bool = False) -> None:
        if run_id != self.spec.run_id and not (allow_empty and run_id == ""):
            raise ValidationError(
                "run_id", f"unknown run {short(run_id)} (this server runs {self.spec.run_id!r})"
            )

    def _check_admin(self, run_id: str, token: str) -> None:
        self._check_run(run_id)
        if not hmac.compare_digest(token.encode(), self.spec.admin_token.encode()):
            raise AuthenticationError("admin_token: wrong admin token")

    def add_observer(self, observer: Observer, *, replay: bool = False) -> None:
        """Add an observer; with `replay`, first hand it every stored record and the current
        phase's marker (a restarted server's feed), with no record stored in between."""
        with self._lock:
            if replay:
                for record in self._stored_records():
                    observer(record)
                observer(self._phase_marker())
            self.observers.append(observer)

    def add_batch_observer(self, observer: BatchObserver, *, replay: bool = False) -> None:
        """Add an observer called once per accepted request or batch with its records (in
        seq order): the batched observation feed. With `replay`, first hand it every stored
        record (one call) and the current phase's marker, with no record stored in between."""
        with self._lock:
            if replay:
                observer(list(self._stored_records()))
                observer([self._phase_marker()])
            self.batch_observers.append(observer)

    def _stored_records(self) -> Iterator[pb.TranscriptRecord]:
        """Every stored transcript row as the feed's record (a restarted server's resend)."""
        for row in self.store.transcript():
            yield pb.TranscriptRecord(
                seq=row.seq, arrival_unix_ns=row.arrival_ns, method=row.method, request=row.request
            )

    def _phase_marker(self) -> pb.TranscriptRecord:
        return pb.TranscriptRecord(seq=0, method="Phase", request=self._phase.encode())

    def _notify(self, seq: int, method: str, raw: bytes) -> None:
        self._notify_many([(seq, method, raw)])

    def _notify_many(self, items: list[tuple[int, str, bytes]]) -> None:
        """Hand the records of one accepted request or batch to the observers: each record to
        the per-record observers, the whole list once to the batch observers."""
        if not (self.observers or self.batch_observers) or not items:
            return
        now = time.time_ns()
        records = [
            pb.TranscriptRecord(seq=seq, arrival_unix_ns=now, method=method, request=raw)
            for seq, method, raw in items
        ]
        for observer in self.observers:
            for record in records:
                try:
                    observer(record)
                except Exception:  # an observer must never break the protocol
                    logger.exception("observer failed on record %d", record.seq)
        for batch_observer in self.batch_observers:
            try:
                batch_observer(records)
            except Exception:  # an observer must never break the protocol
                logger.exception("observer failed on records from %d", records[0].seq)

    def refusals(self) -> _RejectionCounter:
        """A context that counts a privrec refusal raised inside it (`releases_rejected`)."""
        return _RejectionCounter(self.counters, self._lock)


class _RejectionCounter:
    """Counts requests refused with a privrec error (they are never stored)."""

    def __init__(self, counters: Counters, lock: threading.RLock) -> None:
        self.counters, self.lock = counters, lock

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        if exc_type is not None and issubclass(exc_type, REFUSALS):
            with self.lock:
                self.counters.rejected += 1


def _where(name: str, i: int, batch: list[bytes]) -> str:
    """The position prefix of a refusal in a batch (none for a batch of one)."""
    return f"{name}[{i}]." if len(batch) > 1 else ""


def _prefixed(exc: Exception, prefix: str) -> tuple[Any, ...]:
    if isinstance(exc, ValidationError):
        return (prefix + exc.field, str(exc).split(": ", 1)[1])
    return (prefix + str(exc),)


__all__ = ["MAX_ID_LEN", "Aggregator", "Counters", "Enrollment", "RunSpec"]
