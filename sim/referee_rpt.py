"""The referee's scores of the RPT attacks: reconstructed z-scores and fake detection.

Each figure comes beside the baseline an attacker gets for free (`sim.referee_attacks`):

* reconstruction (`OutputKind.Z_HAT`): RMSE and MAE of ẑ on the genuine filled cells
  against the true z-scores (`shared.zscores.zscore`). The baselines are the naive
  estimate ẑ = z′ (the disguised value itself, when the releases are passed; its RMSE is about
  √E[σ²] = σ_max/√3) and the know-nothing estimate ẑ = 0 (RMSE ≈ 1, the unit variance of
  z-scores).
* fake detection (`OutputKind.GENUINE_SCORE`): ROC AUC of genuine against fake over all filled
  cells pooled (baseline 0.5), its mean over users (which ignores between-user differences in
  the genuine fraction), and, after Bilge §3.1.1, how often taking each user's g top-scored
  cells recovers her exact genuine list, and the precision of those g cells (baseline g/f).
"""

from __future__ import annotations

from collections.abc import Mapping

import numba
import numpy as np

from privrec.adversary.attacks.base import AttackOutput
from privrec.shared.mechanisms.base import Payload, SparsePayload
from privrec.shared.metrics import rmse, roc_auc
from privrec.shared.types import FloatArray, IntArray
from privrec.shared.zscore_rows import zscores_by_row
from privrec.sim.referee_cells import (
    SharedCells,
    TruthProfiles,
    find_cells,
    shared_cells,
    shared_users,
)


def score_reconstruction(
    output: AttackOutput, truth: TruthProfiles, releases: Mapping[str, Payload] | None
) -> dict[str, float]:
    """RMSE and MAE of ẑ on the genuine cells it covers, beside ẑ = 0 and (with `releases`)
    the naive ẑ = z′; every user's cells in one pass per chunk (`referee_cells`)."""
    est, true, naive = [], [], []
    n_true = n_users = 0
    for users in shared_users(output, truth):
        cells = shared_cells(output, truth, users)
        z = zscores_by_row(cells.true_lens, cells.true_ratings)
        n_true += cells.true_items.size
        est.append(cells.est_values[cells.hit_est])
        true.append(z[cells.true_hit])
        hit_users = cells.true_user[cells.true_hit]  # non-decreasing
        holders = np.unique(hit_users)
        n_users += holders.size
        if releases is not None:
            naive.append(_released_at(releases, cells, hit_users, holders))
    if not n_users:
        raise ValueError(f"attack {output.attack!r}: no estimate falls on a genuine cell")
    return reconstruction_metrics(
        np.concatenate(est),
        np.concatenate(true),
        np.concatenate(naive) if releases is not None else None,
        n_users,
        n_true,
    )


def reconstruction_metrics(
    e: FloatArray, t: FloatArray, naive: FloatArray | None, n_users: int, n_true: int
) -> dict[str, float]:
    """The figures of a reconstruction from the estimates `e` and true z-scores `t` on the
    covered genuine cells (and the naive estimates there, if any), over `n_users` users with
    such a cell and `n_true` genuine cells in all."""
    out = {
        "rmse_z": rmse(e, t),
        "mae_z": float(np.mean(np.abs(e - t))),
        "rmse_z_zero": rmse(np.zeros_like(t), t),
        "n_cells": float(t.size),
        "n_users": float(n_users),
        "coverage": t.size / max(n_true, 1),
    }
    if naive is not None:
        out["rmse_z_naive"] = rmse(naive, t)
        out["mae_z_naive"] = float(np.mean(np.abs(naive - t)))
        out["rmse_reduction"] = 1.0 - out["rmse_z"] / out["rmse_z_naive"]
    return out


def _released_at(
    releases: Mapping[str, Payload], cells: SharedCells, hit_users: IntArray, holders: IntArray
) -> FloatArray:
    """The disguised value z′ each user released at her true cells with a hit (the naive
    estimate), in the order of those cells (`hit_users`: each one's user; `holders`: those
    users, once each, increasing).

    Raises:
        ValueError: for the first user (in order) with a hit whose release is not a
            `SparsePayload` or does not cover her genuine cells.
    """
    parts: list[SparsePayload] = []
    for i in holders.tolist():
        rel = releases.get(cells.users[i])
        if not isinstance(rel, SparsePayload):
            break  # refused below, unless an earlier user's release falls short
        parts.append(rel)
    held = holders[: len(parts)]
    rel_rows = np.repeat(held, [p.indices.size for p in parts])
    rel_items = np.concatenate([p.indices for p in parts]) if parts else np.zeros(0, np.int64)
    rows, items = hit_users, cells.true_items[cells.true_hit]
    asked = rows < (holders[len(parts)] if len(parts) < holders.size else len(cells.users))
    found, at = find_cells(rel_rows, rel_items.astype(np.int64), rows[asked], items[asked])
    if not found.all():
        user = cells.users[int(rows[asked][np.argmin(found)])]
        raise ValueError(f"releases[{user!r}] does not cover the user's genuine cells")
    if len(parts) < holders.size:
        user = cells.users[int(holders[len(parts)])]
        raise ValueError(f"releases[{user!r}] must be the user's SparsePayload")
    values = [np.asarray(p.values, dtype=np.float64) for p in parts]
    return np.concatenate(values)[at] if values else np.zeros(0)


