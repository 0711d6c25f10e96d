"""The adversary's model of an item-set release: Balu's channel models of BLIP and JLT.

Everything here is computed from public parameters and the releases alone (Balu §3.1–3.4):

* **Profile size ĉ.**
  BLIP (§3.1.3): ω(b̃)/L estimates π̃_c, (3.9) inverts (3.7), π̂_c = (ω/L − p)/(1 − 2p), and
  inverting (3.6) gives ĉ = ln(1 − π̂_c)/(K ln(1 − 1/L)).
  JLT (3.11): ĉ = L/(L − 1)·Σ_i ỹ_i² − Lσ², the L/(L − 1) factor as printed (it adds ≈ c/L + σ²
  to the unbiased Σ ỹ² − Lσ²; kept for fidelity, Balu extraction §3.1).
  The upper end c_high of a two-sided normal confidence interval at level `confidence` (Balu
  gives none; we use 0.99) bounds the chain's slot count c_max (§3.4.2, "Section 3.1.3
  describes how to infer … a maximum number c_max"): for BLIP the binomial interval of ω/L
  pushed through the same inversion, for JLT ĉ + z·√(2L)·(σ² + ĉ/L) (the sd of Σ ỹ², a sum of L
  squared N(0, σ² + c/L)). Estimates are rounded and clamped to [1, N].
  With p = ½ (BLIP at ε = 0) the release carries no information on c and (3.9) divides by 0;
  ĉ is then the caller's fallback (the attacks pass the auxiliary users' mean profile size, or
  N/2 without them: the mean size under a uniform prior on sets). This is our choice.
* **Single decoder.**
  BLIP, the ML score (3.27)–(3.29): s_j = n₁₁ ln((1 − p)/π̃) + n₀₁ ln(p/(1 − π̃)) over the
  distinct positions of X_j only, with the marginal π̃ estimated by ω(b̃)/L (clamped to
  [1/(2L), 1 − 1/(2L)]); the printed denominator P[B_P = b̃] is read as P[B̃_P = b̃]. ln p and
  ln(1 − p) are computed as −softplus(±ε/K), finite for any ε.
  JLT (our extension; Balu only says the approach "works also with JLT"): the per-coordinate
  log-likelihood ratio of §3.2.2's two models, H₁: ỹ_i ~ N(X_j(i), σ² + (ĉ − 1)/L) against
  H₀: ỹ_i ~ N(0, σ² + ĉ/L):
      s_j = −(L/2) ln(v₁/v₀) − ‖ỹ − X_j‖²/(2v₁) + ‖ỹ‖²/(2v₀),
  with ĉ − 1 floored at 1 in v₁ (one interfering item) so that σ = 0 and ĉ = 1 stay finite.

References:
    R. Balu, PhD thesis, Univ. Rennes 1, 2016, §3.1.2–3.1.3 (3.5)–(3.9), §3.2.2 (3.11),
    §3.4.1 (3.27)–(3.29).
"""

from __future__ import annotations

import abc
import dataclasses
import math
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import scipy.sparse as sp
from scipy.special import ndtri

from privrec.adversary.observations import Observations
from privrec.shared.errors import ValidationError
from privrec.shared.mechanisms.base import BitPayload, DensePayload
from privrec.shared.mechanisms.blip import Blip
from privrec.shared.mechanisms.jlt import JohnsonLindenstrauss
from privrec.shared.types import FloatArray, IntArray


@dataclasses.dataclass(frozen=True)
class SizeEstimate:
    """ĉ per user.

    Attributes:
        c_hat: int64 (n,), the estimate rounded and clamped to [1, N].
        c_raw: float64 (n,), the estimate before rounding and clamping (NaN: no information).
        c_high: int64 (n,), the upper confidence bound, clamped to [c_hat, N].
    """

    c_hat: IntArray
    c_raw: FloatArray
    c_high: IntArray


def _clamp(raw: FloatArray, n_items: int, fallback: float) -> IntArray:
    filled = np.where(np.isnan(raw), fallback, raw)
    out: IntArray = np.clip(np.rint(np.minimum(filled, n_items)), 1, n_items).astype(np.int64)
    return out


class ItemSetChannel(abc.ABC):
    """What the adversary knows about one item-set mechanism (public parameters only)."""

    mechanism: ClassVar[str]

    def __init__(self, n_items: int) -> None:
        self.n_items = int(n_items)

    @abc.abstractmethod
    def stack(self, payloads: Sequence[object]) -> np.ndarray:
        """The users' releases as one (n, L) array (bool for BLIP, float64 for JLT)."""

    @abc.abstractmethod
    def size(self, releases: np.ndarray, confidence: float, fallback: float) -> SizeEstimate:
        """ĉ and c_high per user (module docstring)."""

    @abc.abstractmethod
    def single_scores(self, releases: np.ndarray, c_hat: IntArray) -> FloatArray:
        """The single decoder's score of every item for every user, (n, N)."""

    @property
    @abc.abstractmethod
    def informative(self) -> bool:
        """Whether a release carries any information on the profile."""


