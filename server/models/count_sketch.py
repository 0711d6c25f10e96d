"""Latent factors stored densely or in one count sketch, learnt by SGD (Balu 2016, ch. 4).

The shared factorization core of Balu's chapter 4, used by the recommenders of
`server.models.sketch_mf` and by the `balu-*` reproductions:

* **Regular MF** (Balu §2.2.5, Eqs. (2.7)–(2.9)): dense P (|U| × d) and Q (|I| × d); for each
  observed ⟨u, i, r⟩ in a random order, with e = p_uᵀq_i − r (= ∂L/∂r̂ for L = ½(r − r̂)²),
  p_u ← p_u − η(e q_i + λ p_u) and q_i ← q_i − η(e p_u + λ q_i), both from the values read
  before the step (the printed gradient "(r − pᵀq)q + λp" of §4.2.1 has the wrong sign). This
  is the pass of privrec's one SGD trainer (`server.models.factorization.sgd_pass`, without
  its bias terms: Balu's are the fixed mean correction below).
* **Count-sketch MF** (Balu §4.1.1–4.1.2): ONE sketch C of `depth` (Balu's k) rows and w
  columns holds every component of every user and item vector. Component l of user u lives at
  cells c_{j, h_j^u(u, l)} with signs s_j^u(u, l), j = 1..k (items: their own hash family).
  Read with the MEAN (4.1)/(4.2): p̃_{u,l} = k⁻¹ Σ_j s_j^u(u,l) c_{j,h_j^u(u,l)}. Update all
  k cells of every component with the sign-corrected gradient (4.3)/(4.4), computed from the
  reads before the update: c_{j,h_j^u(u,l)} −= η s_j^u(u,l)(e q̃_{i,l} + λ p̃_{u,l}). The
  k⁻¹ of the exact cell gradient (4.7) is absorbed in η, as the thesis does: then a read moves
  by exactly the regular-MF step, so η means the same for the three methods.
* **Feature hashing** [WDL⁺09, KWS10] is the sketch with k = 1.
* **Width** (4.9): w = ⌈(|U| + |I|) d / (γ k)⌉, γ the space gain: at γ = 1 the sketch holds as
  many cells as regular MF's P and Q.
* **Data clipping** (Balu §4.2.1): a rating whose current loss ½(r − r̂)² exceeds the threshold
  ε is skipped for that epoch only (re-tested in later epochs); ε = ∞ is plain SGD. The loss
  is the §4.2.1 algorithm's L = ½(r − r̂)² (§4.2.2 writes the test as (r − r̂)² ≤ ε; we follow
  the algorithm).
* **Learning rate** η_t = η / (1 + b t/T) at epoch t = 0..T−1 (Balu §4.1.5.1 with b = 1,
  §4.2.4.1 with b not given: b = `decay`, default 1).
* **Mean correction** (Balu §4.1.5.1 "user, item and global means are subtracted"; the formula
  is not given): r′ = r − µ − b_i − b_u with µ the global mean, b_i the item's mean of r − µ,
  then b_u the user's mean of r − µ − b_i (`Baseline`). The factors learn r′.

Choices where the thesis is silent (docs/decisions/curator_models.md):
hashes are simple tabulation on the key x = id·d + l, one random table set per row and per
family (users, items) drawn from the model's seed, the address and the sign from different
bits of one hash value (`SketchHashes`); initial reads are
N(0, σ₀²) for all three methods (sketch cells N(0, k σ₀²), so a mean read of k signed cells has
variance σ₀²), σ₀ = `init_scale` = 0.1; a fresh uniform permutation of the training ratings
every epoch. The SGD loops are compiled with numba: numpy cannot express a sequential
per-rating update.

References:
    R. Balu, "Privacy-aware and scalable recommender systems using sketching techniques",
    PhD thesis, Université Rennes 1, 2016, ch. 4 (Eqs. (4.1)–(4.4), (4.9), §4.2.1).
    M. Charikar, K. Chen, M. Farach-Colton, "Finding frequent items in data streams", ICALP
    2002 (the count sketch).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

import numba
import numpy as np
import numpy.typing as npt

from privrec.server.models.factorization import sgd_pass
from privrec.shared.types import FloatArray, IntArray

Storage = Literal["dense", "sketch"]
STORAGES: tuple[str, ...] = ("dense", "sketch")


# --------------------------------------------------------------------------- hashing
@dataclasses.dataclass(frozen=True)
class SketchHashes:
    """The address and sign hashes of one count sketch (Balu §4.1.1), by simple tabulation.

    The key of component l of id i is x = i·d + l (32 bits). Row j of family f (0: users,
    1: items) hashes it to h = T[f, j, 0][x₀] ⊕ T[f, j, 1][x₁] ⊕ T[f, j, 2][x₂] ⊕ T[f, j, 3][x₃]
    (x_c the c-th byte of x, T random 64-bit tables): h(x) and h(x′) of two distinct keys are
    independent and uniform (simple tabulation is 3-wise independent), so the address
    (h ≫ 32) mod w and the sign 1 − 2·(h & 1) are pairwise independent as the count sketch
    needs, and stay so on consecutive keys (a linear Carter–Wegman family does not: with one
    draw, its collisions concentrate on a few key differences whose sign products are fixed,
    and the mean read came out biased, measured −0.5 to +1.4 on unit-scale values).

    Attributes:
        tables: uint64 array of shape (2, depth, 4, 256).
        width: w, the number of columns.
        d: the number of components per vector.

    References:
        M. Pătraşcu, M. Thorup, "The power of simple tabulation hashing", J. ACM 59(3), 2012.
    """

    tables: npt.NDArray[np.uint64]
    width: int
    d: int

    @classmethod
    def draw(cls, depth: int, width: int, d: int, rng: np.random.Generator) -> SketchHashes:
        """Uniform random tables for `depth` rows of both families."""
        tables = rng.integers(0, 2**64, size=(2, depth, 4, 256), dtype=np.uint64)
        return cls(tables, int(width), int(d))

    @property
    def depth(self) -> int:
        """Number of hash rows of each count sketch (k)."""
        return int(self.tables.shape[1])

    def cells(self, family: int, ids: IntArray) -> tuple[IntArray, FloatArray]:
        """Addresses and signs of every component of `ids`: arrays of shape (n, d, depth).

        Args:
            family: 0 for users, 1 for items.
            ids: int array of shape (n,), with ids·d < 2³².
        """
        x = (np.asarray(ids, dtype=np.int64)[:, None] * self.d + np.arange(self.d)).astype(
            np.uint64
        )
        if x.size and int(x.max()) >= 2**32:
            raise ValueError(f"ids up to {int(np.max(ids))} with d = {self.d} exceed 32-bit keys")
        h = np.zeros((*x.shape, self.depth), dtype=np.uint64)
        for c in range(4):
            byte = ((x >> np.uint64(8 * c)) & np.uint64(255)).astype(np.intp)
            h ^= np.moveaxis(self.tables[family, :, c, :][:, byte], 0, -1)
        addr = (h >> np.uint64(32)) % np.uint64(self.width)
        sign = 1.0 - 2.0 * (h & np.uint64(1)).astype(np.float64)
        return addr.astype(np.int64), sign


def sketch_width(n_users: int, n_items: int, d: int, gamma: float, depth: int) -> int:
    """w = ⌈(|U| + |I|) d / (γ k)⌉ (Balu Eq. (4.9))."""
    return max(1, math.ceil((n_users + n_items) * d / (gamma * depth) - 1e-9))


def read_sketch(table: FloatArray, hashes: SketchHashes, family: int, ids: IntArray) -> FloatArray:
    """Mean reads (Balu Eqs. (4.1)/(4.2)) of the vectors of `ids`, shape (n, d)."""
    addr, sign = hashes.cells(family, ids)
    rows = np.arange(hashes.depth)
    vals: FloatArray = (sign * table[rows, addr]).mean(axis=2)
    return vals


# --------------------------------------------------------------------------- SGD kernels
@numba.njit(cache=True)
def _epoch_sketch(
    C: FloatArray,
    user_addr: npt.NDArray[np.int32],
    user_sign: npt.NDArray[np.int8],
    item_addr: npt.NDArray[np.int32],
    item_sign: npt.NDArray[np.int8],
    users: IntArray,
    items: IntArray,
    resid: FloatArray,
    order: IntArray,
    eta: float,
    lam: float,
    clip: float,
) -> int:  # pragma: no cover - numba
    """One epoch of count-sketch SGD MF (Balu (4.1)–(4.4), §4.2.1 clipping); returns the number
    of skipped ratings. `user_addr`/`user_sign` (n_users, d, depth) and `item_addr`/`item_sign`
    (n_items, d, depth) are the hash values of every cell (`SketchHashes.cells`)."""
    depth = C.shape[0]
    d = user_addr.shape[1]
    p = np.empty(d)
    q = np.empty(d)
    skipped = 0
    for t in range(order.size):
        n = order[t]
        u = users[n]
        i = items[n]
        e = -resid[n]
        for c in range(d):
            su = 0.0
            si = 0.0
            for j in range(depth):
                su += user_sign[u, c, j] * C[j, user_addr[u, c, j]]
                si += item_sign[i, c, j] * C[j, item_addr[i, c, j]]
            p[c] = su / depth
            q[c] = si / depth
            e += p[c] * q[c]
        if 0.5 * e * e > clip:
            skipped += 1
            continue
        for c in range(d):
            gp = eta * (e * q[c] + lam * p[c])
            gq = eta * (e * p[c] + lam * q[c])
            for j in range(depth):
                C[j, user_addr[u, c, j]] -= user_sign[u, c, j] * gp
                C[j, item_addr[i, c, j]] -= item_sign[i, c, j] * gq
    return skipped


# --------------------------------------------------------------------------- mean correction
@dataclasses.dataclass(frozen=True)
class Baseline:
    """Balu's mean correction: r̂ = µ + b_u + b_i + p̃_uᵀq̃_i (see the module docstring).

    Attributes:
        mu: the global mean.
        user_bias: float array of shape (n_users,) (0 for a user with no rating).
        item_bias: float array of shape (n_items,) (0 for an item with no rating).
    """

    mu: float
    user_bias: FloatArray
    item_bias: FloatArray

    @classmethod
    def fit(
        cls, users: IntArray, items: IntArray, ratings: FloatArray, n_users: int, n_items: int
    ) -> Baseline:
        """Fit μ, b_u and b_i as successive group means of the residuals."""
        mu = float(ratings.mean()) if ratings.size else 0.0
        b_i = _group_mean(items, ratings - mu, n_items)
        b_u = _group_mean(users, ratings - mu - b_i[items], n_users)
        return cls(mu, b_u, b_i)

    def residuals(self, users: IntArray, items: IntArray, ratings: FloatArray) -> FloatArray:
        """r′ = r − µ − b_u − b_i."""
        out: FloatArray = ratings - self.mu - self.user_bias[users] - self.item_bias[items]
        return out

    def user_bias_of(self, items: IntArray, ratings: FloatArray) -> float:
        """b_u of a user not in the model, from her ratings (the same rule as in `fit`)."""
        return float(np.mean(ratings - self.mu - self.item_bias[items])) if items.size else 0.0


def _group_mean(keys: IntArray, values: FloatArray, n: int) -> FloatArray:
    counts = np.bincount(keys, minlength=n)
    sums = np.bincount(keys, weights=values, minlength=n)
    out: FloatArray = np.where(counts > 0, sums / np.maximum(counts, 1), 0.0)
    return out


# --------------------------------------------------------------------------- the fitted model
@dataclasses.dataclass(frozen=True)
class SGDConfig:
    """Hyper-parameters of one factorization (see the module docstring).

    Attributes:
        d: latent factors per vector.
        storage: "dense" (regular MF) or "sketch" (count sketch; depth 1 = feature hashing).
        depth: k, the sketch's rows (ignored by dense storage).
        gamma: γ, the space gain (Eq. (4.9); ignored by dense storage).
        eta: η, the initial learning rate.
        reg: λ, the per-rating Tikhonov weight (Eq. (2.7)).
        epochs: T.
        decay: b of η_t = η / (1 + b t/T).
        clip: the data-clipping threshold ε on ½(r − r̂)² (inf: no clipping).
        init_scale: σ₀, the standard deviation of the initial reads.
    """

    d: int = 32
    storage: Storage = "sketch"
    depth: int = 4
    gamma: float = 1.0
    eta: float = 0.01
    reg: float = 0.02
    epochs: int = 20
    decay: float = 1.0
    clip: float = math.inf
    init_scale: float = 0.1

    def __post_init__(self) -> None:
        _check_int("d", self.d)
        _check_int("depth", self.depth)
        _check_int("epochs", self.epochs, low=0)
        if self.storage not in STORAGES:
            raise ValueError(f"`storage` must be one of {STORAGES}, got {self.storage!r}")
        for name in ("gamma", "eta", "clip"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ValueError(f"`{name}` must be a number > 0, got {value!r}")
        for name in ("reg", "decay", "init_scale"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"`{name}` must be a finite number >= 0, got {value!r}")
            if not 0 <= value < math.inf:
                raise ValueError(f"`{name}` must be a finite number >= 0, got {value!r}")
        if math.isinf(self.gamma) or math.isnan(self.eta) or math.isinf(self.eta):
            raise ValueError(f"`gamma` and `eta` must be finite, got {self.gamma!r}, {self.eta!r}")


def _check_int(name: str, value: object, low: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
        raise ValueError(f"`{name}` must be an int >= {low}, got {value!r}")


@dataclasses.dataclass
class Factorization:
    """A fitted factorization: the baseline and the factors (dense P, Q or one sketch C).

    Attributes:
        config: the hyper-parameters.
        baseline: the mean correction.
        n_users, n_items: the id ranges.
        table: (P, Q) for dense storage, or the sketch C (depth × w) for sketch storage.
        hashes: the sketch's hash families (None for dense storage).
        skipped: per epoch, the ratings the clipping skipped.
    """

    config: SGDConfig
    baseline: Baseline
    n_users: int
    n_items: int
    table: tuple[FloatArray, FloatArray] | FloatArray
    hashes: SketchHashes | None
    skipped: list[int]

    @property
    def cells(self) -> int:
        """The floats the factors take (P and Q, or the k × w sketch)."""
        if isinstance(self.table, tuple):
            return int(self.table[0].size + self.table[1].size)
        return int(self.table.size)

    def user_vectors(self, users: IntArray) -> FloatArray:
        """p̃_u of `users`, shape (n, d)."""
        return self._vectors(0, users)

    def item_vectors(self, items: IntArray) -> FloatArray:
        """q̃_i of `items`, shape (n, d)."""
        return self._vectors(1, items)

    def _vectors(self, family: int, ids: IntArray) -> FloatArray:
        ids = np.asarray(ids, dtype=np.int64)
        if isinstance(self.table, tuple):
            return self.table[family][ids]
        assert self.hashes is not None
        return read_sketch(self.table, self.hashes, family, ids)

    def predict(self, users: IntArray, items: IntArray) -> FloatArray:
        """r̂ = µ + b_u + b_i + p̃_uᵀq̃_i for known users (unclipped), shape (n,)."""
        users = np.asarray(users, dtype=np.int64)
        items = np.asarray(items, dtype=np.int64)
        b = self.baseline
        dot = np.einsum("nd,nd->n", self.user_vectors(users), self.item_vectors(items))
        out: FloatArray = b.mu + b.user_bias[users] + b.item_bias[items] + dot
        return out

    def fold_in(self, items: IntArray, ratings: FloatArray) -> tuple[float, FloatArray]:
        """(b_u, p_u) of a user the model was not trained on, from her ratings with the item
        side fixed: b_u by the `Baseline` rule, p_u the exact minimiser of the same per-rating
        objective (2.7) in p alone, p = (Q̃_φᵀQ̃_φ + λ|φ| I)⁻¹ Q̃_φᵀ r′_φ (the limit of SGD on
        her ratings; the thesis's online setting folds new users in by updates instead)."""
        items = np.asarray(items, dtype=np.int64)
        ratings = np.asarray(ratings, dtype=np.float64)
        b_u = self.baseline.user_bias_of(items, ratings)
        resid = ratings - self.baseline.mu - b_u - self.baseline.item_bias[items]
        q = self.item_vectors(items)
        lam = self.config.reg * max(items.size, 1)
        a = q.T @ q + max(lam, 1e-12) * np.eye(q.shape[1])
        p = np.asarray(np.linalg.solve(a, q.T @ resid), dtype=np.float64)
        return b_u, p

    def predict_new_user(
        self, items: IntArray, ratings: FloatArray, targets: IntArray
    ) -> FloatArray:
        """r̂ of `targets` for a user folded in from her ratings (`fold_in`), unclipped."""
        b_u, p = self.fold_in(items, ratings)
        targets = np.asarray(targets, dtype=np.int64)
        b = self.baseline
        out: FloatArray = b.mu + b_u + b.item_bias[targets] + self.item_vectors(targets) @ p
        return out


def fit_factorization(
    users: IntArray,
    items: IntArray,
    ratings: FloatArray,
    n_users: int,
    n_items: int,
    config: SGDConfig,
    rng: np.random.Generator,
) -> Factorization:
    """Learn a factorization of the observed ⟨u, i, r⟩ by SGD (the module docstring).

    Args:
        users, items: int arrays of shape (N,), ids in [0, n_users) and [0, n_items).
        ratings: float array of shape (N,).
        n_users, n_items: the id ranges (the sketch's width counts both, Eq. (4.9)).
        config: the hyper-parameters.
        rng: draws, in this order: the hashes (sketch only), the initial factors, then one
            permutation per epoch.

    Returns:
        the fitted `Factorization`.

    Raises:
        ValueError: arrays of different lengths, or ids out of range.
    """
    users = np.ascontiguousarray(users, dtype=np.int64)
    items = np.ascontiguousarray(items, dtype=np.int64)
    ratings = np.ascontiguousarray(ratings, dtype=np.float64)
    if not users.shape == items.shape == ratings.shape or users.ndim != 1:
        raise ValueError(
            f"`users`, `items`, `ratings` must be 1-D of one length, got {users.shape}, "
            f"{items.shape}, {ratings.shape}"
        )
    if users.size and (users.min() < 0 or users.max() >= n_users):
        raise ValueError(f"`users` must lie in [0, {n_users})")
    if items.size and (items.min() < 0 or items.max() >= n_items):
        raise ValueError(f"`items` must lie in [0, {n_items})")
    if not np.all(np.isfinite(ratings)):
        raise ValueError("`ratings` must be finite")
    baseline = Baseline.fit(users, items, ratings, n_users, n_items)
    resid = baseline.residuals(users, items, ratings)
    c = config
    hashes: SketchHashes | None = None
    table: tuple[FloatArray, FloatArray] | FloatArray
    if c.storage == "dense":
        table = (
            rng.normal(0.0, c.init_scale, (n_users, c.d)),
            rng.normal(0.0, c.init_scale, (n_items, c.d)),
        )
    else:
        width = sketch_width(n_users, n_items, c.d, c.gamma, c.depth)
        hashes = SketchHashes.draw(c.depth, width, c.d, rng)
        table = rng.normal(0.0, c.init_scale * math.sqrt(c.depth), (c.depth, width))
        # The hash values of every cell, computed once: a lookup table of the same functions
        # (an implementation shortcut for speed that changes no number; `SketchHashes.cells`).
        ua, us = hashes.cells(0, np.arange(n_users, dtype=np.int64))
        ia, is_ = hashes.cells(1, np.arange(n_items, dtype=np.int64))
        # compact dtypes keep the tables in cache (w < 2^31; signs are ±1 exactly)
        cells = (ua.astype(np.int32), us.astype(np.int8), ia.astype(np.int32), is_.astype(np.int8))
    skipped = []
    clip = float(c.clip)
    for t in range(c.epochs):
        eta = c.eta / (1.0 + c.decay * t / c.epochs)
        order = rng.permutation(ratings.size).astype(np.int64)
        if isinstance(table, tuple):
            # regular MF: the shared trainer's pass, no bias terms (Balu's are fixed above)
            _, s = sgd_pass(
                users, items, resid, order, table[0], table[1], learning_rate=eta, reg=c.reg,
                clip=clip,
            )  # fmt: skip
        else:
            s = _epoch_sketch(table, *cells, users, items, resid, order, eta, c.reg, clip)
        skipped.append(int(s))
    return Factorization(c, baseline, n_users, n_items, table, hashes, skipped)


__all__ = [
    "STORAGES",
    "Baseline",
    "Factorization",
    "SGDConfig",
    "SketchHashes",
    "Storage",
    "fit_factorization",
    "read_sketch",
    "sketch_width",
]
