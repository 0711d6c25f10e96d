"""The packed, looked-up-on-access views that keep a million users' data out of Python objects
(`PackedEstimates`, `RowTruth`, `StoredReleases`, `row_positions`) equal the per-user dicts
they replace, and the item-set scores over them equal the scores over those dicts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from privrec.adversary.attacks.base import AttackOutput, PackedEstimates, UserEstimate
from privrec.adversary.observations import Observations
from privrec.adversary.replay import load_output, save_output
from privrec.shared.csr import row_positions
from privrec.shared.data.dataset import RatingData
from privrec.shared.mechanisms.base import BitPayload, SparsePayload
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.serde import StoredReleases, payload_from_proto, payload_to_proto
from privrec.sim import referee_itemset
from privrec.sim.referee_itemset import score_item_set
from privrec.sim.referee_truth import RowTruth
from tests.run_configs import make_run_config

N_ITEMS = 40


def _estimates(seed: int, n: int = 120) -> dict[str, UserEstimate]:
    rng = np.random.default_rng(seed)
    out = {}
    for u in rng.permutation(n):
        idx = np.sort(rng.choice(N_ITEMS, size=int(rng.integers(0, 12)), replace=False))
        out[str(u)] = UserEstimate(idx.astype(np.int64), rng.normal(size=idx.size))
    return out


def _data(seed: int, n: int = 150) -> RatingData:
    rng = np.random.default_rng(seed)
    dense = (rng.random((n, N_ITEMS)) < 0.2) * rng.integers(1, 6, (n, N_ITEMS))
    ids = rng.permutation(np.arange(1000, 1000 + 3 * n, 3))  # unsorted dataset ids
    return RatingData(
        name="t",
        ratings=sp.csr_matrix(dense.astype(float)),
        user_ids=ids.astype(np.int64),
        item_ids=np.arange(N_ITEMS, dtype=np.int64),
        rating_scale=(1.0, 5.0),
    )


def test_row_positions_gathers_the_rows_in_the_asked_order() -> None:
    rng = np.random.default_rng(0)
    lens = rng.integers(0, 5, 30)
    indptr = np.concatenate([[0], np.cumsum(lens)])
    flat = rng.normal(size=int(indptr[-1]))
    rows = rng.choice(30, size=25)  # repeats allowed
    got_lens, positions = row_positions(indptr, rows)
    expected = np.concatenate([flat[indptr[r] : indptr[r + 1]] for r in rows])
    assert np.array_equal(got_lens, lens[rows])
    assert np.array_equal(flat[positions], expected)
    assert row_positions(indptr, np.zeros(0, np.int64))[1].size == 0


def test_packed_estimates_equal_the_dict_and_stay_read_only() -> None:
    per_user = _estimates(1)
    packed = PackedEstimates.of(per_user)
    assert packed.user_ids == sorted(per_user)
    assert dict(packed).keys() == per_user.keys() and len(packed) == len(per_user)
    for uid, est in per_user.items():
        assert np.array_equal(packed[uid].indices, est.indices)
        assert packed[uid].indices.dtype == np.int64
        assert np.array_equal(packed[uid].values, est.values)
    users = list(per_user)[::3]
    lens, idx, val = packed.take(users)
    assert np.array_equal(lens, [per_user[u].indices.size for u in users])
    assert np.array_equal(idx, np.concatenate([per_user[u].indices for u in users]))
    assert np.array_equal(val, np.concatenate([per_user[u].values for u in users]))
    with pytest.raises(ValueError):
        packed[users[0]].values[:] = 0.0  # a view of the store, not a copy to scribble on
    assert "nobody" not in packed and 17 not in packed
    with pytest.raises(KeyError):
        packed["nobody"]
    assert PackedEstimates.of(packed) is packed


def test_packed_estimates_refuse_inconsistent_arrays() -> None:
    with pytest.raises(ValueError, match="indptr"):
        PackedEstimates(["a", "b"], [0, 1], [3], [0.5])
    with pytest.raises(ValueError, match="indices and data"):
        PackedEstimates(["a"], [0, 2], [3], [0.5])


@pytest.mark.parametrize("packed", [False, True])
def test_saved_output_reads_back_equal(tmp_path: Path, packed: bool) -> None:
    per_user = _estimates(2)
    sizes = {u: int(e.indices.size) + 1 for u, e in per_user.items()}
    out = AttackOutput(
        "a", "item_set", "k", PackedEstimates.of(per_user) if packed else per_user, {}, sizes
    )
    save_output(tmp_path / "a.npz", out)
    back = load_output(tmp_path / "a.npz")
    assert isinstance(back.per_user, PackedEstimates)
    assert back.set_sizes == sizes
    for uid, est in per_user.items():
        assert np.array_equal(back.per_user[uid].indices, est.indices)
        assert np.array_equal(back.per_user[uid].values, est.values)


def test_row_truth_equals_the_dict_of_rows_without_the_excluded() -> None:
    data = _data(3)
    exclude = {str(int(data.user_ids[4])), str(int(data.user_ids[9])), "not-a-user"}
    truth = RowTruth(data, exclude=exclude)
    expected = {
        str(int(data.user_ids[r])): data.user_row(r)
        for r in range(data.n_users)
        if str(int(data.user_ids[r])) not in exclude
    }
    assert list(truth) == list(expected) and len(truth) == len(expected)
    for uid, (items, ratings) in expected.items():
        assert np.array_equal(truth[uid][0], items)
        assert np.array_equal(truth[uid][1], ratings)
    users = list(expected)[::-2]
    lens, items, ratings = truth.take(users)
    assert np.array_equal(items, np.concatenate([expected[u][0] for u in users]))
    assert np.array_equal(ratings, np.concatenate([expected[u][1] for u in users]))
    assert np.array_equal(lens, [expected[u][0].size for u in users])
    some = users[0]
    for absent in (str(int(data.user_ids[4])), "0" + some, "x", "999999"):
        assert absent not in truth
        with pytest.raises(KeyError):
            truth[absent]
        with pytest.raises(KeyError):
            truth.take([some, absent])


@pytest.mark.parametrize("chunk", [7, 20_000])
def test_item_set_scores_over_packed_views_equal_the_dicts(
    chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The referee's figures do not change when the output is packed and the truth is the
    rating matrix (including the users whose ties go through the per-user reference)."""
    monkeypatch.setattr(referee_itemset, "CHUNK", chunk)
    data = _data(4)
    rng = np.random.default_rng(4)
    per_user, sizes = {}, {}
    for r in range(data.n_users):
        idx = np.sort(rng.choice(N_ITEMS, size=int(rng.integers(1, 20)), replace=False))
        val = (
            rng.integers(0, 4, idx.size).astype(float) if r % 3 == 0 else rng.normal(size=idx.size)
        )
        uid = str(int(data.user_ids[r]))
        per_user[uid], sizes[uid] = UserEstimate(idx.astype(np.int64), val), int(rng.integers(1, 9))
    per_user = dict(sorted(per_user.items()))  # the packed order: sums in the same order
    truth = {str(int(data.user_ids[r])): data.user_row(r) for r in range(data.n_users)}
    plain = score_item_set(AttackOutput("a", "item_set", "k", per_user, {}, sizes), truth, N_ITEMS)
    packed = score_item_set(
        AttackOutput("a", "item_set", "k", PackedEstimates.of(per_user), {}, sizes),
        RowTruth(data),
        N_ITEMS,
    )
    assert packed == plain


