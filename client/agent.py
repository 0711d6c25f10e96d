"""A simulated user: she holds her true ratings, perturbs them locally, and de-normalises answers.

Nothing private leaves a private-tier `UserAgent` except through `profile_release` /
`query_request`, which carry only mechanism outputs. Her mean and deviation (Bilge Eq 2.5) stay
here. A public-tier user (Xin & Jaakkola's public users) shares her ratings openly with
`public_release`. In a two-tier run every user releases only her training ratings (her held-out
ones never leave her) and predicts the held-out ones locally with the published model
(`local_predictions`, Xin & Jaakkola Eq. (4)).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from privrec.shared.local_prediction import LOCAL_PREDICTORS
from privrec.shared.mechanisms.base import Mechanism, Payload, Profile, SparsePayload
from privrec.shared.population import UserPlan, without
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.protocol import profile_nonce, query_nonce
from privrec.shared.seeding import rng_for, rngs_for
from privrec.shared.serde import payload_to_proto
from privrec.shared.types import FloatArray, IntArray
from privrec.shared.zscores import denormalise, zscore


@dataclasses.dataclass(slots=True)  # half a million per shard at bench scale
class UserAgent:
    """One user of the population.

    Attributes:
        user_id: her id on the wire.
        profile: her true ratings (never sent).
        seed: the run seed (her generators derive from it and her id).
        withheld: the items she will ask predictions for (empty = not a test user).
        token: her enrollment token, once enrolled.
        tier: TIER_PRIVATE or TIER_PUBLIC.
        round: her collect round in a two-tier run (`shared.population.private_rounds`).
    """

    user_id: str
    profile: Profile
    seed: int
    withheld: IntArray
    token: str = ""
    tier: pb.Tier.ValueType = pb.TIER_PRIVATE
    round: int = 0

    @classmethod
    def from_plan(cls, plan: UserPlan, seed: int) -> UserAgent:
        """The agent of one user of the public plan (`shared.population.population_plan`)."""
        return cls(
            plan.user_id, plan.profile, seed, plan.withheld, tier=plan.tier, round=plan.round
        )

    def enroll_request(self, run_id: str, shard: str) -> pb.EnrollRequest:
        """The enrollment request of this user for `run_id` on `shard`."""
        return pb.EnrollRequest(run_id=run_id, user_id=self.user_id, shard=shard, tier=self.tier)

    def public_release(self, run_id: str) -> pb.Release:
        """A public user's ratings, shared openly (her held-out ones excepted)."""
        p = self.query_profile()
        rel = pb.Release(
            run_id=run_id,
            user_id=self.user_id,
            token=self.token,
            nonce=profile_nonce(),
            purpose=pb.PURPOSE_PROFILE,
        )
        payload_to_proto("public_ratings", SparsePayload(p.n_items, p.items, p.ratings), rel)
        return rel

    def _release(
        self,
        run_id: str,
        mechanism: Mechanism,
        profile: Profile,
        nonce: str,
        purpose: pb.Purpose.ValueType,
        key: tuple[object, ...],
        rng: np.random.Generator | None = None,
    ) -> pb.Release:
        if rng is None:
            rng = rng_for(self.seed, *self.stream(key))
        return self.release_message(
            run_id, mechanism, mechanism.release(profile, rng), nonce, purpose
        )

    def release_message(
        self,
        run_id: str,
        mechanism: Mechanism,
        payload: Payload,
        nonce: str,
        purpose: pb.Purpose.ValueType,
    ) -> pb.Release:
        """Her release message carrying `payload`."""
        rel = pb.Release(
            run_id=run_id, user_id=self.user_id, token=self.token, nonce=nonce, purpose=purpose
        )
        payload_to_proto(mechanism.payload_field, payload, rel)
        return rel

    def stream(self, key: tuple[object, ...]) -> tuple[object, ...]:
        """The key of her generator for `key` (``rng_for(seed, *stream(key))``)."""
        return ("user", self.user_id, *key)

    def profile_release(
        self,
        run_id: str,
        mechanism: Mechanism,
        *,
        holdout: bool = False,
        rng: np.random.Generator | None = None,
    ) -> pb.Release:
        """Her one profile release: the whole profile, perturbed (Bilge §1.4 step 1), or with
        `holdout` only her training ratings (two-tier runs). `rng`, if given, is her
        `PROFILE_STREAM` generator already seeded (`profile_releases`)."""
        return self._release(
            run_id,
            mechanism,
            self.released_profile(holdout),
            profile_nonce(),
            pb.PURPOSE_PROFILE,
            PROFILE_STREAM,
            rng,
        )

    def released_profile(self, holdout: bool = False) -> Profile:
        """What her profile release perturbs: all her ratings, or (`holdout`) her training
        ratings."""
        return self.query_profile() if holdout else self.profile

    def query_profile(self) -> Profile:
        """Her ratings without the withheld ones: what she knows when she asks."""
        return without(self.profile, self.withheld)

    def query_request(self, run_id: str, mechanism: Mechanism, index: int = 0) -> pb.PredictRequest:
        """A freshly disguised query vector with the target items (Bilge §2.2.1, last §)."""
        rel = self._release(
            run_id,
            mechanism,
            self.query_profile(),
            query_nonce(index),
            pb.PURPOSE_QUERY,
            ("query", index),
        )
        return pb.PredictRequest(query=rel, items=self.withheld.tolist())

    def local_predictions(self, rule: str, published: Mapping[str, np.ndarray]) -> FloatArray:
        """Her held-out ratings predicted locally from her training ratings and the model's
        published parameters, with the shared rule the model names (for the two-tier model:
        Xin & Jaakkola Eq. (4), `shared.local_prediction.low_rank_completion`)."""
        p = self.query_profile()
        return LOCAL_PREDICTORS[rule](published, p.items, p.ratings, self.withheld)

    def denormalise(self, scores: FloatArray, clip: tuple[float, float] | None) -> FloatArray:
        """p_aq = v̄_a + σ_a·P′_aq with her private statistics (Bilge Eq 2.5)."""
        z = zscore(self.query_profile().ratings)
        return np.asarray(denormalise(np.asarray(scores), z.mean, z.std, clip=clip))


PROFILE_STREAM: tuple[object, ...] = ("profile",)
"""The key of the generator a user's profile release draws from (after "user", her id)."""


def profile_releases(
    agents: Sequence[UserAgent], run_id: str, mechanism: Mechanism, *, holdout: bool = False
) -> list[pb.Release]:
    """Each agent's `profile_release` (the same bytes), with the generators of the batch
    seeded in one `rngs_for` pass and the batch perturbed by one `Mechanism.release_many`."""
    seeds = {a.seed for a in agents}
    if len(seeds) != 1:
        return [a.profile_release(run_id, mechanism, holdout=holdout) for a in agents]
    rngs = rngs_for(seeds.pop(), [a.stream(PROFILE_STREAM) for a in agents])
    payloads = mechanism.release_many([a.released_profile(holdout) for a in agents], rngs)
    return [
        a.release_message(run_id, mechanism, payload, profile_nonce(), pb.PURPOSE_PROFILE)
        for a, payload in zip(agents, payloads, strict=True)
    ]


__all__ = ["PROFILE_STREAM", "UserAgent", "profile_releases"]
