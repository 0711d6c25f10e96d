"""Feature-based profiles (Bilge §6.3.1), the clustering module (§6.3.2, Algorithm 5) and the
neighbour rules: hand-checkable inputs, the thesis's Alice/Bob example, and broken variants."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp

from privrec.server.models.clustering import (
    BisectingTree,
    _memberships,
    _som_train,
    fuzzy_cmeans,
    kmeans_correlation,
    partition,
    pearson,
    som_1d,
    standardise_rows,
)
from privrec.server.models.features import (
    check_features,
    feature_profiles,
    query_profile,
)
from privrec.server.models.neighbourhood import neighbour_scores, top_k_mask

# Bilge Tables 6.1 and 6.2: Alice and Bob over five movies, genres [C, D, R, A, F].
ALICE_BOB = sp.csr_matrix(np.array([[2, 0, 3, 0, 1], [0, 2, 0, 4, 0]], dtype=float))
GENRES = np.array(
    [
        [1, 1, 1, 0, 0],  # i1: Comedy, Drama, Romance
        [0, 1, 0, 0, 0],  # i2: Drama
        [1, 0, 1, 0, 0],  # i3: Comedy, Romance
        [0, 0, 0, 1, 1],  # i4: Action, Fantasy
        [0, 1, 0, 0, 1],  # i5: Drama, Fantasy
    ],
    dtype=bool,
)


# ------------------------------------------------------------------ feature-based profiles
def test_alice_and_bob_feature_profiles_bilge_fig_6_1() -> None:
    """PBP [2,2,2,0,1]/7 and [0,1,0,1,1]/3; RBP [5,3,5,0,1]/14 and [0,2,0,4,4]/10."""
    g = check_features(GENRES)
    np.testing.assert_allclose(
        feature_profiles(ALICE_BOB, g, "pbp"),
        [[2 / 7, 2 / 7, 2 / 7, 0, 1 / 7], [0, 1 / 3, 0, 1 / 3, 1 / 3]],
    )
    np.testing.assert_allclose(
        feature_profiles(ALICE_BOB, g, "rbp"),
        [[5 / 14, 3 / 14, 5 / 14, 0, 1 / 14], [0, 2 / 10, 0, 4 / 10, 4 / 10]],
    )


def test_alice_and_bob_are_comparable_on_features_only() -> None:
    """No co-rated item, yet their PBPs have a PCC (here negative: different genres)."""
    a, b = ALICE_BOB.toarray()
    assert not np.any((a > 0) & (b > 0))
    pbp = feature_profiles(ALICE_BOB, check_features(GENRES), "pbp")
    r = pearson(pbp[:1], pbp[1:])[0, 0]
    np.testing.assert_allclose(r, np.corrcoef(pbp[0], pbp[1])[0, 1])
    assert r < 0


def test_every_filled_cell_counts_on_disguised_data() -> None:
    """On U′ a fake cell (any value, even 0.0 or negative) adds 1 to a PBP like a genuine one
    (Bilge §6.5.1); an RBP adds the disguised value, a negative sum flips it, a zero sum stays."""
    g = check_features(GENRES)
    disguised = sp.csr_matrix(
        (np.array([0.0, -1.5, 0.5]), (np.array([0, 0, 0]), np.array([0, 1, 3]))), shape=(1, 5)
    )
    np.testing.assert_allclose(
        feature_profiles(disguised, g, "pbp"), [[1 / 6, 2 / 6, 1 / 6, 1 / 6, 1 / 6]]
    )
    raw = np.array([0.0, -1.5, 0.0, 0.5, 0.5])  # RBP before normalising: sum −0.5
    np.testing.assert_allclose(feature_profiles(disguised, g, "rbp"), [raw / -0.5])
    # cells i2 (Drama) 2.0 and i3 (Comedy, Romance) −1.0: sum 0, left as it is
    zero = sp.csr_matrix((np.array([2.0, -1.0]), ([0, 0], [1, 2])), shape=(1, 5))
    np.testing.assert_allclose(feature_profiles(zero, g, "rbp"), [[-1.0, 2.0, -1.0, 0, 0]])


def test_query_profile_is_the_row_profile() -> None:
    g = check_features(GENRES)
    for kind in ("pbp", "rbp"):
        np.testing.assert_allclose(
            query_profile(np.array([0, 2, 4]), np.array([2.0, 3.0, 1.0]), g, kind),
            feature_profiles(ALICE_BOB, g, kind)[0],
        )


@pytest.mark.parametrize(
    ("features", "n_items", "needle"),
    [
        (None, None, "not set"),
        (np.ones(5), None, "2-D"),
        (np.ones((5, 0)), None, "2-D"),
        (-np.ones((5, 2)), None, "non-negative"),
        (np.ones((4, 2)), 5, "one row per item (5)"),
        (np.array([["a"]]), None, "numeric"),
    ],
)
def test_bad_features_are_refused_by_name(features: object, n_items: int | None, needle: str):
    with pytest.raises(ValueError, match="item_features") as info:
        check_features(features, n_items)
    assert needle in str(info.value)


# ------------------------------------------------------------------ k-means (correlation)
def _two_shapes(n: int = 10) -> np.ndarray:
    """Rows of two shapes (rising, falling) at random positive scales and offsets."""
    rng = np.random.default_rng(0)
    up, down = np.arange(6.0), np.arange(6.0)[::-1]
    rows = [
        (up if i % 2 == 0 else down) * rng.uniform(0.5, 3) + rng.uniform(0, 5) for i in range(n)
    ]
    return np.array(rows) + rng.normal(0, 0.05, (n, 6))


def test_kmeans_correlation_separates_shapes_not_scales() -> None:
    """Correlation distance groups by shape whatever the scale/offset (MATLAB 'correlation');
    first-rows init starts from rows 0 (rising) and 1 (falling)."""
    x = _two_shapes()
    labels, centres = kmeans_correlation(x, 2, init="first-rows")
    np.testing.assert_array_equal(labels, np.arange(10) % 2)
    np.testing.assert_allclose(np.linalg.norm(centres, axis=1), 1.0)
    # a Euclidean k-means would mix them: the scales differ more than the shapes
    labels_r, _ = kmeans_correlation(x, 2, init="random-partition", rng=np.random.default_rng(1))
    assert len({tuple(labels_r[::2]), tuple(labels_r[1::2])}) == 2
    assert len(set(labels_r[::2])) == len(set(labels_r[1::2])) == 1


def test_kmeans_centroid_is_mean_of_standardised_points() -> None:
    """One Lloyd step by hand: centroid = standardise(mean of standardised members)."""
    x = np.array([[1.0, 2, 4], [2.0, 4, 9], [5.0, 1, 0], [9.0, 2, 1]])
    labels, centres = kmeans_correlation(x, 2, init="first-rows")
    s = standardise_rows(x)
    expect = standardise_rows(np.stack([s[labels == 0].mean(0), s[labels == 1].mean(0)]))
    np.testing.assert_allclose(centres, expect)
    np.testing.assert_array_equal(labels, [0, 0, 1, 1])


def test_kmeans_first_rows_skips_duplicate_head_rows() -> None:
    """Identical head rows would give identical centres; the next distinct row is used."""
    x = np.array([[1.0, 2, 3], [2.0, 4, 6], [3.0, 2, 1], [1.0, 2, 3.1]])
    labels, _ = kmeans_correlation(x, 2, init="first-rows")
    assert labels[0] == labels[1] != labels[2]


def test_kmeans_refuses_bad_arguments() -> None:
    with pytest.raises(ValueError, match="clusters"):
        kmeans_correlation(np.ones((3, 2)), 4, init="first-rows")
    with pytest.raises(ValueError, match="init"):
        kmeans_correlation(np.ones((3, 2)), 2, init="kmeans++")
    with pytest.raises(ValueError, match="rng"):
        kmeans_correlation(np.ones((3, 2)), 2)


# ------------------------------------------------------------------ fuzzy c-means
def test_fcm_membership_formula_by_hand() -> None:
    """u_ij = 1/Σ_k (d_ij/d_kj)^{2/(Q−1)}: distances 1 and 2 with Q = 2 give 0.8 and 0.2;
    a point on a centre belongs to it alone."""
    u = _memberships(np.array([[1.0, 4.0], [0.0, 9.0]]), 2.0)
    np.testing.assert_allclose(u, [[0.8, 0.2], [1.0, 0.0]])
    u3 = _memberships(np.array([[1.0, 4.0]]), 3.0)  # (d1/d2)^{2/(Q-1)} = (1/2)^1
    np.testing.assert_allclose(u3, [[2 / 3, 1 / 3]])


def _blobs() -> np.ndarray:
    rng = np.random.default_rng(3)
    return np.vstack([rng.normal(0, 0.3, (20, 2)), rng.normal(5, 0.3, (20, 2))])


def test_fcm_finds_blobs_and_decreases_its_objective() -> None:
    """Two separated blobs: memberships near 1 for the right centre; J_Q (Eq 6.1) never rises
    from one iteration to the next."""
    x = _blobs()
    u, _centres = fuzzy_cmeans(x, 2, rng=np.random.default_rng(0))
    np.testing.assert_allclose(u.sum(axis=1), 1.0)
    hard = u.argmax(axis=1)
    assert len(set(hard[:20])) == len(set(hard[20:])) == 1 and hard[0] != hard[20]
    assert u.max(axis=1).min() > 0.9
    objectives = []
    for t in range(1, 8):
        u_t, v_t = fuzzy_cmeans(x, 2, rng=np.random.default_rng(0), max_iter=t, tol=0.0)
        d2 = ((x[:, None, :] - v_t[None]) ** 2).sum(-1)
        objectives.append(float(((u_t**2) * d2).sum()))
    assert all(b <= a + 1e-9 for a, b in itertools.pairwise(objectives))


def test_fcm_partition_overlaps_by_the_one_over_c_rule() -> None:
    """A user joins every cluster where her membership is >= 1/c."""
    x = _blobs()
    found = partition(x, 3, "fcm", rng=np.random.default_rng(0))
    u, _ = fuzzy_cmeans(x, 3, rng=np.random.default_rng(0))
    for j, members in enumerate(found.members):
        np.testing.assert_array_equal(members, np.flatnonzero(u[:, j] >= 1 / 3 - 1e-12))
    assert sum(m.size for m in found.members) >= x.shape[0]


# ------------------------------------------------------------------ SOM
def test_som_one_update_is_eq_6_5_with_learnsom_neighbourhood() -> None:
    """Step 0 of the ordering phase: lr = 0.9, nd = c − 1 + 1e-5; the winner moves by lr·(u − w)
    and every neuron within nd by 0.5·lr·(u − w) (Eq 6.5 with MATLAB learnsom)."""
    w = np.array([[0.0, 0.0], [1.0, 1.0], [5.0, 5.0]])
    x = np.array([[2.0, 0.0]])
    expect = w.copy()
    expect[1] += 0.9 * (x[0] - w[1])  # winner: nearest in Euclidean distance
    expect[0] += 0.45 * (x[0] - w[0])
    expect[2] += 0.45 * (x[0] - w[2])  # |2 − 1| = 1 <= nd = 2.00001
    _som_train(x, w, np.zeros((1, 1), dtype=np.int64), 0.9, 1000, 0.02, 1.0)
    np.testing.assert_allclose(w, expect)


def test_som_orders_a_line_of_clusters() -> None:
    """Three groups on a line map to three neurons in order (topological ordering)."""
    rng = np.random.default_rng(1)
    x = np.vstack([rng.normal(m, 0.1, (15, 2)) for m in (0.0, 3.0, 6.0)])
    winners, w = som_1d(x, 3, rng=np.random.default_rng(0), epochs=50)
    per_group = [
        np.bincount(winners[i * 15 : (i + 1) * 15], minlength=3).argmax() for i in range(3)
    ]
    assert sorted(per_group) == [0, 1, 2]
    assert per_group in ([0, 1, 2], [2, 1, 0])
    assert np.all(np.diff(w[:, 0]) > 0) or np.all(np.diff(w[:, 0]) < 0)


def test_partition_with_one_cluster_is_everybody() -> None:
    x = _blobs()
    for method in ("kmeans", "fcm", "som"):
        found = partition(x, 1, method, rng=np.random.default_rng(0))
        assert len(found.members) == 1
        np.testing.assert_array_equal(found.members[0], np.arange(x.shape[0]))
    with pytest.raises(ValueError, match="method"):
        partition(x, 2, "dbscan", rng=np.random.default_rng(0))


def test_assign_skips_empty_clusters() -> None:
    """An active user is assigned by PCC to the centres (Bilge §6.2), never to an empty
    cluster (a SOM neuron that won nobody)."""
    from privrec.server.models.clustering import Clusters

    c = Clusters(
        [np.array([0]), np.zeros(0, dtype=np.int64)],
        np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]),
    )
    assert c.assign(np.array([[0.0, 0.1, 1.0]]))[0] == 0


# ------------------------------------------------------------------ bisecting tree
def _four_groups() -> np.ndarray:
    """Four groups of 6 FBP-like rows; groups 0/1 and 2/3 are close pairs."""
    rng = np.random.default_rng(2)
    bases = np.array(
        [
            [5, 4, 0, 0, 0, 0],
            [4, 5, 1, 0, 0, 0],
            [0, 0, 0, 1, 5, 4],
            [0, 0, 0, 0, 4, 5],
        ],
        dtype=float,
    )
    rows = [bases[g] + rng.uniform(0, 0.3, 6) for i in range(6) for g in range(4)]
    return np.array(rows)  # row i belongs to group i % 4


def test_tree_leaves_hold_at_most_n_and_split_by_groups() -> None:
    """Algorithm 5: every leaf has <= N rows; each group ends in one leaf at N = 6."""
    x = _four_groups()
    tree = BisectingTree.build(x, 6)
    leaves = [m for m in tree.members if m.size]
    assert all(m.size <= 6 for m in leaves)
    assert sorted(np.concatenate(leaves).tolist()) == list(range(24))
    for m in leaves:
        assert len(set((m % 4).tolist())) == 1
    assert tree.height == 3
    # the root splits the two pairs of groups; rows 0 and 1 started its two centres
    root_left = tree.members[tree.children[tree.children[0, 0], 0]]
    assert root_left.size


def test_tree_search_finds_leaf_and_sibling_leaf() -> None:
    """A query like group 2 reaches group 2's leaf; its sibling is group 3's leaf; the walk
    passes 2 branch nodes down and 0 more for a leaf sibling."""
    x = _four_groups()
    tree = BisectingTree.build(x, 6)
    leaves, siblings, steps = tree.search(np.array([[0, 0, 0, 1, 5, 4.2]]))
    assert set((tree.members[leaves[0]] % 4).tolist()) == {2}
    assert set((tree.members[siblings[0]] % 4).tolist()) == {3}
    assert steps[0] == 2


def test_tree_sibling_subtree_is_descended_to_a_leaf() -> None:
    """When the sibling of the leaf is a branch node, the query walks it down to a leaf."""
    x = np.vstack([_four_groups()[:12], [[9, 0, 0, 0, 0, 9.0]] * 1])
    tree = BisectingTree.build(x, 3)
    leaves, siblings, _ = tree.search(x[:1])
    assert tree.children[siblings[0], 0] == -1  # a leaf
    assert siblings[0] != leaves[0]


def test_tree_identical_profiles_make_one_oversized_leaf() -> None:
    """Identical rows cannot be split: the recursion stops (Algorithm 5 would not)."""
    tree = BisectingTree.build(np.ones((10, 3)) * [1, 2, 3], 4)
    assert [m.size for m in tree.members] == [10]
    leaves, siblings, steps = tree.search(np.array([[3.0, 2.0, 1.0]]))
    assert leaves[0] == 0 and siblings[0] == -1 and steps[0] == 0


# ------------------------------------------------------------------ neighbour rules
def test_neighbour_rules_by_hand() -> None:
    """Weights w = [0.9, 0.8, 0.5, -0.95, 0.1]; users 0, 2, 3, 4 filled item 0 and users 1, 3
    item 1; k = 2.

    raters:   item 0 -> users 0, 2;          item 1 -> user 1
    top-k:    top-2 overall = users 0, 1;    item 0 -> user 0; item 1 -> user 1
    absolute: item 0 -> |w| top 2 = 3, 0:    (−0.95·d30 + 0.9·d00)/(0.95 + 0.9)
    """
    d = np.zeros((5, 2))
    d[[0, 2, 3, 4], 0] = [1.0, -1.0, 2.0, 3.0]
    d[[1, 3], 1] = [0.5, -2.0]
    filled = np.zeros((5, 2), bool)
    filled[[0, 2, 3, 4], 0] = True
    filled[[1, 3], 1] = True
    r, c = np.nonzero(filled)
    dev = sp.csc_matrix((d[r, c], (r, c)), shape=(5, 2))
    w = np.array([0.9, 0.8, 0.5, -0.95, 0.1])
    items, allowed = np.array([0, 1]), np.ones(5, bool)
    avg, cnt = neighbour_scores(dev, w, items, 2, allowed, "raters")
    np.testing.assert_allclose(avg, [(0.9 * 1 - 0.5 * 1) / 1.4, 0.5])
    np.testing.assert_array_equal(cnt, [2, 1])
    avg, cnt = neighbour_scores(dev, w, items, 2, allowed, "top-k")
    np.testing.assert_allclose(avg, [1.0, 0.5])
    np.testing.assert_array_equal(cnt, [1, 1])
    avg, cnt = neighbour_scores(dev, w, items, 2, allowed, "absolute")
    np.testing.assert_allclose(
        avg, [(-0.95 * 2 + 0.9 * 1) / 1.85, (0.8 * 0.5 - 0.95 * -2.0) / 1.75]
    )
    np.testing.assert_array_equal(cnt, [2, 2])
    with pytest.raises(ValueError, match="neighbours"):
        neighbour_scores(dev, w, items, 2, allowed, "closest")


def test_top_k_mask_ties_and_positivity() -> None:
    w = np.array([0.5, 0.5, -1.0, 0.7, 0.0])
    np.testing.assert_array_equal(top_k_mask(w, np.ones(5, bool), 2), [1, 0, 0, 1, 0])
    np.testing.assert_array_equal(top_k_mask(w, np.ones(5, bool), 9), [1, 1, 0, 1, 0])


def test_tree_leaf_size_counts_users_not_their_clones() -> None:
    """With `owners`, a leaf holds at most N distinct users however many rows (clones) each
    has: four groups of 6 rows, each group owned by 2 users, N = 2 -> one group per leaf."""
    x = _four_groups()
    owners = (np.arange(24) % 4) * 2 + (np.arange(24) // 12)  # group g: users 2g and 2g + 1
    tree = BisectingTree.build(x, 2, owners=owners)
    leaves = [m for m in tree.members if m.size]
    assert all(np.unique(owners[m]).size <= 2 for m in leaves)
    assert max(m.size for m in leaves) > 2  # rows exceed N, users do not
    rows_tree = BisectingTree.build(x, 2)
    assert all(m.size <= 2 for m in rows_tree.members if m.size)
