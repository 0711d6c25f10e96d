"""Submission and the store: every check of a release, and how accepted releases are recorded.

Validation happens once, here, before anything is stored: a bad release raises a
`shared.errors` exception naming the field (mapped to a gRPC status by `shared.rpc`) and leaves
the store untouched. Every accepted profile and every answered query is a release in the store,
keyed by (user, nonce) with the SHA-256 of its request: a retry (same bytes) is acknowledged and
stored once, a different content under a used nonce is refused (ALREADY_EXISTS), and the nonce
``profile`` is reserved for the profile. So each answer the server gives is in the transcript
and in the per-user privacy ledger.
"""

from __future__ import annotations

import hashlib

from privrec.server.enrollment import Enrollments
from privrec.server.release_view import Envelope, read_views
from privrec.server.state import REFUSALS, TIER_NAMES, AggregatorState, at_position, position
from privrec.server.store_records import NewRelease
from privrec.server.validation import check_id, parse, short
from privrec.shared.errors import (
    AlreadyExistsError,
    ProtocolError,
    ResourceExhaustedError,
    ValidationError,
)
from privrec.shared.mechanisms.base import Payload, SparsePayload
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.protocol import RELEASE_PHASE, profile_nonce
from privrec.shared.serde import payload_from_proto

_PHASE_OF_TIER = {tier: RELEASE_PHASE[name] for tier, name in TIER_NAMES.items()}
"""The phase in which each tier's profile releases are accepted."""

AnsweredQuery = tuple[pb.Release, str, bytes, bytes]
"""An answered query to record: its release, the method, the request's bytes and their digest."""


