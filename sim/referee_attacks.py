"""The referee's scoring of attack outputs against the truth only it holds.

Attacks (`adversary.attacks`) see only what the server observed. Here the referee compares their
per-user estimates with each user's true profile, the exact ratings she z-scored and released
(Bilge Procedure 1), and reports each metric beside the baseline an attacker gets for free, so
that a report shows what the attack adds:

* reconstruction (`AttackOutput.kind == "z_hat"`): RMSE and MAE of ẑ on the genuine filled cells
  against the true z-scores (`shared.mechanisms.rpt.zscore`). The baselines are the naive
  estimate ẑ = z′ (the disguised value itself, when the releases are passed; its RMSE is about
  √E[σ²] = σ_max/√3) and the know-nothing estimate ẑ = 0 (RMSE ≈ 1, the unit variance of
  z-scores).
* fake detection (`kind == "genuine_score"`): ROC AUC of genuine against fake over all filled
  cells pooled (baseline 0.5), its mean over users (which ignores between-user differences in
  the genuine fraction), and, after Bilge §3.1.1, how often taking each user's g top-scored
  cells recovers her exact genuine list, and the precision of those g cells (baseline g/f).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np
import numpy.typing as npt

from adversary.attacks.base import AttackOutput
from shared.data.dataset import RatingData
from shared.mechanisms.base import Payload, SparsePayload
from shared.mechanisms.rpt import zscore
from shared.metrics import rmse, roc_auc
from shared.types import FloatArray, IntArray

TruthProfiles = Mapping[str, tuple[npt.ArrayLike, npt.ArrayLike]]
"""user id → (item indices, true ratings) of exactly the profile the user released."""


def truth_from_rating_data(data: RatingData) -> dict[str, tuple[IntArray, FloatArray]]:
    """Truth keyed by wire user id (`client.population.user_id_of`: the dataset's own id)."""
    return {str(int(data.user_ids[u])): data.user_row(u) for u in range(data.n_users)}


def _pairs(
    output: AttackOutput, truth: TruthProfiles
) -> Iterator[tuple[str, IntArray, FloatArray, IntArray, FloatArray]]:
    """Yield (user id, estimate indices, values, true items, true ratings) for shared users."""
    for uid, est in output.per_user.items():
        if uid not in truth:
            continue
        items, ratings = truth[uid]
        items = np.asarray(items, dtype=np.int64)
        ratings = np.asarray(ratings, dtype=np.float64)
        order = np.argsort(items)
        yield uid, est.indices, est.values, items[order], ratings[order]


def _score_reconstruction(
    output: AttackOutput, truth: TruthProfiles, releases: Mapping[str, Payload] | None
) -> dict[str, float]:
    est, true, naive = [], [], []
    n_true = n_users = 0
    for uid, idx, val, items, ratings in _pairs(output, truth):
        z = zscore(ratings).z
        n_true += items.size
        hit = np.isin(items, idx, assume_unique=True)
        if not hit.any():
            continue
        n_users += 1
        est.append(val[np.searchsorted(idx, items[hit])])
        true.append(z[hit])
        if releases is not None:
            rel = releases.get(uid)
            if not isinstance(rel, SparsePayload):
                raise ValueError(f"releases[{uid!r}] must be the user's SparsePayload")
            pos = np.searchsorted(rel.indices, items[hit])
            if np.any(pos >= rel.indices.size) or np.any(rel.indices[np.minimum(
                    pos, rel.indices.size - 1)] != items[hit]):
                raise ValueError(f"releases[{uid!r}] does not cover the user's genuine cells")
            naive.append(np.asarray(rel.values, dtype=np.float64)[pos])
    if not est:
        raise ValueError(f"attack {output.attack!r}: no estimate falls on a genuine cell")
    e, t = np.concatenate(est), np.concatenate(true)
    out = {
        "rmse_z": rmse(e, t),
        "mae_z": float(np.mean(np.abs(e - t))),
        "rmse_z_zero": rmse(np.zeros_like(t), t),
        "n_cells": float(t.size),
        "n_users": float(n_users),
        "coverage": t.size / max(n_true, 1),
    }
    if releases is not None:
        nv = np.concatenate(naive)
        out["rmse_z_naive"] = rmse(nv, t)
        out["mae_z_naive"] = float(np.mean(np.abs(nv - t)))
        out["rmse_reduction"] = 1.0 - out["rmse_z"] / out["rmse_z_naive"]
    return out


def _score_detection(output: AttackOutput, truth: TruthProfiles) -> dict[str, float]:
    labels, scores, user_aucs = [], [], []
    exact = prec = chance = n_users = 0.0
    for _, idx, val, items, _ in _pairs(output, truth):
        y = np.isin(idx, items, assume_unique=True)
        g = int(y.sum())
        labels.append(y)
        scores.append(val)
        if 0 < g < y.size:
            user_aucs.append(roc_auc(y, val))
            top = np.argsort(-val, kind="stable")[:g]
            n_users += 1
            prec += float(y[top].mean())
            chance += g / y.size
            exact += float(y[top].all())
    if not labels:
        raise ValueError(f"attack {output.attack!r}: no user in common with the truth")
    lab, sc = np.concatenate(labels), np.concatenate(scores)
    out = {
        "auc": roc_auc(lab, sc),
        "auc_baseline": 0.5,
        "auc_per_user_mean": float(np.mean(user_aucs)) if user_aucs else float("nan"),
        "n_genuine": float(lab.sum()),
        "n_fake": float((~lab).sum()),
    }
    if n_users:
        out |= {"top_g_precision": prec / n_users, "top_g_precision_chance": chance / n_users,
                "exact_list_rate": exact / n_users}
    return out


def score_attack(
    name: str, output: AttackOutput, truth: TruthProfiles, *,
    releases: Mapping[str, Payload] | None = None,
) -> dict[str, float]:
    """Score one attack's output against the truth.

    Args:
        name: the attack's registry name; must match `output.attack`.
        output: the attack's fitted output.
        truth: user id → (item indices, true ratings) of the profile each user released;
            users absent from it are skipped.
        releases: the observed profile releases (`Observations.profiles`); needed for the naive
            baseline of a reconstruction.

    Returns:
        metric name → value (see the module docstring).

    Raises:
        ValueError: the output is of another attack or kind, or shares no cell with the truth.
    """
    if output.attack != name:
        raise ValueError(f"output is of attack {output.attack!r}, not {name!r}")
    if output.kind == "z_hat":
        return _score_reconstruction(output, truth, releases)
    if output.kind == "genuine_score":
        return _score_detection(output, truth)
    raise ValueError(f"no scoring rule for output kind {output.kind!r} of {name!r}")


__all__ = ["TruthProfiles", "score_attack", "truth_from_rating_data"]
