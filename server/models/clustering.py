"""Clustering of feature-based profiles: the one clustering module of Bilge's schemes (Ch. 6, 7).

Every clustering-based model of privrec clusters users' FBPs (`server.models.features`) through
this module, so k-means, fuzzy c-means, the self-organising map and the bisecting k-means tree
are implemented once:

* `kmeans_correlation` — k-means with the correlation distance 1 − PCC (Bilge §6.3.2, Eq 6.2,
  Eq 6.3; MATLAB `kmeans(..., 'distance', 'correlation')`, which the thesis used). As MATLAB
  does, points are centred and scaled to unit length ("standardised"), a centroid is the mean of
  its members' standardised points, and the similarity of a point to a centre is their PCC.
  Initialisation is either Bilge §6.3.2's "randomly assigns the users into c clusters" (random
  partition, Ch. 6) or Ch. 7's "head k user vectors ... as initial centers" (first rows).
* `fuzzy_cmeans` — Bezdek's fuzzy c-means minimising J_Q = Σ_j Σ_i u_ij^Q d²(x_j, V_i)
  (Bilge Eq 6.1) with Q = 2 and the Euclidean d (MATLAB `fcm` defaults, which the thesis used).
* `som_1d` — a one-dimensional Kohonen map trained for 500 epochs (Bilge §6.3.2, Eq 6.5), with
  MATLAB `learnsom`'s schedule (ordering then tuning phase); the training loop runs in numba.
* `BisectingTree` — Bilge Algorithm 5: recursive 2-means (first two rows as initial centres,
  correlation distance) until every leaf holds at most N users; searched by PCC to the two
  centres of each branch node (Bilge §7.3.1), the walk compiled with numba.

`partition` gives one interface to the three flat methods for the clustered kNN models: member
lists per cluster and centres to assign an active user by PCC (Bilge §6.2).

Choices where the thesis is silent (docs/decisions/clustering.md):

* A profile with no variance (e.g. all zeros) has PCC 0 with everything; argmax ties go to the
  lower cluster index.
* k-means: Lloyd (batch) iterations only, at most `max_iter` (MATLAB's default 100); an empty
  cluster takes the point least correlated with its own centre (MATLAB's 'singleton' action).
* Fuzzy c-means: memberships start uniformly random (normalised per user), at most 100
  iterations, stop when J_Q improves by less than 1e-5 (MATLAB `fcm` defaults). A user belongs
  to every cluster where her membership is at least 1/c (Bilge allows overlapping fuzzy
  clusters and assumes "at most n/2 users per cluster", §6.4; with this rule cluster sizes stay
  near n/2 whatever c, matching the thesis's FCM online time that does not fall with c).
* SOM: c neurons on a line (link distance |i − j|); the winner is the nearest neuron in
  Euclidean distance (MATLAB's `negdist`; the thesis's Eq 6.4 writes the inner product, which
  ranks neurons alike only for weights of equal norm); the neighbourhood gives the winner the
  full rate and neurons within the neighbourhood distance half of it (`learnsom`); ordering phase
  of 1,000 steps with the rate falling from 0.9 to 0.02 and the neighbourhood distance from
  c − 1 to 1, then tuning with rate 0.02·1000/s and distance 1; users presented in a fresh
  random order each epoch; weights start on the first principal-component line of the data.
* Bisecting tree: a node whose profiles are all alike in PCC terms, or whose 2-means leaves one
  side empty, is a leaf even when it holds more than N rows (Algorithm 5 would recurse
  forever). When the two head rows are identical, the second initial centre is the next row
  that differs.

References:
    Bilge, A. "Improving Performance of Privacy-Preserving Collaborative Filtering Schemes",
    PhD thesis, Anadolu University, 2013, §6.2, §6.3.2, §7.2, §7.3.1, Algorithm 5.
    Bezdek, J. C. "Pattern Recognition with Fuzzy Objective Function Algorithms", 1981.
    Kohonen, T. "Self-Organization and Associative Memory", 1989.
    Steinbach, M., Karypis, G., Kumar, V. "A comparison of document clustering techniques",
    KDD Workshop on Text Mining, 2000 (bisecting k-means).
"""

