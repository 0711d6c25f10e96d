"""The referee's reconstruction and detection scores gathered a chunk of users at a time
(`sim.referee_cells`), against the per-user loop they were first computed with."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from privrec.adversary.attacks.base import AttackOutput, UserEstimate, per_user_from_flat
from privrec.shared.data.dataset import RatingData
from privrec.shared.mechanisms.base import DensePayload, SparsePayload
from privrec.shared.zscores import zscore
from privrec.sim import referee_cells
from privrec.sim.referee_attacks import score_attack
from privrec.sim.referee_rpt import reconstruction_metrics
from privrec.sim.referee_truth import RowTruth

Truth = dict[str, tuple[np.ndarray, np.ndarray]]


def _reconstruction_by_user_loop(
    per_user: dict[str, UserEstimate], truth: Truth, releases: dict[str, SparsePayload]
) -> dict[str, float]:
    """The per-user loop `_score_reconstruction` was first written as: the oracle of the
    cells it gathers (the figures from them are the shared `reconstruction_metrics`)."""
    est, true, naive = [], [], []
    n_true = n_users = 0
    for uid, e in per_user.items():
        if uid not in truth:
            continue
        items, ratings = (np.asarray(a) for a in truth[uid])
        order = np.argsort(items)
        items, ratings = items[order], ratings[order].astype(np.float64)
        z = zscore(ratings).z
        n_true += items.size
        hit = np.isin(items, e.indices, assume_unique=True)
        if not hit.any():
            continue
        n_users += 1
        est.append(e.values[np.searchsorted(e.indices, items[hit])])
        true.append(z[hit])
        rel = releases[uid]
        naive.append(rel.values[np.searchsorted(rel.indices, items[hit])])
    e_, t, nv = np.concatenate(est), np.concatenate(true), np.concatenate(naive)
    return reconstruction_metrics(e_, t, nv, n_users, n_true)


def _population(seed: int, n_users: int = 600, n_items: int = 90):
    """Users with 0–40 true ratings (some with more than 8 and a few with none) whose
    releases cover their items plus fakes, estimates on a random part of each release (some
    on no true item), users only in the output, and users only in the truth."""
    rng = np.random.default_rng(seed)
    per_user: dict[str, UserEstimate] = {}
    truth: Truth = {}
    releases: dict[str, SparsePayload] = {}
    for u in range(n_users):
        uid = f"u{u:04d}"
        k = int(rng.integers(0, 41)) if u % 11 else 0
        items = rng.choice(n_items, size=k, replace=False)  # unsorted, as a dict truth may be
        ratings = rng.integers(1, 6, k).astype(float)
        extra = rng.choice(
            np.setdiff1d(np.arange(n_items), items), size=int(rng.integers(0, 20)), replace=False
        )
        cells = np.sort(np.concatenate([items, extra])).astype(np.int64)
        if u % 13 != 5:
            truth[uid] = (items, ratings)
        releases[uid] = SparsePayload(n_items, cells, rng.standard_normal(cells.size))
        if u % 17 == 3:
            continue  # in the truth, not in the output
        shown = np.sort(rng.choice(cells, size=int(rng.integers(0, cells.size + 1)), replace=False))
        if u % 19 == 4:
            shown = np.setdiff1d(shown, items)  # no estimate on a true item
        per_user[uid] = UserEstimate(shown.astype(np.int64), rng.standard_normal(shown.size))
    return per_user, truth, releases


def _output(kind: str, per_user: dict[str, UserEstimate]) -> AttackOutput:
    return AttackOutput(attack="x", kind=kind, knowledge="test", per_user=per_user)


@pytest.mark.parametrize("chunk", [7, 20_000])
@pytest.mark.parametrize("seed", [0, 1])
def test_reconstruction_scores_equal_the_per_user_loop_bit_for_bit(
    seed: int, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(referee_cells, "CHUNK", chunk)
    per_user, truth, releases = _population(seed)
    got = score_attack("x", _output("z_hat", per_user), truth, releases=releases)
    want = _reconstruction_by_user_loop(per_user, truth, releases)
    assert got == want


def test_reconstruction_from_packed_estimates_and_row_truth_equals_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The run's own types: a `RowTruth` over the rating matrix and packed estimates (users
    in id order), over several chunks."""
    monkeypatch.setattr(referee_cells, "CHUNK", 50)
    per_user, truth, releases = _population(2)
    ids = sorted(truth, key=lambda u: int(u[1:]))
    rows = [np.sort(truth[u][0]) for u in ids]
    ratings = [truth[u][1][np.argsort(truth[u][0])] for u in ids]
    indptr = np.concatenate([[0], np.cumsum([r.size for r in rows])])
    matrix = sp.csr_matrix(
        (np.concatenate(ratings), np.concatenate(rows), indptr), shape=(len(ids), 90)
    )
    data = RatingData("t", matrix, np.array([int(u[1:]) for u in ids]), np.arange(90), (1.0, 5.0))
    numeric = {str(int(u[1:])): e for u, e in sorted(per_user.items())}
    users = sorted(numeric)
    sizes = [numeric[u].indices.size for u in users]
    packed = per_user_from_flat(
        users,
        np.concatenate([[0], np.cumsum(sizes)]),
        np.concatenate([numeric[u].indices for u in users]),
        np.concatenate([numeric[u].values for u in users]),
    )
    rel = {str(int(u[1:])): r for u, r in releases.items()}
    got = score_attack("x", _output("z_hat", packed), RowTruth(data), releases=rel)
    plain_truth = {str(int(u[1:])): truth[u] for u in ids}
    assert got == _reconstruction_by_user_loop(dict(packed.items()), plain_truth, rel)


