"""The untrusted aggregator's core, without gRPC: a small facade over collaborators with one
job each.

`server/servicer.py` is a thin gRPC adapter over this class and `--launcher inprocess` calls it
directly, so both transports run the same logic. Every method that receives client data takes
the request's raw bytes, exactly as they arrived, because the transcript stores them verbatim.
Validation happens once, before anything is stored: a bad request raises a `shared.errors`
exception naming the field (mapped to a gRPC status by `shared.rpc`), is counted as refused and
leaves the store untouched. Every request kind has a byte limit and unknown fields are refused
(`server.validation`); echoed values are cut short.

The collaborators, all over one shared `server.state.AggregatorState` (spec, store, writer
lock, counters, feed, phase):

* `server.enrollment.Enrollments` — enrollment and authority (who may act as whom);
* `server.submission.Submissions` — every check of a release, and the store's records of
  accepted releases and answered queries;
* `server.trainer.Trainer` — the model fitted from the stored releases through `server.fitting`
  (two-tier: `server.two_tier`), and what is published of it;
* `server.queries.QueryService` — Predict, PredictBatch and Recommend;
* `server.feed.ObservationFeed` — the observation feed.

This class holds the run's public configuration and its phases, and hands every request to the
collaborator whose job it is.

**Concurrency.** The gRPC adapter calls these methods from worker threads. One lock serialises
the writers (store transactions, phase changes) and feed notifications, so the feed is in
transcript order; training runs outside it, after the phase has moved to "train" (late releases
are refused, never acknowledged and dropped), so status and reads stay live.

**Restarts.** The phase, the round, every published model, the fitted model and the counters are
in the store (`Store.commit_state`), written in the same transaction as the change they belong
to. A new `Aggregator` over the same store takes up where the last one stopped; if it stopped
while training, `resume()` fits again from the stored releases (deterministic, canonical order).

The core dispatches on what the run's model declares (`ModelCapabilities`), never on its name:
what `fit` receives, whether queries are answered, and — for a two-tier model — the public phase
and collect rounds.
"""

from __future__ import annotations

import hmac
import logging
import threading

from privrec.server.enrollment import Enrollments
from privrec.server.feed import BatchObserver
from privrec.server.queries import QueryService
from privrec.server.spec import RunSpec
from privrec.server.state import TIER_NAMES, AggregatorState, Counters, RejectionCounter
from privrec.server.store import Store
from privrec.server.submission import Submissions
from privrec.server.trainer import Trainer
from privrec.server.validation import check_size, parse, short
from privrec.shared.control.acl import FEED_READERS
from privrec.shared.errors import AuthenticationError, ProtocolError, ValidationError
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.protocol import PHASES
from privrec.shared.run_config import PublicRunConfig

logger = logging.getLogger(__name__)
PAGE_USERS = 65_536
"""At most this many users in one `ListUsers` answer."""
PAGE_RECORDS, PAGE_BYTES = 10_000, 8 << 20
"""At most this many records, and about this many bytes, in one `GetTranscript` answer."""
TRAIN_FROM = "train_from"
"""Meta key: the phase a run entered "train" from (where a failed fit takes it back)."""