class Submissions:
    """Checks and stores profile releases, and records answered queries.

    Args:
        state: the aggregator's shared state.
        enrollments: who may release as whom (`Enrollments.authenticate`).
    """

    def __init__(self, state: AggregatorState, enrollments: Enrollments) -> None:
        self.state, self.enrollments = state, enrollments

    def submit_many(self, raws: list[bytes], method: str, node: str) -> list[int | None]:
        """Validate every release of a batch, then store them in one transaction.

        If any release is invalid the whole batch is refused and nothing is stored; the error
        names the release's position (`releases[i].…`).

        Returns:
            per release, its transcript seq, or None when it was a duplicate.
        """
        state = self.state
        checked = self.check_profiles(raws, node)  # every check of the content first
        batch: list[NewRelease] = []
        keys: list[tuple[str, str]] = []
        first: dict[tuple[str, str], bytes] = {}  # each (user, nonce)'s digest in this batch
        tiers: dict[pb.Tier.ValueType, int] = {}  # each tier's first position
        for i, ((rel, field, tier), raw) in enumerate(zip(checked, raws, strict=True)):
            digest = hashlib.sha256(raw).digest()
            key = (rel.user_id, rel.nonce)
            keys.append(key)
            known = first.setdefault(key, digest)
            if known is digest:  # its first time in the batch (a repeat is stored once)
                batch.append(NewRelease(rel.user_id, rel.nonce, rel.purpose, field, raw, digest))
                tiers.setdefault(tier, i)
            elif known != digest:  # `check_batch_nonces`, in the same pass
                raise nonce_conflict(rel.nonce, position("releases", i, len(raws)))
        for tier, i in tiers.items():  # the phase, once per tier, in batch order
            try:
                self._check_phase(tier)
            except REFUSALS as exc:
                raise at_position(exc, position("releases", i, len(raws))) from exc
        with state.lock:
            # again under the writer lock: the phase may have moved on since the checks
            phase_ok: set[pb.Tier.ValueType] = set()
            n_stored = 0  # releases stored by an earlier call (retries: acknowledged)
            for i, new in enumerate(batch):
                try:
                    tier = self.enrollments.tier_of(new.user_id)
                    if tier not in phase_ok:
                        self._check_phase(tier)
                        phase_ok.add(tier)
                    n_stored += state.check_conflict(new.user_id, new.nonce, new.digest)
                except REFUSALS as exc:
                    raise at_position(exc, position("releases", i, len(raws))) from exc
            n_dup = len(keys) - len(batch) + n_stored
            state.counters.duplicates += n_dup
            try:
                seqs = state.store.add_releases(method, batch, state.counters_meta())
            except BaseException:
                state.counters.duplicates -= n_dup
                raise
            state.feed.notify_many(
                [
                    (seq, method, new.raw)
                    for new, seq in zip(batch, seqs, strict=True)
                    if seq is not None
                ]
            )
        if len(batch) == len(keys):  # no release repeated in the batch: seqs in batch order
            return seqs
        stored = {(r.user_id, r.nonce): s for r, s in zip(batch, seqs, strict=True)}
        return [stored.pop(key, None) for key in keys]  # repeats after the first: None

    def _check_phase(self, tier: pb.Tier.ValueType) -> None:
        phase = self.state.phase
        if phase == _PHASE_OF_TIER.get(tier):  # the usual answer, asked twice per release
            return
        if phase not in RELEASE_PHASE.values():
            raise ProtocolError(
                f"phase: profile releases are accepted in phases "
                f"{sorted(set(RELEASE_PHASE.values()))}, not {phase!r}"
            )
        want = RELEASE_PHASE[TIER_NAMES[tier]]
        if phase != want:
            raise ProtocolError(
                f"phase: {TIER_NAMES[tier]}-tier releases are accepted in phase {want!r}, "
                f"not {phase!r}"
            )

    def check_profiles(
        self, raws: list[bytes], node: str
    ) -> list[tuple[Envelope, str, pb.Tier.ValueType]]:
        """Every check of each profile release of a batch (`check_release`), decoded together
        (`server.release_view`; a release the fast lane cannot read takes the full parse).

        Raises:
            ValidationError: or another of `REFUSALS`: the first refusal in batch order, named
                by its position (``releases[i].…``).
        """
        checked: list[tuple[Envelope, str, pb.Tier.ValueType]] = []
        for i, (raw, view) in enumerate(zip(raws, read_views(raws), strict=True)):
            try:
                if view is None:
                    checked.append(self.check_release(raw, pb.PURPOSE_PROFILE, node))
                else:
                    self._check_size(raw)
                    _, tier = self._check_envelope(view, view.field, pb.PURPOSE_PROFILE, node)
                    self._check_payload(view.payload, tier, view.largest)
                    checked.append((view, view.field, tier))
            except REFUSALS as exc:
                raise at_position(exc, position("releases", i, len(raws))) from exc
        return checked

    def check_release(
        self, raw: bytes, purpose: pb.Purpose.ValueType, node: str, name: str = "Release"
    ) -> tuple[pb.Release, str, pb.Tier.ValueType]:
        """Every check of one release; returns it parsed, its payload field and the tier."""
        self._check_size(raw)
        rel = parse(pb.Release, raw, name)
        field, tier = self._check_envelope(rel, rel.WhichOneof("payload"), purpose, node)
        _, payload = payload_from_proto(rel)
        self._check_payload(payload, tier)
        return rel, field, tier

    def _check_size(self, raw: bytes) -> None:
        limit = self.state.spec.max_release_bytes
        if len(raw) > limit:
            raise ResourceExhaustedError(
                f"release: {len(raw)} bytes exceeds max_release_bytes {limit}"
            )

    def _check_envelope(
        self, rel: Envelope, field: str | None, purpose: pb.Purpose.ValueType, node: str
    ) -> tuple[str, pb.Tier.ValueType]:
        """The checks of a release's fields around its payload: run, ids, the enrolling node,
        purpose, nonce and the payload field the user's tier sends; returns (field, tier)."""
        allowed = self.state.allowed
        self.state.check_run(rel.run_id)
        check_id("user_id", rel.user_id)
        check_id("nonce", rel.nonce)
        tier = self.enrollments.authenticate(rel.user_id, rel.token, node)
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
        if field is None:
            raise ValidationError("payload", "a release must carry a payload")
        if field != allowed[tier]:
            raise ValidationError(
                "payload",
                f"{field!r} is not accepted from a {pb.Tier.Name(tier)} user in this run "
                f"(expects {allowed[tier]!r})",
            )
        return field, tier

    def _check_payload(
        self, payload: Payload, tier: pb.Tier.ValueType, largest: float | None = None
    ) -> None:
        """The checks of a payload beyond its wire shape: the mechanism's (a private user's) or
        the rating scale's (a public user's). `largest`: its largest |value|, when known."""
        spec = self.state.spec
        if tier == pb.TIER_PRIVATE:
            spec.mechanism.validate(payload, spec.n_items)
            if largest is None:
                spec.mechanism.check_values(payload, spec.n_items)  # |value| within its bound
            else:
                spec.mechanism.check_largest(largest, spec.n_items)
        elif isinstance(payload, SparsePayload):
            check_public_ratings(payload, spec.n_items, spec.rating_scale)

    def record_queries(self, queries: list[AnsweredQuery]) -> None:
        """Store answered queries, each its own release and transcript record (in one
        transaction per method); a retried query is answered again but stored once. (The
        callers check a batch with `check_batch_nonces` before answering; checked again here,
        so that no answer is ever given without its record)."""
        state = self.state
        check_batch_nonces([(r.user_id, r.nonce, d) for r, _, _, d in queries], "requests")
        with state.lock:
            state.check_serving()
            by_method: dict[str, list[tuple[NewRelease, bytes]]] = {}
            seen: set[tuple[str, str]] = set()
            for rel, method, raw, digest in queries:
                state.check_conflict(rel.user_id, rel.nonce, digest)
                field = rel.WhichOneof("payload") or ""
                new = NewRelease(rel.user_id, rel.nonce, rel.purpose, field, raw, digest)
                key = (rel.user_id, rel.nonce)
                if key in seen or state.store.has_release(*key):
                    state.counters.duplicates += 1  # a retried query: answered again, stored once
                seen.add(key)
                by_method.setdefault(method, []).append((new, raw))
            stored: list[tuple[int, str, bytes]] = []
            for method, rows in by_method.items():
                seqs = state.store.add_releases(method, [r for r, _ in rows], state.counters_meta())
                stored += [
                    (seq, method, raw)
                    for seq, (_, raw) in zip(seqs, rows, strict=True)
                    if seq is not None
                ]
            # one feed message per answered batch, as for a SubmitStream batch (each query still
            # its own record): one message per query cost the embedded broker and the adversary
            # ≈ 0.8 ms of CPU between them, ≈ 30 % of serve's CPU at 30,000 users (issue 28)
            state.feed.notify_many(stored)


