"""Element-wise private second-order releases of Xin & Jaakkola (2014), Sec. 4, and baselines.

Protocol (extraction §A3, §A6): the server publishes (µ, V) learned from public users; a private
user completes her rating vector r locally with Eq. (4) (`shared.mechanisms.completion`) and
releases ONE vector M(r) ∈ ℝ^m, once. The server forms (x − µ)(x − µ)ᵀ itself. Bind the model
before releasing: ``mech.bind(mu, V)``; (µ, V) is public (it travels by GetModel), so it is not
among the public parameters of the run config.

Mechanisms:
  * PMD (`pmd`, discrete, S = the rating values, K = |S|): K candidate vectors x¹…x^K whose
    coordinate i, across candidates, is a permutation of S; greedy coordinate descent on the
    Eq. (8) objective (1/K) Σ_j ‖(x^j − µ)(x^j − µ)ᵀ − (r − µ)(r − µ)ᵀ‖²_F with random pair
    swaps; one candidate sent uniformly at random. With a = x^j − µ, b = r − µ,
    ‖aaᵀ − bbᵀ‖²_F = (a·a)² − 2(a·b)² + (b·b)², so keeping A_j = a_j·a_j and D_j = a_j·b makes
    each swap test O(1) (extraction §A6 [D]); the loop runs in numba.
  * PMC (`pmc`, continuous, Theorem 4.2): u = ±sign(r − µ)·h, the sign a fair coin, with
    h = ‖r − µ‖₁/m per user, or a shared h estimated from public users (`h_mode`).
  * Laplace baseline (`laplace_second_order`, Sec. 5): clip(r, [r_min, r_max]) + Lap(0, Δ/ε)
    per coordinate, Δ = r_max − r_min (4.5 on the paper's 0.5–5 scale).
  * Exact second order (`exact_second_order`, Sec. 5): a·(r − µ) with a = ±1 — NOT private.

Element-wise privacy (Def. 4.1): every coordinate of M(r) has the same marginal distribution. It
is not differential privacy: the joint distribution depends on r (that is the point: it carries
how ratings co-vary). PMD's marginal is uniform on S whatever r is (each coordinate across the K
candidates is a permutation of S and the pick is uniform), so each coordinate alone says nothing.
PMC's marginal is ±h with probability 1/2; with a per-user h, h = ‖r − µ‖₁/m itself is revealed
(the paper: it "releases some additional information ... albeit weakly"), and sign(r − µ) is
revealed up to one global sign. `event()` is `UnsupportedDpEvent` for both: no ε exists.

Choices where the paper is silent (extraction §A9; recorded in docs/decisions/mechanisms.md):
  * Completion: mean-centred Eq. (4) with public ridge λ′ (default 1.0); the completed vector is
    continuous, not rounded to S (Eq. (8) only needs x ∈ S^m).
  * PMD: initial candidates = an independent uniform permutation of S per coordinate; pairs
    (p, q) uniform over ordered distinct pairs; `swaps_per_item` = 10 tries per coordinate
    ("a few times") and `n_passes` = 5 sweeps over the coordinates in item order (measured on
    ML-100K: the candidates' alignment with r − µ saturates there — the greedy local optimum;
    3 tries × 1 pass left them almost random); a swap is kept only if it strictly lowers the
    objective. The server centres a release by the marginal mean s̄ = mean(S), not by µ, and
    treats its diagonal as uninformative (`PrivateDiscrete.estimate`, `moment_diagonal`):
    both parts of E[(x − µ)(x − µ)ᵀ] are the same for every user. Draw order from the user's
    generator: the m permutations (`Generator.permuted` on an (m, K) array, axis 1), then p
    and q for all (pass, item, try), then the index of the released candidate.
  * PMC: a coordinate where r − µ is exactly 0 gets its own fair sign, independent of the
    global coin (it would otherwise have variance 0 and break the equal-variance constraint).
    An earlier convention, sign(0) := +1, sent +a·h there and so gave the global coin a away
    wherever V has a zero row (items no public user rated, on ML-100K hundreds per user; found
    by the `second_order_reconstruction` attack); it also added a spurious all-ones block to
    the server's Σ u uᵀ. Draw order: the global coin `rng.random() < 0.5` → +1, then m
    uniforms, one per coordinate, used only at the zeros. A shared h
    is public: it travels with the model (``bind(mu, V, shared_h=h)``), estimated by
    `completion.estimate_shared_h` from the public users.
  * Laplace: the completed vector is clipped to the rating range before the noise so that Δ is
    the range; noise per element (implied by the paper); default range 1–5 (MovieLens-100K).
    The server removes the noise variance 2b² from the diagonal of u uᵀ (`moment_diagonal`).

References:
    Y. Xin, T. Jaakkola, "Controlling privacy in recommender systems", NIPS 2014, Sec. 4
    (Def. 4.1, Eqs. (8)–(9), Theorem 4.2) and Sec. 5 (baselines).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal, Self, get_args

import numpy as np
import scipy.sparse as sp

from privrec.shared.accounting import dp
from privrec.shared.accounting.events import Relation
from privrec.shared.capabilities import PayloadKind, ReleaseKind, ReleaseScale
from privrec.shared.errors import NotFittedError, ValidationError
from privrec.shared.mechanisms.base import (
    LAPLACE_TAIL_SCALES,
    DensePayload,
    Mechanism,
    Payload,
    PrivacyStatement,
    Profile,
    require_dense,
)
from privrec.shared.mechanisms.completion import complete_vector, estimate_shared_h
from privrec.shared.mechanisms.params import check_int, check_param
from privrec.shared.types import FloatArray

ELEMENT_WISE_RELATION = (
    "not a DP relation: each single coordinate, viewed alone, has the same "
    "marginal whatever the profile (Xin & Jaakkola Def. 4.1)"
)


# --------------------------------------------------------------------------- shared plumbing
class SecondOrderMechanism(Mechanism):
    """Base of the mechanisms that release a vector derived from the completed ratings.

    Args:
        ridge: λ′ > 0 of the local completion, Eq. (4).
    """

    binds_public_model: ClassVar[bool] = True
    releases: ClassVar[ReleaseKind] = ReleaseKind(PayloadKind.DENSE, ReleaseScale.SECOND_ORDER)

    def __init__(self, ridge: float = 1.0) -> None:
        self.ridge = check_param("ridge", ridge, low=0.0, low_open=True)
        self.mu: FloatArray | None = None
        self.V: FloatArray | None = None

    def bind(self, mu: FloatArray, V: FloatArray) -> Self:
        """Attach the server's public model (µ of shape (m,), V of shape (m, k)); returns self.

        Raises:
            ValueError: on a shape mismatch or non-finite values.
        """
        mu = np.asarray(mu, dtype=np.float64)
        V = np.asarray(V, dtype=np.float64)
        if mu.ndim != 1 or V.ndim != 2 or V.shape[0] != mu.shape[0] or V.shape[1] < 1:
            raise ValueError(
                f"`mu` must have shape (m,) and `V` shape (m, k >= 1), got {mu.shape} and {V.shape}"
            )
        if not (np.all(np.isfinite(mu)) and np.all(np.isfinite(V))):
            raise ValueError("`mu` and `V` must be finite")
        self.mu, self.V = mu, V
        return self

    @property
    def is_bound(self) -> bool:
        """True once the public μ and V are set (`public_binding`)."""
        return self.mu is not None

    def public_binding(
        self, public_ratings: sp.spmatrix | sp.sparray, mu: FloatArray, V: FloatArray
    ) -> dict[str, float]:
        """Public values, besides (µ, V), that the server derives from the public users and
        publishes with the model, as keyword arguments of `bind` (none by default; PMC's
        shared h)."""
        del public_ratings, mu, V
        return {}

    def estimate(self, payload: Payload, n_items: int) -> FloatArray:
        """The second-order vector u the server sums as u uᵀ: x − µ (Xin & Jaakkola Sec. 4, the
        M-step adds (x − µ)(x − µ)ᵀ). Releases that are already centred (PMC, exact second
        order) override this with the release itself."""
        mu, _ = self._model(n_items)
        return self._dense(payload, n_items) - mu

    def moment_diagonal(self, u: FloatArray) -> FloatArray | None:
        """Per-user estimates of (r_i − µ_i)², the diagonal of r′r′ᵀ, from the de-biased
        vectors u = `estimate` (shape (n, m)), or None when the release carries no information
        about it (the server then fills it from the public users,
        `TwoTierLowRank.add_private`). Default: u² (exact for exact second order)."""
        out: FloatArray = u * u
        return out

    def _model(self, n_items: int) -> tuple[FloatArray, FloatArray]:
        if self.mu is None or self.V is None:
            raise NotFittedError(f"{self.name}: call bind(mu, V) with the server's model first")
        if self.mu.shape[0] != n_items:
            raise ValueError(
                f"{self.name}: the bound model has {self.mu.shape[0]} items but the "
                f"profile has n_items = {n_items}"
            )
        return self.mu, self.V

    def complete(self, profile: Profile) -> FloatArray:
        """r: the profile completed with Xin & Jaakkola Eq. (4), shape (m,)."""
        mu, V = self._model(profile.n_items)
        return complete_vector(
            np.asarray(profile.items, np.int64),
            np.asarray(profile.ratings, np.float64),
            mu,
            V,
            self.ridge,
        )

    def centred(self, profile: Profile) -> FloatArray:
        """r′ = r − µ of the completed profile."""
        mu, _ = self._model(profile.n_items)
        return self.complete(profile) - mu

    def _dense(self, payload: Payload, n_items: int) -> FloatArray:
        return require_dense(payload, self.payload_field, n_items, f"n_items = {n_items}")


# --------------------------------------------------------------------------- PMD
def pmd_objective(candidates: FloatArray, mu: FloatArray, r: FloatArray) -> float:
    """(1/K) Σ_j ‖(x^j − µ)(x^j − µ)ᵀ − (r − µ)(r − µ)ᵀ‖²_F, Eq. (8) over the uniform mixture."""
    a = candidates - mu
    b = r - mu
    a_sq = np.einsum("ji,ji->j", a, a)
    a_b = a @ b
    return float(np.mean(a_sq**2 - 2.0 * a_b**2 + (b @ b) ** 2))


class PrivateDiscrete(SecondOrderMechanism):
    """PMD: Xin & Jaakkola Sec. 4, discrete values (see the module docstring).

    Args:
        rating_values: S, the K ≥ 2 distinct rating values (MovieLens-100K: 1…5).
        swaps_per_item: random pair-swap tries per coordinate and pass.
        n_passes: sweeps over the coordinates.
        ridge: λ′ of the completion.
    """

    name = "pmd"
    payload_field = "pmd"

    def __init__(
        self,
        rating_values: Sequence[float] = (1.0, 2.0, 3.0, 4.0, 5.0),
        swaps_per_item: int = 10,
        n_passes: int = 5,
        ridge: float = 1.0,
    ) -> None:
        super().__init__(ridge)
        vals = [check_param("rating_values", v) for v in rating_values]
        if len(vals) < 2 or len(set(vals)) != len(vals):
            raise ValueError(
                f"`rating_values` must hold >= 2 distinct values, got {list(rating_values)!r}"
            )
        self.rating_values = np.array(sorted(vals))
        self.swaps_per_item = check_int("swaps_per_item", swaps_per_item, low=0)
        self.n_passes = check_int("n_passes", n_passes, low=1)

    @property
    def n_candidates(self) -> int:
        """K = |S|: one candidate per rating value (each coordinate is a permutation of S)."""
        return int(self.rating_values.size)

    def public_params(self) -> dict[str, Any]:
        """The public rating values, swaps per item, passes and ridge λ′."""
        return {
            "rating_values": [float(v) for v in self.rating_values],
            "swaps_per_item": self.swaps_per_item,
            "n_passes": self.n_passes,
            "ridge": self.ridge,
        }

    def candidates(self, profile: Profile, rng: np.random.Generator) -> FloatArray:
        """The K optimised candidates x¹…x^K, float array of shape (K, m)."""
        mu, _ = self._model(profile.n_items)
        b = self.centred(profile)
        k, m = self.n_candidates, profile.n_items
        perm = np.ascontiguousarray(
            rng.permuted(np.tile(np.arange(k, dtype=np.int64), (m, 1)), axis=1).T
        )
        shape = (self.n_passes, m, self.swaps_per_item)
        p = rng.integers(0, k, size=shape, dtype=np.int64)
        q = rng.integers(0, k - 1, size=shape, dtype=np.int64)
        q += q >= p
        # imported here: numba alone is ≈ 0.25 s of a shard's start-up, and only PMD needs it
        from privrec.shared.mechanisms.pmd_swaps import greedy_swaps

        greedy_swaps(perm, self.rating_values, mu, b, np.stack([p, q], axis=-1))
        cands: FloatArray = self.rating_values[perm]
        return cands

    def estimate(self, payload: Payload, n_items: int) -> FloatArray:
        """u = x − s̄, s̄ = mean(S) the marginal mean every coordinate has whatever the user.

        The server wants E[(x − µ)(x − µ)ᵀ] over the uniform pick to track (r − µ)(r − µ)ᵀ
        (Eq. (8)); but E[x] = s̄·1 for every user, so that expectation is
        E[(x − s̄)(x − s̄)ᵀ] + (s̄ − µ)(s̄ − µ)ᵀ, and the second term is the same for everyone:
        summed over users it became V's top factor (cosine ≈ 0.99 on ML-100K) and later
        rounds completed against it. Centring by s̄ drops it (docs/decisions/two_tier.md)."""
        return self._dense(payload, n_items) - float(self.rating_values.mean())

    def moment_diagonal(self, u: FloatArray) -> None:
        """None: (x_i − s̄)² has expectation Var(S) at every coordinate for every user (the
        marginal is uniform on S whatever r is), so the diagonal carries no information."""
        del u

    def release_with_candidates(
        self, profile: Profile, rng: np.random.Generator
    ) -> tuple[DensePayload, FloatArray, int]:
        """The release, the candidate set and the index of the candidate sent."""
        cands = self.candidates(profile, rng)
        j = int(rng.integers(self.n_candidates))
        return DensePayload(cands[j].copy()), cands, j

    def release(self, profile: Profile, rng: np.random.Generator) -> DensePayload:
        """The released discrete vector (PMD, Xin & Jaakkola Sec. 4), candidates discarded."""
        return self.release_with_candidates(profile, rng)[0]

    def privacy(self) -> PrivacyStatement:
        """Element-wise privacy only: no DP claim (Xin & Jaakkola Sec. 4)."""
        return PrivacyStatement(
            kind="element-wise",
            epsilon=None,
            delta=None,
            neighbouring=ELEMENT_WISE_RELATION,
            notes=(
                "PMD (Xin & Jaakkola Sec. 4): every coordinate is uniform on S = "
                f"{[float(v) for v in self.rating_values]} whatever the profile; the joint "
                "distribution carries second-order information and is not differentially "
                "private. Event: UnsupportedDpEvent (no eps exists)."
            ),
            flags=("not-differentially-private",),
        )

    def event(self) -> dp.DpEvent:
        """Unsupported: the accountant cannot compose PMD."""
        return dp.UnsupportedDpEvent()

    def validate(self, payload: Payload, n_items: int) -> None:
        """Refuse a vector whose values are not among the public rating values."""
        v = self._dense(payload, n_items)
        ok = np.isclose(v[:, None], self.rating_values[None, :], rtol=0.0, atol=1e-9).any(1)
        if not ok.all():
            bad = int(np.flatnonzero(~ok)[0])
            raise ValidationError(
                "pmd.values",
                f"value {v[bad]!r} at item {bad} is not in the "
                f"rating set {[float(s) for s in self.rating_values]}",
            )


# --------------------------------------------------------------------------- PMC
HMode = Literal["per-user", "shared"]
_H_MODES: tuple[str, ...] = get_args(HMode)


class PrivateContinuous(SecondOrderMechanism):
    """PMC: Xin & Jaakkola Theorem 4.2, u = ±sign(r − µ)·h (see the module docstring).

    Args:
        h_mode: "per-user" (h = ‖r − µ‖₁/m, Theorem 4.2) or "shared" (one h for everyone,
            estimated from public users and bound with the model: ``bind(mu, V, shared_h=h)``).
        ridge: λ′ of the completion.
    """

    name = "pmc"
    payload_field = "pmc"

    def __init__(self, h_mode: HMode = "per-user", ridge: float = 1.0) -> None:
        super().__init__(ridge)
        if h_mode not in _H_MODES:
            raise ValueError(f"`h_mode` must be one of {_H_MODES}, got {h_mode!r}")
        self.h_mode: HMode = h_mode
        self.shared_h: float | None = None

    def public_params(self) -> dict[str, Any]:
        """The public h mode and ridge λ′."""
        return {"h_mode": self.h_mode, "ridge": self.ridge}

    def public_binding(
        self, public_ratings: sp.spmatrix | sp.sparray, mu: FloatArray, V: FloatArray
    ) -> dict[str, float]:
        """With h_mode "shared": the h every user sends, estimated from the public users
        (`completion.estimate_shared_h`, Xin & Jaakkola Sec. 4)."""
        if self.h_mode != "shared":
            return {}
        return {"shared_h": estimate_shared_h(public_ratings, mu, V, self.ridge)}

    def estimate(self, payload: Payload, n_items: int) -> FloatArray:
        """u itself: the release is already centred (u uᵀ = h² z zᵀ, Theorem 4.2)."""
        return self._dense(payload, n_items)

    def bind(self, mu: FloatArray, V: FloatArray, *, shared_h: float | None = None) -> Self:
        """Attach (µ, V) and, with h_mode "shared", the public shared h (> 0)."""
        if self.h_mode == "shared":
            if shared_h is None:
                raise ValueError(
                    "pmc: h_mode='shared' needs `shared_h` (see completion.estimate_shared_h)"
                )
            self.shared_h = check_param("shared_h", shared_h, low=0.0, low_open=True)
        elif shared_h is not None:
            raise ValueError("pmc: `shared_h` is only used with h_mode='shared'")
        return super().bind(mu, V)

    @staticmethod
    def signs(centred: FloatArray, zero_signs: FloatArray | None = None) -> FloatArray:
        """z = sign(r′), with `zero_signs` (±1, default +1) where r′ is exactly 0."""
        z = np.sign(centred)
        return np.where(z == 0.0, 1.0 if zero_signs is None else zero_signs, z)

    def scale(self, centred: FloatArray) -> float:
        """h: the shared value, or ‖r′‖₁/m (Theorem 4.2)."""
        if self.h_mode == "shared":
            assert self.shared_h is not None
            return self.shared_h
        return float(np.abs(centred).mean())

    def release(self, profile: Profile, rng: np.random.Generator) -> DensePayload:
        """u = a·h·sign(r − µ), a = ±1 a fair coin (Xin & Jaakkola Theorem 4.2)."""
        c = self.centred(profile)
        coin = 1.0 if rng.random() < 0.5 else -1.0
        zero_signs = np.where(rng.random(c.size) < 0.5, 1.0, -1.0)
        return DensePayload(coin * self.scale(c) * self.signs(c, zero_signs))

    def privacy(self) -> PrivacyStatement:
        """Not DP: the sign pattern is revealed up to the global sign (flags say what leaks)."""
        flags = ["not-differentially-private", "sign-pattern-revealed-up-to-global-sign"]
        if self.h_mode == "per-user":
            flags.append("h-reveals-mean-absolute-deviation")
            h_note = (
                "h = ||r - mu||_1/m is computed from her private vector and is revealed "
                "by any coordinate."
            )
        else:
            h_note = "h is shared by all users and estimated from public users."
        return PrivacyStatement(
            kind="element-wise",
            epsilon=None,
            delta=None,
            neighbouring=ELEMENT_WISE_RELATION,
            notes=(
                "PMC (Xin & Jaakkola Theorem 4.2): every coordinate is +h or -h with "
                f"probability 1/2. {h_note} The server recovers sign(r - mu) up to one "
                "global sign. Event: UnsupportedDpEvent (no eps exists)."
            ),
            flags=tuple(flags),
        )

    def event(self) -> dp.DpEvent:
        """Unsupported: the accountant cannot compose PMC."""
        return dp.UnsupportedDpEvent()

    def validate(self, payload: Payload, n_items: int) -> None:
        """Refuse a vector whose entries do not all have the same magnitude h."""
        v = np.abs(self._dense(payload, n_items))
        h = self.shared_h if self.shared_h is not None else float(v[0])
        if not np.allclose(v, h, rtol=1e-9, atol=1e-12):
            bad = int(np.flatnonzero(~np.isclose(v, h, rtol=1e-9, atol=1e-12))[0])
            raise ValidationError(
                "pmc.values", f"every |value| must equal h = {h!r}, got {v[bad]!r} at item {bad}"
            )


# --------------------------------------------------------------------------- baselines
class LaplaceSecondOrder(SecondOrderMechanism):
    """Xin & Jaakkola's "Lap eps" baseline: clip(r) + Lap(0, (r_max − r_min)/ε) per element.

    Privacy: pure ε-DP for "one element of the completed vector changed within the rating range,
    the others fixed" (L1 sensitivity Δ = r_max − r_min). That is the relation the paper's ε
    refers to. It is NOT ε for one rating changed: the completion moves every unrated coordinate
    too, so with m items the profile-level bound is m·ε (flag "element-level-epsilon").
    Neighbouring pair for an audit: a profile that rates every item (its completion is its
    ratings) and the same profile with one rating moved from r_min to r_max.

    Draw order: m Laplace draws (`Generator.laplace`) from the user's generator.

    Args:
        epsilon: ε > 0 per element.
        rating_min, rating_max: the rating range the completed vector is clipped to.
        ridge: λ′ of the completion.
    """

    name = "laplace_second_order"
    payload_field = "laplace_second_order"
    accounting_relation: ClassVar[Relation] = "ADD_OR_REMOVE_ONE"

    def __init__(
        self,
        epsilon: float = 1.0,
        rating_min: float = 1.0,
        rating_max: float = 5.0,
        ridge: float = 1.0,
    ) -> None:
        super().__init__(ridge)
        self.epsilon = check_param("epsilon", epsilon, low=0.0, low_open=True)
        self.rating_min = check_param("rating_min", rating_min)
        self.rating_max = check_param("rating_max", rating_max, low=self.rating_min, low_open=True)

    @property
    def scale(self) -> float:
        """b = Δ/ε with Δ = r_max − r_min (4.5/ε on a 0.5–5 scale, Xin & Jaakkola Sec. 5)."""
        return (self.rating_max - self.rating_min) / self.epsilon

    def public_params(self) -> dict[str, Any]:
        """The public ε, rating range and ridge λ′."""
        return {
            "epsilon": self.epsilon,
            "rating_min": self.rating_min,
            "rating_max": self.rating_max,
            "ridge": self.ridge,
        }

    def moment_diagonal(self, u: FloatArray) -> FloatArray:
        """u² − 2b²: u = clip(r) + L − µ with L ~ Lap(b) per coordinate has
        E[u_i²] = (clip(r)_i − µ_i)² + 2b², so subtracting the noise variance 2b² leaves an
        unbiased estimate (without it every round adds 2b² w to each diagonal entry: 32 w per
        user at ε = 1 on 1–5, which swamped the spectrum)."""
        out: FloatArray = u * u - 2.0 * self.scale**2
        return out

    def release(self, profile: Profile, rng: np.random.Generator) -> DensePayload:
        """clip(r) + Lap(0, (r_max − r_min)/ε) per element (Xin & Jaakkola Sec. 5)."""
        r = np.clip(self.complete(profile), self.rating_min, self.rating_max)
        return DensePayload(r + rng.laplace(0.0, self.scale, r.size))

    def value_bound(self, n_items: int) -> float:
        """max(|r_min|, |r_max|) + 80 b: the clipped rating plus Laplace noise of scale b,
        cut at `LAPLACE_TAIL_SCALES` (1.8e-35 per value)."""
        del n_items
        return max(abs(self.rating_min), abs(self.rating_max)) + LAPLACE_TAIL_SCALES * self.scale

    def privacy(self) -> PrivacyStatement:
        """Pure ε-DP per element of the completed vector."""
        return PrivacyStatement(
            kind="pure",
            epsilon=self.epsilon,
            delta=0.0,
            neighbouring=(
                "one element of the completed rating vector changed within "
                f"[{self.rating_min:g}, {self.rating_max:g}], the others fixed"
            ),
            notes=(
                f"Laplace baseline (Xin & Jaakkola Sec. 5): scale {self.scale:.6g} = range/"
                "eps per element. One changed rating also moves the completion of every "
                "unrated item, so for one rating changed, or the whole profile, the bound is "
                "m*eps. Event: LaplaceDpEvent(1/eps), ADD_OR_REMOVE_ONE."
            ),
            flags=("element-level-epsilon",),
        )

    def event(self) -> dp.DpEvent:
        """The Laplace event with noise multiplier b/Δ."""
        return dp.LaplaceDpEvent(noise_multiplier=self.scale / (self.rating_max - self.rating_min))

    def validate(self, payload: Payload, n_items: int) -> None:
        """Refuse a vector of the wrong length or with non-finite values."""
        self._dense(payload, n_items)


class ExactSecondOrder(SecondOrderMechanism):
    """Xin & Jaakkola's "Exact 2nd order" reference: a·(r − µ), a = ±1 — NOT a private mechanism.

    Draw order: one uniform; a = +1 iff it is < 1/2.

    Args:
        ridge: λ′ of the completion.
    """

    name = "exact_second_order"
    payload_field = "exact_second_order"

    def public_params(self) -> dict[str, Any]:
        """The public ridge λ′."""
        return {"ridge": self.ridge}

    def estimate(self, payload: Payload, n_items: int) -> FloatArray:
        """a·(r − µ) itself: (a r′)(a r′)ᵀ = r′r′ᵀ exactly."""
        return self._dense(payload, n_items)

    def release(self, profile: Profile, rng: np.random.Generator) -> DensePayload:
        """a·(r − µ), a = ±1 a fair coin: the exact second-order reference, not private."""
        c = self.centred(profile)
        coin = 1.0 if rng.random() < 0.5 else -1.0
        return DensePayload(coin * c)

    def privacy(self) -> PrivacyStatement:
        """No privacy: the centred ratings are released exactly (up to sign)."""
        return PrivacyStatement(
            kind="none",
            epsilon=None,
            delta=None,
            neighbouring="not applicable",
            notes=(
                "Exact second order (Xin & Jaakkola Sec. 5): the server gets r'r'^T exactly; "
                "'not a valid privacy preserving mechanism'. A reference point only."
            ),
            flags=("not-private",),
        )

    def event(self) -> dp.DpEvent:
        """A non-private event."""
        return dp.NonPrivateDpEvent()

    def validate(self, payload: Payload, n_items: int) -> None:
        """Refuse a vector of the wrong length or with non-finite values."""
        self._dense(payload, n_items)


__all__ = [
    "ExactSecondOrder",
    "HMode",
    "LaplaceSecondOrder",
    "PrivateContinuous",
    "PrivateDiscrete",
    "SecondOrderMechanism",
    "pmd_objective",
]