from __future__ import annotations

import dataclasses
import functools

import numba
import numpy as np

from privrec.shared.types import BoolArray, FloatArray, IntArray

METHODS = ("kmeans", "fcm", "som")
"""The flat clustering methods of Bilge Ch. 6: KMC, FCM and SOM."""


# ---------------------------------------------------------------------------- correlation
def standardise_rows(x: FloatArray) -> FloatArray:
    """Each row centred and scaled to unit length, so that PCC(a, b) = â·b̂; a row with no
    variance becomes all zeros (PCC 0 with everything)."""
    centred = x - x.mean(axis=-1, keepdims=True)
    norms = np.linalg.norm(centred, axis=-1, keepdims=True)
    out: FloatArray = np.divide(centred, norms, out=np.zeros_like(centred), where=norms > 1e-12)
    return out


def pearson(x: FloatArray, centres: FloatArray) -> FloatArray:
    """PCC of every row of `x` (n, d) with every row of `centres` (c, d): shape (n, c)."""
    return np.asarray(standardise_rows(x) @ standardise_rows(centres).T)


# ---------------------------------------------------------------------------- k-means
@dataclasses.dataclass(frozen=True)
class Clusters:
    """A flat clustering of n profiles into c clusters.

    Attributes:
        members: per cluster, int64 array of the member rows (sorted; may overlap for FCM,
            may be empty for a SOM neuron that won no user).
        centres: float array of shape (c, d), the cluster centres in profile space; an active
            user joins the cluster of highest PCC to its centre among the non-empty ones.
    """

    members: list[IntArray]
    centres: FloatArray

    @functools.cached_property
    def _unit_centres(self) -> FloatArray:
        """Standardised centres; an empty cluster's centre is never chosen (NaN)."""
        unit = standardise_rows(self.centres)
        unit[[m.size == 0 for m in self.members]] = np.nan
        return unit

    def assign(self, profiles: FloatArray) -> IntArray:
        """The cluster of each profile (n, d): the non-empty cluster of highest PCC to its
        centre (Bilge §6.2), ties to the lower index."""
        corr = standardise_rows(profiles) @ self._unit_centres.T
        corr[np.isnan(corr)] = -np.inf
        chosen: IntArray = np.argmax(corr, axis=1).astype(np.int64)
        return chosen


def kmeans_correlation(
    x: FloatArray,
    c: int,
    *,
    init: str = "random-partition",
    rng: np.random.Generator | None = None,
    max_iter: int = 100,
) -> tuple[IntArray, FloatArray]:
    """k-means with the correlation distance (Bilge §6.3.2, Eq 6.2/6.3; MATLAB semantics).

    Args:
        x: float array of shape (n, d), the profiles.
        c: number of clusters, 1 <= c <= n.
        init: "random-partition" (every point to a uniformly random cluster, centres the
            member means: Bilge §6.3.2) or "first-rows" (the first c distinct rows are the
            initial centres: Bilge §7.5, "head k user vectors").
        rng: the generator of the random partition (needed for "random-partition").
        max_iter: most Lloyd iterations.

    Returns:
        (labels, centres): int64 array of shape (n,) and the standardised centres (c, d) — the
        PCC of a profile with centre j is ``standardise_rows(profile) @ centres[j]``.
    """
    n = x.shape[0]
    if not 1 <= c <= n:
        raise ValueError(f"`clusters` must be in [1, {n}] for {n} profiles, got {c}")
    s = standardise_rows(x)
    labels: IntArray
    if init == "random-partition":
        if rng is None:
            raise ValueError("init='random-partition' needs a generator `rng`")
        labels = np.asarray(rng.integers(0, c, size=n), dtype=np.int64)
        centres = _centroids(s, labels, c)
    elif init == "first-rows":
        centres = standardise_rows(s[_first_distinct(s, c)])
        labels = np.full(n, -1, dtype=np.int64)
    else:
        raise ValueError(f"`init` must be 'random-partition' or 'first-rows', got {init!r}")
    for _ in range(max_iter):
        corr = s @ centres.T
        new: IntArray = _fill_empty(np.argmax(corr, axis=1).astype(np.int64), corr, c)
        if np.array_equal(new, labels):
            break
        labels = new
        centres = _centroids(s, labels, c)
    return labels, centres


