"""Membership inference on model outputs: Balu's KL measure and a loss-threshold classifier.

The question (Balu 2016 §4.2.3): an observer who sees predicted ratings r̂ and knows the true
r tries to tell whether the rating was used to train the model. Balu's answer is an average
measure, the KL divergence (4.15) between Gaussian fits of the prediction errors r̂ − r on
training and on test ratings (`shared.privacy.membership.membership_kld`); the standard attack
is a classifier, here the loss threshold of Yeom, Giacomelli, Fredrikson, Jha (CSF 2018):
member iff the loss (r̂ − r)² is small, i.e. score = −loss, measured by its ROC AUC (0.5 =
no leak).

Where the predictions come from:

* **Through the protocol** (`MembershipInference`, every model that answers queries: the
  kNN models and the factorization models, which fold the querying user in;
  `configs/membership_mf.toml` runs it against `sgd_mf`). The experiment hands the
  adversary known ratings of candidate users, some in the run and some not, under opaque
  labels (`adversary.knowledge`); its sybils hold back `membership_probe_items` of each
  candidate's ratings and send the rest to `Predict` for them, from sybils in distinct folds
  (`adversary.sybils`): a member's own ratings then trained the answering model in at least one
  fold. The attack keeps, per candidate, the answer with the smallest loss (the attacker knows
  r) and outputs those r̂ (kind ``"membership"``); the referee, which alone knows who is a
  member, computes the classifier's AUC (score = −mean loss over the candidate's probe items)
  and the KL measure of member versus non-member errors.
* **From a factorization model's own predictions** (`FactorizationView`, Balu's setting: the
  model predicts r̂_ui for its training users). `rating_membership` computes the same loss
  scores, AUC and KL measure for (user, item, rating) triples with known membership; the
  protocol never hands the adversary a training user's own predictions, so this view is for
  offline studies (tested on a small SGD MF in tests/unit/adversary/test_attacks_membership.py).

Choices: the loss is the mean squared error over a candidate's probe items; the minimum over
folds is taken per candidate (not per item); predictions are de-normalised by the sybil, like
a client, when the model answers z-scores (`adversary.sybils.scores_as_ratings`).

References:
    R. Balu, PhD thesis, Université Rennes 1, 2016, §4.2.3, Eq. (4.15).
    S. Yeom, I. Giacomelli, M. Fredrikson, S. Jha, "Privacy risk in machine learning:
    analyzing the connection to overfitting", IEEE CSF 2018.
    R. Shokri, M. Stronati, C. Song, V. Shmatikov, "Membership inference attacks against
    machine learning models", IEEE S&P 2017.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

import numpy as np
import numpy.typing as npt

from privrec.adversary.attacks.base import (
    Attack,
    AttackOutput,
    OutputKind,
    SideKnowledge,
    UserEstimate,
)
from privrec.adversary.observations import Observations
from privrec.shared.errors import ValidationError
from privrec.shared.metrics import roc_auc
from privrec.shared.privacy.membership import membership_kld
from privrec.shared.types import FloatArray, IntArray


class FactorizationView(Protocol):
    """What the membership measure needs of a factorization model: its prediction r̂_ui for
    any (training user, item) pair (Balu §4.2.3: the observer "queries r̂_{u,i}")."""

    def predict_pairs(self, users: IntArray, items: IntArray) -> FloatArray:
        """r̂ for each (users[c], items[c]), float64 array of shape (len(users),)."""
        ...


def loss_scores(predicted: npt.ArrayLike, ratings: npt.ArrayLike) -> FloatArray:
    """Yeom et al.'s membership score: −(r̂ − r)² (higher = more likely a member)."""
    e = np.asarray(predicted, dtype=np.float64) - np.asarray(ratings, dtype=np.float64)
    out: FloatArray = -(e**2)
    return out


