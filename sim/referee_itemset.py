"""The referee's scores of item-set reconstructions (Balu §3.5), for all users at once.

Item-set reconstruction (`OutputKind.ITEM_SET`, Balu's decoders on BLIP/JLT,
`adversary.attacks.balu_*`): the truth is the user's item set P (every item she released,
whatever the rating). Items are ranked by score, ties in a random order (seeded by ("referee",
"item-set ties", user id), so the same output always scores the same), and P̂ is the
`set_sizes[user]` = ĉ top-ranked items (Balu §3.5.2). Ties must not go by item index: dataset
ids carry structure (ML-100K's low ids are the popular films), and BLIP's single decoder scores
take few distinct values, so an index rule would hand it a popularity prior. Per user: the set
cosine (3.36) cos(P, P̂) = |P ∩ P̂|/√(|P|·|P̂|) (0 when P̂ is empty); reported as its mean and
its 10 % and 90 % quantiles over users (numpy's linear interpolation), beside `cosine_chance`,
the mean expected cosine of ĉ items drawn at random, √(|P|·ĉ)/N. The item-presence test
(§3.5.3): mAP@10 with the thesis's definition (3.37), the mean over users of (1/R)·Σ_{r=1}^{R}
precision(r), R = 10, precision(r) = |P ∩ top r|/r (unranked ranks count as misses), beside
`map_at_10_chance`, the mean of |P|/N; precision@10; and `presence_auc`, the mean over users of
the ROC AUC of the scores for "item j ∈ P" over all N items (items the attack did not score tie
below every scored one), 0.5 for a blind guess. Also the mean ĉ, the mean |P| and the mean |ĉ −
|P||/|P| (how far off the size estimate is).

`score_item_set_vectorised` computes exactly the figures of the per-user reference
(`score_item_set(..., method="reference")`): the set cosine (Balu 3.36), mAP@10 (3.37),
precision@10, the presence AUC and the size figures, with every user's items ranked by
decreasing score. The reference breaks ties of equal scores in a random order seeded by the user
id; a user whose scores hold no tie has one ranking whatever that order, so she is scored here
in one sorted pass over the concatenated outputs of all users, and so is a user whose ties all
lie where the order cannot change a figure (below the top 10 and not across the cut of P̂);
every other user goes through the reference's own per-user code (same draws, same result). The
presence AUC is the Mann–Whitney statistic from ranks: the unscored items tie below every scored
one at the average rank (U + 1)/2 (U of them), a scored item's rank is U plus its position from
the bottom, averaged over its group of equal scores. The figures agree with the reference up to
float summation order (tested to 1e-12).

Cost: one lexsort of all (user, score) pairs and a few bincounts: O(Σ|output| log) instead of a
Python loop with a generator, an n_items-wide AUC and a lexsort per user (`bench/population.py`:
370 µs per user in the reference).
"""

from __future__ import annotations

import numpy as np

from privrec.adversary.attacks.base import AttackOutput
from privrec.shared.metrics import roc_auc
from privrec.shared.seeding import rng_for
from privrec.shared.types import FloatArray, IntArray
from privrec.sim.referee_cells import TruthProfiles, estimates_of, true_profiles, user_pairs

CHUNK = 20_000
"""Users scored per vectorised pass (about 40 MB of working arrays at 100 items per user)."""
R = 10
"""mAP@R and precision@R (Balu §3.5.3: R = 10)."""

_AP_WEIGHTS = np.array([sum(1.0 / r for r in range(s, R + 1)) / R for s in range(1, R + 1)])
"""AP@R = (1/R) Σ_r (1/r) Σ_{s ≤ r} h_s = Σ_s h_s · (1/R) Σ_{r ≥ s} 1/r: the weight of a hit at
rank s."""

PerUser = tuple[float, float, float, float, float, float, float, float, float]
"""(cosine, chance, AP, P@10, map chance, AUC, ĉ, |P|, size error) of one user."""


def score_item_set_vectorised(
    output: AttackOutput, truth: TruthProfiles, n_items: int
) -> list[PerUser]:
    """Every shared user's figures (in `output.per_user` order, users with an empty profile
    left out), tie-free users vectorised, the others by the reference's per-user code
    (`_item_set_user`); `CHUNK` users at a time, so the working arrays stay O(CHUNK) whatever
    the population."""
    out: list[PerUser] = []
    users: list[str] = []
    for uid in output.per_user:
        if uid not in truth:
            continue
        if uid not in output.set_sizes:
            raise ValueError(f"attack {output.attack!r}: no set size for user {uid!r}")
        users.append(uid)
        if len(users) == CHUNK:
            out.extend(_score_chunk(output, truth, n_items, users))
            users = []
    out.extend(_score_chunk(output, truth, n_items, users))
    return out