class Aggregator:
    """The aggregator of one run (module docstring).

    Args:
        spec: the run's configuration.
        store: where accepted requests go (an existing store is taken up where it stopped).

    Raises:
        ConfigError: the spec names an unknown model.
        TypeError: a two-tier model without a second-order mechanism (`sim` and
            `server.spec.check_tiers` refuse such a config first, with a config error).
    """

    def __init__(self, spec: RunSpec, store: Store) -> None:
        self.spec, self.store = spec, store
        self._allowed: dict[pb.Tier.ValueType, str] = {
            pb.TIER_PRIVATE: spec.mechanism.payload_field
        }
        self.state = AggregatorState(spec, store, self._allowed)
        self.counters: Counters = self.state.counters
        self.observers = self.state.feed.observers  # per-record observers of the feed
        self.enrollments = Enrollments(self.state)
        self.submissions = Submissions(self.state, self.enrollments)
        self.trainer = Trainer(self.state, self.enrollments)
        self.queries = QueryService(self.state, self.submissions, self.trainer)
        self.capabilities = self.trainer.capabilities
        if self.capabilities.public_tier:
            self._allowed[pb.TIER_PUBLIC] = "public_ratings"
        self._phase_lock = threading.Lock()  # one phase change at a time
        self.public = self._public_config()
        store.set_meta("run_config", self.public.to_json())
        self.trainer.restore()
        if self.phase != "enroll":
            logger.info(
                "store taken up: phase %s, round %d, %d users, %s",
                self.phase,
                self.round,
                len(self.enrollments),
                "trained" if self.trained else "not trained",
            )

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
            control_keys=s.control_keys,
        )

    def public_config(self) -> PublicRunConfig:
        """The public run configuration (the adversary may know all of it)."""
        return self.public

    def run_config(self, req: pb.GetRunConfigRequest | bytes) -> pb.RunConfig:
        """The public run configuration with the current phase and round (`GetRunConfig`)."""
        if isinstance(req, bytes):
            check_size(req, self.spec.limits.small_bytes, "GetRunConfigRequest")
            req = parse(pb.GetRunConfigRequest, req, "GetRunConfigRequest")
        self.state.check_run(req.run_id, allow_empty=True)
        return self.public.to_proto(phase=self.phase, round_=self.round)

    @property
    def phase(self) -> str:
        """The current phase (one of `shared.protocol.PHASES`)."""
        return self.state.phase

    @property
    def round(self) -> int:
        """The current collect round of a two-tier run (0 otherwise)."""
        return self.trainer.round

    @property
    def trained(self) -> bool:
        """True once the final model is fitted."""
        return self.trainer.trained

    def needs_training(self) -> bool:
        """The phase is "train" or later but no fitted model is stored (a restart during a
        fit): `resume` fits it."""
        return self.trainer.needs_training()

    def resume(self) -> None:
        """Finish what a previous server left undone: fit the model when `needs_training`.
        Blocking; the gRPC adapter runs it in a worker at start-up. A fit that cannot succeed
        (a store an older server left in "train") moves the run back to the phase it came
        from, so that it is not stuck in "train" across restarts."""
        if self.needs_training():
            with self._phase_lock:
                try:
                    self._train(self.store.get_meta(TRAIN_FROM) or "collect")
                except ProtocolError as exc:
                    logger.error("resuming: %s", exc)

    # ------------------------------------------------------------------ admin
    def set_phase(self, req: pb.SetPhaseRequest | bytes) -> pb.RunStatus:
        """Move to `req.phase`. Leaving "public" fits the public model of a two-tier run, a
        higher `req.round` in "collect" folds the private releases so far into it
        (`Trainer.fold_private`), and entering "train" trains. Each step is stored with what it
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
        two_tier = self.trainer.rounds is not None
        with self._phase_lock:
            old, new = PHASES.index(self.phase), PHASES.index(req.phase)
            if new < old:
                raise ProtocolError(
                    f"phase: cannot go back from {self.phase!r} to {req.phase!r}",
                    run_id=req.run_id,
                )
            collect, train = PHASES.index("collect"), PHASES.index("train")
            if req.round and not (two_tier and req.phase == "collect"):
                raise ValidationError(
                    "round",
                    "only the collect phase of a two-tier run has "
                    f"rounds, got round {req.round} for {req.phase!r}",
                )
            if req.round and req.round < self.round:
                raise ProtocolError(f"round: cannot go back from round {self.round} to {req.round}")
            if two_tier and old < collect <= new:
                self.trainer.fit_public()
            if req.round > self.round:
                self.trainer.fold_private(req.round)
            if old < train <= new:
                self._check_trainable()
                self.state.move_to("train", meta={TRAIN_FROM: self.phase})
            if new >= train:
                self._train(PHASES[old] if old < train else None)
            if req.phase != self.phase:
                self.state.move_to(req.phase)
        return self.status()

    def _check_trainable(self) -> None:
        """Refuse "train" when no model can be fitted: a one-tier run with no profile."""
        if self.trainer.rounds is None and not self.store.tally.users_with(pb.PURPOSE_PROFILE):
            raise ProtocolError(
                f"phase: no profile release is stored, so {self.spec.model} cannot be fitted; "
                f"the run stays in {self.phase!r}"
            )

    def _train(self, back_to: str | None) -> None:
        """Fit the model (unless fitted). If the fit fails, the run goes back to `back_to`
        (the phase before "train"; None: it was already in "train" or later, and stays) and
        the failure is a refusal naming the reason; the traceback is logged."""
        try:
            self.trainer.ensure_trained()
        except Exception as exc:
            reason = short(str(exc) or "no reason given", 200)
            logger.exception("the fit of %s failed", self.spec.model)
            where = self.phase
            if back_to is not None and self.phase == "train":
                self.state.move_to(back_to)
                where = back_to
            n = self.store.tally.users_with(pb.PURPOSE_PROFILE)
            raise ProtocolError(
                f"train: {self.spec.model} could not be fitted on the {n} stored profiles "
                f"({reason}); the run stays in {where!r}"
            ) from exc

    def get_status(self, req: pb.GetStatusRequest | bytes) -> pb.RunStatus:
        """The run's counts (`GetStatus`, admin only)."""
        if isinstance(req, bytes):
            check_size(req, self.spec.limits.small_bytes, "GetStatusRequest")
            req = parse(pb.GetStatusRequest, req, "GetStatusRequest")
        self._check_admin(req.run_id, req.admin_token)
        return self.status()

    def status(self) -> pb.RunStatus:
        """The run's counts, as `GetStatus` answers them."""
        with self.state.lock:
            tally = self.store.tally  # kept by the store's writes: no table scan per poll
            return pb.RunStatus(
                run_id=self.spec.run_id,
                phase=self.phase,
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

    def _check_admin(self, run_id: str, token: str) -> None:
        self.state.check_run(run_id)
        if not hmac.compare_digest(token.encode(), self.spec.admin_token.encode()):
            raise AuthenticationError("admin_token: wrong admin token")

    # ------------------------------------------------------------------ users' requests
    def enroll(self, raw: bytes, node: str = "") -> pb.EnrollResponse:
        """Enroll a user for `node` (idempotent for that node; refused for any other)."""
        return self.enroll_many([raw], node)[0]

    def enroll_many(self, raws: list[bytes], node: str = "") -> list[pb.EnrollResponse]:
        """Enroll a batch of users for `node` (`Enrollments.enroll_many`)."""
        with self.refusals():
            return self.enrollments.enroll_many(raws, node)

    def submit(self, raw: bytes, method: str = "Submit", node: str = "") -> pb.SubmitResponse:
        """Accept one profile release."""
        seqs = self.submit_many([raw], method, node)
        return pb.SubmitResponse(seq=seqs[0] or 0, duplicate=seqs[0] is None)

    def submit_many(
        self, raws: list[bytes], method: str = "SubmitStream", node: str = ""
    ) -> list[int | None]:
        """Validate a batch of profile releases, then store them in one transaction
        (`Submissions.submit_many`): per release its transcript seq, None for a duplicate."""
        with self.refusals():
            return self.submissions.submit_many(raws, method, node)

    def predict(self, raw: bytes, node: str = "") -> pb.PredictResponse:
        """Answer one Predict query (`QueryService.predict`)."""
        with self.refusals():
            return self.queries.predict(raw, node)

    def predict_batch(self, raw: bytes, node: str = "") -> pb.PredictBatchResponse:
        """Answer several users' Predict queries in one block (`QueryService.predict_batch`)."""
        with self.refusals():
            return self.queries.predict_batch(raw, node)

    def recommend(self, raw: bytes, node: str = "") -> pb.RecommendResponse:
        """Top-n items for a perturbed query vector (`QueryService.recommend`)."""
        with self.refusals():
            return self.queries.recommend(raw, node)

    def model_archive(self, req: pb.GetModelRequest | bytes) -> bytes:
        """The published model (`Trainer.model_archive`)."""
        return self.trainer.model_archive(req)

    # ------------------------------------------------------------------ rejoining
    def list_users(self, raw: bytes, node: str = "") -> pb.ListUsersResponse:
        """`node`'s own users, a page at a time (`Enrollments.list_users`)."""
        check_size(raw, self.spec.limits.small_bytes, "ListUsersRequest")
        req = parse(pb.ListUsersRequest, raw, "ListUsersRequest")
        self.state.check_run(req.run_id)
        limit = min(req.limit or PAGE_USERS, PAGE_USERS)
        return pb.ListUsersResponse(users=self.enrollments.list_users(node, req.after, limit))

    def transcript_after(self, raw: bytes, node: str = "") -> pb.TranscriptBatch:
        """The stored records after `req.after_seq`, in seq order, a page of at most
        `req.limit` records and about `PAGE_BYTES` (`GetTranscript`): what a restarted
        adversary missed. Only a node that may read the observation feed may ask
        (`shared.control.acl.FEED_READERS`: the transcript is the feed, stored)."""
        check_size(raw, self.spec.limits.small_bytes, "GetTranscriptRequest")
        req = parse(pb.GetTranscriptRequest, raw, "GetTranscriptRequest")
        self.state.check_run(req.run_id)
        if node not in FEED_READERS:
            raise AuthenticationError(
                f"transcript: node {short(node)} may not read the transcript (only "
                f"{', '.join(FEED_READERS)} may, as only they may read the observation feed)"
            )
        limit, size = min(req.limit or PAGE_RECORDS, PAGE_RECORDS), 0
        records: list[pb.TranscriptRecord] = []
        with self.state.lock:  # the store's one connection: no write in between
            for row in self.store.transcript(after=req.after_seq):
                records.append(
                    pb.TranscriptRecord(
                        seq=row.seq, arrival_unix_ns=row.arrival_ns, method=row.method,
                        request=row.request,
                    )
                )  # fmt: skip
                size += len(row.request)
                if len(records) >= limit or size >= PAGE_BYTES:
                    break
        return pb.TranscriptBatch(records=records)

    # ------------------------------------------------------------------ the feed
    def add_batch_observer(self, observer: BatchObserver, *, replay: bool = False) -> None:
        """Add an observer called once per accepted request or batch with its records (in
        seq order): the batched observation feed. With `replay`, first hand it every stored
        record (one call) and the current phase's marker, with no record stored in between."""
        with self.state.lock:
            self.state.feed.add_batch_observer(observer, replay=replay, phase=self.phase)

    def refusals(self) -> RejectionCounter:
        """A context that counts a privrec refusal raised inside it (`releases_rejected`)."""
        return self.state.refusals()


__all__ = ["Aggregator"]