def test_a_release_that_falls_short_is_named_in_user_order() -> None:
    """The first user, in the output's order, whose release is missing, not sparse, or does
    not cover her genuine cells is the one the error names, as in the per-user loop."""
    per_user, truth, releases = _population(3, n_users=60)
    users = [u for u in per_user if u in truth and np.isin(truth[u][0], per_user[u].indices).any()]
    first, second = users[3], users[5]
    short = dict(releases)
    items = truth[first][0]
    keep = ~np.isin(short[first].indices, items[np.isin(items, per_user[first].indices)][:1])
    short[first] = SparsePayload(90, short[first].indices[keep], short[first].values[keep])
    short[second] = DensePayload(np.zeros(3))
    with pytest.raises(ValueError, match=rf"releases\['{first}'\] does not cover"):
        score_attack("x", _output("z_hat", per_user), truth, releases=short)
    short[first] = releases[first]
    with pytest.raises(
        ValueError, match=rf"releases\['{second}'\] must be the user's SparsePayload"
    ):
        score_attack("x", _output("z_hat", per_user), truth, releases=short)
    del short[second]
    with pytest.raises(ValueError, match=rf"releases\['{second}'\] must be"):
        score_attack("x", _output("z_hat", per_user), truth, releases=short)


def test_shared_cells_match_per_user_isin_with_unsorted_estimates() -> None:
    """Detection needs no order of an estimate's items: `est_true` is `np.isin` user by user
    even when they are shuffled, and each hit's estimate is the one at that item."""
    rng = np.random.default_rng(4)
    per_user, truth, _ = _population(4, n_users=80)
    shuffled = {}
    for u, e in per_user.items():
        p = rng.permutation(e.indices.size)
        shuffled[u] = UserEstimate(e.indices[p], e.values[p])
    out = _output("genuine_score", shuffled)
    users = [u for u in shuffled if u in truth]
    cells = referee_cells.shared_cells(out, truth, users)
    want_true = np.concatenate([np.isin(shuffled[u].indices, truth[u][0]) for u in users])
    assert np.array_equal(cells.est_true, want_true)
    items = cells.true_items[cells.true_hit]
    owners = cells.true_user[cells.true_hit]
    starts = np.concatenate([[0], np.cumsum(cells.est_lens)])
    for item, owner, at in zip(items, owners, cells.hit_est, strict=True):
        e = shuffled[users[owner]]
        assert starts[owner] <= at < starts[owner + 1]
        assert e.indices[at - starts[owner]] == item
