"""Bisecting k-means trees with user clones: BKM, BKM+ and their private forms (Bilge Ch. 7).

OFFLINE (Bilge §7.3):

1. **Clones** (BKM+, Algorithm 6). Each training user u gets ω clones. A clone holds all of u's
   filled cells plus n_ec = ⌊n_r·ρ⌋ pseudo-self-predictions (PSPs) in randomly chosen empty
   cells of u, distinct across her clones (n_r = her filled cells; ρ the density). A PSP is the
   kNN prediction of u herself from her `psp_neighbours` (100) nearest users (Eq 2.2 on true
   ratings; on U′ Eq 2.6, a z-score: the server cannot de-normalise). On U′ the server cannot
   tell fake cells from genuine ones, so n_r counts both.
2. **Tree** (Algorithm 5). The FBPs (PBP by default, "relying on purchase data") of the
   originals and their clones are split recursively by 2-means — the first two rows as initial
   centres, correlation distance — until every leaf holds at most N users
   (`server.models.clustering.BisectingTree`). Rows are ordered originals first (canonical user
   order), then clone 1 of every user, clone 2, …; the head rows are therefore original users.

ONLINE (§7.3.1): the active user's FBP walks down the tree by PCC to the two centres of each
branch node; the candidates are the users of her leaf and of its sibling; exact similarities
with them only (Eq 2.1 or Eq 2.4); the N nearest candidates who filled q are the neighbours of
item q, averaged with Eq 2.2 or Eq 2.6 (the "raters" rule of `server.models.cluster_knn`; the
literal "marks the nearest N of them as neighbors", then those who filled q, is
``neighbours="top-k"``). N is both the maximum leaf size and the neighbour count. BKM is BKM+
with ω = 0.

Choices where the thesis is silent (docs/decisions/clustering.md):

* **Clones are never neighbours** ("predictions are produced through original user profiles
  only", §7.5.1): a clone in a candidate leaf brings its original user ("if a is similar to any
  clone profile, she also most likely be similar to the parent", §7.3.2).
* **Leaf size counts users, not rows**: a node is split while it holds more than N distinct
  users, a user and her clones counting once ("a BDT with at most N users in the leaf nodes",
  §7.3.1). Counting rows instead would shrink the candidate pool as ω grows (on ML-100K with
  ω = 5 the median query had 61 distinct candidates instead of 103) and make T fall with ω,
  while the thesis reports T rising slightly with ω (18 s → 20 s, Table 7.2).
* **Sibling that is a subtree**: the active user descends it by the same rule to a leaf, so the
  candidates stay within two leaves (the thesis's 2(h − 1 + N) bound).
* **Not enough empty cells** for ω distinct sets of n_ec cells: each clone gets
  ⌊empty/ω⌋ cells.
* **PSP values** enter nothing when the profile is a PBP: PBPs count cells, not values, and
  clones are never neighbours (extraction §3.4 [DERIVED]). They are then not computed; with an
  RBP they are.
* The clone cells of user u are drawn from `rng_for(random_state, "clones", u)`, the same for
  every fold; the PSP values (RBP) and the tree are fold-specific.

References:
    Bilge, A. PhD thesis, Anadolu University, 2013, Ch. 7, Algorithms 5 and 6, Tables 7.1–7.5.
    Bilge, A., Polat, H. "A scalable privacy-preserving recommendation scheme via bisecting
    k-means clustering", Information Processing & Management 49(4), 2013.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np
import scipy.sparse as sp

from privrec.server.models.candidate_knn import CandidateKNN, Pool, Route
from privrec.server.models.clustering import BisectingTree
from privrec.server.models.features import feature_profiles
from privrec.server.models.knn import PPCF, PearsonKNN
from privrec.server.models.neighbourhood import neighbour_scores
from privrec.shared.capabilities import ModelCapabilities, ModelInput, ScoreKind, Serving
from privrec.shared.seeding import rng_for
from privrec.shared.types import FloatArray, IntArray


@dataclasses.dataclass(frozen=True)
class Clones:
    """The clones of a set of users (Bilge Algorithm 6).

    Attributes:
        matrix: CSR of shape (ω·n, m): clone i of user j is row i·n + j, with the user's cells
            and her PSP cells (PSP values 0 when not computed).
        parents: int64 array of shape (ω·n,), each clone's user (a global training row).
    """

    matrix: sp.csr_matrix
    parents: IntArray


def clone_cells(
    row_cells: IntArray, n_items: int, clones: int, density: float, rng: np.random.Generator
) -> list[IntArray]:
    """The PSP cells of each of a user's `clones` clones (Algorithm 6, lines 5–8, 13–16):
    n_ec = ⌊n_r·ρ⌋ cells each, taken in turn from one random permutation of her empty cells,
    so no two clones share a PSP cell (⌊empty/ω⌋ each when the empty cells run short)."""
    empty = np.setdiff1d(np.arange(n_items, dtype=np.int64), row_cells, assume_unique=True)
    order = empty[rng.permutation(empty.size)]
    n_ec = min(int(np.floor(row_cells.size * density)), empty.size // clones)
    return [np.sort(order[i * n_ec : (i + 1) * n_ec]) for i in range(clones)]


class _BisectingKNN(CandidateKNN):
    """The tree and clones shared by `BisectingCF` and `BisectingPPCF` (module docstring)."""

    clones: int
    density: float
    psp_neighbours: int

    def _set_tree(self, clones: int, density: float, psp_neighbours: int) -> None:
        if isinstance(clones, bool) or not isinstance(clones, int | np.integer) or clones < 0:
            raise ValueError(f"`clones` must be an int >= 0, got {clones!r}")
        if not float(density) > 0.0:
            raise ValueError(f"`density` must be > 0, got {density!r}")
        if (
            isinstance(psp_neighbours, bool)
            or not isinstance(psp_neighbours, int | np.integer)
            or psp_neighbours < 1
        ):
            raise ValueError(f"`psp_neighbours` must be an int >= 1, got {psp_neighbours!r}")
        self.clones, self.density = int(clones), float(density)
        self.psp_neighbours = int(psp_neighbours)

    # ---------------------------------------------------------------- offline
    def make_clones(self, rows: IntArray) -> Clones:
        """The ω clones of each training row in `rows` (Bilge Algorithm 6), their PSPs
        predicted from the other rows of `rows` (values only for an RBP; module docstring)."""
        train, n_items = self._train, self.n_items_
        cache: dict[int, list[IntArray]] = self._fit_cache.setdefault("clone_cells", {})
        for r in rows.tolist():
            if r not in cache:  # the same cells for every fold (module docstring)
                cache[r] = clone_cells(
                    train.indices[train.indptr[r] : train.indptr[r + 1]].astype(np.int64),
                    n_items,
                    self.clones,
                    self.density,
                    rng_for(self.random_state, "clones", r),
                )
        cells = [cache[r] for r in rows.tolist()]
        values = [self._psp_values(r, c, rows) for r, c in zip(rows, cells, strict=True)]
        own = train[rows].tocoo()
        blocks = []
        for i in range(self.clones):
            sizes = [c[i].size for c in cells]
            psp_rows = np.repeat(np.arange(rows.size, dtype=np.int64), sizes)
            psp_cols = np.concatenate([c[i] for c in cells]) if rows.size else psp_rows
            psp_vals = np.concatenate([v[i] for v in values]) if rows.size else np.zeros(0)
            blocks.append(
                sp.csr_matrix(
                    (
                        np.concatenate([own.data, psp_vals]),
                        (np.concatenate([own.row, psp_rows]), np.concatenate([own.col, psp_cols])),
                    ),
                    shape=(rows.size, n_items),
                )
            )
        matrix = sp.vstack(blocks, format="csr") if blocks else sp.csr_matrix((0, n_items))
        return Clones(matrix, np.tile(rows, self.clones).astype(np.int64))

    def _psp_values(self, row: int, cells: list[IntArray], rows: IntArray) -> list[FloatArray]:
        """The PSPs of user `row` at each clone's cells: her kNN prediction from her
        `psp_neighbours` nearest users among `rows` (herself excluded); zeros for a PBP."""
        if self.profile == "pbp" or not any(c.size for c in cells):
            return [np.zeros(c.size) for c in cells]
        own = slice(self._train.indptr[row], self._train.indptr[row + 1])
        idx = self._train.indices[own].astype(np.int64)
        val = self._train.data[own]
        allowed = np.zeros(self.n_users_, dtype=bool)
        allowed[rows] = True
        allowed[row] = False
        targets = np.concatenate(cells)
        avg, _ = neighbour_scores(
            self._dev_csc,
            self._weights(idx, val),
            targets,
            self.psp_neighbours,
            allowed,
            self.neighbours,
        )
        psp = self._finish(avg, val)
        return np.split(psp, np.cumsum([c.size for c in cells])[:-1])

    def _build_pool(self, rows: IntArray, group: int | None) -> Pool:
        assert self.item_features_ is not None
        profiles = self.profiles_[rows]
        parents = rows
        if self.clones:
            clones = self.make_clones(rows)
            extra = feature_profiles(clones.matrix, self.item_features_, self.profile)
            profiles = np.vstack([profiles, extra])
            parents = np.concatenate([rows, clones.parents])
        tree = BisectingTree.build(profiles, self.k, owners=parents)
        blocks = [np.unique(parents[m]) for m in tree.members]
        return Pool(rows, blocks, tree)

    # ---------------------------------------------------------------- online
    def _route(self, pool: Pool, profiles: FloatArray) -> list[Route]:
        tree: BisectingTree = pool.router
        leaves, siblings, steps = tree.search(profiles)
        return [
            Route((int(leaf),) if sib < 0 else (int(leaf), int(sib)), 2 * int(s))
            for leaf, sib, s in zip(leaves, siblings, steps, strict=True)
        ]

    def tree(self, exclude_group: int | None = None) -> BisectingTree:
        """The tree the queries of `exclude_group` (a fold, or None) are routed in."""
        self._check_fitted()
        allowed = self._allowed(exclude_group)
        tree: BisectingTree = self._pool(allowed).router
        return tree


class BisectingPPCF(_BisectingKNN, PPCF):
    """P²BKM+ (P²BKM with `clones=0`): the bisecting k-means tree on U′ (Bilge §7.3.3,
    Table 7.5). Fitted on RPT releases; `predict` returns P′_aq for the client to de-normalise.

    Args:
        k: N, the maximum leaf size and the neighbour count (Bilge: 80).
        clones: ω, clones per user (Bilge: 5; 0 = P²BKM, no clones).
        density: ρ, PSPs per clone as a fraction of the user's filled cells (Bilge: 1).
        psp_neighbours: neighbours of a PSP (Bilge: 100).
        profile: "pbp" (Bilge) or "rbp".
        neighbours: "raters" (default), "top-k" (the thesis's text read literally) or
            "absolute" (`server.models.neighbourhood`).
        random_state: seeds the clones' cells.
    """

    name: ClassVar[str] = "bkm_ppcf"
    capabilities: ClassVar[ModelCapabilities] = ModelCapabilities(
        ModelInput.RELEASES, Serving.QUERIES, ScoreKind.ZSCORE
    )
    _knn_base = PPCF

    def __init__(
        self,
        k: int = 80,
        clones: int = 5,
        density: float = 1.0,
        psp_neighbours: int = 100,
        profile: str = "pbp",
        neighbours: str = "raters",
        random_state: int = 0,
    ) -> None:
        PPCF.__init__(self, k)
        self._set_common(profile, neighbours, random_state)
        self._set_tree(clones, density, psp_neighbours)


class BisectingCF(_BisectingKNN, PearsonKNN):
    """BKM+ (BKM with `clones=0`) on true ratings (Bilge §7.5.1, Tables 7.1–7.3): a
    trusted-curator run (the `raw` mechanism); `predict` returns ratings. Parameters as
    `BisectingPPCF`, plus the following.

    Args:
        clip: (lo, hi) rating scale to clip predictions (and PSPs) to, or None.
    """

    name: ClassVar[str] = "bkm_cf"
    capabilities: ClassVar[ModelCapabilities] = ModelCapabilities(
        ModelInput.RELEASES, Serving.QUERIES, ScoreKind.RATING
    )
    _knn_base = PearsonKNN

    def __init__(
        self,
        k: int = 80,
        clones: int = 5,
        density: float = 1.0,
        psp_neighbours: int = 100,
        profile: str = "pbp",
        neighbours: str = "raters",
        random_state: int = 0,
        *,
        clip: tuple[float, float] | None = None,
    ) -> None:
        PearsonKNN.__init__(self, k, clip=clip)
        self._set_common(profile, neighbours, random_state)
        self._set_tree(clones, density, psp_neighbours)


__all__ = ["BisectingCF", "BisectingPPCF", "Clones", "clone_cells"]