def _first_distinct(s: FloatArray, c: int) -> IntArray:
    """Indices of the first c rows that differ from every earlier chosen row (head rows, with
    duplicates skipped); falls back to the head rows when fewer than c rows are distinct."""
    chosen: list[int] = []
    for i in range(s.shape[0]):
        if all(not np.array_equal(s[i], s[j]) for j in chosen):
            chosen.append(i)
            if len(chosen) == c:
                return np.array(chosen, dtype=np.int64)
    return np.arange(c, dtype=np.int64)


def _centroids(s: FloatArray, labels: IntArray, c: int) -> FloatArray:
    """Standardised mean of each cluster's standardised points (Eq 6.3 in PCC geometry)."""
    onehot = np.zeros((labels.size, c))
    onehot[np.arange(labels.size), labels] = 1.0
    return standardise_rows(onehot.T @ s)


def _fill_empty(labels: IntArray, corr: FloatArray, c: int) -> IntArray:
    """Give every empty cluster the point least correlated with its own centre (MATLAB's
    'singleton' empty action), one point per empty cluster, never emptying another."""
    counts = np.bincount(labels, minlength=c)
    if np.all(counts > 0):
        return labels
    labels = labels.copy()
    own = corr[np.arange(labels.size), labels]
    for j in np.flatnonzero(counts == 0):
        movable = counts[labels] > 1
        if not movable.any():
            break
        candidates = np.flatnonzero(movable)
        i = int(candidates[np.argmin(own[candidates])])
        counts[labels[i]] -= 1
        labels[i], counts[j], own[i] = j, 1, np.inf
    return labels


# ---------------------------------------------------------------------------- fuzzy c-means
def fuzzy_cmeans(
    x: FloatArray,
    c: int,
    *,
    rng: np.random.Generator,
    q: float = 2.0,
    max_iter: int = 100,
    tol: float = 1e-5,
) -> tuple[FloatArray, FloatArray]:
    """Fuzzy c-means minimising Bilge Eq 6.1 with the Euclidean distance (MATLAB `fcm`).

        V_i = Σ_j u_ij^Q x_j / Σ_j u_ij^Q,
        u_ij = 1 / Σ_k (d_ij / d_kj)^{2/(Q−1)}          (Bezdek 1981)

    Args:
        x: float array of shape (n, d).
        c: number of clusters, 1 <= c <= n.
        rng: draws the initial memberships.
        q: the fuzziness exponent Q > 1 (Bilge: 2).
        max_iter: most iterations.
        tol: stop when the objective improves by less than this.

    Returns:
        (memberships, centres): float arrays of shape (n, c) (rows sum to 1) and (c, d).
    """
    n = x.shape[0]
    if not 1 <= c <= n:
        raise ValueError(f"`clusters` must be in [1, {n}] for {n} profiles, got {c}")
    if not q > 1.0:
        raise ValueError(f"`fuzziness` must be > 1, got {q!r}")
    u = rng.random((n, c))
    u /= u.sum(axis=1, keepdims=True)
    previous = np.inf
    centres = np.zeros((c, x.shape[1]))
    for _ in range(max_iter):
        uq = u**q
        centres = (uq.T @ x) / uq.sum(axis=0)[:, None]
        d2 = np.maximum(
            (x * x).sum(axis=1)[:, None] - 2.0 * x @ centres.T + (centres * centres).sum(axis=1),
            0.0,
        )
        objective = float((uq * d2).sum())
        u = _memberships(d2, q)
        if abs(previous - objective) < tol:
            break
        previous = objective
    return u, centres