def test_stored_releases_decode_on_access_like_the_wire() -> None:
    raws = {}
    for u, bits in (("b", [1, 0, 1, 1]), ("a", [0, 0, 1, 0])):
        rel = pb.Release(user_id=u, purpose=pb.PURPOSE_PROFILE)
        payload_to_proto("oue", BitPayload(np.array(bits, dtype=bool)), rel)
        raws[u] = rel.SerializeToString()
    stored = StoredReleases(raws)
    assert list(stored) == ["b", "a"] and len(stored) == 2 and "a" in stored
    for u, raw in raws.items():
        expected = payload_from_proto(pb.Release.FromString(raw))[1]
        assert isinstance(stored[u], BitPayload)
        assert np.array_equal(stored[u].bits, expected.bits)  # type: ignore[attr-defined]
    assert stored["a"] is not stored["a"]  # decoded afresh: nothing kept


def test_targets_leave_the_auxiliary_users_out_as_a_view() -> None:
    aux = _data(5, n=3)
    profiles = {
        str(u): SparsePayload(N_ITEMS, np.array([1]), np.array([0.5]))
        for u in [*aux.user_ids.tolist(), 1, 2]
    }
    config = make_run_config("rpt", {"sigma_max": 1.0, "beta_max": 10}, N_ITEMS)
    obs = Observations(run_config=config, profiles=profiles, auxiliary=aux)
    targets = obs.targets()
    assert list(targets) == ["1", "2"] and len(targets) == 2
    assert str(int(aux.user_ids[0])) not in targets
    with pytest.raises(KeyError):
        targets[str(int(aux.user_ids[0]))]
    assert targets["1"] is profiles["1"]
