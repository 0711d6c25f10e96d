"""Bilge Ch. 6 and 7 models: clustered CF/PPCF and BKM/BKM+ on small hand-checkable inputs,
against the plain kNN models as oracles, and the fold discipline of their offline structures."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from privrec.server.models import (
    PPCF,
    BisectingCF,
    BisectingPPCF,
    ClusterCF,
    ClusterPPCF,
    PearsonKNN,
    make_model,
)
from privrec.server.models.bisecting_knn import clone_cells
from privrec.server.models.clustering import partition
from privrec.server.models.features import feature_profiles
from privrec.shared.seeding import rng_for


def _ratings(seed: int, n_users: int = 40, n_items: int = 24, density: float = 0.4):
    rng = np.random.default_rng(seed)
    filled = rng.random((n_users, n_items)) < density
    filled[:, 0] = True
    r, c = np.nonzero(filled)
    return sp.csr_matrix(
        (rng.integers(1, 6, r.size).astype(float), (r, c)), shape=(n_users, n_items)
    )


def _genres(n_items: int = 24, n_genres: int = 5) -> np.ndarray:
    g = np.zeros((n_items, n_genres), dtype=bool)
    g[np.arange(n_items), np.arange(n_items) % n_genres] = True
    g[np.arange(0, n_items, 3), (np.arange(0, n_items, 3) + 2) % n_genres] = True
    return g


def _queries(train: sp.csr_matrix, rows: list[int]) -> list[tuple[np.ndarray, np.ndarray]]:
    out = []
    for r in rows:
        s = slice(train.indptr[r], train.indptr[r + 1])
        out.append((train.indices[s].astype(np.int64), train.data[s] + 0.25))
    return out


# ------------------------------------------------------------------ c = 1 is plain kNN
@pytest.mark.parametrize(
    ("clustered", "plain"),
    [
        (ClusterPPCF(k=7, clusters=1, neighbours="raters"), PPCF(k=7)),
        (
            ClusterCF(k=7, clusters=1, neighbours="raters", clip=(1.0, 5.0)),
            PearsonKNN(k=7, clip=(1.0, 5.0)),
        ),
    ],
)
def test_one_cluster_with_the_raters_rule_is_the_plain_model(clustered, plain) -> None:
    """c = 1 is "no clustering at all" (Bilge §6.5.1): bit-identical answers to PPCF/Pearson,
    fold exclusion included."""
    train = _ratings(1)
    groups = np.arange(40) % 5
    clustered.set_item_features(_genres()).fit(train, exclude_groups=groups)
    plain.fit(train, exclude_groups=groups)
    queries = _queries(train, [0, 3, 17])
    items = [np.arange(24)] * 3
    for g in (0, 3, None):
        a = clustered.predict_block(queries, items, exclude_groups=[g] * 3)
        b = plain.predict_block(queries, items, exclude_groups=[g] * 3)
        for (sa, ca), (sb, cb) in zip(a, b, strict=True):
            np.testing.assert_array_equal(sa, sb)
            np.testing.assert_array_equal(ca, cb)


# ------------------------------------------------------------------ clustered, by hand
def _two_tastes() -> tuple[sp.csr_matrix, np.ndarray]:
    """Six users × six items; items 0–2 are genre A, 3–5 genre B. Users 0–2 rate only A
    items, users 3–5 only B items (their PBPs are [1, 0] and [0, 1])."""
    dense = np.array(
        [
            [5, 4, 0, 0, 0, 0],
            [4, 0, 5, 0, 0, 0],
            [1, 2, 2, 0, 0, 0],
            [0, 0, 0, 5, 4, 1],
            [0, 0, 0, 4, 5, 2],
            [0, 0, 0, 1, 0, 4],
        ],
        dtype=float,
    )
    genres = np.zeros((6, 2), dtype=bool)
    genres[:3, 0] = genres[3:, 1] = True
    return sp.csr_matrix(dense), genres


def test_clustered_ppcf_hand_example_uses_the_active_users_cluster_only() -> None:
    """An active user rating A items joins the A cluster; P′ for item 2 is Eq 2.6 over the A
    users who filled it (users 1, 2; weights Z′_a·Z′_u / m with the top-k rule, k = 5)."""
    train, genres = _two_tastes()
    model = ClusterPPCF(k=5, clusters=2, method="kmeans", random_state=3)
    model.set_item_features(genres).fit(train)
    rows, cost = model.candidate_pool(np.array([0, 1]), np.array([1.0, -1.0]))
    np.testing.assert_array_equal(rows, [0, 1, 2])
    assert cost == 2 + 3  # two centres compared, three candidates
    za = np.array([1.0, -1.0, 0, 0, 0, 0])
    w = train.toarray() @ za / 6  # Eq 2.4 over all m = 6 items
    # users 0, 1, 2: w = (5−4)/6, 4/6, (1−2)/6; positive: 0 and 1; item 2 filled by 1 and 2
    expect = (w[1] * 5.0) / w[1]  # user 2 has w < 0 and is not a neighbour
    scores, counts = model.predict(np.array([0, 1]), np.array([1.0, -1.0]), np.array([2, 4]))
    np.testing.assert_allclose(scores, [expect, 0.0])
    np.testing.assert_array_equal(counts, [1, 0])  # item 4 is a B item: nobody in the cluster


def test_cluster_models_build_their_clusters_without_the_test_fold() -> None:
    """The clustering of fold g is the clustering of the rows outside g only (the test fold
    never shapes the clusters), and no candidate comes from fold g."""
    train = _ratings(2, n_users=60)
    genres = _genres()
    groups = np.arange(60) % 3
    model = ClusterPPCF(k=10, clusters=3, method="kmeans", random_state=5)
    model.set_item_features(genres).fit(train, exclude_groups=groups)
    profiles = feature_profiles(train, genres.astype(float), "pbp")
    for g in range(3):
        rows = np.flatnonzero(groups != g)
        expect = partition(profiles[rows], 3, "kmeans", rng=rng_for(5, "clusters", g))
        pool = model._pools[g]
        for got, members in zip(pool.blocks, expect.members, strict=True):
            np.testing.assert_array_equal(got, rows[members])
        for idx, val in _queries(train, [g, g + 3, g + 6]):
            cand, _ = model.candidate_pool(idx, val, exclude_group=g)
            assert not np.any(groups[cand] == g)


def test_fcm_clusters_overlap_and_som_partitions() -> None:
    """FCM clusters may share users (membership >= 1/c); SOM and KMC partition them."""
    train = _ratings(4, n_users=50)
    for method, overlap in (("fcm", True), ("som", False), ("kmeans", False)):
        model = ClusterPPCF(k=5, clusters=3, method=method, som_epochs=20)
        model.set_item_features(_genres()).fit(train)
        pool = model._pool(np.ones(50, dtype=bool))
        sizes = sum(b.size for b in pool.blocks)
        assert (sizes > 50) if overlap else (sizes == 50), method


def test_feature_models_refuse_missing_or_mismatched_features() -> None:
    train = _ratings(0)
    with pytest.raises(ValueError, match="item_features"):
        ClusterPPCF().fit(train)
    with pytest.raises(ValueError, match="one row per item"):
        BisectingPPCF().set_item_features(_genres(10)).fit(train)
    model = ClusterCF().set_item_features(_genres())
    with pytest.raises(ValueError, match="item_features"):
        model.set_item_features(np.ones(3))


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"clusters": 0}, "clusters"),
        ({"method": "dbscan"}, "method"),
        ({"profile": "tbp"}, "profile"),
        ({"neighbours": "near"}, "neighbours"),
        ({"fuzziness": 1.0}, "fuzziness"),
        ({"random_state": -1}, "random_state"),
    ],
)
def test_cluster_parameters_are_checked(params: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        ClusterPPCF(**params)


@pytest.mark.parametrize(
    ("params", "needle"),
    [({"clones": -1}, "clones"), ({"density": 0}, "density"), ({"psp_neighbours": 0}, "psp")],
)
def test_bisecting_parameters_are_checked(params: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        make_model("bkm_ppcf", params)


# ------------------------------------------------------------------ clones (Algorithm 6)
def test_clone_cells_follow_algorithm_6() -> None:
    """The thesis's example: 100 ratings, ρ = 0.5, five clones -> 50 PSP cells each, 250 in
    all, in distinct empty cells."""
    rated = np.sort(np.random.default_rng(0).choice(1682, 100, replace=False))
    cells = clone_cells(rated, 1682, 5, 0.5, np.random.default_rng(1))
    assert [c.size for c in cells] == [50] * 5
    flat = np.concatenate(cells)
    assert np.unique(flat).size == 250
    assert not np.isin(flat, rated).any()
    # not enough empty cells for 5 x 8: each clone gets floor(10 / 5) = 2
    short = clone_cells(np.arange(8), 18, 5, 1.0, np.random.default_rng(2))
    assert [c.size for c in short] == [2] * 5
    assert np.unique(np.concatenate(short)).size == 10


def test_clones_carry_the_users_cells_and_psps_from_other_users() -> None:
    """Clone i of user u = u's cells + her PSP cells; with an RBP the PSP values are u's own
    kNN prediction from the other rows (PearsonKNN with the same k as oracle)."""
    train = _ratings(3, n_users=30)
    model = BisectingCF(k=6, clones=2, density=0.5, psp_neighbours=4, profile="rbp")
    model.neighbours = "raters"  # the oracle's rule
    model.set_item_features(_genres()).fit(train)
    rows = np.arange(30)
    clones = model.make_clones(rows)
    assert clones.matrix.shape == (60, 24)
    np.testing.assert_array_equal(clones.parents, np.tile(rows, 2))
    u = 7
    own = set(train[u].indices.tolist())
    others = np.ones(30, dtype=bool)
    others[u] = False
    oracle = PearsonKNN(k=4).fit(train, exclude_groups=(~others).astype(np.int64))
    idx, val = train[u].indices.astype(np.int64), train[u].data
    for i in range(2):
        row = clones.matrix[i * 30 + u]
        cells = set(row.indices.tolist())
        assert own < cells
        psp_cells = np.array(sorted(cells - own))
        assert psp_cells.size == int(np.floor(len(own) * 0.5))
        expect, _ = oracle.predict(idx, val, psp_cells, exclude_group=1)
        got = row.toarray()[0, psp_cells]
        np.testing.assert_allclose(got, expect)
        np.testing.assert_array_equal(
            row.toarray()[0, sorted(own)], train[u].toarray()[0, sorted(own)]
        )


# ------------------------------------------------------------------ BKM / BKM+
def test_bkm_with_one_leaf_is_the_top_k_knn() -> None:
    """N at least the number of users: the tree is one leaf, every training user is a
    candidate, and BKM answers as the unclustered top-k kNN (c = 1)."""
    train = _ratings(5, n_users=30)
    groups = np.arange(30) % 3
    bkm = BisectingPPCF(k=40, clones=0).set_item_features(_genres())
    flat = ClusterPPCF(k=40, clusters=1).set_item_features(_genres())
    bkm.fit(train, exclude_groups=groups)
    flat.fit(train, exclude_groups=groups)
    queries = _queries(train, [1, 2])
    items = [np.arange(24)] * 2
    for a, b in zip(
        bkm.predict_block(queries, items, exclude_groups=[1, 2]),
        flat.predict_block(queries, items, exclude_groups=[1, 2]),
        strict=True,
    ):
        np.testing.assert_array_equal(a[0], b[0])
    assert bkm.tree(1).height == 1


def test_bkm_candidates_are_the_leaf_and_its_sibling() -> None:
    """The candidates of a query are exactly the users of the leaf it reaches and of the
    sibling leaf, and its cost 2·(branch nodes passed) + candidates (Bilge §7.3.1)."""
    train = _ratings(6, n_users=60)
    model = BisectingCF(k=8, clones=0).set_item_features(_genres())
    model.fit(train)
    tree = model.tree()
    for idx, val in _queries(train, [0, 11, 42]):
        fbp = feature_profiles(
            sp.csr_matrix((val, idx, [0, idx.size]), shape=(1, 24)), _genres().astype(float), "pbp"
        )
        leaves, siblings, steps = tree.search(fbp)
        expect = np.union1d(tree.members[leaves[0]], tree.members[siblings[0]])
        rows, cost = model.candidate_pool(idx, val)
        np.testing.assert_array_equal(rows, expect)
        assert cost == 2 * steps[0] + tree.members[leaves[0]].size + tree.members[siblings[0]].size
        assert rows.size <= 2 * 8


def test_bkm_plus_clones_shape_the_tree_but_are_never_neighbours() -> None:
    """With ω clones the tree holds (1 + ω)·n rows, yet every candidate is an original
    training user of the query's pool (clones map back to their users)."""
    train = _ratings(7, n_users=45)
    groups = np.arange(45) % 3
    model = BisectingPPCF(k=10, clones=3, density=1.0).set_item_features(_genres())
    model.fit(train, exclude_groups=groups)
    tree = model.tree(0)
    n_train = int(np.sum(groups != 0))
    assert sum(m.size for m in tree.members) == 4 * n_train
    for idx, val in _queries(train, [0, 3, 9]):
        rows, _ = model.candidate_pool(idx, val, exclude_group=0)
        assert rows.size and np.all(rows < 45) and not np.any(groups[rows] == 0)


def test_bkm_plus_is_deterministic_given_random_state_and_varies_with_it() -> None:
    train = _ratings(8, n_users=40)
    a = BisectingCF(k=6, clones=2, random_state=1).set_item_features(_genres()).fit(train)
    b = BisectingCF(k=6, clones=2, random_state=1).set_item_features(_genres()).fit(train)
    c = BisectingCF(k=6, clones=2, random_state=2).set_item_features(_genres()).fit(train)
    ma, mb, mc = (m.make_clones(np.arange(40)).matrix for m in (a, b, c))
    np.testing.assert_array_equal(ma.indices, mb.indices)  # the PSP cells (values 0 with PBP)
    assert not np.array_equal(ma.indices, mc.indices)