def _score_chunk(
    output: AttackOutput,
    truth: TruthProfiles,
    n_items: int,
    users: list[str],
) -> list[PerUser]:
    """`score_item_set_vectorised` for the users `users` (all shared, all with a size)."""
    n_users = len(users)
    if n_users == 0:
        return []
    est_len, idx, val = estimates_of(output.per_user, users)
    c, true_items, _ = true_profiles(truth, users)
    sizes = [output.set_sizes[u] for u in users]
    owner = np.repeat(np.arange(n_users), est_len)
    # rank within each user by decreasing score
    order = np.lexsort((-val, owner))
    r_owner, r_idx, r_val = owner[order], idx[order], val[order]
    starts = np.zeros(n_users + 1, dtype=np.int64)
    np.cumsum(est_len, out=starts[1:])
    position = np.arange(r_idx.size) - starts[r_owner]
    set_sizes = np.array(sizes, dtype=np.int64)
    size = np.minimum(set_sizes, est_len)
    # a tie changes a figure only where it straddles the cut of P̂ (positions size − 1 and
    # size) or touches the top R (AP@R, P@R); the AUC counts ties by score, not by order
    tied = np.zeros(n_users, dtype=bool)
    same = (r_owner[1:] == r_owner[:-1]) & (r_val[1:] == r_val[:-1])
    first = position[:-1]
    same &= (first + 1 == size[r_owner[:-1]]) | (first < R)
    tied[r_owner[:-1][same]] = True
    # membership of each ranked item in the user's true set, by sorted (user, item) keys
    t_owner = np.repeat(np.arange(n_users), c)
    t_starts = np.zeros(n_users + 1, dtype=np.int64)
    np.cumsum(c, out=t_starts[1:])
    t_keys = np.sort(t_owner * n_items + true_items)
    r_keys = r_owner * n_items + r_idx
    at = np.minimum(np.searchsorted(t_keys, r_keys), max(t_keys.size - 1, 0))
    hit = (t_keys[at] == r_keys) if t_keys.size else np.zeros(r_keys.size, dtype=bool)
    hit_f = hit.astype(np.float64)
    top_hits = np.bincount(r_owner, weights=hit_f * (position < size[r_owner]), minlength=n_users)
    in_r = position < R
    ap = np.bincount(
        r_owner[in_r], weights=hit_f[in_r] * _AP_WEIGHTS[position[in_r]], minlength=n_users
    )
    p10 = np.bincount(r_owner[in_r], weights=hit_f[in_r], minlength=n_users) / R
    # presence AUC: ascending rank of a scored item = U + (est_len − position), averaged over
    # its group of equal scores (positions first..last: U + est_len − (first + last)/2)
    unscored = n_items - est_len
    new_group = np.ones(r_idx.size, dtype=bool)
    new_group[1:] = (r_owner[1:] != r_owner[:-1]) | (r_val[1:] != r_val[:-1])
    group = np.cumsum(new_group) - 1
    last = np.append(new_group[1:], True)
    middle = (position[new_group][group] + position[last][group]) / 2.0
    rank_scored = unscored[r_owner] + (est_len[r_owner] - middle)
    pos_scored = np.bincount(r_owner, weights=hit_f, minlength=n_users)
    rank_sum = np.asarray(
        np.bincount(r_owner, weights=hit_f * rank_scored, minlength=n_users), dtype=np.float64
    )
    rank_sum += (c - pos_scored) * (unscored + 1) / 2.0
    n_neg = n_items - c
    with np.errstate(divide="ignore", invalid="ignore"):
        auc = (rank_sum - c * (c + 1) / 2.0) / (c * n_neg)
    auc = np.where((c == 0) | (c == n_items), np.nan, auc)
    out: list[PerUser] = []
    for u in range(n_users):
        if c[u] == 0:
            continue
        if tied[u]:  # her own arrays, as the reference sees them
            a, b = starts[u], starts[u + 1]
            items = np.sort(true_items[t_starts[u] : t_starts[u + 1]])
            row = _item_set_user(output, users[u], idx[a:b], val[a:b], items, n_items)
            if row is not None:
                out.append(row)
            continue
        cu, su, sz = int(c[u]), int(size[u]), int(set_sizes[u])
        out.append(
            (
                float(top_hits[u]) / np.sqrt(cu * su) if su else 0.0,
                np.sqrt(cu * sz) / n_items,
                float(ap[u]),
                float(p10[u]),
                cu / n_items,
                float(auc[u]),
                float(sz),
                float(cu),
                abs(sz - cu) / cu,
            )
        )
    return out


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


def score_item_set(
    output: AttackOutput, truth: TruthProfiles, n_items: int | None, method: str = "vectorised"
) -> dict[str, float]:
    """The item-set figures (module docstring). `method` "vectorised" (with `n_items`;
    `sim.referee_itemset`, equal to the reference up to float summation order) or
    "reference" (one user at a time)."""
    if method not in ("vectorised", "reference"):
        raise ValueError(f"`method` must be 'vectorised' or 'reference', got {method!r}")
    if method == "vectorised" and n_items is not None:
        rows = score_item_set_vectorised(output, truth, n_items)
    else:
        rows = []
        for uid, idx, val, items, _ in user_pairs(output, truth):
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


__all__ = ["score_item_set", "score_item_set_vectorised"]
