"""The referee's scoring of the inference attacks (their kinds' rules in `sim.referee_attacks`).

Each metric comes beside the level an attacker reaches without the attack:

* ``"item_hat"`` (`knn_sybil`): per target, the estimates ranked; precision and recall of the
  top 10 and of every inferred item against her true items outside the m the attacker knew,
  beside the same number of the most popular items (counted over the run's users, the m
  excluded) and chance (her other items over the m_total − m unknown ones).
* ``"membership"`` (`membership_inference`): per candidate, the loss-threshold score −mean
  (r̂ − r)² over her probe items; ROC AUC against the true membership (chance 0.5) and Balu's
  KL measure (4.15) of member versus non-member errors (0 = no leak).
* ``"bit_hat"`` (`rrt_flip_inference`): the recovered bit [value > ½] against the true like
  [rating > threshold] at every released cell, beside the released bit itself (right with
  probability θ); the AUC of the values; and each (user, group)'s inferred flip (the recovered
  bits disagree with the released ones in most of the group's cells) against its true flip
  (the released bits disagree with the truth), beside "no flip" (right with probability ≈ θ).
* ``"sign_hat"`` (`second_order_signs`): on each user's rated (released) items, the sign of the
  value against sign(r − µ) (µ the public item means, sign(0) := +1), with the attack's global
  sign and up to one global sign per user, beside a coin, the binomial chance of the best flip
  and another user's estimate (permuted); and "which items are above her own mean": the ROC
  AUC, per user, of the values against [r > r̄_u], also up to the global sign.
* ``"denormalised_hat"`` (`rpt_rating_recovery`): on each user's genuine cells, RMSE and MAE of
  r̂ against her rating, beside r̂ = the population's mean rating (the know-nothing guess) and
  r̂ = her own mean (an oracle that knew her mean); the rate of exact ratings after rounding.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from privrec.adversary.attacks.base import AttackOutput
from privrec.adversary.attacks.membership import measure_membership
from privrec.adversary.knowledge import AdversaryKnowledge
from privrec.shared.mechanisms.base import Payload, SparsePayload
from privrec.shared.mechanisms.completion import public_item_means, public_ratings_matrix
from privrec.shared.mechanisms.rrt import group_of
from privrec.shared.metrics import roc_auc
from privrec.shared.run_config import PublicRunConfig
from privrec.shared.types import FloatArray, IntArray
from privrec.sim.referee_ratings import max_flip_chance, sign

Truth = Mapping[str, tuple[npt.ArrayLike, npt.ArrayLike]]
"""user id → (item indices, true ratings), as `sim.referee_cells.TruthProfiles`."""


def _sorted_truth(truth: Truth, uid: str) -> tuple[IntArray, FloatArray]:
    items, ratings = truth[uid]
    items = np.asarray(items, dtype=np.int64)
    order = np.argsort(items)
    return items[order], np.asarray(ratings, dtype=np.float64)[order]


# ---------------------------------------------------------------------------- kNN items
def score_items(
    output: AttackOutput, truth: Truth, knowledge: AdversaryKnowledge, n_items: int
) -> dict[str, float]:
    """Precision/recall of the inferred items (module docstring)."""
    known = {t.label: t.items for t in knowledge.targets}
    counts = np.zeros(n_items)
    for items, _ in truth.values():
        counts[np.asarray(items, dtype=np.int64)] += 1.0
    rows = []
    for uid, est in output.per_user.items():
        if uid not in truth:
            continue
        items, _ = _sorted_truth(truth, uid)
        mine = known.get(uid, np.zeros(0, np.int64))
        rest = np.setdiff1d(items, mine)
        if rest.size == 0:
            continue
        order = np.lexsort((est.indices, -est.values))
        ranked = est.indices[order]
        popular = np.array(
            [j for j in np.argsort(-counts, kind="stable") if j not in set(mine.tolist())],
            dtype=np.int64,
        )
        n_all = max(ranked.size, 1)

        def pr(guess: IntArray, rest: IntArray = rest) -> tuple[float, float]:
            hits = float(np.isin(guess, rest).sum())
            return hits / max(guess.size, 1), hits / rest.size

        p10, r10 = pr(ranked[:10])
        pall, rall = pr(ranked)
        q10, s10 = pr(popular[:10])
        qall, sall = pr(popular[:n_all])
        chance = rest.size / max(n_items - mine.size, 1)
        rows.append((p10, r10, pall, rall, q10, s10, qall, sall, chance, float(ranked.size)))
    if not rows:
        raise ValueError(f"attack {output.attack!r}: no target in common with the truth")
    a = np.array(rows)
    names = (
        "precision_at_10",
        "recall_at_10",
        "precision_inferred",
        "recall_inferred",
        "precision_at_10_popularity",
        "recall_at_10_popularity",
        "precision_inferred_popularity",
        "recall_inferred_popularity",
        "precision_chance",
        "inferred_items_mean",
    )
    out = {n: float(v) for n, v in zip(names, a.mean(axis=0), strict=True)}
    out["targets"] = float(len(rows))
    return out


# ---------------------------------------------------------------------------- membership
def score_membership(
    output: AttackOutput, knowledge: AdversaryKnowledge, members: Mapping[str, bool]
) -> dict[str, float]:
    """The loss classifier's AUC and Balu's KL measure (module docstring)."""
    known = {c.label: c for c in knowledge.candidates}
    scores: list[float] = []
    labels: list[bool] = []
    err_in: list[FloatArray] = []
    err_out: list[FloatArray] = []
    for label, est in output.per_user.items():
        if label not in members or label not in known:
            continue
        cand = known[label]
        pos = np.searchsorted(cand.items, est.indices)
        if np.any(pos >= cand.items.size) or np.any(cand.items[pos] != est.indices):
            raise ValueError(f"{output.attack!r}: candidate {label!r} has unknown probe items")
        e = est.values - cand.ratings[pos]
        scores.append(-float(np.mean(e**2)))
        labels.append(members[label])
        (err_in if members[label] else err_out).append(e)
    if not scores:
        raise ValueError(f"attack {output.attack!r}: no candidate in common with the truth")
    m = measure_membership(scores, labels, np.concatenate(err_in), np.concatenate(err_out))
    return m.to_dict() | {"auc_chance": 0.5, "kld_no_leak": 0.0}


# ---------------------------------------------------------------------------- RRT bits
def score_bits(
    output: AttackOutput,
    truth: Truth,
    releases: Mapping[str, Payload],
    run_config: PublicRunConfig,
) -> dict[str, float]:
    """Recovered bits and flips of RRT (module docstring)."""
    params = run_config.public_params
    threshold, n_groups = float(params["threshold"]), int(params["n_groups"])
    m = run_config.n_items
    hit, naive, labels, values = [], [], [], []
    flip_hit = flip_prior = n_groups_seen = 0.0
    for uid, est in output.per_user.items():
        if uid not in truth or uid not in releases:
            continue
        rel = releases[uid]
        if not isinstance(rel, SparsePayload):
            raise ValueError(f"releases[{uid!r}] must be an RRT SparsePayload")
        items, ratings = _sorted_truth(truth, uid)
        if not np.array_equal(items, est.indices) or not np.array_equal(items, rel.indices):
            raise ValueError(f"{output.attack!r}: user {uid!r}'s cells differ from her release")
        true_bits = ratings > threshold
        released = np.asarray(rel.values) > 0.5
        recovered = est.values > 0.5
        hit.append(recovered == true_bits)
        naive.append(released == true_bits)
        labels.append(true_bits)
        values.append(est.values)
        groups = group_of(items, m, n_groups)
        for g in np.unique(groups):
            cells = groups == g
            true_flip = bool(released[cells][0] != true_bits[cells][0])
            inferred = bool(np.mean(recovered[cells] != released[cells]) > 0.5)
            flip_hit += float(inferred == true_flip)
            flip_prior += float(not true_flip)
            n_groups_seen += 1
    if not hit:
        raise ValueError(f"attack {output.attack!r}: no user in common with the truth")
    y, v = np.concatenate(labels), np.concatenate(values)
    return {
        "bit_accuracy": float(np.mean(np.concatenate(hit))),
        "bit_accuracy_released": float(np.mean(np.concatenate(naive))),
        "bit_auc": roc_auc(y, v) if 0 < y.sum() < y.size else float("nan"),
        "flip_accuracy": flip_hit / n_groups_seen,
        "flip_accuracy_no_flip_guess": flip_prior / n_groups_seen,
        "theta": float(params["theta"]),
        "n_cells": float(y.size),
        "n_groups": n_groups_seen,
    }


# ---------------------------------------------------------------------------- signs
def _sign_rows(
    output: AttackOutput, truth: Truth, mu: FloatArray, shift: int = 0
) -> list[tuple[FloatArray, FloatArray, FloatArray]]:
    """Per user: (values at her rated items, sign(r − µ) there, [r > r̄_u] there). With
    `shift` = 1 the values are the NEXT scored user's estimate at her items: an estimate
    unrelated to her (the permuted reference)."""
    users = [u for u in output.per_user if u in truth]
    rows = []
    for pos, uid in enumerate(users):
        est = output.per_user[users[(pos + shift) % len(users)]]
        items, ratings = _sorted_truth(truth, uid)
        hit = np.isin(items, est.indices, assume_unique=True)
        if hit.sum() < 2:
            continue
        v = est.values[np.searchsorted(est.indices, items[hit])]
        y = ratings[hit]
        rows.append((v, sign(y - mu[items[hit]]), (y > y.mean()).astype(np.float64)))
    return rows


def _sign_figures(rows: list[tuple[FloatArray, FloatArray, FloatArray]]) -> dict[str, float]:
    agree = agree_g = cells = 0.0
    aucs, aucs_g = [], []
    for v, s, above in rows:
        a = float(np.sum(sign(v) == s))
        agree += a
        agree_g += max(a, s.size - a)
        cells += s.size
        if 0 < above.sum() < above.size:
            auc = roc_auc(above > 0.5, v)
            aucs.append(auc)
            aucs_g.append(max(auc, 1.0 - auc))
    return {
        "sign_accuracy": agree / cells,
        "sign_accuracy_global": agree_g / cells,
        "above_mean_auc": float(np.mean(aucs)) if aucs else float("nan"),
        "above_mean_auc_global": float(np.mean(aucs_g)) if aucs_g else float("nan"),
        "n_cells": cells,
    }


def score_signs(
    output: AttackOutput, truth: Truth, public: Mapping[str, Payload] | None
) -> dict[str, float]:
    """sign(r − µ) and above-her-mean recovery (module docstring)."""
    if not public:
        raise ValueError(f"scoring {output.attack!r} (kind 'sign_hat') needs the public users")
    mu = public_item_means(public_ratings_matrix(public))
    rows = _sign_rows(output, truth, mu)
    if not rows:
        raise ValueError(f"attack {output.attack!r}: no user with two rated cells in common")
    out = _sign_figures(rows)
    out["sign_accuracy_chance"] = 0.5
    # E[max(X, n − X)] agreements per user (a count), pooled over cells like the accuracy
    out["sign_accuracy_global_chance"] = float(
        sum(max_flip_chance(s.size) for _, s, _ in rows) / out["n_cells"]
    )
    out["above_mean_auc_chance"] = 0.5
    shifted = _sign_rows(output, truth, mu, shift=1) if len(rows) > 1 else []
    if shifted:
        perm = _sign_figures(shifted)
        for key in ("sign_accuracy", "sign_accuracy_global", "above_mean_auc_global"):
            out[f"{key}_permuted"] = perm[key]
    out["users"] = float(len(rows))
    return out


# ---------------------------------------------------------------------------- RPT ratings
def score_denormalised(output: AttackOutput, truth: Truth) -> dict[str, float]:
    """Rating recovery on the genuine cells (module docstring)."""
    est_all, true_all, user_mean = [], [], []
    n_true = 0
    for uid, est in output.per_user.items():
        if uid not in truth:
            continue
        items, ratings = _sorted_truth(truth, uid)
        n_true += items.size
        hit = np.isin(items, est.indices, assume_unique=True)
        if not hit.any():
            continue
        est_all.append(est.values[np.searchsorted(est.indices, items[hit])])
        true_all.append(ratings[hit])
        user_mean.append(np.full(int(hit.sum()), ratings.mean()))
    if not est_all:
        raise ValueError(f"attack {output.attack!r}: no estimate falls on a genuine cell")
    e, t, um = np.concatenate(est_all), np.concatenate(true_all), np.concatenate(user_mean)
    values, counts = np.unique(t, return_counts=True)
    return {
        "rmse": float(np.sqrt(np.mean((e - t) ** 2))),
        "mae": float(np.mean(np.abs(e - t))),
        "rmse_global_mean": float(np.sqrt(np.mean((t.mean() - t) ** 2))),
        "rmse_user_mean_oracle": float(np.sqrt(np.mean((um - t) ** 2))),
        "exact_rate": float(np.mean(np.round(e) == t)),
        "exact_rate_mode": float(counts.max() / t.size) if values.size else float("nan"),
        "n_cells": float(t.size),
        "coverage": t.size / max(n_true, 1),
    }


__all__ = [
    "score_bits",
    "score_denormalised",
    "score_items",
    "score_membership",
    "score_signs",
]
