"""Enrollment and authority: who is enrolled, in which tier, and by which node.

**Authority.** A user belongs to the node that enrolled her (the `node` each user method is
called with: the signer the gRPC adapter verified, `server.auth`). No other node can enroll,
submit or query as her; to any other node she looks exactly like a user who was never enrolled
("not enrolled by this node"), and a second enrollment of her id by another node is refused with
nothing about her in the answer. The enrollment token is a public receipt, not a credential: it
is in the transcript and proves nothing by itself.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import NamedTuple

from privrec.server.state import REFUSALS, AggregatorState, at_position, position
from privrec.server.validation import MAX_SHARD_LEN, check_id, check_size, parse, short
from privrec.shared.errors import (
    AlreadyExistsError,
    AuthenticationError,
    ProtocolError,
    ValidationError,
)
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.protocol import ENROLL_PHASES, profile_nonce


class Enrollment(NamedTuple):
    """One enrolled user: her receipt, tier and owning node."""

    token: str
    tier: pb.Tier.ValueType
    node: str


class Enrollments:
    """Every enrolled user, kept in memory (the store is the authority and is read at start).

    Args:
        state: the aggregator's shared state.
    """

    def __init__(self, state: AggregatorState) -> None:
        self.state = state
        self.users: dict[str, Enrollment] = {
            u: Enrollment(t, pb.Tier.ValueType(tier), node)
            for u, t, tier, node in state.store.owners()
        }

    def __len__(self) -> int:
        return len(self.users)

    def tier_of(self, user_id: str) -> pb.Tier.ValueType:
        """The tier of an enrolled user."""
        return self.users[user_id].tier

    def token(self, user_id: str, node: str) -> str:
        """The public enrollment receipt of (run, user, node)."""
        msg = f"{self.state.spec.run_id}\x00{user_id}\x00{node}".encode()
        return hmac.new(self.state.spec.token_key, msg, hashlib.sha256).hexdigest()[:32]

    def authenticate(self, user_id: str, token: str, node: str) -> pb.Tier.ValueType:
        """The user's tier, if `node` enrolled her. To any other node she is not enrolled
        (the same answer as for an id nobody enrolled: no existence oracle)."""
        known = self.users.get(user_id)
        if known is None or known.node != node:
            raise ProtocolError(
                f"user_id: {short(user_id)} is not enrolled by this node", user_id=user_id[:64]
            )
        if not hmac.compare_digest(known.token.encode(), token.encode()):
            raise AuthenticationError(
                f"token: does not match the enrollment receipt of user {short(user_id)}"
            )
        return known.tier

    def list_users(self, node: str, after: str, limit: int) -> list[pb.UserState]:
        """`node`'s own users with ids after `after`, in id order, at most `limit`: each with
        her receipt, tier and whether her profile is stored (`ListUsers`: what a restarted
        client node continues from). Another node's users are never listed."""
        with self.state.lock:
            mine = sorted(u for u, e in self.users.items() if e.node == node and u > after)
            page = mine[:limit]
            store = self.state.store
            return [
                pb.UserState(
                    user_id=u,
                    token=self.users[u].token,
                    tier=self.users[u].tier,
                    profile=store.has_release(u, profile_nonce()),
                )
                for u in page
            ]

    def enroll_many(self, raws: list[bytes], node: str) -> list[pb.EnrollResponse]:
        """Enroll a batch of users for `node` (`EnrollBatch`): every request is checked
        first, then the new ones are stored in one transaction, each its own transcript record
        ("Enroll", its bytes verbatim) as if it had come alone. Idempotent per user
        (`already_enrolled`); if any request is refused the whole batch is, and the error
        names its position (`requests[i].…`) and the user."""
        state = self.state
        reqs = []
        for i, raw in enumerate(raws):
            try:
                reqs.append(self._check(raw))
            except REFUSALS as exc:
                raise at_position(exc, position("requests", i, len(raws))) from exc
        with state.lock:
            out: list[pb.EnrollResponse] = []
            new: dict[str, tuple[int, str, int]] = {}  # user -> (position, token, tier)
            for i, req in enumerate(reqs):
                try:
                    known = self._known(req, node, new)
                except REFUSALS as exc:
                    raise at_position(exc, position("requests", i, len(raws))) from exc
                if known is None:
                    token = self.token(req.user_id, node)
                    new[req.user_id] = (i, token, req.tier)
                    known = pb.EnrollResponse(token=token, already_enrolled=False)
                out.append(known)
            rows = [
                (reqs[i].user_id, token, reqs[i].shard, tier, raws[i])
                for i, token, tier in new.values()
            ]
            seqs = state.store.enroll_many(rows, node, state.counters_meta()) if rows else []
            for (user, token, _, tier, _), _seq in zip(rows, seqs, strict=True):
                self.users[user] = Enrollment(token, pb.Tier.ValueType(tier), node)
            state.feed.notify_many(
                [(seq, "Enroll", row[4]) for row, seq in zip(rows, seqs, strict=True)]
            )
        return out

    def _check(self, raw: bytes) -> pb.EnrollRequest:
        """Every check of one EnrollRequest that needs no lock."""
        state = self.state
        check_size(raw, state.spec.limits.enroll_bytes, "EnrollRequest")
        req = parse(pb.EnrollRequest, raw, "EnrollRequest")
        state.check_run(req.run_id)
        check_id("user_id", req.user_id)
        if len(req.shard) > MAX_SHARD_LEN or not req.shard.isprintable():
            raise ValidationError("shard", f"must be at most {MAX_SHARD_LEN} printable characters")
        if req.tier not in (pb.TIER_PRIVATE, pb.TIER_PUBLIC):
            raise ValidationError("tier", f"must be TIER_PRIVATE or TIER_PUBLIC, got {req.tier}")
        if req.tier not in state.allowed:
            raise ValidationError(
                "tier", f"this run has no public tier (model {state.spec.model!r} uses none)"
            )
        if state.phase not in ENROLL_PHASES:
            raise ProtocolError(f"phase: Enroll is not accepted in phase {state.phase!r}")
        return req

    def _known(
        self, req: pb.EnrollRequest, node: str, new: dict[str, tuple[int, str, int]]
    ) -> pb.EnrollResponse | None:
        """The answer for a user enrolled before (by this node), None for a new one; refuses
        another node's user and a second tier (also against an earlier request of the batch,
        `new`: user -> (position, token, tier))."""
        known = self.users.get(req.user_id)
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


__all__ = ["ENROLL_PHASES", "Enrollment", "Enrollments"]
