"""The privacy half of the report: the mechanism's statement, every user's composed ε and
the model's output-privacy claim composed per training user (the `privacy` block).

`privacy_block` composes each private user's stored releases in a `PrivacyLedger` at
`DELTA`; `model_privacy_block` charges the model's fit and answer events to each training
user (`_per_user_charges`) and composes only what the median and the max need
(`_per_user_summary`); `epsilon_histogram` keeps the per-user ε compactly for `epsilon.png`.
"""

from __future__ import annotations

import itertools
import math
import statistics
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from privrec.server.models import OutputPrivacy, make_model
from privrec.server.store import Store
from privrec.shared.accounting import PrivacyLedger
from privrec.shared.accounting.ledger import weighted_median
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.protocol import fold_of
from privrec.shared.run_config import PublicRunConfig
from privrec.shared.serde import payload_from_proto

DELTA = 1e-6  # δ at which per-user composed ε is stated
HISTOGRAM_BINS = 20  # at most this many bars in a per-user ε histogram


def privacy_block(run_config: PublicRunConfig, out_dir: Path) -> dict[str, Any]:
    """The mechanism's statement and the per-user composition of every stored release of the
    private tier. Public-tier users share their ratings openly: they are counted apart, not
    composed (their ε would be infinite by construction).

    Users who stored the same number of releases of each purpose have the same ledger: each
    distinct ledger is composed once and stands for its users (`Store.release_count_groups`,
    `PrivacyLedger.summary(weights=...)`), the summary being the one of every user alone.
    """
    mech = run_config.mechanism()
    statement = mech.privacy()
    ledger = PrivacyLedger()
    purposes = [p for p in pb.Purpose.values() if p != pb.PURPOSE_UNSPECIFIED]
    names = [pb.Purpose.Name(p) for p in purposes]
    store = Store(out_dir / "server.sqlite", read_only=True)
    try:
        by_tier = store.tier_counts()
        groups = store.release_count_groups(purposes, pb.TIER_PUBLIC)
    finally:
        store.close()
    event = mech.event()  # one event object for every user: the ledger flattens it once
    weights: dict[str, int] = {}
    for vector, users in groups:
        key = "/".join(map(str, vector))  # the ledger of `users` users
        for name, count in zip(names, vector, strict=True):
            if count:
                ledger.record(key, event, count=count, purpose=name)
        weights[key] = users
    n_public = by_tier.get(pb.TIER_PUBLIC, 0)
    tiers_block: dict[str, Any] = {"private": sum(by_tier.values()) - n_public}
    if n_public:
        tiers_block["public"] = n_public
        tiers_block["public_statement"] = (
            "public-tier users share their (training) ratings "
            "openly: no privacy (Xin & Jaakkola Sec. 4)"
        )
    summary = ledger.summary(DELTA, statement, weights=weights)
    block = {
        "mechanism": mech.name,
        "public_params": mech.public_params(),
        "kind": statement.kind,
        "epsilon": statement.epsilon,
        "delta": statement.delta,
        "neighbouring": statement.neighbouring,
        "notes": statement.notes,
        "flags": list(statement.flags),
        "per_user": _with_histogram(ledger, summary, weights)
        | {"composed": _composed_groups(names, groups)},
        "tiers": tiers_block,
    }
    model = model_privacy_block(run_config, out_dir)
    return block | ({"model": model} if model else {})


def _composed_counts(counts: dict[str, dict[str, int]]) -> dict[str, dict[str, float]]:
    """What each user's ε composes, per kind of release: ``{"profile": {"median": 1, "max":
    1}, "query": {…}}`` over the users who made that kind of release."""
    return {
        purpose: {
            "median": float(statistics.median(by_user.values())),
            "max": float(max(by_user.values())),
            "users": float(len(by_user)),
        }
        for purpose, by_user in sorted(counts.items())
    }


def _composed_groups(
    names: list[str], groups: list[tuple[tuple[int, ...], int]]
) -> dict[str, dict[str, float]]:
    """`_composed_counts` of the users' release counts given as `groups` (each distinct
    vector of release counts per purpose, and its number of users)."""
    out = {}
    for i, name in sorted(enumerate(names), key=lambda item: item[1]):
        made = [(vector[i], users) for vector, users in groups if vector[i]]
        if made:
            counts, users = [c for c, _ in made], [u for _, u in made]
            out[name.removeprefix("PURPOSE_").lower()] = {
                "median": float(weighted_median(counts, users)),
                "max": float(max(counts)),
                "users": float(sum(users)),
            }
    return dict(sorted(out.items()))


