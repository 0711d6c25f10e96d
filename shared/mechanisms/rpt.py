"""RPT: randomized perturbation of z-scores with fake fill (Bilge 2013, §2.2.1, Procedure 1).

After Polat & Du (2005a). Each user z-scores her true ratings, draws her own private σ and β,
adds zero-mean noise (a fair coin picks Gaussian N(0, σ²) or uniform U[−√3σ, √3σ], both of
variance σ²) to her genuine z-scores, and fills ⌊e·β/100⌋ of her e empty cells, chosen uniformly
at random, with pure noise ("fake ratings"). The other empty cells stay empty. She keeps her mean
and standard deviation, which the server never sees, to de-normalise predictions (Bilge Eq 2.5).

Choices where the thesis is silent (Bilge extraction §7.4; docs/decisions/mechanisms.md):
  * STD convention: the sample standard deviation (ddof = 1), MATLAB's `std` default, which the
    thesis's experiments used. A user with one rating, or with all ratings equal, has no spread:
    her z-scores are 0 and her deviation is taken as 1, so de-normalising gives her mean.
  * β is an integer percentage drawn uniformly from {1, …, β_max}, as the thesis's guessing
    probability "1 out of β_max" implies (§3.1.1); β_max = 0 disables the fake fill.
  * σ is drawn uniformly from (0, σ_max].
  * F = ⌊e·β/100⌋ (rounded down).
  * Order of draws from the user's generator: β, σ, coin, fake cells, then the g + F noise values
    (genuine cells in item order first, then fake cells in the order drawn). Fixing the order
    makes a release reproducible bit for bit from its seed.

Privacy: RPT has NO formal guarantee (no ε); its protection is the server's uncertainty about σ,
β and the fake cells, measured in Bilge ch. 3 and attacked by `adversary.attacks`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from privrec.shared.accounting import dp
from privrec.shared.capabilities import PayloadKind, ReleaseKind, ReleaseScale
from privrec.shared.mechanisms.base import (
    GAUSSIAN_TAIL_SIGMAS,
    Mechanism,
    Payload,
    PrivacyStatement,
    Profile,
    SparsePayload,
    require_sparse,
)
from privrec.shared.mechanisms.params import check_param
from privrec.shared.types import FloatArray
from privrec.shared.zscores import zscore

SQRT3 = float(np.sqrt(3.0))


@dataclasses.dataclass(frozen=True)
class RptDraw:
    """The private parameters a user drew for one release (kept for tests and the referee)."""

    beta_percent: int
    sigma: float
    gaussian: bool
    fake_items: np.ndarray


class RandomizedPerturbation(Mechanism):
    """Bilge Procedure 1 with public bounds σ_max and β_max.

    Args:
        sigma_max: upper bound of the per-user noise standard deviation σ ∈ (0, σ_max].
        beta_max: upper bound, in percent of the user's empty cells, of the fake fill
            β ∈ {1, …, β_max}; 0 disables fakes.
    """

    name = "rpt"
    payload_field = "rpt"
    releases = ReleaseKind(PayloadKind.SPARSE, ReleaseScale.ZSCORE)

    def __init__(self, sigma_max: float = 2.0, beta_max: int = 25) -> None:
        self.sigma_max = check_param("sigma_max", sigma_max, low=0.0, low_open=True)
        b = check_param("beta_max", beta_max, low=0.0, high=100.0)
        if b != int(b):
            raise ValueError(f"`beta_max` must be a whole percentage, got {beta_max!r}")
        self.beta_max = int(b)

    def public_params(self) -> dict[str, Any]:
        """The public bounds σ_max and β_max."""
        return {"sigma_max": self.sigma_max, "beta_max": self.beta_max}

    def draw(self, profile: Profile, rng: np.random.Generator) -> RptDraw:
        """Draw β, σ, the distribution and the fake cells (Procedure 1, lines 5–8)."""
        beta = int(rng.integers(1, self.beta_max + 1)) if self.beta_max > 0 else 0
        sigma = self.sigma_max * (1.0 - rng.random())  # uniform on (0, σ_max]
        gaussian = bool(rng.random() < 0.5)
        # the unrated items, ascending: np.setdiff1d(arange(m), items) without its sort
        unrated = np.ones(profile.n_items, dtype=bool)
        unrated[profile.items] = False
        empty = np.flatnonzero(unrated).astype(np.int64)
        n_fake = (empty.size * beta) // 100
        fake = rng.choice(empty, size=n_fake, replace=False) if n_fake else empty[:0]
        return RptDraw(beta, sigma, gaussian, fake.astype(np.int64))

    @staticmethod
    def noise(rng: np.random.Generator, size: int, sigma: float, gaussian: bool) -> FloatArray:
        """N(0, σ²) or U[−√3σ, √3σ] (variance σ² either way; Procedure 1, line 9)."""
        if gaussian:
            return rng.normal(0.0, sigma, size)
        return rng.uniform(-SQRT3 * sigma, SQRT3 * sigma, size)

    def release_with_draw(
        self, profile: Profile, rng: np.random.Generator
    ) -> tuple[SparsePayload, RptDraw]:
        """The release and the private draw behind it (lines 10–13)."""
        z = zscore(profile.ratings).z
        d = self.draw(profile, rng)
        r = self.noise(rng, z.size + d.fake_items.size, d.sigma, d.gaussian)
        items = np.concatenate([profile.items.astype(np.int64), d.fake_items])
        values = np.concatenate([z, np.zeros(d.fake_items.size)]) + r
        order = np.argsort(items, kind="stable")
        return SparsePayload(profile.n_items, items[order], values[order]), d

    def release(self, profile: Profile, rng: np.random.Generator) -> SparsePayload:
        """The disguised ratings of Bilge Procedure 1 (the private draw discarded)."""
        return self.release_with_draw(profile, rng)[0]

    def privacy(self) -> PrivacyStatement:
        """No DP claim: it rests on the server not knowing σ, β and the fake cells (Bilge ch. 3)."""
        return PrivacyStatement(
            kind="none",
            epsilon=None,
            delta=None,
            neighbouring="not applicable",
            notes=(
                "RPT (Bilge 2013, Procedure 1) gives no differential-privacy guarantee: "
                "protection rests on the server not knowing each user's σ, β and fake cells. "
                "Bilge ch. 3 measures it by entropy H(S), the exact-list guessing probability "
                "and Π(P|U); see the attacks section for empirical reconstruction error."
            ),
        )

    def event(self) -> dp.DpEvent:
        """A non-private event: RPT has no DP guarantee."""
        return dp.NonPrivateDpEvent()

    def value_bound(self, n_items: int) -> float:
        """√m + 12 σ_max. A z-score with the sample deviation (ddof 1) of n ≤ m ratings is at
        most (n − 1)/√n < √m in size; the noise is U[−√3σ, √3σ] or N(0, σ²) with σ ≤ σ_max
        (Bilge Procedure 1, line 9), cut at `GAUSSIAN_TAIL_SIGMAS` (a false refusal has
        probability 3.6e-33 per value). ML-100K at σ_max = 2: 65.0."""
        return math.sqrt(n_items) + GAUSSIAN_TAIL_SIGMAS * self.sigma_max

    def validate(self, payload: Payload, n_items: int) -> None:
        """Refuse an empty release or one over another catalogue."""
        require_sparse(payload, "rpt", n_items, "a release must fill at least one cell")


__all__ = ["RandomizedPerturbation", "RptDraw"]
