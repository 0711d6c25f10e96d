"""JLT: a Johnson–Lindenstrauss sketch of the item set plus Gaussian noise (Balu 2016, §3.2).

After Kenthapadi, Korolova, Mironov & Mishra (KKMM12). A public codebook X ∈ ℝ^{N×L} has i.i.d.
entries N(0, 1/L) drawn once from a public seed (`shared.mechanisms.hashing.gaussian_codebook`);
the user releases

    Ỹ_P = Σ_{j∈P} X_j + N,      N ~ N(0, σ² I_L)      (Balu §3.2, "Encoding" and "Release"),

with only N private. σ is public ("a recommended noise power", Balu §3.2.1).

σ from (ε, δ), by the public `sigma_rule`:
  * "kkmm12": σ = (4/ε)·√ln(1/δ), KKMM12 Lemma 2 as quoted by Balu (3.10), which also asks for
    L ≥ 2(ln N + ln(2/δ)) and ε < ln(1/δ). Default δ = 1e−5.
  * "balu2016": the thesis's table (§3.5.1, L = 1000), `BALU2016_SIGMA`:
    ε ∈ {600, 6, 3, 2, 1, 0.75, 0.5, 0.25, 0.1} ↔ σ ∈ {0, 1, 2, 3, 6, 8, 12, 24, 61}. The thesis
    gives no δ; the pairs fit σ = 6/ε, i.e. 4√ln(1/δ) = 6, so the preset's default δ is
    e^{−2.25} ≈ 0.105 (extraction §2.2 [D]). ε must be one of the table's values.

Privacy, for "one item added or removed": the mean moves by X_j, so with the realised public
codebook the release is exactly the Gaussian mechanism with L2 sensitivity Δ = max_{j<N} ‖X_j‖₂
(≈ 1.08 for N = 1682, L = 1000) and `event()` is GaussianDpEvent(σ/Δ), accounted under
ADD_OR_REMOVE_ONE. `privacy()` states the configured (ε, δ) when this exact analysis certifies it
(`tight_epsilon(δ)` ≤ ε, via the analytic Gaussian mechanism of Balle & Wang 2018), and the
tight ε otherwise (flag "claim-not-certified"). Violated KKMM12 conditions are flagged
("kkmm12-conditions-violated" plus the specific one): e.g. the thesis points ε ∈ {600, 6, 3} have
ε ≥ ln(1/δ). σ = 0 (the thesis's ε = 600) releases the sketch without noise: kind "none".
Neighbouring pair for an audit: P and P ∪ {j*} with j* = argmax_j ‖X_j‖.

N (`n_items`) is a public parameter because the codebook, Δ and the dimension condition depend
on it; without it `release` still works (codebook rows do not depend on N) but `event()` raises.

Draw order: exactly L standard normals from the user's generator, N = σ·z.

References:
    R. Balu, PhD thesis, Univ. Rennes 1, 2016, §3.2, Eq. (3.10), §3.5.1.
    K. Kenthapadi, A. Korolova, I. Mironov, N. Mishra, "Privacy via the Johnson-Lindenstrauss
    transform", J. Privacy and Confidentiality 5(1), 2013 (arXiv 1204.2606), Lemma 2.
    B. Balle, Y.-X. Wang, "Improving the Gaussian mechanism for differential privacy", ICML 2018.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar, Literal, get_args

import numpy as np
import scipy.sparse as sp

from privrec.shared.accounting import dp
from privrec.shared.accounting.events import Relation
from privrec.shared.capabilities import PayloadKind, ReleaseKind, ReleaseScale
from privrec.shared.mechanisms.base import (
    GAUSSIAN_TAIL_SIGMAS,
    DensePayload,
    Mechanism,
    Payload,
    PrivacyStatement,
    Profile,
    require_dense,
)
from privrec.shared.mechanisms.hashing import gaussian_codebook
from privrec.shared.mechanisms.params import check_int, check_param
from privrec.shared.types import FloatArray

SigmaRule = Literal["kkmm12", "balu2016"]
_RULES: tuple[str, ...] = get_args(SigmaRule)

#: Balu §3.5.1, L = 1000: ε → σ as printed (σ = 61 at ε = 0.1 where 6/ε gives 60).
BALU2016_SIGMA: dict[float, float] = {
    600.0: 0.0,
    6.0: 1.0,
    3.0: 2.0,
    2.0: 3.0,
    1.0: 6.0,
    0.75: 8.0,
    0.5: 12.0,
    0.25: 24.0,
    0.1: 61.0,
}
#: δ implied by the table (σ = 6/ε ⇔ 4√ln(1/δ) = 6); the thesis does not state δ.
BALU2016_DELTA = math.exp(-2.25)
KKMM12_DEFAULT_DELTA = 1e-5
DEFAULT_DIM = 1000


def kkmm12_sigma(epsilon: float, delta: float) -> float:
    """σ = (4/ε)·√ln(1/δ), KKMM12 Lemma 2 as quoted by Balu (3.10)."""
    return 4.0 / epsilon * math.sqrt(math.log(1.0 / delta))


def kkmm12_violations(
    epsilon: float, delta: float, sigma: float, dim: int, n_items: int | None
) -> tuple[str, ...]:
    """Names of the Balu (3.10) conditions the setting violates (empty tuple if none)."""
    out: list[str] = []
    if not 0.0 < delta < 1.0:
        out.append("kkmm12-delta-out-of-range")
        return tuple(out)
    if not epsilon < math.log(1.0 / delta):
        out.append("kkmm12-epsilon-not-below-log-inv-delta")
    if sigma < kkmm12_sigma(epsilon, delta) * (1.0 - 1e-12):
        out.append("kkmm12-sigma-too-small")
    if n_items is not None and dim < 2.0 * (math.log(n_items) + math.log(2.0 / delta)):
        out.append("kkmm12-dim-too-small")
    return tuple(out)


class JohnsonLindenstrauss(Mechanism):
    """JLT (Balu §3.2) with a public codebook and public σ.

    Args:
        epsilon: the ε that σ is derived from (> 0).
        delta: δ ∈ (0, 1); None takes the rule's default (1e−5 for "kkmm12", e^{−2.25} for
            "balu2016").
        dim: L, the sketch length.
        codebook_seed: public seed of the codebook.
        sigma_rule: "kkmm12" or "balu2016" (the thesis's table as a preset).
        n_items: N, the catalogue size (needed for the sensitivity and the L condition).
        sigma: the published noise level; if given it must equal the rule's σ (it is accepted
            so that `cls(**public_params())` round-trips).
    """

    name = "jlt"
    payload_field = "jlt"
    releases = ReleaseKind(PayloadKind.DENSE, ReleaseScale.SKETCH)
    accounting_relation: ClassVar[Relation] = "ADD_OR_REMOVE_ONE"

    def __init__(
        self,
        epsilon: float = 1.0,
        delta: float | None = None,
        *,
        dim: int = DEFAULT_DIM,
        codebook_seed: int = 0,
        sigma_rule: SigmaRule = "kkmm12",
        n_items: int | None = None,
        sigma: float | None = None,
    ) -> None:
        self.epsilon = check_param("epsilon", epsilon, low=0.0, low_open=True)
        if sigma_rule not in _RULES:
            raise ValueError(f"`sigma_rule` must be one of {_RULES}, got {sigma_rule!r}")
        self.sigma_rule: SigmaRule = sigma_rule
        if delta is None:
            delta = KKMM12_DEFAULT_DELTA if sigma_rule == "kkmm12" else BALU2016_DELTA
        self.delta = check_param("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
        self.dim = check_int("dim", dim, low=1)
        self.codebook_seed = check_int("codebook_seed", codebook_seed, low=0)
        self.n_items = None if n_items is None else check_int("n_items", n_items, low=1)
        if sigma_rule == "kkmm12":
            rule_sigma = kkmm12_sigma(self.epsilon, self.delta)
        else:
            if self.epsilon not in BALU2016_SIGMA:
                raise ValueError(
                    f"`epsilon` must be one of the balu2016 table's "
                    f"{sorted(BALU2016_SIGMA)} with sigma_rule='balu2016', "
                    f"got {epsilon!r}"
                )
            rule_sigma = BALU2016_SIGMA[self.epsilon]
        if sigma is not None and not math.isclose(
            float(sigma), rule_sigma, rel_tol=1e-9, abs_tol=1e-12
        ):
            raise ValueError(
                f"`sigma` = {sigma!r} disagrees with sigma_rule={sigma_rule!r}, "
                f"which gives {rule_sigma!r}"
            )
        self.sigma = rule_sigma
        self._codebook: FloatArray = np.zeros((0, self.dim))
        self._bound: tuple[int, float] | None = None  # (n_items, `value_bound`)

    def public_params(self) -> dict[str, Any]:
        """The public ε, δ, L, codebook seed, σ rule, catalogue size and σ."""
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "dim": self.dim,
            "codebook_seed": self.codebook_seed,
            "sigma_rule": self.sigma_rule,
            "n_items": self.n_items,
            "sigma": self.sigma,
        }

    # ------------------------------------------------------------------ public codebook
    def codebook(self, n_items: int) -> FloatArray:
        """The first `n_items` rows of the public codebook, shape (n_items, L), N(0, 1/L)."""
        if self._codebook.shape[0] < n_items:
            self._codebook = gaussian_codebook(self.codebook_seed, n_items, self.dim)
        return self._codebook[:n_items]

    def sensitivity(self) -> float:
        """Δ = max_{j<N} ‖X_j‖₂, the L2 sensitivity for one item added or removed."""
        if self.n_items is None:
            raise ValueError("jlt: `n_items` must be set to compute the codebook's sensitivity")
        return float(np.linalg.norm(self.codebook(self.n_items), axis=1).max())

    def _check_catalogue(self, n_items: int) -> None:
        if self.n_items is not None and n_items != self.n_items:
            raise ValueError(
                f"profile has n_items = {n_items} but the mechanism's public "
                f"`n_items` is {self.n_items}"
            )

    def sketch(self, profile: Profile) -> FloatArray:
        """Y_P = Σ_{j∈P} X_j (Balu §3.2), shape (L,)."""
        self._check_catalogue(profile.n_items)
        y: FloatArray = self.codebook(profile.n_items)[profile.items].sum(axis=0)
        return y

    # ------------------------------------------------------------------ release
    def release(self, profile: Profile, rng: np.random.Generator) -> DensePayload:
        """Ỹ_P = Σ_{j∈P} X_j + N, N ~ N(0, σ² I_L) (Balu §3.2)."""
        return DensePayload(self.sketch(profile) + self.sigma * rng.standard_normal(self.dim))

    def _release_many(
        self, profiles: Sequence[Profile], rngs: Sequence[np.random.Generator]
    ) -> list[Payload]:
        """`release` for many users, vectorised (the same draws, the same releases)."""
        n_items = max(p.n_items for p in profiles)
        for p in profiles:
            self._check_catalogue(p.n_items)
        rows = np.concatenate([np.full(p.items.size, i) for i, p in enumerate(profiles)])
        cols = np.concatenate([np.asarray(p.items, np.int64) for p in profiles])
        ind = sp.csr_matrix((np.ones(cols.size), (rows, cols)), shape=(len(profiles), n_items))
        y = ind @ self.codebook(n_items)
        noise = np.stack([r.standard_normal(self.dim) for r in rngs])
        out = np.asarray(y) + self.sigma * noise
        return [DensePayload(row) for row in out]

    # ------------------------------------------------------------------ privacy
    def tight_epsilon(self, delta: float | None = None) -> float:
        """Exact ε at δ of one release for the realised codebook (analytic Gaussian)."""
        d = self.delta if delta is None else delta
        if self.sigma == 0.0:
            return math.inf
        return float(dp.get_epsilon_gaussian(self.sigma / self.sensitivity(), d))

    def privacy(self) -> PrivacyStatement:
        """(ε, δ)-DP by the Gaussian mechanism (Balu (3.10)); none when σ = 0."""
        if self.sigma == 0.0:
            return PrivacyStatement(
                kind="none",
                epsilon=None,
                delta=None,
                neighbouring="one item added or removed",
                notes=(
                    f"sigma = 0 (balu2016 table at eps = {self.epsilon:g}): the JL sketch is "
                    "released without noise; the thesis's eps label is not a guarantee."
                ),
                flags=("no-noise", "kkmm12-conditions-violated"),
            )
        violated = kkmm12_violations(self.epsilon, self.delta, self.sigma, self.dim, self.n_items)
        flags = list(violated)
        if violated:
            flags.insert(0, "kkmm12-conditions-violated")
        eps = self.epsilon
        if self.n_items is None:
            flags.append("n-items-unset")
            tight_note = (
                "n_items is unset, so the codebook's sensitivity is unknown: the "
                "statement rests on KKMM12 alone."
            )
        else:
            tight = self.tight_epsilon()
            delta_l2 = self.sensitivity()
            tight_note = (
                f"Exact Gaussian analysis for the realised codebook (sensitivity "
                f"max_j ||X_j|| = {delta_l2:.6g}, sigma/Delta = "
                f"{self.sigma / delta_l2:.6g}): eps = {tight:.6g} at "
                f"delta = {self.delta:.6g}."
            )
            if tight > eps:
                flags.append("claim-not-certified")
                eps = tight
        return PrivacyStatement(
            kind="approximate",
            epsilon=eps,
            delta=self.delta,
            neighbouring="one item added or removed",
            notes=(
                f"JLT (Balu 3.2), sigma = {self.sigma:g} from sigma_rule = "
                f"{self.sigma_rule!r} at eps = {self.epsilon:g}, delta = {self.delta:.6g}. "
                f"{tight_note} Event: GaussianDpEvent(sigma/Delta), ADD_OR_REMOVE_ONE."
            ),
            flags=tuple(flags),
        )

    def event(self) -> dp.DpEvent:
        """The Gaussian event with noise multiplier σ/Δ (not private when σ = 0)."""
        if self.sigma == 0.0:
            return dp.NonPrivateDpEvent()
        return dp.GaussianDpEvent(noise_multiplier=self.sigma / self.sensitivity())

    def value_bound(self, n_items: int) -> float:
        """max_l Σ_j |X_jl| + 12 σ: Ỹ_P = Σ_{j∈P} X_j + N (Balu §3.2) is at most the largest
        column L1 norm of the public codebook plus the noise, cut at `GAUSSIAN_TAIL_SIGMAS`
        (3.6e-33 per value). Computed once per instance (N = 1682, L = 1000: about 42 + 12σ)."""
        if self._bound is None or self._bound[0] != n_items:
            column = float(np.abs(self.codebook(n_items)).sum(axis=0).max())
            self._bound = (n_items, column + GAUSSIAN_TAIL_SIGMAS * self.sigma)
        return self._bound[1]

    def validate(self, payload: Payload, n_items: int) -> None:
        """Refuse a payload that is not L finite values."""
        require_dense(payload, "jlt", self.dim, f"L = {self.dim}")


__all__ = [
    "BALU2016_DELTA",
    "BALU2016_SIGMA",
    "JohnsonLindenstrauss",
    "SigmaRule",
    "kkmm12_sigma",
    "kkmm12_violations",
]