def _memberships(d2: FloatArray, q: float) -> FloatArray:
    """u_ij ∝ d_ij^{−2/(Q−1)}, normalised per point; a point on a centre belongs to it alone."""
    zero = d2 <= 1e-300
    inv = np.divide(1.0, d2, out=np.zeros_like(d2), where=~zero) ** (1.0 / (q - 1.0))
    u = inv / np.where(inv.sum(axis=1, keepdims=True) > 0, inv.sum(axis=1, keepdims=True), 1.0)
    hit = zero.any(axis=1)
    if hit.any():
        u[hit] = zero[hit] / zero[hit].sum(axis=1, keepdims=True)
    return u


# ---------------------------------------------------------------------------- SOM
@numba.njit(cache=True)
def _som_train(
    x: FloatArray,
    w: FloatArray,
    order: IntArray,
    order_lr: float,
    order_steps: int,
    tune_lr: float,
    tune_nd: float,
) -> None:  # pragma: no cover - numba
    """Sequential Kohonen training (Bilge Eq 6.5) with MATLAB `learnsom`'s schedule, in place."""
    c, d = w.shape
    max_nd = float(c - 1)
    step = 0
    for e in range(order.shape[0]):
        for t in range(order.shape[1]):
            if step < order_steps:
                percent = 1.0 - step / order_steps
                nd = 1.00001 + (max_nd - 1.0) * percent
                lr = tune_lr + (order_lr - tune_lr) * percent
            else:
                nd = tune_nd + 0.00001
                lr = tune_lr * order_steps / step
            step += 1
            i = order[e, t]
            win = 0
            best = np.inf
            for j in range(c):
                dist = 0.0
                for f in range(d):
                    diff = x[i, f] - w[j, f]
                    dist += diff * diff
                if dist < best:
                    best = dist
                    win = j
            for j in range(c):
                if j == win:
                    a = lr
                elif abs(j - win) <= nd:
                    a = 0.5 * lr
                else:
                    continue
                for f in range(d):
                    w[j, f] += a * (x[i, f] - w[j, f])


def som_1d(
    x: FloatArray,
    c: int,
    *,
    rng: np.random.Generator,
    epochs: int = 500,
    order_lr: float = 0.9,
    order_steps: int = 1000,
    tune_lr: float = 0.02,
    tune_nd: float = 1.0,
) -> tuple[IntArray, FloatArray]:
    """A one-dimensional self-organising map of c neurons (Bilge §6.3.2, Eq 6.4, Eq 6.5).

    Args:
        x: float array of shape (n, d).
        c: number of neurons (clusters), >= 1.
        rng: draws the presentation order of each epoch.
        epochs: passes over the data (Bilge: 500).
        order_lr, order_steps, tune_lr, tune_nd: MATLAB `learnsom`'s schedule (module docstring).

    Returns:
        (winners, weights): int64 array of shape (n,), each profile's winning neuron, and the
        neuron weights (c, d).
    """
    n, _d = x.shape
    if c < 1:
        raise ValueError(f"`clusters` must be >= 1, got {c}")
    if epochs < 1:
        raise ValueError(f"`som_epochs` must be >= 1, got {epochs}")
    w = _pc_line(x, c)
    order = rng.permuted(np.tile(np.arange(n, dtype=np.int64), (epochs, 1)), axis=1)
    _som_train(np.ascontiguousarray(x), w, order, order_lr, order_steps, tune_lr, tune_nd)
    d2 = (x * x).sum(axis=1)[:, None] - 2.0 * x @ w.T + (w * w).sum(axis=1)
    return np.argmin(d2, axis=1).astype(np.int64), w


def _pc_line(x: FloatArray, c: int) -> FloatArray:
    """c weights evenly along the first principal component of x, within ±1 sd around the mean
    (a deterministic start, as MATLAB's `initsompc`)."""
    mean = x.mean(axis=0)
    if c == 1 or x.shape[0] < 2:
        return np.tile(mean, (c, 1)).astype(np.float64)
    _, svals, vt = np.linalg.svd(x - mean, full_matrices=False)
    sd = svals[0] / np.sqrt(max(x.shape[0] - 1, 1))
    steps = np.linspace(-1.0, 1.0, c)
    return np.asarray(mean + np.outer(steps * sd, vt[0]), dtype=np.float64)


