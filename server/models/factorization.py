"""The one SGD matrix-factorisation trainer: the non-private baseline, DPSGD-MF and DPPS-MF.

**The trainer** (`fit_mf`, built on `sgd_pass`): the biased factorisation of Koren, Bell &
Volinsky (2009, Eq. (5)),

    r̂_ui = µ + b_u + b_i + p_u·q_i,

learnt by per-rating stochastic gradient descent on

    Σ_{(u,i) stored} [ e_ui² + λ(‖p_u‖² + ‖q_i‖²) + λ_b(b_u² + b_i²) ],   e_ui = r_ui − r̂_ui,

visiting the ratings in a fresh random order every epoch and, for each, updating from the values
read before the step (Funk 2006; Koren et al. Eq. (6)):

    b_u += η(e − λ_b b_u),  b_i += η(e − λ_b b_i),
    p_u += η(e q_i − λ p_u),  q_i += η(e p_u − λ q_i).

The penalty applied at every visit weights each vector by its number of ratings. Every
factorisation model of privrec that trains dense factors by SGD runs this one compiled pass:

* `biased_mf` (`server.models.biased_mf`), the strong non-private baseline;
* DPSGD-MF (`server.models.dp_mf`, Berlioz et al. 2015): the same pass with each error
  released through Laplace noise and clamped before use (`noise`, `e_max`);
* Balu's regular MF (`server.models.count_sketch`, Balu Eqs. (2.8)/(2.9)): the same pass with
  the biases fixed to Balu's mean correction (`biases=None`) and his data clipping (`clip`:
  a rating whose ½e² exceeds it is skipped for the epoch). With `biases=None`, no noise and
  `clip = ∞` the pass is plain Funk SVD on the given values;
* DPPS-MF (`server.models.dp_mf`, Liu, Wang & Smola 2015 as Wang & Tang §4 apply it): the
  pass as the drift of an SGLD chain (below).

So each DP variant meets its non-private counterpart as its noise vanishes (tests compare them
with `biased_mf` at ε = 10⁶). The hyper-parameters of `MFConfig` were chosen on ML-100K by
validation (docs/decisions/factorization.md): d = 100, η = 0.01, λ = 0.1, λ_b = 0.02, 40
epochs reach RMSE 0.91 on the 80/20 random split (`bench/mf_baseline.py`).

**The posterior sampler** (`fit_mf` with `penalty = "prior"`, `bounds` and a `chain`). A
posterior sample is DP only if the prior does not depend on the data, and the per-rating
penalty above weights each vector by its count, so DPPS-MF's objective is the negative
log-posterior of a Gaussian likelihood (unit precision, the fit clipped to the rating scale so
that a user's Σe² ≤ B) and a Gaussian prior of fixed precision:

    U = ½Σ_{(u,i)} (x_ui − clip(b_u + b_i + p_u·q_i))² + ½λ(‖P‖² + ‖Q‖²) + ½λ_b(‖b_u‖² + ‖b_i‖²).

An epoch is one SGLD step of size δ_t on it, split in three: the likelihood's drift by the
per-rating pass without penalty (Wang & Tang's mini-batch gradient 𝓛ḡ at L = 1, whose prior
term Eq. (10)–(11) reweights by the chance a vector is in the batch — summed over the epoch,
once per vector), the prior's drift as its exact flow θ·e^{−δλ} (unrated vectors included),
then the noise N(0, 2δ_t/κ) on every parameter (`langevin.TemperedChain`). As ε → ∞ the noise
vanishes and the chain is SGD on U: it ends at the MAP (the non-private counterpart).

A user outside the training set — a querying user of another fold — is folded in
(`FactorModel.fold_in`): her bias and factor are the exact minimiser of her part of the same
objective with the item side fixed (a ridge regression on [1, q_i] with penalties λ_b·n and
λ·n for her n ratings, λ_b and λ with the prior), so only the item side leaves the curator.

References:
    Y. Koren, R. Bell, C. Volinsky. "Matrix Factorization Techniques for Recommender Systems",
    IEEE Computer 42(8), 2009, Eqs. (5)–(6).
    S. Funk. "Netflix Update: Try This at Home", 2006.
    M. Welling, Y. W. Teh. "Bayesian Learning via Stochastic Gradient Langevin Dynamics",
    ICML 2011.
    J. Wang, Q. Tang. IFIP SEC 2017, §4 (Eqs. (7)–(11), Algorithm 2).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numba
import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from privrec.server.models.langevin import TemperedChain
from privrec.shared.types import FloatArray, IntArray

Index = npt.NDArray[np.integer[Any]]
"""Any integer index array (CSR indices are int32)."""

_NO_BIAS = np.zeros(0)


def init_factors(n_rows: int, n_factors: int, scale: float, rng: np.random.Generator) -> FloatArray:
    """Factors drawn i.i.d. N(0, scale²), shape (n_rows, n_factors)."""
    out: FloatArray = rng.normal(0.0, scale, size=(n_rows, n_factors))
    return out


def cell_rows(train: sp.csr_matrix) -> IntArray:
    """The row of every stored cell of a CSR matrix, in storage order."""
    return np.repeat(np.arange(train.shape[0], dtype=np.int64), np.diff(train.indptr))


def predictions(rows: Index, cols: Index, p: FloatArray, q: FloatArray) -> FloatArray:
    """p_u·q_i for every cell (rows[c], cols[c])."""
    out: FloatArray = np.einsum("cd,cd->c", p[rows], q[cols])
    return out


# --------------------------------------------------------------------------- the SGD pass
@numba.njit(cache=True)
def _sgd_pass(
    rows: IntArray,
    cols: IntArray,
    values: FloatArray,
    order: IntArray,
    noise: FloatArray,
    mu: float,
    user_bias: FloatArray,
    item_bias: FloatArray,
    p: FloatArray,
    q: FloatArray,
    learning_rate: float,
    reg: float,
    reg_bias: float,
    e_max: float,
    clip: float,
    learn_biases: bool,
    lower: FloatArray,
    upper: FloatArray,
) -> tuple[float, int]:  # pragma: no cover - compiled
    loss = 0.0
    skipped = 0
    d = p.shape[1]
    with_noise = noise.size > 0
    with_bounds = lower.size > 0
    for c in order:
        u, i = rows[c], cols[c]
        e = values[c]
        if learn_biases:
            e -= mu + user_bias[u] + item_bias[i]
        for f in range(d):
            e -= p[u, f] * q[i, f]
        if with_bounds:
            fit = values[c] - e
            if fit < lower[c] or fit > upper[c]:
                e = values[c] - min(max(fit, lower[c]), upper[c])
                loss += e * e
                skipped += 1
                continue
        loss += e * e
        if 0.5 * e * e > clip:
            skipped += 1
            continue
        if with_noise:
            e = min(max(e + noise[c], -e_max), e_max)
        if learn_biases:
            user_bias[u] += learning_rate * (e - reg_bias * user_bias[u])
            item_bias[i] += learning_rate * (e - reg_bias * item_bias[i])
        for f in range(d):
            pu, qi = p[u, f], q[i, f]
            p[u, f] += learning_rate * (e * qi - reg * pu)
            q[i, f] += learning_rate * (e * pu - reg * qi)
    return loss, skipped


@dataclasses.dataclass
class Biases:
    """The bias terms of a biased factorisation, updated in place by `sgd_pass`.

    Attributes:
        mu: the global offset µ (fixed during training).
        user: float array of shape (n_users,), b_u.
        item: float array of shape (n_items,), b_i.
    """

    mu: float
    user: FloatArray
    item: FloatArray


def sgd_pass(
    rows: Index,
    cols: Index,
    values: FloatArray,
    order: IntArray,
    p: FloatArray,
    q: FloatArray,
    *,
    learning_rate: float,
    reg: float,
    biases: Biases | None = None,
    reg_bias: float = 0.0,
    noise: FloatArray | None = None,
    e_max: float = math.inf,
    clip: float = math.inf,
    bounds: tuple[FloatArray, FloatArray] | None = None,
) -> tuple[float, int]:
    """One epoch of per-rating SGD over the cells (rows[c], cols[c], values[c]) visited in
    `order`, in place (module docstring). Compiled.

    For each cell: e = x − (µ + b_u + b_i) − p_u·q_i (without the bracket when `biases` is
    None); with `bounds`, a cell whose fit x − e lies outside [lower[c], upper[c]] is fitted
    at the nearest bound and skipped (the clipped loss has no gradient there: DPPS-MF's
    bounded likelihood); a cell with ½e² > `clip` is skipped (Balu §4.2.1); otherwise e ←
    clamp(e + noise[c], ±e_max) when `noise` is given (Berlioz et al.'s perturbed SGD), then
    the biases (if any) and the factors move as in the module docstring.

    Args:
        rows, cols: int arrays of shape (N,), the cells' user and item indices.
        values: float array of shape (N,), the values to fit.
        order: int array, the visiting order (indices into the cells).
        p, q: the factors, updated in place.
        learning_rate, reg: η and λ.
        biases: µ, b_u, b_i (b_u and b_i updated in place), or None for no bias terms.
        reg_bias: λ_b.
        noise: float array of shape (N,) added to each cell's error this epoch, or None.
        e_max: the clamp of the noisy error.
        clip: the data-clipping threshold on ½e² (inf: none).
        bounds: (lower, upper), float arrays of shape (N,): each cell's fit is clipped to
            them, or None.

    Returns:
        (Σ e² over the visited cells before noise, with clipped fits; the number of skipped
        cells).
    """
    with_biases = biases is not None
    lower, upper = (_NO_BIAS, _NO_BIAS) if bounds is None else bounds
    loss, skipped = _sgd_pass(
        np.asarray(rows, dtype=np.int64),
        np.asarray(cols, dtype=np.int64),
        np.asarray(values, dtype=np.float64),
        np.asarray(order, dtype=np.int64),
        _NO_BIAS if noise is None else np.asarray(noise, dtype=np.float64),
        biases.mu if biases is not None else 0.0,
        biases.user if biases is not None else _NO_BIAS,
        biases.item if biases is not None else _NO_BIAS,
        p,
        q,
        float(learning_rate),
        float(reg),
        float(reg_bias),
        float(e_max),
        float(clip),
        with_biases,
        np.asarray(lower, dtype=np.float64),
        np.asarray(upper, dtype=np.float64),
    )
    return float(loss), int(skipped)


# --------------------------------------------------------------------------- the trainer
PENALTIES = ("per-rating", "prior")
"""`MFConfig.penalty`'s values."""


@dataclasses.dataclass(frozen=True)
class MFConfig:
    """Hyper-parameters of `fit_mf` (defaults: the tuned ML-100K baseline).

    Attributes:
        n_factors: d.
        n_epochs: passes over the ratings.
        learning_rate: η.
        reg: λ, the per-rating penalty of the factors.
        reg_bias: λ_b, the per-rating penalty of the biases.
        init_scale: standard deviation of the initial factors (biases start at 0).
        biases: learn b_u and b_i (False: factors only, r̂ = µ + p_u·q_i).
        penalty: "per-rating" (λ and λ_b at every visit, so each vector's penalty is weighted
            by its number of ratings: Koren et al., Funk) or "prior" (a Gaussian prior of
            precision λ, λ_b on every vector, once per epoch whatever its count: the
            objective ½Σe² + ½λ(‖P‖² + ‖Q‖²) + ½λ_b(‖b_u‖² + ‖b_i‖²) of a posterior whose
            prior does not depend on the data, DPPS-MF's).
    """

    n_factors: int = 100
    n_epochs: int = 40
    learning_rate: float = 0.01
    reg: float = 0.1
    reg_bias: float = 0.02
    init_scale: float = 0.1
    biases: bool = True
    penalty: str = "per-rating"

    def __post_init__(self) -> None:
        if self.penalty not in PENALTIES:
            raise ValueError(
                f"`penalty` must be one of {', '.join(PENALTIES)}, got {self.penalty!r}"
            )
        for name, low in (("n_factors", 1), ("n_epochs", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
                raise ValueError(f"`{name}` must be an int >= {low}, got {value!r}")
        for name in ("learning_rate", "reg", "reg_bias", "init_scale"):
            value = getattr(self, name)
            ok = not isinstance(value, bool) and isinstance(value, int | float | np.number)
            if (
                not ok
                or not 0 <= float(value) < math.inf
                or (name == "learning_rate" and not value)
            ):
                bound = "> 0" if name == "learning_rate" else ">= 0"
                raise ValueError(f"`{name}` must be a finite number {bound}, got {value!r}")


@dataclasses.dataclass(frozen=True)
class FactorModel:
    """A fitted factorisation r̂ = µ + b_u + b_i + p_u·q_i.

    Attributes:
        mu: µ.
        user_bias, item_bias: b_u (n_users,) and b_i (n_items,) (zeros without biases).
        p, q: the factors, (n_users, d) and (n_items, d).
        config: the hyper-parameters it was trained with.
        losses: mean e² (before noise) of every epoch.
    """

    mu: float
    user_bias: FloatArray
    item_bias: FloatArray
    p: FloatArray
    q: FloatArray
    config: MFConfig
    losses: FloatArray

    def predict(self, users: Index, items: Index) -> FloatArray:
        """r̂ of the cells (users[c], items[c]) for users the model was trained on."""
        out: FloatArray = (
            self.mu
            + self.user_bias[users]
            + self.item_bias[items]
            + predictions(users, items, self.p, self.q)
        )
        return out

    def fold_in(self, items: Index, values: FloatArray) -> tuple[float, FloatArray]:
        """(b_u, p_u) of a user the model was not trained on: the minimiser of her part of the
        training objective, Σ_i (x_i − µ − b_i − b_u − p·q_i)² + n(λ_b b_u² + λ‖p‖²) over her n
        ratings, with the item side fixed (ridge regression on [1, q_i]; without biases b_u = 0).
        With the "prior" penalty n is 1: her part of the MAP objective."""
        items = np.asarray(items, dtype=np.int64)
        n = max(items.size, 1) if self.config.penalty == "per-rating" else 1
        target = np.asarray(values, dtype=np.float64) - self.mu - self.item_bias[items]
        qi = self.q[items]
        c = self.config
        if c.biases:
            design = np.hstack([np.ones((items.size, 1)), qi])
            penalty = np.array([c.reg_bias, *([c.reg] * qi.shape[1])]) * n
        else:
            design, penalty = qi, np.full(qi.shape[1], c.reg * n)
        gram = design.T @ design + np.diag(np.maximum(penalty, 1e-12))
        sol = np.asarray(np.linalg.solve(gram, design.T @ target), dtype=np.float64)
        return (float(sol[0]), sol[1:]) if c.biases else (0.0, sol)

    def predict_new_user(self, items: Index, values: FloatArray, targets: Index) -> FloatArray:
        """r̂ of `targets` for a user folded in from her ratings (`fold_in`)."""
        b_u, p_u = self.fold_in(items, values)
        targets = np.asarray(targets, dtype=np.int64)
        out: FloatArray = self.mu + b_u + self.item_bias[targets] + self.q[targets] @ p_u
        return out


NoiseDraw = Callable[[int], FloatArray]
"""``draw(epoch)``: the noise added to every cell's error in that epoch, shape (nnz,)."""


def fit_mf(
    train: sp.csr_matrix,
    config: MFConfig,
    rng: np.random.Generator,
    *,
    mu: float | None = None,
    noise: NoiseDraw | None = None,
    e_max: float = math.inf,
    bounds: tuple[FloatArray, FloatArray] | None = None,
    chain: TemperedChain | None = None,
) -> FactorModel:
    """Train a factorisation of the stored cells of `train` by SGD (module docstring).

    With the "prior" penalty the pass carries no penalty and each epoch ends with the prior's
    own step, θ ← θ·e^{−ηλ} (the exact flow of −λθ over the epoch's step η; unrated vectors
    too). With `chain`, the epochs are the steps of an SGLD chain (DPPS-MF, module
    docstring): epoch t runs at the chain's drift step δ_t (in place of
    `config.learning_rate`) and ends with its noise N(0, 2δ_t/κ) on every parameter.

    Args:
        train: CSR of shape (n_users, n_items); stored cells are the values to fit.
        config: the hyper-parameters.
        rng: draws the initial factors (P, then Q), then one visiting order per epoch (and the
            chain's noise after it).
        mu: the fixed offset µ; default the mean of the stored values (0 for none stored).
        noise: per epoch, the noise added to each cell's error before the update, or None.
        e_max: the clamp of the noisy error (used with `noise`).
        bounds: (lower, upper) per stored cell (storage order): the fit is clipped to them
            (`sgd_pass`), or None.
        chain: the SGLD chain the epochs run, or None (plain SGD).

    Returns:
        the fitted `FactorModel`.
    """
    n_users, n_items = train.shape
    rows = cell_rows(train)
    offset = float(train.data.mean()) if mu is None and train.nnz else float(mu or 0.0)
    p = init_factors(n_users, config.n_factors, config.init_scale, rng)
    q = init_factors(n_items, config.n_factors, config.init_scale, rng)
    biases = Biases(offset, np.zeros(n_users), np.zeros(n_items))
    values = train.data if config.biases else train.data - offset
    prior = config.penalty == "prior"
    learnt = [p, q, biases.user, biases.item] if config.biases else [p, q]
    losses = np.zeros(config.n_epochs)
    for epoch in range(config.n_epochs):
        rate = config.learning_rate if chain is None else chain.drift_step(epoch + 1)
        order = rng.permutation(train.nnz)
        loss, _ = sgd_pass(
            rows,
            train.indices,
            values,
            order,
            p,
            q,
            learning_rate=rate,
            reg=0.0 if prior else config.reg,
            biases=biases if config.biases else None,
            reg_bias=0.0 if prior else config.reg_bias,
            noise=None if noise is None else noise(epoch),
            e_max=e_max,
            bounds=bounds,
        )
        if prior:  # the prior's flow over the epoch's step: e^{−ηλ}
            for k, theta in enumerate(learnt):
                np.multiply(
                    theta, math.exp(-rate * (config.reg if k < 2 else config.reg_bias)), out=theta
                )
        if chain is not None:
            chain.diffuse(learnt, epoch + 1, rng)
        losses[epoch] = loss / max(train.nnz, 1)
    return FactorModel(offset, biases.user, biases.item, p, q, config, losses)


__all__ = [
    "PENALTIES",
    "Biases",
    "FactorModel",
    "MFConfig",
    "NoiseDraw",
    "cell_rows",
    "fit_mf",
    "init_factors",
    "predictions",
    "sgd_pass",
]