def model_privacy_block(run_config: PublicRunConfig, out_dir: Path) -> dict[str, Any] | None:
    """The model's output-privacy claim (`Model.output_privacy`) composed per training user
    (every private-tier user):
    its fit event once (or once per fold state she is in, `fit_per_fold`), its answer event
    once per answered query (or, `answer_scope = "raters"`, once per predicted item she rated,
    see `_per_user_charges`); None without a claim."""
    claim = make_model(run_config.model_name, run_config.model_params).output_privacy()
    if claim is None:
        return None
    store = Store(out_dir / "server.sqlite", read_only=True)
    try:
        training_users = [u for u, t in store.tiers().items() if t != pb.TIER_PUBLIC]
        answered = sum(c for _, purpose, c in store.release_counts() if purpose == pb.PURPOSE_QUERY)
        per_user = _per_user_charges(claim, run_config, training_users, store, answered)
    finally:
        store.close()
    s = claim.statement
    return {
        "model": run_config.model_name,
        "kind": s.kind,
        "epsilon": s.epsilon,
        "delta": s.delta,
        "neighbouring": s.neighbouring,
        "notes": s.notes,
        "flags": list(s.flags),
        "answers": answered,
        "answer_scope": claim.answer_scope,
        "fit_per_fold": claim.fit_per_fold,
        "guarantee": "output privacy against other users and observers, not against the aggregator",
        "per_user": _per_user_summary(claim, [per_user[u] for u in training_users])
        | {"composed": _composed_counts(_charged(claim, per_user))},
    }


def _charged(
    claim: OutputPrivacy, per_user: dict[str, tuple[int, int]]
) -> dict[str, dict[str, int]]:
    """The model events charged to each training user, by kind ("fit", "answer")."""
    out: dict[str, dict[str, int]] = {}
    for user, (fits, answers) in per_user.items():
        if claim.fit_event is not None:
            out.setdefault("fit", {})[user] = fits
        if claim.answer_event is not None:
            out.setdefault("answer", {})[user] = answers
    return out


def epsilon_histogram(
    values: list[float], weights: list[int] | None = None
) -> dict[str, list[float] | list[int]]:
    """A compact histogram of per-user ε: ``{values, counts}`` when there are at most
    `HISTOGRAM_BINS` distinct values (exact; the common case, where users released alike),
    else ``{edges, counts}`` over `HISTOGRAM_BINS` equal bins. `weights`: how many users each
    value stands for (default one)."""
    eps = np.asarray(values, dtype=np.float64)
    w = np.ones(eps.size, np.int64) if weights is None else np.asarray(weights, np.int64)
    distinct, where = np.unique(eps, return_inverse=True)
    if distinct.size <= HISTOGRAM_BINS:
        counts = np.bincount(where.ravel(), weights=w, minlength=distinct.size)
        return {"values": distinct.tolist(), "counts": counts.astype(np.int64).tolist()}
    binned, edges = np.histogram(eps, bins=HISTOGRAM_BINS, weights=w)
    return {"edges": edges.tolist(), "counts": binned.astype(np.int64).tolist()}


def _with_histogram(
    ledger: PrivacyLedger, summary: dict[str, Any], weights: dict[str, int]
) -> dict[str, Any]:
    """The ledger summary plus the histogram of its per-user ε when it states ε (the ledger
    caches each composition: nothing is composed twice)."""
    if "per_user_epsilon" not in summary or not summary.get("users"):
        return summary
    users = ledger.users()
    eps = [ledger.epsilon(u, summary["delta"]) for u in users]
    if not all(math.isfinite(e) for e in eps):
        return summary
    return summary | {"histogram": epsilon_histogram(eps, [weights[str(u)] for u in users])}


def _record(ledger: PrivacyLedger, key: str, claim: OutputPrivacy, fits: int, answers: int) -> None:
    if claim.fit_event is not None and fits:
        ledger.record(key, claim.fit_event, count=fits, purpose="model-fit")
    if claim.answer_event is not None and answers:
        ledger.record(key, claim.answer_event, count=answers, purpose="model-answer")