@dataclasses.dataclass(frozen=True)
class MembershipMeasures:
    """The two membership figures on one set of predictions.

    Attributes:
        auc: ROC AUC of the loss-threshold classifier (0.5: no leak).
        kld: Balu (4.15), KL(N_members ‖ N_non-members) of the errors r̂ − r, in nats.
        loss_members: mean squared error on members.
        loss_non_members: the same on non-members.
        n_members, n_non_members: how many scored units of each.
    """

    auc: float
    kld: float
    loss_members: float
    loss_non_members: float
    n_members: int
    n_non_members: int

    def to_dict(self) -> dict[str, float]:
        """The scores as a plain dict of floats (for the report)."""
        return {k: float(v) for k, v in dataclasses.asdict(self).items()}


def measure_membership(
    scores: npt.ArrayLike,
    labels: npt.ArrayLike,
    member_errors: npt.ArrayLike,
    non_member_errors: npt.ArrayLike,
) -> MembershipMeasures:
    """AUC of `scores` against `labels` (True = member) and Balu's KL of the two error sets.

    Raises:
        ValueError: no member or no non-member.
    """
    y = np.asarray(labels, dtype=bool)
    s = np.asarray(scores, dtype=np.float64)
    if y.all() or not y.any():
        raise ValueError("membership needs both members and non-members")
    em = np.asarray(member_errors, dtype=np.float64)
    en = np.asarray(non_member_errors, dtype=np.float64)
    return MembershipMeasures(
        auc=roc_auc(y, s),
        kld=membership_kld(em, en),
        loss_members=float(np.mean(em**2)),
        loss_non_members=float(np.mean(en**2)),
        n_members=int(y.sum()),
        n_non_members=int((~y).sum()),
    )


def rating_membership(
    view: FactorizationView,
    users: IntArray,
    items: IntArray,
    ratings: FloatArray,
    members: npt.ArrayLike,
) -> MembershipMeasures:
    """Balu's rating-level test on a factorization model: for (user, item, rating) triples,
    some trained on (`members` True) and some held out, the loss classifier's AUC and the KL
    measure of the errors (module docstring)."""
    predicted = view.predict_pairs(np.asarray(users), np.asarray(items))
    errors = predicted - np.asarray(ratings, dtype=np.float64)
    y = np.asarray(members, dtype=bool)
    return measure_membership(loss_scores(predicted, ratings), y, errors[y], errors[~y])


class MembershipInference(Attack):
    """Predictions of the candidates' held-back ratings through sybil `Predict` queries
    (module docstring); the referee turns them into the classifier's AUC and Balu's KL."""

    fits_on_sample = False  # scored on other users than those whose releases it reads
    name = "membership_inference"
    knowledge = (
        "Predict answers to its own sybils + known ratings of candidate users (labels "
        "opaque) + public run config; not the transcript"
    )
    applies_to = ("rpt", "raw")
    needs = frozenset({SideKnowledge.MEMBERSHIP_CANDIDATES})

    def _fit(self, observations: Observations) -> AttackOutput:
        probes = observations.probes(
            "membership", "no membership probes observed (set [adversary] membership_candidates)"
        )
        known = {c.label: c for c in observations.knowledge.candidates}
        per_user: dict[str, UserEstimate] = {}
        losses = []
        for label in sorted({p.subject for p in probes}):
            cand = known.get(label)
            if cand is None:
                raise ValidationError(
                    "knowledge.candidates", f"no known ratings for candidate {label!r}"
                )
            best: tuple[float, IntArray, FloatArray] | None = None
            for p in (q for q in probes if q.subject == label):
                truth = cand.ratings[np.searchsorted(cand.items, p.items)]
                loss = float(np.mean((p.answer_ratings - truth) ** 2))
                if best is None or loss < best[0]:
                    best = (loss, p.items, p.answer_ratings)
            assert best is not None
            order = np.argsort(best[1])
            per_user[label] = UserEstimate(
                best[1][order].astype(np.int64), best[2][order].astype(np.float64)
            )
            losses.append(best[0])
        return AttackOutput(
            attack=self.name,
            kind=OutputKind.MEMBERSHIP,
            knowledge=self.knowledge,
            per_user=per_user,
            diagnostics={
                "candidates": float(len(per_user)),
                "queries": float(len(probes)),
                "mean_loss": float(np.mean(losses)),
            },
        )


__all__ = [
    "FactorizationView",
    "MembershipInference",
    "MembershipMeasures",
    "loss_scores",
    "measure_membership",
    "rating_membership",
]
