"""The public tier as the adversary rebuilds it from what the server observed.

Xin & Jaakkola's server fits its public model (µ, V) on the public users' openly shared
ratings and publishes it, with what the mechanism derives from the public users (PMC's shared
h). Everything that goes into it is public, so the adversary refits it exactly: the server's
own model class, built from the published model name and parameters (`public_model`), on the
public users stacked in user-id order, and the run's mechanism built from its public
parameters and bound to the result — the very mechanism the private users ran. Attacks on the
second-order releases (`adversary.attacks.second_order`) start from here.

References:
    Y. Xin, T. Jaakkola, "Controlling privacy in recommender systems", NIPS 2014, Sec. 4.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any

import scipy.sparse as sp

from privrec.adversary.observations import Observations
from privrec.server.models import TwoTierModel, make_model
from privrec.shared.errors import ValidationError
from privrec.shared.mechanisms.completion import public_ratings_matrix
from privrec.shared.mechanisms.second_order import SecondOrderMechanism
from privrec.shared.run_config import PublicRunConfig
from privrec.shared.types import FloatArray


@dataclasses.dataclass(frozen=True)
class PublicTier:
    """The public model rebuilt from the public users, with a mechanism bound to it.

    Attributes:
        user_ids: the public users, in the order the server stacks them.
        ratings: CSR of shape (n_public, m), their shared ratings.
        mu: float array of shape (m,), µ.
        V: float array of shape (m, k), V.
        mechanism: the run's mechanism, built from its public parameters and bound to (µ, V)
            (and the shared h for PMC with h_mode "shared").
        binding: what the mechanism binds to besides (µ, V) (PMC's shared h), as the server
            derives it from the public users.
        model: the server's model, unfitted, built from the published name and `model_params`
            (`public_model`); `refit` fits a copy of it on other public ratings.
    """

    user_ids: list[str]
    ratings: sp.csr_matrix
    mu: FloatArray
    V: FloatArray
    mechanism: SecondOrderMechanism
    binding: dict[str, float]
    model: TwoTierModel

    @property
    def shared_h(self) -> float | None:
        """PMC's shared h, or None."""
        return self.binding.get("shared_h")

    def mechanism_for(self, mu: FloatArray, V: FloatArray) -> SecondOrderMechanism:
        """A copy of the run's mechanism bound to another (µ, V), with the run's binding."""
        return copy.deepcopy(self.mechanism).bind(mu, V, **self.binding)

    @property
    def rank(self) -> int:
        """The rank of the public item factors V."""
        return int(self.V.shape[1])

    def refit(self, ratings: sp.csr_matrix) -> tuple[FloatArray, FloatArray]:
        """(µ, V) of the server's public fit on `ratings` (a subset of the public users)."""
        return fit_like(self.model, ratings)


def fit_like(model: TwoTierModel, ratings: sp.csr_matrix) -> tuple[FloatArray, FloatArray]:
    """(µ, V) of a copy of the server's `model` fitted on the public `ratings`."""
    fitted = copy.deepcopy(model).fit_public(ratings)
    assert fitted.mu_ is not None and fitted.V_ is not None
    return fitted.mu_, fitted.V_


def second_order_mechanism(run_config: PublicRunConfig) -> SecondOrderMechanism:
    """The run's mechanism, unbound, from its public parameters.

    Raises:
        ValidationError: bad public parameters, or not a second-order mechanism.
    """
    try:
        mech = run_config.mechanism()
    except ValueError as exc:
        raise ValidationError("run_config.public_params", str(exc)) from exc
    if not isinstance(mech, SecondOrderMechanism):
        raise ValidationError(
            "run_config.mechanism", f"{run_config.mechanism_name!r} is not a second-order mechanism"
        )
    return mech


def public_model(model_name: str, model_params: Mapping[str, Any]) -> TwoTierModel:
    """The server's two-tier model, unfitted, built by the server's own class from the
    published model name and parameters (so defaults such as λ′, the EM rounds and the
    spectrum resolve exactly as on the server).

    Raises:
        ValidationError: naming `run_config.model_params` (a value the model refuses) or
            `run_config.model` (a model with no public tier).
    """
    try:
        model = make_model(model_name, model_params)
    except ValueError as exc:
        raise ValidationError("run_config.model_params", str(exc)) from exc
    if not isinstance(model, TwoTierModel):
        raise ValidationError("run_config.model", f"{model_name!r} fits no public model")
    return model


def rebuild_public_tier(observations: Observations) -> PublicTier:
    """(µ, V) exactly as the server fits them, and the run's mechanism bound to it.

    Raises:
        ValidationError: no public users; a malformed public payload; missing or invalid
            `model_params` or `public_params` (each naming the field).
    """
    if not observations.public:
        raise ValidationError(
            "public",
            "no public users observed: the second-order attack rebuilds (µ, V) from "
            "the public tier and calibrates on it (Xin & Jaakkola Sec. 4); this run has none",
        )
    m = observations.n_items
    ratings = public_ratings_matrix(observations.public, m)
    rc = observations.run_config
    tier_model = public_model(rc.model_name, rc.model_params)
    try:
        mu, V = fit_like(tier_model, ratings)
    except ValueError as exc:
        raise ValidationError("run_config.model_params", str(exc)) from exc
    mech = second_order_mechanism(rc)
    # What the server publishes with (µ, V) besides them (PMC's shared h), by its own code path.
    binding = mech.public_binding(ratings, mu, V)
    mech.bind(mu, V, **binding)
    return PublicTier(list(observations.public), ratings, mu, V, mech, binding, tier_model)


__all__ = [
    "PublicTier",
    "fit_like",
    "public_model",
    "rebuild_public_tier",
    "second_order_mechanism",
]