def _per_user_summary(claim: OutputPrivacy, charges: list[tuple[int, int]]) -> dict[str, Any]:
    """`PrivacyLedger.summary` over the training users' (fits, answers) charges, composing
    only what the max and the median need.

    A user's composed ε grows with each of her two counts, so when the distinct (fits,
    answers) pairs form a chain (always so for one varying count) the max is the largest pair's
    ε and the median the middle pair's: two or three PLD compositions instead of one per user
    (a PNCF user can be charged thousands of predictions). Otherwise every distinct pair is
    composed. Users charged nothing count with ε = 0.
    """
    if not charges:
        return {"users": 0}
    ordered = sorted(charges)
    distinct = sorted(set(ordered))
    chain = all(a[1] <= b[1] for a, b in itertools.pairwise(distinct))
    n = len(ordered)
    needed = {ordered[-1], ordered[(n - 1) // 2], ordered[n // 2]} if chain else set(distinct)
    probe = PrivacyLedger()  # one release of each event: the summary's kind and accountant
    _record(probe, "probe", claim, 1, 1)
    if not len(probe):
        return {"users": n, "per_user_epsilon": {"max": 0.0, "median": 0.0}}
    base = probe.summary(DELTA, claim.statement)
    if base.get("kind") == "none":  # no ε to compose: the full ledger's reason is cheap
        everyone = PrivacyLedger()
        for i, (fits, answers) in enumerate(charges):
            _record(everyone, str(i), claim, fits, answers)
        return everyone.summary(DELTA, claim.statement) | {"users": n}
    ledger = PrivacyLedger()
    for fits, answers in set(distinct):
        _record(ledger, f"{fits}/{answers}", claim, fits, answers)
    recorded = set(ledger.users())

    def eps(pair: tuple[int, int], naive: bool = False) -> float:
        key = f"{pair[0]}/{pair[1]}"
        if key not in recorded:
            return 0.0
        return ledger.naive_epsilon(key, DELTA) if naive else ledger.epsilon(key, DELTA)

    composed = {pair: eps(pair) for pair in needed}
    naive = {pair: eps(pair, naive=True) for pair in distinct}
    middle = ordered[(n - 1) // 2], ordered[n // 2]
    median = (
        (composed[middle[0]] + composed[middle[1]]) / 2
        if chain
        else statistics.median(composed[p] for p in ordered)
    )
    return base | {
        "per_user_epsilon": {"max": max(composed.values()), "median": median},
        "naive_sum": {
            "max": max(naive.values()),
            "median": statistics.median(naive[p] for p in ordered),
        },
        "users": n,
    }


def _per_user_charges(
    claim: OutputPrivacy,
    run_config: PublicRunConfig,
    training_users: list[str],
    store: Store,
    answered: int,
) -> dict[str, tuple[int, int]]:
    """user → (fit events, answer events) charged to her (`OutputPrivacy` says how).

    * fits: 1, or with `fit_per_fold` the number of fold states she is in: every fold present
      among the training users but her own (`server.models.foldwise`).
    * answers: with `answer_scope = "all"` every answered query; with "raters" one per
      distinct item each query predicted (a Predict's items; a Recommend's every item absent
      from its query) that she has a stored cell at, counting only queries from other folds
      (the querier's fold is left out of her answer, `shared.protocol.fold_of`).
    """
    n_folds = run_config.n_folds  # 0 under a named split: one fit on everyone, nobody left out
    folds = {u: fold_of(u, n_folds, run_config.fold_seed) if n_folds else 0 for u in training_users}
    fits = 1
    if claim.fit_per_fold and n_folds:
        fits = max(len(set(folds.values())) - 1, 0)
    if claim.answer_scope == "all" or not training_users:
        return {u: (fits, answered) for u in training_users}
    m = run_config.n_items
    # predicted[f, i]: how many queries of fold f had item i predicted
    predicted = np.zeros((max(n_folds, 1), m))
    for row in store.transcript(methods=("Predict", "Recommend")):
        if row.method == "Predict":
            req = pb.PredictRequest.FromString(row.request)
            query, items = req.query, np.unique(np.array(req.items, dtype=np.int64))
        elif row.method == "Recommend":
            query = pb.RecommendRequest.FromString(row.request).query
            unseen = np.ones(m, dtype=bool)
            unseen[_cells(query)] = False
            items = np.flatnonzero(unseen)
        else:
            continue
        predicted[
            fold_of(query.user_id, n_folds, run_config.fold_seed) if n_folds else 0, items
        ] += 1
    index = {u: i for i, u in enumerate(training_users)}
    rows, cols = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
    for user, raw in store.releases_by_purpose(pb.PURPOSE_PROFILE):
        if user in index:
            cells = _cells(pb.Release.FromString(raw))
            rows.append(np.full(cells.size, index[user]))
            cols.append(cells)
    r, c = np.concatenate(rows), np.concatenate(cols)
    rated = sp.csr_matrix((np.ones(r.size), (r, c)), shape=(len(training_users), m))
    by_fold = np.asarray(rated @ predicted.T)  # training user × querier's fold
    return {
        user: (fits, round(float(by_fold[i].sum() - (by_fold[i, folds[user]] if n_folds else 0))))
        for user, i in index.items()
    }


def _cells(release: pb.Release) -> np.ndarray:
    """The item indices a sparse release fills (empty for a dense one)."""
    _, payload = payload_from_proto(release)
    return np.asarray(getattr(payload, "indices", np.zeros(0)), dtype=np.int64)


__all__ = [
    "DELTA",
    "HISTOGRAM_BINS",
    "epsilon_histogram",
    "model_privacy_block",
    "privacy_block",
]