class BlipChannel(ItemSetChannel):
    """BLIP (Balu §3.1) as the adversary models it."""

    mechanism = "blip"

    def __init__(self, mechanism: Blip, n_items: int) -> None:
        super().__init__(n_items)
        self.mech = mechanism
        self.n_bits, self.n_hashes = mechanism.n_bits, mechanism.n_hashes
        self.p = mechanism.p_flip
        t = mechanism.epsilon / mechanism.n_hashes
        # ln p and ln(1 − p) for p = 1/(1 + e^t): −softplus(t) and −softplus(−t)
        self.log_p = -float(np.logaddexp(0.0, t))
        self.log_q = -float(np.logaddexp(0.0, -t))
        self.lam = self.log_q - self.log_p  # λ = ln((1 − p)/p) = ε/K
        positions = mechanism.hashes.positions(np.arange(self.n_items))
        rows = np.repeat(np.arange(self.n_items), self.n_hashes)
        # X_j as a 0/1 matrix: duplicate positions of one item (collisions, (3.1)) count once
        code = sp.csr_matrix(
            (np.ones(rows.size), (rows, positions.ravel())), shape=(self.n_items, self.n_bits)
        )
        code.sum_duplicates()
        code.data[:] = 1.0
        self.codewords: sp.csr_matrix = code

    @property
    def informative(self) -> bool:
        """False when p = 1/2 (ε = 0): the flipped bits say nothing about the filter."""
        return abs(1.0 - 2.0 * self.p) > 1e-12

    def codeword_csr(self, items: IntArray) -> tuple[IntArray, IntArray]:
        """(ptr, idx): the distinct positions of X_j for each of `items`, as one CSR."""
        sub = self.codewords[items]
        return sub.indptr.astype(np.int64), sub.indices.astype(np.int64)

    def stack(self, payloads: Sequence[object]) -> np.ndarray:
        """The BLIP releases as one (n, L) bool array; refuses any payload that is not L bits."""
        bits = []
        for k, pl in enumerate(payloads):
            if not isinstance(pl, BitPayload) or np.asarray(pl.bits).shape != (self.n_bits,):
                raise ValidationError(
                    f"profiles[{k}]", f"expected a BLIP bit vector of length {self.n_bits}"
                )
            bits.append(np.asarray(pl.bits, dtype=bool))
        return np.stack(bits) if bits else np.zeros((0, self.n_bits), bool)

    def _invert(self, weight_fraction: FloatArray) -> FloatArray:
        """(3.9) then the inversion of (3.6): c as a function of ω/L (float, may be ±inf)."""
        pi_hat = (weight_fraction - self.p) / (1.0 - 2.0 * self.p)
        with np.errstate(divide="ignore", invalid="ignore"):
            c = np.log1p(-np.minimum(pi_hat, 1.0)) / (
                self.n_hashes * math.log1p(-1.0 / self.n_bits)
            )
        out: FloatArray = np.where(pi_hat <= 0.0, 0.0, c)
        return out

    def size(self, releases: np.ndarray, confidence: float, fallback: float) -> SizeEstimate:
        """ĉ from the count of set bits, the flips inverted; `fallback` when ε = 0."""
        n = releases.shape[0]
        if not self.informative:
            nan = np.full(n, np.nan)
            c = _clamp(nan, self.n_items, fallback)
            return SizeEstimate(c, nan, np.full(n, self.n_items, np.int64))
        w = releases.sum(axis=1) / self.n_bits
        raw = self._invert(w)
        z = float(ndtri(0.5 + confidence / 2.0))
        # the larger ω is, the larger ĉ when p < ½ (and the smaller when p > ½)
        step = z * np.sqrt(w * (1.0 - w) / self.n_bits) * np.sign(1.0 - 2.0 * self.p)
        high = self._invert(w + step)
        c_hat = _clamp(raw, self.n_items, fallback)
        c_high = np.maximum(_clamp(high, self.n_items, fallback), c_hat)
        return SizeEstimate(c_hat, raw, c_high)

    def single_scores(self, releases: np.ndarray, c_hat: IntArray) -> FloatArray:
        """Each item's log-likelihood ratio from its K bits' agreement (Balu §3.1)."""
        b = sp.csr_matrix(releases.astype(np.float64))
        n11 = np.asarray((b @ self.codewords.T).todense())
        n01 = np.asarray(self.codewords.sum(axis=1)).ravel()[None, :] - n11
        half = 0.5 / self.n_bits
        pi = np.clip(releases.mean(axis=1), half, 1.0 - half)[:, None]
        scores: FloatArray = n11 * (self.log_q - np.log(pi)) + n01 * (self.log_p - np.log1p(-pi))
        return scores