def check_public_ratings(payload: SparsePayload, n_items: int, scale: tuple[float, float]) -> None:
    """A public-tier user's ratings (Xin & Jaakkola's public users share them as they are):
    over the run's catalogue and on its rating scale.

    Raises:
        ValidationError: naming ``public_ratings.dim`` or ``public_ratings.values``.
    """
    if payload.dim != n_items:
        raise ValidationError(
            "public_ratings.dim", f"must equal n_items {n_items}, got {payload.dim}"
        )
    lo, hi = scale
    if payload.values.size and not (lo <= payload.values.min() and payload.values.max() <= hi):
        raise ValidationError(
            "public_ratings.values", f"ratings must lie on the run's scale [{lo:g}, {hi:g}]"
        )


def check_batch_nonces(releases: list[tuple[str, str, bytes]], name: str) -> None:
    """A (user, nonce) seen twice in one batch must carry the same request bytes both times (a
    retry, answered or acknowledged twice and stored once): a different content under one nonce
    is refused as it is across calls, so that a batch cannot have more answered than recorded.

    Args:
        releases: (user id, nonce, SHA-256 of the request) of each item, in batch order.
        name: the batch's field, for the position in the message (``requests[3].nonce``).

    Raises:
        AlreadyExistsError: the first item that reuses a nonce with another content.
    """
    first: dict[tuple[str, str], bytes] = {}
    for i, (user_id, nonce, digest) in enumerate(releases):
        if first.setdefault((user_id, nonce), digest) != digest:
            raise nonce_conflict(nonce, position(name, i, len(releases)))


def nonce_conflict(nonce: str, where: str) -> AlreadyExistsError:
    """The refusal of a batch item (at position prefix `where`) that reuses its user's nonce
    of an earlier item with another content."""
    return AlreadyExistsError(
        f"{where}nonce: {short(nonce)} appears twice in this batch for one user with different "
        "contents"
    )


__all__ = ["AnsweredQuery", "Submissions", "check_batch_nonces"]
