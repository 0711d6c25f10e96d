"""The referee's scoring of attack outputs against the truth only it holds.

Attacks (`adversary.attacks`) see only what the server observed. Here the referee compares their
per-user estimates with each user's true profile, the exact ratings she z-scored and released
(Bilge Procedure 1), and reports each metric beside the baseline an attacker gets for free, so
that a report shows what the attack adds:

* reconstruction (`AttackOutput.kind == "z_hat"`): RMSE and MAE of ẑ on the genuine filled cells
  against the true z-scores (`shared.zscores.zscore`). The baselines are the naive
  estimate ẑ = z′ (the disguised value itself, when the releases are passed; its RMSE is about
  √E[σ²] = σ_max/√3) and the know-nothing estimate ẑ = 0 (RMSE ≈ 1, the unit variance of
  z-scores).
* fake detection (`kind == "genuine_score"`): ROC AUC of genuine against fake over all filled
  cells pooled (baseline 0.5), its mean over users (which ignores between-user differences in
  the genuine fraction), and, after Bilge §3.1.1, how often taking each user's g top-scored
  cells recovers her exact genuine list, and the precision of those g cells (baseline g/f).
* rating reconstruction (`kind == "rating_hat"`, Xin & Jaakkola's second-order releases,
  `adversary.attacks.second_order`): on each user's truly rated items, RMSE and MAE of r̂ against
  her rating, beside the free baseline r̂ = µ, the public item means. µ is recomputed HERE from
  the public users' openly shared ratings (`public`, i.e. `Observations.public`) with the
  server's own estimator (`completion.public_item_means`), not taken from the attack: the
  baseline must not depend on what the attack reports, and µ is the same m-vector for every
  user, so it does not belong in a per-user estimate. Also: sign accuracy, the fraction of
  rated cells with sign(r̂ − µ) = sign(r − µ) (sign(0) := +1, as PMC), beside a coin (1/2)
  and the µ baseline's constant "+"; the same maximised over one global sign flip per user
  ("up to global sign", the leakage the paper states for PMC), beside its chance level
  E[max(X, n − X)]/n, X ~ Bin(n, 1/2), and the µ baseline's max(share +, share −); and
  `rmse_best_global_sign`, the RMSE when for each user the better of r̂ and its mirror
  2µ − r̂ is kept (what the attack would reach if it learned that one bit; an oracle figure).
  The ``*_permuted`` figures score each user's truth against ANOTHER user's estimate (the next
  in id order): the level an attack reaches with estimates unrelated to the user. It is the
  fair reference for the global-sign figures, which the structure all users share (item
  effects, low-rank sign patterns) lifts above the binomial chance.
* item-set reconstruction (`kind == "item_set"`, Balu's decoders on BLIP/JLT,
  `adversary.attacks.balu_*`): the truth is the user's item set P (every item she released,
  whatever the rating). Items are ranked by score, ties in a random order (seeded by
  ("referee", "item-set ties", user id), so the same output always scores the same), and P̂ is
  the `set_sizes[user]` = ĉ top-ranked items (Balu §3.5.2). Ties must not go by item index:
  dataset ids carry structure (ML-100K's low ids are the popular films), and BLIP's single
  decoder scores take few distinct values, so an index rule would hand it a popularity prior.
  Per user: the set cosine (3.36) cos(P, P̂) = |P ∩ P̂|/√(|P|·|P̂|) (0 when P̂ is empty);
  reported as its mean and its 10 % and 90 % quantiles over users (numpy's linear
  interpolation), beside `cosine_chance`, the mean
  expected cosine of ĉ items drawn at random, √(|P|·ĉ)/N. The item-presence test (§3.5.3):
  mAP@10 with the thesis's definition (3.37), the mean over users of (1/R)·Σ_{r=1}^{R}
  precision(r), R = 10, precision(r) = |P ∩ top r|/r (unranked ranks count as misses), beside
  `map_at_10_chance`, the mean of |P|/N; precision@10; and `presence_auc`, the mean over users
  of the ROC AUC of the scores for "item j ∈ P" over all N items (items the attack did not
  score tie below every scored one), 0.5 for a blind guess. Also the mean ĉ, the mean |P| and
  the mean |ĉ − |P||/|P| (how far off the size estimate is).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Iterator, Mapping, Sequence

import numba
import numpy as np
import scipy.stats

from privrec.adversary.attacks.base import AttackOutput
from privrec.adversary.knowledge import AdversaryKnowledge
from privrec.shared.csr import row_positions
from privrec.shared.data.dataset import RatingData
from privrec.shared.mechanisms.base import Payload, SparsePayload
from privrec.shared.mechanisms.completion import public_item_means, public_ratings_matrix
from privrec.shared.metrics import rmse, roc_auc
from privrec.shared.run_config import PublicRunConfig
from privrec.shared.seeding import rng_for
from privrec.shared.types import FloatArray, IntArray
from privrec.shared.zscore_rows import zscores_by_row
from privrec.sim.referee_cells import (
    SharedCells,
    TruthProfiles,
    find_cells,
    shared_cells,
    shared_users,
)
from privrec.sim.referee_inference import (
    score_bits,
    score_denormalised,
    score_items,
    score_membership,
    score_signs,
)
from privrec.sim.referee_itemset import score_item_set_vectorised


class RowTruth(Mapping[str, tuple[IntArray, FloatArray]]):
    """The truth of a one-tier run: wire user id (`shared.population.user_id_of`, the dataset's
    own id) → (items, ratings) of her row of `data`, found by id on access, so a million
    users' truth is the rating matrix itself and no Python object per user. The users in
    `exclude` (the auxiliary users) are left out."""

    def __init__(self, data: RatingData, exclude: Iterable[str] = ()) -> None:
        self._data = data
        ids = np.asarray(data.user_ids, dtype=np.int64)
        self._order = np.argsort(ids, kind="stable")
        self._sorted = ids[self._order]
        self._exclude: frozenset[str] = frozenset()
        self._exclude = frozenset(u for u in exclude if self._row(u) is not None)

    def _row(self, user_id: object) -> int | None:
        if not isinstance(user_id, str) or user_id in self._exclude:
            return None
        try:
            key = int(user_id)
        except ValueError:
            return None
        pos = int(self._sorted.searchsorted(key))
        if str(key) != user_id or pos == self._sorted.size or self._sorted[pos] != key:
            return None
        return int(self._order[pos])

    def _rows(self, user_ids: Sequence[str]) -> IntArray:
        """The rows of `user_ids`, found in one vectorised search (KeyError naming the first
        user not in the truth)."""
        try:
            keys = np.array([int(u) for u in user_ids], dtype=np.int64)
        except ValueError:
            keys = None
        if keys is not None and self._sorted.size:
            pos = np.minimum(self._sorted.searchsorted(keys), self._sorted.size - 1)
            if (
                np.array_equal(self._sorted[pos], keys)
                and all(str(k) == u for k, u in zip(keys.tolist(), user_ids, strict=True))
                and not any(u in self._exclude for u in user_ids)
            ):
                return np.asarray(self._order[pos], dtype=np.int64)
        for u in user_ids:
            if self._row(u) is None:
                raise KeyError(u)
        return np.zeros(0, dtype=np.int64)  # only an empty request gets here

    def take(self, user_ids: Sequence[str]) -> tuple[IntArray, IntArray, FloatArray]:
        """(profile sizes, items as int64, ratings as float64) of `user_ids`, concatenated in
        that order, in one pass (KeyError for a user not in the truth)."""
        rows = self._rows(user_ids)
        matrix = self._data.ratings
        lens, positions = row_positions(matrix.indptr, rows)
        return (
            lens,
            matrix.indices[positions].astype(np.int64, copy=False),
            matrix.data[positions].astype(np.float64, copy=False),
        )

    def __getitem__(self, user_id: str) -> tuple[IntArray, FloatArray]:
        row = self._row(user_id)
        if row is None:
            raise KeyError(user_id)
        items, ratings = self._data.user_row(row)
        return items, ratings

    def __contains__(self, user_id: object) -> bool:
        return self._row(user_id) is not None

    def __iter__(self) -> Iterator[str]:
        for u in self._data.user_ids.tolist():
            if str(u) not in self._exclude:
                yield str(u)

    def __len__(self) -> int:
        return self._data.n_users - len(self._exclude)


def truth_from_rating_data(data: RatingData) -> RowTruth:
    """Truth keyed by wire user id (`shared.population.user_id_of`: the dataset's own id)."""
    return RowTruth(data)


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


def _score_detection(output: AttackOutput, truth: TruthProfiles) -> dict[str, float]:
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
    """Per user i (entries ``indptr[i]:indptr[i+1]``, `g[i]` of them labelled true):

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


def _sign(a: FloatArray) -> FloatArray:
    return np.where(a >= 0.0, 1.0, -1.0)


@functools.cache
def _max_flip_chance(n: int) -> float:
    """E[max(X, n − X)] for X ~ Bin(n, 1/2): agreements of a coin-sign vector after the flip."""
    x = np.arange(n + 1)
    return float(np.sum(np.maximum(x, n - x) * scipy.stats.binom.pmf(x, n, 0.5)))


max_flip_chance = _max_flip_chance
"""E[max(X, n − X)] for X ~ Bin(n, 1/2), an expected count of agreements (public name, for
`sim.referee_inference`; divide by the cells for an accuracy)."""

_Cells = tuple[IntArray, FloatArray, IntArray, FloatArray]
"""(estimate indices, estimate values, true items sorted, their true ratings)."""


def _rating_metrics(cells: list[_Cells], mu: FloatArray) -> dict[str, float]:
    """RMSE, MAE and sign metrics of r̂ on the true cells the estimates cover (pooled)."""
    err, err_mu, err_best = [], [], []
    agree = agree_mu = agree_g = agree_g_mu = chance_g = 0.0
    n_true = n_users = 0
    for idx, val, items, ratings in cells:
        n_true += items.size
        hit = np.isin(items, idx, assume_unique=True)
        g = int(hit.sum())
        if not g:
            continue
        n_users += 1
        y, m_j = ratings[hit], mu[items[hit]]
        r_hat = val[np.searchsorted(idx, items[hit])]
        e = r_hat - y
        e_mirror = (2.0 * m_j - r_hat) - y
        err.append(e)
        err_mu.append(m_j - y)
        err_best.append(e if e @ e <= e_mirror @ e_mirror else e_mirror)
        true_sign = _sign(y - m_j)
        a = float(np.sum(_sign(r_hat - m_j) == true_sign))
        plus = float(np.sum(true_sign > 0))
        agree += a
        agree_mu += plus
        agree_g += max(a, g - a)
        agree_g_mu += max(plus, g - plus)
        chance_g += _max_flip_chance(g)
    if not err:
        raise ValueError("no estimate falls on a rated cell")
    e, e_mu, e_best = np.concatenate(err), np.concatenate(err_mu), np.concatenate(err_best)
    n = float(e.size)
    return {
        "rmse": float(np.sqrt(np.mean(e**2))),
        "mae": float(np.mean(np.abs(e))),
        "rmse_mu": float(np.sqrt(np.mean(e_mu**2))),
        "mae_mu": float(np.mean(np.abs(e_mu))),
        "rmse_best_global_sign": float(np.sqrt(np.mean(e_best**2))),
        "sign_accuracy": agree / n,
        "sign_accuracy_mu": agree_mu / n,
        "sign_accuracy_chance": 0.5,
        "sign_accuracy_global": agree_g / n,
        "sign_accuracy_global_mu": agree_g_mu / n,
        "sign_accuracy_global_chance": chance_g / n,
        "n_cells": n,
        "n_users": float(n_users),
        "coverage": n / max(n_true, 1),
    }


def _score_rating_hat(
    output: AttackOutput, truth: TruthProfiles, public: Mapping[str, Payload] | None
) -> dict[str, float]:
    if not public:
        raise ValueError(
            f"scoring {output.attack!r} (kind 'rating_hat') needs `public`, the "
            "public users' shared ratings (Observations.public), for the µ "
            "baseline and the signs"
        )
    mu = public_item_means(public_ratings_matrix(public))
    cells: list[_Cells] = []
    for uid, idx, val, items, ratings in _pairs(output, truth):
        if items.size and (items[0] < 0 or items[-1] >= mu.size):
            raise ValueError(f"truth[{uid!r}] has an item outside [0, n_items = {mu.size})")
        cells.append((idx, val, items, ratings))
    try:
        out = _rating_metrics(cells, mu)
    except ValueError as exc:
        raise ValueError(f"attack {output.attack!r}: {exc}") from None
    out["rmse_reduction"] = (
        1.0 - out["rmse"] / out["rmse_mu"] if out["rmse_mu"] > 0 else float("nan")
    )
    if len(cells) > 1:
        # Each user's truth against the NEXT user's estimate: what the attack scores when its
        # output carries nothing about the user. Unlike the binomial chance, it keeps the
        # structure shared by all users (item effects, a low-rank sign pattern that one global
        # flip can align with anybody's), so it is the fair reference for the "global" figures.
        shifted = [
            (cells[(u + 1) % len(cells)][0], cells[(u + 1) % len(cells)][1], items, ratings)
            for u, (_, _, items, ratings) in enumerate(cells)
        ]
        try:
            perm = _rating_metrics(shifted, mu)
        except ValueError:
            perm = {}
        for key in ("rmse", "rmse_best_global_sign", "sign_accuracy", "sign_accuracy_global"):
            if key in perm:
                out[f"{key}_permuted"] = perm[key]
    return out


@dataclasses.dataclass(frozen=True)
class Headline:
    """One headline figure of an attack's scores, with what a reader compares it to.

    The report draws each headline on its own axis (`sim.figures.attack_figure`): the attack's
    value beside each reference, so a metric is never drawn on the scale of a count.

    Attributes:
        metric: the key in the scores (e.g. ``"rmse_z"``).
        label: the axis label, what the number is (e.g. "RMSE of ẑ on genuine cells").
        better: "lower" or "higher": which way the attack succeeds.
        references: (key, label) of the free baselines and chance levels scored beside it,
            e.g. ``("rmse_z_naive", "naive ẑ = z′")``; keys missing from a run's scores are
            left out of its figure.
        unit_interval: the metric is a probability or rate in [0, 1] (drawn on [0, 1]).
    """

    metric: str
    label: str
    better: str
    references: tuple[tuple[str, str], ...] = ()
    unit_interval: bool = False


HEADLINES: dict[str, tuple[Headline, ...]] = {
    "z_hat": (
        Headline(
            "rmse_z",
            "RMSE of ẑ on genuine cells",
            "lower",
            (("rmse_z_naive", "naive ẑ = z′"), ("rmse_z_zero", "know-nothing ẑ = 0")),
        ),
        Headline("mae_z", "MAE of ẑ on genuine cells", "lower", (("mae_z_naive", "naive ẑ = z′"),)),
    ),
    "genuine_score": (
        Headline(
            "auc", "ROC AUC, genuine vs fake cells", "higher", (("auc_baseline", "chance"),), True
        ),
        Headline(
            "top_g_precision",
            "precision of each user's top-g cells",
            "higher",
            (("top_g_precision_chance", "chance g/f"),),
            True,
        ),
        Headline("exact_list_rate", "users whose genuine list is exact", "higher", (), True),
    ),
    "rating_hat": (
        Headline(
            "rmse",
            "RMSE of r̂ on rated items",
            "lower",
            (("rmse_mu", "public item means µ"), ("rmse_permuted", "another user's r̂")),
        ),
        Headline(
            "sign_accuracy",
            "sign accuracy of r̂ − µ",
            "higher",
            (("sign_accuracy_mu", "µ's constant +"), ("sign_accuracy_chance", "coin")),
            True,
        ),
        Headline(
            "sign_accuracy_global",
            "sign accuracy up to one global sign",
            "higher",
            (
                ("sign_accuracy_global_permuted", "another user's r̂"),
                ("sign_accuracy_global_chance", "binomial chance"),
            ),
            True,
        ),
    ),
    "item_hat": (
        Headline(
            "precision_at_10",
            "precision of the top 10 inferred items",
            "higher",
            (
                ("precision_at_10_popularity", "10 most popular items"),
                ("precision_chance", "chance: unknown items at random"),
            ),
            True,
        ),
        Headline(
            "recall_at_10",
            "recall of her unknown items in the top 10",
            "higher",
            (("recall_at_10_popularity", "10 most popular items"),),
            True,
        ),
        Headline(
            "precision_inferred",
            "precision of every inferred item",
            "higher",
            (
                ("precision_inferred_popularity", "as many popular items"),
                ("precision_chance", "chance: unknown items at random"),
            ),
            True,
        ),
    ),
    "item_set": (
        Headline(
            "cosine_mean",
            "set cosine of P̂ and P (Balu 3.36)",
            "higher",
            (("cosine_chance", "ĉ items at random"),),
            True,
        ),
        Headline(
            "map_at_10",
            "mAP@10 of item presence (Balu 3.37)",
            "higher",
            (("map_at_10_chance", "chance |P|/N"),),
            True,
        ),
    ),
}
"""The headline figures of each output kind, declared beside its scoring rule. A new kind adds
its entry here; a kind without one is drawn by the report's fallback (every non-count metric
beside the `<metric>_<naive|baseline|chance|…>` keys that share its name)."""


def _ranked(indices: IntArray, values: FloatArray, user_id: str) -> IntArray:
    """Items by decreasing score, ties in a random order seeded by the user id."""
    tie = rng_for(0, "referee", "item-set ties", user_id).permutation(indices.size)
    ranked: IntArray = indices[np.lexsort((tie, -values))]
    return ranked


def _presence_auc(idx: IntArray, val: FloatArray, items: IntArray, n_items: int) -> float:
    """ROC AUC of the scores for "j ∈ P" over all `n_items` items (ties count one half; items
    without a score tie below every scored one). NaN when P is empty or everything."""
    if items.size in (0, n_items):
        return float("nan")
    scores = np.full(n_items, -np.inf)
    scores[idx] = val
    if np.isneginf(scores).any():  # rank the unscored items just below the lowest score
        low = float(val.min()) if val.size else 0.0
        scores[np.isneginf(scores)] = low - 1.0
    labels = np.zeros(n_items, dtype=bool)
    labels[items] = True
    return roc_auc(labels, scores)


def _item_set_user(
    output: AttackOutput, uid: str, idx: IntArray, val: FloatArray, items: IntArray, n: int
) -> tuple[float, float, float, float, float, float, float, float, float] | None:
    """One user's item-set figures (None: an empty profile): cosine, chance, AP@10, P@10,
    map chance, presence AUC, ĉ, |P|, size error."""
    r = 10
    ranked = _ranked(idx, val, uid)
    size = min(output.set_sizes[uid], ranked.size)
    hits = np.isin(ranked, items, assume_unique=True)
    c = items.size
    if c == 0:
        return None
    top = np.zeros(r)
    top[: min(r, hits.size)] = hits[:r]
    return (
        float(hits[:size].sum()) / np.sqrt(c * size) if size else 0.0,
        np.sqrt(c * output.set_sizes[uid]) / n,
        float(np.mean(np.cumsum(top) / np.arange(1, r + 1))),
        float(top.mean()),
        c / n,
        _presence_auc(idx, val, items, n),
        float(output.set_sizes[uid]),
        float(c),
        abs(output.set_sizes[uid] - c) / c,
    )


def _score_item_set(
    output: AttackOutput, truth: TruthProfiles, n_items: int | None, method: str = "vectorised"
) -> dict[str, float]:
    """The item-set figures (module docstring). `method` "vectorised" (with `n_items`;
    `sim.referee_itemset`, equal to the reference up to float summation order) or
    "reference" (one user at a time)."""
    if method not in ("vectorised", "reference"):
        raise ValueError(f"`method` must be 'vectorised' or 'reference', got {method!r}")
    if method == "vectorised" and n_items is not None:
        rows = score_item_set_vectorised(
            output,
            truth,
            n_items,
            lambda uid, idx, val, items, n: _item_set_user(output, uid, idx, val, items, n),
        )
    else:
        rows = []
        for uid, idx, val, items, _ in _pairs(output, truth):
            if uid not in output.set_sizes:
                raise ValueError(f"attack {output.attack!r}: no set size for user {uid!r}")
            n = n_items if n_items is not None else int(max(idx.max(initial=-1), items.max()) + 1)
            row = _item_set_user(output, uid, idx, val, items, n)
            if row is not None:
                rows.append(row)
    cos, chance, ap, p10, map_chance, auc, c_hat, c_true, size_err = (
        [row[k] for row in rows] for k in range(9)
    )
    if not cos:
        raise ValueError(f"attack {output.attack!r}: no user in common with the truth")
    cosine = np.array(cos)
    return {
        "cosine_mean": float(cosine.mean()),
        "cosine_q10": float(np.quantile(cosine, 0.1)),
        "cosine_q90": float(np.quantile(cosine, 0.9)),
        "cosine_chance": float(np.mean(chance)),
        "map_at_10": float(np.mean(ap)),
        "map_at_10_chance": float(np.mean(map_chance)),
        "precision_at_10": float(np.mean(p10)),
        "presence_auc": float(np.nanmean(auc)),
        "c_hat_mean": float(np.mean(c_hat)),
        "c_true_mean": float(np.mean(c_true)),
        "size_rel_error_mean": float(np.mean(size_err)),
        "n_users": float(cosine.size),
    }


def score_attack(
    name: str,
    output: AttackOutput,
    truth: TruthProfiles,
    *,
    releases: Mapping[str, Payload] | None = None,
    public: Mapping[str, Payload] | None = None,
    n_items: int | None = None,
    run_config: PublicRunConfig | None = None,
    knowledge: AdversaryKnowledge | None = None,
    members: Mapping[str, bool] | None = None,
) -> dict[str, float]:
    """Score one attack's output against the truth.

    Args:
        name: the attack's registry name; must match `output.attack`.
        output: the attack's fitted output.
        truth: user id → (item indices, true ratings) of the profile each user released;
            users absent from it are skipped.
        releases: the observed profile releases (`Observations.profiles`); needed for the naive
            baseline of a reconstruction.
        public: the public users' openly shared ratings (`Observations.public`); required for
            kind "rating_hat" (its µ baseline and signs), unused otherwise.
        n_items: N, the catalogue size (kind "item_set": chance levels and the presence AUC
            over all items); when None, the largest item index seen + 1.
        run_config: the public run config (kinds "bit_hat" and "item_hat").
        knowledge: the adversary's stated side knowledge (kinds "item_hat", "membership").
        members: membership candidate label → True when in the run (kind "membership").

    Returns:
        metric name → value (see the module docstring).

    Raises:
        ValueError: the output is of another attack or kind, shares no cell with the truth, or
            is a "rating_hat" output scored without `public`.
    """
    if output.attack != name:
        raise ValueError(f"output is of attack {output.attack!r}, not {name!r}")
    if output.kind == "z_hat":
        return _score_reconstruction(output, truth, releases)
    if output.kind == "genuine_score":
        return _score_detection(output, truth)
    if output.kind == "rating_hat":
        return _score_rating_hat(output, truth, public)
    if output.kind == "item_set":
        if n_items is None and run_config is not None:
            n_items = run_config.n_items
        return _score_item_set(output, truth, n_items)
    # the inference attacks (`sim.referee_inference`)
    if output.kind == "sign_hat":
        return score_signs(output, truth, public)
    if output.kind == "denormalised_hat":
        return score_denormalised(output, truth)
    if output.kind == "bit_hat":
        if releases is None or run_config is None:
            raise ValueError(f"scoring {name!r} (kind 'bit_hat') needs releases and run_config")
        return score_bits(output, truth, releases, run_config)
    if output.kind == "item_hat":
        if knowledge is None or run_config is None:
            raise ValueError(f"scoring {name!r} (kind 'item_hat') needs knowledge and run_config")
        return score_items(output, truth, knowledge, run_config.n_items)
    if output.kind == "membership":
        if knowledge is None or members is None:
            raise ValueError(f"scoring {name!r} (kind 'membership') needs knowledge and members")
        return score_membership(output, knowledge, members)
    raise ValueError(f"no scoring rule for output kind {output.kind!r} of {name!r}")


__all__ = [
    "HEADLINES",
    "Headline",
    "TruthProfiles",
    "reconstruction_metrics",
    "score_attack",
    "truth_from_rating_data",
]