class JltChannel(ItemSetChannel):
    """JLT (Balu §3.2) as the adversary models it.

    Args:
        mechanism: the run's JLT instance (public codebook seed, σ).
        n_items: N.
        sigma_floor: the σ the likelihoods assume when the published σ is smaller (σ = 0 is the
            thesis's ε = 600 column, where the likelihood is a point mass); our choice, 0.01
            (6/ε at ε = 600, the value the table rounds to 0).
    """

    mechanism = "jlt"

    def __init__(
        self, mechanism: JohnsonLindenstrauss, n_items: int, sigma_floor: float = 0.01
    ) -> None:
        super().__init__(n_items)
        self.mech = mechanism
        self.dim = mechanism.dim
        self.sigma = float(mechanism.sigma)
        self.sigma_eff = max(self.sigma, float(sigma_floor))
        self.codebook: FloatArray = mechanism.codebook(self.n_items)
        self.norms: FloatArray = np.einsum("ij,ij->i", self.codebook, self.codebook)
        self._gram: FloatArray | None = None

    @property
    def informative(self) -> bool:
        """Always true: Gaussian noise of finite σ leaves the sketch informative."""
        return True

    @property
    def gram(self) -> FloatArray:
        """X Xᵀ of the public codebook, (N, N) (computed once)."""
        if self._gram is None:
            self._gram = self.codebook @ self.codebook.T
        return self._gram

    def stack(self, payloads: Sequence[object]) -> np.ndarray:
        """The JLT releases as one (n, L) float64 array; refuses a payload that is not L values."""
        rows = []
        for k, pl in enumerate(payloads):
            if not isinstance(pl, DensePayload) or np.asarray(pl.values).shape != (self.dim,):
                raise ValidationError(
                    f"profiles[{k}]", f"expected a JLT vector of length {self.dim}"
                )
            rows.append(np.asarray(pl.values, dtype=np.float64))
        return np.stack(rows) if rows else np.zeros((0, self.dim))

    def size(self, releases: np.ndarray, confidence: float, fallback: float) -> SizeEstimate:
        """ĉ from the release's energy, ‖y‖² debiased for the noise σ² (module docstring)."""
        big_l = self.dim
        energy = np.einsum("ij,ij->i", releases, releases)
        raw = big_l / (big_l - 1.0) * energy - big_l * self.sigma**2 if big_l > 1 else energy
        z = float(ndtri(0.5 + confidence / 2.0))
        spread = z * math.sqrt(2.0 * big_l) * (self.sigma**2 + np.maximum(raw, 0.0) / big_l)
        c_hat = _clamp(raw, self.n_items, fallback)
        c_high = np.maximum(_clamp(raw + spread, self.n_items, fallback), c_hat)
        return SizeEstimate(c_hat, np.asarray(raw, dtype=np.float64), c_high)

    def projections(self, releases: np.ndarray) -> FloatArray:
        """ỹ·X_j for every user and item, (n, N)."""
        out: FloatArray = releases @ self.codebook.T
        return out

    def single_scores(self, releases: np.ndarray, c_hat: IntArray) -> FloatArray:
        """Each item's Gaussian log-likelihood ratio of holding vs lacking it (Balu §3.2)."""
        big_l = self.dim
        s2 = self.sigma_eff**2
        c = c_hat.astype(np.float64)[:, None]
        v0 = s2 + c / big_l
        v1 = s2 + np.maximum(c - 1.0, 1.0) / big_l
        energy = np.einsum("ij,ij->i", releases, releases)[:, None]
        dist = energy - 2.0 * self.projections(releases) + self.norms[None, :]
        scores: FloatArray = -0.5 * big_l * np.log(v1 / v0) - dist / (2.0 * v1) + energy / (2 * v0)
        return scores


def channel_for(observations: Observations, sigma_floor: float = 0.01) -> ItemSetChannel:
    """The channel model of the run's mechanism (BLIP or JLT), from its public parameters."""
    mech = observations.run_config.mechanism()
    n_items = observations.n_items
    if isinstance(mech, Blip):
        return BlipChannel(mech, n_items)
    if isinstance(mech, JohnsonLindenstrauss):
        return JltChannel(mech, n_items, sigma_floor)
    raise ValidationError(
        "run_config.mechanism",
        "item-set attacks model BLIP and JLT releases, got "
        f"{observations.run_config.mechanism_name!r}",
    )


__all__ = [
    "BlipChannel",
    "ItemSetChannel",
    "JltChannel",
    "SizeEstimate",
    "channel_for",
]
