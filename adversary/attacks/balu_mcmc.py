"""`balu_mcmc` and `balu_mcmc_flat`: Balu's MCMC joint decoder on BLIP and JLT (§3.4.2, §3.5).

The joint decoder tests whole profiles: it samples P ~ P[P | release] with the multi-stage
Gibbs sampler of (3.34)–(3.35) (`gibbs`), estimates each item's marginal (3.33), and scores items
by it; the reconstruction is the top-ĉ items (§3.5.2). Per attacked user:

1. **ĉ and c_max** from the release (`itemset_channel`): ĉ sizes the output and the initial
   state, the upper end of its confidence interval caps the slots, c_max = clamp(c_high,
   ĉ, |C|).
2. **Prefilter** (§3.5.1): the f·ĉ items ranked highest by the single decoder (f = `prefilter`,
   4 by default: Balu gives f ∈ [2, 6] and no value) form the candidate set C; the chain never
   leaves it. Equal scores are ordered at random (per user), never by item index. With the
   popularity prior the ranking adds each item's prior log-odds to its single score, i.e.
   ranks by the single-item posterior ("the f × ĉ most probable items"); with the flat prior
   that is the single decoder's own ranking. (Our reading; with a pure single-decoder prefilter
   the prior could not reach popular items at small ε.)
3. **Prior** (`itemset_prior`): independent item inclusions with log-odds β_j, the popularity
   of the auxiliary users tilted to an expected size ĉ (`prior = "popularity"`, attack
   `balu_mcmc`), or the same for every candidate (`prior = "flat"`, attack `balu_mcmc_flat`).
4. **Chain**: start from ĉ candidates drawn uniformly (§3.5.1, "started with ĉ random items"),
   T = `burn_in` (1,000) then M = `samples` (19,000) single-slot Gibbs steps, as in §3.5.1.
   BLIP uses the likelihood (3.31) with per-bit reference counts, JLT the Gaussian likelihood
   with σ (floored at `sigma_floor`).
5. **Scores**: the marginals over C, plus 10⁻⁹ × the candidate's prefilter rank (scaled to
   (0, 1]) to order the items the chain never visited; one Monte Carlo count is 1/M ≥ 10⁻⁴·⁵,
   so the tie-break never reorders two different marginals.

Randomness: the chain of user u draws from `seed_sequence(random_state, name, run_id, u)`, so the
output does not depend on the order users are processed, on threads, or on live versus replay.

References:
    R. Balu, PhD thesis, Univ. Rennes 1, 2016, §3.4.2 (3.30)–(3.35), §3.5.1–3.5.3.
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar, Literal

import numpy as np

from privrec.adversary.attacks.base import SideKnowledge
from privrec.adversary.attacks.gibbs import (
    ChainResult,
    ChainSpec,
    blip_marginals,
    chain_state,
    jlt_marginals,
)
from privrec.adversary.attacks.gibbs_reference import reference_chain_blip, reference_chain_jlt
from privrec.adversary.attacks.itemset_base import (
    ItemSetAttack,
    Scores,
    Targets,
    auxiliary_knowledge,
)
from privrec.adversary.attacks.itemset_channel import (
    BlipChannel,
    ItemSetChannel,
    JltChannel,
    channel_for,
)
from privrec.adversary.attacks.itemset_prior import smoothed_log_odds, tilted_log_odds
from privrec.adversary.observations import Observations
from privrec.shared.errors import ValidationError
from privrec.shared.seeding import seed_sequence
from privrec.shared.types import FloatArray, IntArray

Prior = Literal["popularity", "flat"]
_PRIORS = ("popularity", "flat")
TIE_BREAK = 1e-9
"""Weight of the prefilter rank added to the marginals (see the module docstring)."""


@dataclasses.dataclass(frozen=True)
class PreparedChains:
    """Everything set up for the chains of one fit (`JointDecoder.prepare`): the benchmark
    times `run` and compares it with `reference`.

    Attributes:
        channel: the mechanism's channel model.
        targets: the attacked users, their releases and ĉ.
        specs: one chain per attacked user.
        ties: per user, the tie-break of each candidate.
        burn_in, samples: T and M.
    """

    channel: ItemSetChannel
    targets: Targets
    specs: list[ChainSpec]
    ties: list[FloatArray]
    burn_in: int
    samples: int

    def run(self) -> ChainResult:
        """Every user's chain, compiled and threaded (`gibbs.blip_marginals`/`jlt_marginals`)."""
        ch, specs = self.channel, self.specs
        if isinstance(ch, BlipChannel):
            signs = np.where(self.targets.releases, 1, -1).astype(np.int8)
            return blip_marginals(
                specs,
                [ch.codeword_csr(s.candidates) for s in specs],
                signs,
                ch.lam,
                ch.n_hashes,
                self.burn_in,
                self.samples,
            )
        assert isinstance(ch, JltChannel)
        proj = ch.projections(self.targets.releases)
        return jlt_marginals(
            specs,
            ch.gram,
            [proj[u, s.candidates] for u, s in enumerate(specs)],
            ch.sigma_eff,
            self.burn_in,
            self.samples,
        )

    def reference(self, user: int, steps: int | None = None) -> tuple[FloatArray, int]:
        """User `user`'s chain by the plain-numpy reference (`steps` after burn-in, default M)."""
        spec, ch = self.specs[user], self.channel
        samples = self.samples if steps is None else steps
        if isinstance(ch, BlipChannel):
            sign = np.where(self.targets.releases[user], 1, -1).astype(np.int8)
            return reference_chain_blip(
                spec,
                ch.codeword_csr(spec.candidates),
                sign,
                ch.lam,
                ch.n_hashes,
                self.burn_in,
                samples,
            )
        assert isinstance(ch, JltChannel)
        return reference_chain_jlt(
            spec,
            ch.codebook[spec.candidates],
            self.targets.releases[user],
            ch.sigma_eff,
            self.burn_in,
            samples,
        )