# ---------------------------------------------------------------------------- flat partitions
def partition(
    x: FloatArray,
    c: int,
    method: str,
    *,
    rng: np.random.Generator,
    fuzziness: float = 2.0,
    som_epochs: int = 500,
) -> Clusters:
    """Cluster the profiles `x` (n, d) into c clusters with `method` (Bilge Ch. 6).

    KMC and SOM partition the users; FCM puts a user in every cluster where her membership is
    at least 1/c (module docstring). c = 1 is one cluster of everybody (Bilge: "no clustering
    at all").
    """
    if method not in METHODS:
        raise ValueError(f"`method` must be one of {METHODS}, got {method!r}")
    n = x.shape[0]
    if c == 1 or n <= 1:
        return Clusters([np.arange(n, dtype=np.int64)], x.mean(axis=0, keepdims=True))
    c = min(c, n)
    if method == "kmeans":
        labels, centres = kmeans_correlation(x, c, init="random-partition", rng=rng)
        return Clusters(_members_of(labels, c), centres)
    if method == "fcm":
        u, centres = fuzzy_cmeans(x, c, rng=rng, q=fuzziness)
        inside: BoolArray = u >= 1.0 / c - 1e-12
        return Clusters([np.flatnonzero(inside[:, j]) for j in range(c)], centres)
    winners, weights = som_1d(x, c, rng=rng, epochs=som_epochs)
    return Clusters(_members_of(winners, c), weights)


def _members_of(labels: IntArray, c: int) -> list[IntArray]:
    order = np.argsort(labels, kind="stable")
    bounds = np.searchsorted(labels[order], np.arange(c + 1))
    return [np.sort(order[bounds[j] : bounds[j + 1]]).astype(np.int64) for j in range(c)]


# ---------------------------------------------------------------------------- bisecting tree
@numba.njit(cache=True)
def _descend(
    s: FloatArray, children: IntArray, centres: FloatArray, node: IntArray, steps: IntArray
) -> None:  # pragma: no cover - numba
    """Walk each standardised profile s[i] from node[i] to a leaf, in place (PCC to the two
    centres of each branch node, the higher wins, ties to the left)."""
    d = s.shape[1]
    for i in range(s.shape[0]):
        v = node[i]
        while children[v, 0] >= 0:
            left = 0.0
            right = 0.0
            for f in range(d):
                left += s[i, f] * centres[v, 0, f]
                right += s[i, f] * centres[v, 1, f]
            v = children[v, 1] if right > left else children[v, 0]
            steps[i] += 1
        node[i] = v