def score_detection(output: AttackOutput, truth: TruthProfiles) -> dict[str, float]:
    """Genuine-vs-fake scores against the truth: the pooled AUC, each user's AUC, and how often
    a user's g best scores are her g genuine cells (over users with both kinds of cell). The
    per-user figures come from one compiled pass over all users (`_per_user_ranks`), equal to
    `roc_auc` and a stable sort per user bit for bit, and are summed in user order."""
    labels, scores, lens = [], [], []
    for users in shared_users(output, truth):
        cells = shared_cells(output, truth, users)
        labels.append(cells.est_true)
        scores.append(cells.est_values)
        lens.append(cells.est_lens)
    if not labels:
        raise ValueError(f"attack {output.attack!r}: no user in common with the truth")
    lab, sc = np.concatenate(labels), np.concatenate(scores)
    sizes = np.concatenate(lens)
    indptr = np.concatenate([[0], np.cumsum(sizes)])
    genuine = np.bincount(np.repeat(np.arange(sizes.size), sizes)[lab], minlength=sizes.size)
    rank_sum, hits = np.zeros(sizes.size), np.zeros(sizes.size, dtype=np.int64)
    _per_user_ranks(lab, np.asarray(sc, dtype=np.float64), indptr, genuine, rank_sum, hits)
    mixed = (genuine > 0) & (genuine < sizes)
    user_aucs, exact, prec, chance = [], 0.0, 0.0, 0.0
    for r, h, g, size in zip(
        rank_sum[mixed].tolist(),
        hits[mixed].tolist(),
        genuine[mixed].tolist(),
        sizes[mixed].tolist(),
        strict=True,
    ):
        user_aucs.append((r - g * (g + 1) / 2) / (g * (size - g)))  # `roc_auc`'s formula
        prec += h / g
        chance += g / size
        exact += float(h == g)
    n_users = len(user_aucs)
    out = {
        "auc": roc_auc(lab, sc),
        "auc_baseline": 0.5,
        "auc_per_user_mean": float(np.mean(user_aucs)) if user_aucs else float("nan"),
        "n_genuine": float(lab.sum()),
        "n_fake": float((~lab).sum()),
    }
    if n_users:
        out |= {
            "top_g_precision": prec / n_users,
            "top_g_precision_chance": chance / n_users,
            "exact_list_rate": exact / n_users,
        }
    return out


@numba.njit(cache=True)
def _per_user_ranks(
    labels: np.ndarray,
    scores: np.ndarray,
    indptr: np.ndarray,
    g: np.ndarray,
    rank_sum: np.ndarray,
    hits: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """Per user i (entries ``indptr[i]:indptr[i+1]``, `g[i]` of them labelled true), two sums.

    * `rank_sum[i]`, the sum of the true entries' ranks among her scores (1-based, ascending,
      ties given their average rank: the Mann–Whitney statistic of `roc_auc`). Ranks are
      half-integers, so the sum is exact in any order of addition; NaN if a score is NaN,
      as `roc_auc` gives;
    * `hits[i]`, how many of her `g[i]` highest scores are true (equal scores in entry order:
      a stable sort of −score)."""
    for i in range(indptr.size - 1):
        lo, n = indptr[i], indptr[i + 1] - indptr[i]
        s = scores[lo : lo + n]
        order = np.argsort(s, kind="mergesort")
        total = 0.0
        a = 0
        while a < n:  # a run of equal scores: sorted positions a..b-1, ranks a+1..b
            b = a + 1
            while b < n and s[order[b]] == s[order[a]]:
                b += 1
            for t in range(a, b):
                if labels[lo + order[t]]:
                    total += (a + b + 1) / 2.0
            a = b
        rank_sum[i] = np.nan if n and np.isnan(s[order[n - 1]]) else total  # NaN sorts last
        best = np.argsort(-s, kind="mergesort")
        h = 0
        for t in range(g[i]):
            if labels[lo + best[t]]:
                h += 1
        hits[i] = h


__all__ = ["reconstruction_metrics", "score_detection", "score_reconstruction"]
