"""Balu's KL-divergence membership measure (Balu 2016, §4.2.3, Eq. (4.15)).

An observer who sees a prediction r̂_{u,i} and even knows r_{u,i} tries to tell whether the
rating was used in training. Balu models the prediction error r̂ − r as Gaussian, N(m_tr, s²_tr)
on the training ratings and N(m_te, s²_te) on the test ratings, and measures the leak as

    KLD = ½ ( s²_tr/s²_te + (m_tr − m_te)²/s²_te − 1 + log(s²_te/s²_tr) ),          (4.15)

i.e. KL(N_tr ‖ N_te). A low KLD means a prediction looks the same whether or not its rating
was trained on; it is an average-case figure, compared in the thesis against ε (a worst case).
The printed (4.14) is not a well-formed divergence; (4.15) is the one the thesis computes.

Choices: the variances are the maximum-likelihood (ddof = 0) estimates of the fitted Gaussians;
the errors are taken as given (clipped or not is the caller's choice, stated where used).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import numpy.typing as npt


@dataclasses.dataclass(frozen=True)
class GaussianFit:
    """N(mean, var) fitted to prediction errors."""

    mean: float
    var: float

    @classmethod
    def of(cls, errors: npt.ArrayLike, name: str = "errors") -> GaussianFit:
        """The maximum-likelihood Gaussian of `errors` (at least two finite values, not all
        equal).

        Raises:
            ValueError: naming `name`, for fewer than two values, a non-finite value, or zero
                variance (the divergence is then undefined).
        """
        e = np.asarray(errors, dtype=np.float64).ravel()
        if e.size < 2:
            raise ValueError(f"`{name}` must hold at least 2 errors, got {e.size}")
        if not np.all(np.isfinite(e)):
            raise ValueError(f"`{name}` must be finite")
        var = float(e.var())
        if not var > 0:
            raise ValueError(f"`{name}` has zero variance: the Gaussian KLD is undefined")
        return cls(float(e.mean()), var)


def gaussian_kl(p: GaussianFit, q: GaussianFit) -> float:
    """KL(N(p.mean, p.var) ‖ N(q.mean, q.var)) in nats (Balu Eq. (4.15) with p = train)."""
    return 0.5 * (p.var / q.var + (p.mean - q.mean) ** 2 / q.var - 1.0 + math.log(q.var / p.var))


def membership_kld(train_errors: npt.ArrayLike, test_errors: npt.ArrayLike) -> float:
    """Balu's privacy measure (4.15): KL(N_train ‖ N_test) of the prediction errors r̂ − r.

    Args:
        train_errors: r̂ − r on ratings the model was trained on.
        test_errors: r̂ − r on ratings it was not trained on.

    Returns:
        the divergence in nats (≥ 0; 0 when the two fitted Gaussians coincide).
    """
    return gaussian_kl(
        GaussianFit.of(train_errors, "train_errors"), GaussianFit.of(test_errors, "test_errors")
    )


__all__ = ["GaussianFit", "gaussian_kl", "membership_kld"]