@dataclasses.dataclass(frozen=True)
class BisectingTree:
    """Bilge Algorithm 5's binary decision tree over n profiles.

    Node 0 is the root. For a branch node v, `children[v]` = (left, right) and `centres[v]` the
    two standardised k-means centres that forward a profile (PCC to each, the higher wins, ties
    to the left); for a leaf, `children[v]` = (−1, −1) and `members[v]` its rows.

    Attributes:
        children: int64 array of shape (n_nodes, 2).
        parent: int64 array of shape (n_nodes,), −1 for the root.
        centres: float array of shape (n_nodes, 2, d) (zeros at leaves).
        members: per node, the rows of a leaf (empty array at branch nodes).
    """

    children: IntArray
    parent: IntArray
    centres: FloatArray
    members: list[IntArray]

    @classmethod
    def build(
        cls,
        x: FloatArray,
        max_leaf: int,
        *,
        owners: IntArray | None = None,
        max_iter: int = 100,
    ) -> BisectingTree:
        """Recursive 2-means (first two rows as initial centres, correlation distance) until
        every leaf holds at most `max_leaf` users (Bilge Algorithm 5; module docstring for the
        degenerate split).

        Args:
            x: float array of shape (n, d), the profiles.
            max_leaf: N, the most users a leaf may hold.
            owners: int array of shape (n,): the user each row stands for (a clone's original
                user); a leaf's size is its number of distinct users. None: every row is a user.
            max_iter: most Lloyd iterations per split.
        """
        if max_leaf < 1:
            raise ValueError(f"the leaf size N must be >= 1, got {max_leaf}")

        def size(rows: IntArray) -> int:
            return int(rows.size if owners is None else np.unique(owners[rows]).size)

        d = x.shape[1]
        children: list[list[int]] = []
        parent: list[int] = []
        centres: list[FloatArray] = []
        members: list[IntArray] = []

        def new_node(rows: IntArray, up: int) -> int:
            children.append([-1, -1])
            parent.append(up)
            centres.append(np.zeros((2, d)))
            members.append(rows)
            return len(children) - 1

        stack = [new_node(np.arange(x.shape[0], dtype=np.int64), -1)]
        while stack:
            node = stack.pop()
            rows = members[node]
            if size(rows) <= max_leaf or np.ptp(standardise_rows(x[rows]), axis=0).max() < 1e-12:
                continue  # small enough, or identical profiles that no split can separate
            labels, two = kmeans_correlation(x[rows], 2, init="first-rows", max_iter=max_iter)
            left, right = rows[labels == 0], rows[labels == 1]
            if left.size == 0 or right.size == 0:
                continue  # k-means found no split: an oversized leaf
            centres[node] = two
            members[node] = np.zeros(0, dtype=np.int64)
            children[node] = [new_node(left, node), new_node(right, node)]
            stack.extend(children[node][::-1])
        return cls(
            np.array(children, dtype=np.int64),
            np.array(parent, dtype=np.int64),
            np.stack(centres),
            members,
        )

    @property
    def height(self) -> int:
        """Levels from the root to the deepest leaf, counting both (a lone root: 1)."""
        depth = np.zeros(self.parent.size, dtype=np.int64)
        for v in range(1, self.parent.size):  # parents are created before their children
            depth[v] = depth[self.parent[v]] + 1
        return int(depth.max()) + 1

    def descend(self, profiles: FloatArray, start: IntArray) -> tuple[IntArray, IntArray]:
        """Walk each profile (q, d) down from node `start[i]` to a leaf (Bilge §7.3.1: PCC to
        both centres of each branch node, the higher one wins, ties to the left).

        Returns:
            (leaves, steps): int64 arrays of shape (q,): the leaf reached and the branch nodes
            passed (each costs two similarity computations).
        """
        leaves = start.astype(np.int64).copy()
        steps = np.zeros(leaves.size, dtype=np.int64)
        _descend(standardise_rows(profiles), self.children, self.centres, leaves, steps)
        return leaves, steps

    def search(self, profiles: FloatArray) -> tuple[IntArray, IntArray, IntArray]:
        """Each profile's leaf and its sibling leaf (Bilge §7.3.1: the leaf's users and its
        sibling's are the candidates). When the sibling is a branch node the profile descends
        it by the same rule to a leaf; a lone root leaf has no sibling (−1).

        Returns:
            (leaves, siblings, steps): int64 arrays of shape (q,); `steps` counts the branch
            nodes passed on both walks.
        """
        q = profiles.shape[0]
        leaves, steps = self.descend(profiles, np.zeros(q, dtype=np.int64))
        up = self.parent[leaves]
        siblings = np.full(q, -1, dtype=np.int64)
        has = up >= 0
        if has.any():
            kids = self.children[up[has]]
            other = np.where(kids[:, 0] == leaves[has], kids[:, 1], kids[:, 0])
            sib_leaves, more = self.descend(profiles[has], other)
            siblings[has] = sib_leaves
            steps[has] += more
        return leaves, siblings, steps


__all__ = [
    "METHODS",
    "BisectingTree",
    "Clusters",
    "fuzzy_cmeans",
    "kmeans_correlation",
    "partition",
    "pearson",
    "som_1d",
    "standardise_rows",
]