def _check_int(name: str, value: object, low: int) -> int:
    if not (isinstance(value, int) and not isinstance(value, bool) and value >= low):
        raise ValueError(f"`{name}` must be an int >= {low}, got {value!r}")
    return value


class JointDecoder(ItemSetAttack):
    """Balu's MCMC joint decoder (module docstring).

    Args:
        prior: "popularity" (item priors from the auxiliary users) or "flat".
        burn_in: T, Gibbs steps before the marginals are counted (Balu: 1,000).
        samples: M, Gibbs steps counted (Balu: 19,000).
        prefilter: f, candidates per estimated item (Balu: f ∈ [2, 6]); ≥ 1.
        confidence: level of the confidence interval on c that caps the slots.
        sigma_floor: JLT only: the smallest σ the likelihood assumes.
        random_state: seed of the chains (int ≥ 0).
    """

    name = "balu_mcmc"
    knowledge = (
        "item-set releases (BLIP or JLT) + their public parameters + raw profiles of auxiliary "
        "users (item priors)"
    )
    default_prior: ClassVar[Prior] = "popularity"
    needs: ClassVar[frozenset[SideKnowledge]] = frozenset({SideKnowledge.AUXILIARY})

    def __init__(
        self,
        prior: Prior | None = None,
        burn_in: int = 1000,
        samples: int = 19000,
        prefilter: float = 4.0,
        confidence: float = 0.99,
        sigma_floor: float = 0.01,
        random_state: int = 0,
    ) -> None:
        super().__init__(confidence=confidence, sigma_floor=sigma_floor)
        prior = self.default_prior if prior is None else prior
        if prior not in _PRIORS:
            raise ValueError(f"`prior` must be one of {_PRIORS}, got {prior!r}")
        self.prior: Prior = prior
        self.burn_in = _check_int("burn_in", burn_in, 0)
        self.samples = _check_int("samples", samples, 1)
        if not (isinstance(prefilter, int | float) and float(prefilter) >= 1.0):
            raise ValueError(f"`prefilter` must be a number >= 1, got {prefilter!r}")
        self.prefilter = float(prefilter)
        self.random_state = _check_int("random_state", random_state, 0)

    # ------------------------------------------------------------------ per-user set-up
    def _base_log_odds(self, observations: Observations, n_items: int) -> FloatArray:
        if self.prior == "flat":
            return np.zeros(n_items)
        aux = observations.auxiliary
        if aux is None:
            raise ValidationError(
                "auxiliary",
                f"{self.name} with prior='popularity' needs the auxiliary users' raw profiles; "
                'run with [adversary] auxiliary = "popularity" or use balu_mcmc_flat',
            )
        return smoothed_log_odds(aux, n_items)

    def _specs(
        self,
        observations: Observations,
        targets: Targets,
        single: FloatArray,
        base: FloatArray,
    ) -> tuple[list[ChainSpec], list[FloatArray]]:
        """Candidates, prior, slots, initial set and stream of every user's chain, and each
        candidate's tie-break."""
        n_items = single.shape[1]
        specs, ties = [], []
        run_id = observations.run_config.run_id
        for u, uid in enumerate(targets.user_ids):
            c_hat = int(targets.sizes.c_hat[u])
            n_c = min(n_items, max(math.ceil(self.prefilter * c_hat), 1))
            seq = seed_sequence(self.random_state, self.name, run_id, uid)
            chain_seq, init_seq = seq.spawn(2)
            init_rng = np.random.Generator(np.random.PCG64(init_seq))
            # equal prefilter scores (BLIP's single scores take few values) are ordered at
            # random, never by item index: dataset ids carry structure (popular films first)
            tie = init_rng.permutation(n_items)
            order = np.lexsort((tie, -(single[u] + base)))
            candidates: IntArray = order[:n_c].astype(np.int64)
            c_max = int(min(max(int(targets.sizes.c_high[u]), c_hat), n_c))
            init = np.sort(init_rng.choice(n_c, size=min(c_hat, c_max), replace=False))
            specs.append(
                ChainSpec(
                    candidates=candidates,
                    log_prior=tilted_log_odds(base[candidates], c_hat),
                    c_max=c_max,
                    init=init.astype(np.int64),
                    state=chain_state(chain_seq),
                )
            )
            ties.append((n_c - np.arange(n_c)) / n_c)
        return specs, ties

    def prepare(self, observations: Observations) -> PreparedChains:
        """Set up every attacked user's chain without running it (the benchmark's entry)."""
        if observations.run_config.mechanism_name not in self.applies_to:
            raise ValidationError(
                "run_config.mechanism",
                f"attack {self.name!r} applies to {list(self.applies_to)}, got "
                f"{observations.run_config.mechanism_name!r}",
            )
        channel = channel_for(observations, self.sigma_floor)
        return self._prepare(observations, channel, self._targets(observations, channel))

    def _prepare(
        self, observations: Observations, channel: ItemSetChannel, targets: Targets
    ) -> PreparedChains:
        base = self._base_log_odds(observations, channel.n_items)
        single = channel.single_scores(targets.releases, targets.sizes.c_hat)
        specs, ties = self._specs(observations, targets, single, base)
        return PreparedChains(channel, targets, specs, ties, self.burn_in, self.samples)

    def _scores(
        self, observations: Observations, channel: ItemSetChannel, targets: Targets
    ) -> Scores:
        prepared = self._prepare(observations, channel, targets)
        specs = prepared.specs
        result = prepared.run()
        values = [m + TIE_BREAK * t for m, t in zip(result.marginals, prepared.ties, strict=True)]
        knowledge = ""
        if self.prior == "popularity":
            knowledge = auxiliary_knowledge(observations)
        n = max(len(specs), 1)
        return Scores(
            [s.candidates for s in specs],
            values,
            knowledge=knowledge,
            diagnostics={
                "prior_popularity": float(self.prior == "popularity"),
                "burn_in": float(self.burn_in),
                "samples": float(self.samples),
                "prefilter": self.prefilter,
                "candidates_mean": sum(s.candidates.size for s in specs) / n,
                "c_max_mean": sum(s.c_max for s in specs) / n,
                "move_rate_mean": float(result.move_rate.mean()) if specs else 0.0,
            },
        )


class FlatJointDecoder(JointDecoder):
    """Balu's MCMC joint decoder with flat item priors ("MCMC without prior", §3.5.2)."""

    name = "balu_mcmc_flat"
    knowledge = "item-set releases (BLIP or JLT) + their public parameters"
    default_prior: ClassVar[Prior] = "flat"
    needs: ClassVar[frozenset[SideKnowledge]] = frozenset()


__all__ = ["FlatJointDecoder", "JointDecoder", "PreparedChains"]
