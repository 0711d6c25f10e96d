"""Naive Bayes CF on RRT-disguised binary ratings: PPNBC with item extraction and densifying
(Bilge Ch. 8; Miyahara & Pazzani 2000; Kaleli & Polat 2007).

NBC-CF (Bilge Eq 8.1): to classify target item q for active user a, her rated items are the
training examples (labelled like/dislike by her) and the other users are the features (user u's
value at an item is feature f_u):

    p(c | f_1..f_n) ∝ p(c) · Π_{u filled q} p(f_u = y_uq | c),   c ∈ {like, dislike}

The server answers P(like) (`ScoreKind.PROBABILITY`); the client reads the class (like when
P > ½).

**Estimation from masked data** (the thesis cites Kaleli & Polat 2007 without the formulas; our
estimator, docs/decisions/bilge_schemes.md, "Ch. 8"). A released value is right with probability θ
(Procedure 2), so an observed y stands for a true like with "soft" probability
s = θ·y + (1 − θ)(1 − y) (prior ½). Every count of the classifier is a sum of such soft
indicators, which is exactly Bilge Eq 8.3's rule (θ² to the observed pair, θ(1 − θ) to each
half-flipped pair, (1 − θ)² to the fully flipped one; the thesis's "(1 − θ²)" is a typo):

    N_u(c, v) = Σ_{i filled by a and u} A_c(i)·B_v(u, i),   A_1 = s_ai, A_0 = 1 − s_ai,
                                                             B_1 = s_ui, B_0 = 1 − s_ui
    p(v | c)  = (N_u(c, v) + 1) / (N_u(c, 1) + N_u(c, 0) + 2)           (Laplace, M&P 2000)
    p(y_uq | c) = s_uq·p(1 | c) + (1 − s_uq)·p(0 | c)     (the observation is itself masked)
    p(c)      = (Σ_i A_c(i) + 1) / (Σ_i (A_1(i) + A_0(i)) + 2)

With θ = 1 the soft counts are plain counts: the non-private NBC of Miyahara & Pazzani.

**Item extraction (e)** (§8.3.1): offline, for every item the e items of highest Tanimoto
coefficient (Bilge Eq 8.2, T = ((S11 + S00) − (S10 + S01))/(S11 + S00 + S10 + S01), with S
estimated by Eq 8.3, i.e. T = Σ_u (2s_ui − 1)(2s_uj − 1) / #co-raters); online, only q's e items
serve as a's training examples. The active user's unrated cells among them are filled with her
mean vote (§8.3: "fill some of a's unrated items' cells"), de-biased for θ, as soft labels.

**Densifying (d)** (§8.3.2, Algorithm 7): offline, before extraction, each user u draws
ρ ~ U(0, d] and gets ⌊ρ % of her empty cells⌋, chosen uniformly, filled with PPNBC's personalised
P(like) for her (all items, the other users of the pool as features, from U′ before
densifying); a filled cell's soft value is that probability.

Choices where the thesis is silent (docs/decisions/bilge_schemes.md, "Ch. 8"):

* "ρ % of the unrated items' cells" (the §8.3.2 text and Ch. 8's d ≈ density reading) rather
  than Algorithm 7's n_r·ρ.
* Pairs of items with no co-rating user have no Tanimoto coefficient; they rank below every
  pair that has one (never extracted before an item with evidence). Ties go to the smaller index.
* Without extraction (e = None) nothing of the active user's is filled: the non-preprocessed
  PPNBC. q itself is never one of its own training examples.
* The active user's mean vote is her masked like-rate de-biased for θ, (ȳ − (1 − θ))/(2θ − 1),
  clipped to [0, 1] (½ at θ = ½).
* `n_neighbours` counts the feature users that share at least one training item with a.

References:
    Bilge, A. PhD thesis, Anadolu University, 2013, Ch. 8 (Eq 8.1–8.3, Algorithm 7).
    Miyahara, K., Pazzani, M. "Collaborative filtering with the simple Bayesian classifier",
    PRICAI 2000.
    Kaleli, C., Polat, H. "Providing private recommendations using naive Bayesian classifier",
    Advances in Intelligent Web Mastering, 2007.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from privrec.server.models.base import UInt32Array
from privrec.server.models.offline import OfflineRecommender, column_entries
from privrec.server.models.params import check_k, check_number
from privrec.shared.capabilities import ModelCapabilities, ModelInput, ScoreKind, Serving
from privrec.shared.seeding import rng_for
from privrec.shared.types import BoolArray, FloatArray, IntArray

NO_EVIDENCE = -2.0
"""Tanimoto score given to item pairs with no co-rating user (below the range [−1, 1])."""


def soft_like(values: FloatArray, theta: float) -> FloatArray:
    """P(true like | released y) = θ·y + (1 − θ)(1 − y) under a ½ prior (Bilge §8.3.1)."""
    return theta * values + (1.0 - theta) * (1.0 - values)


def prior_log_odds(like_mass: FloatArray, dislike_mass: FloatArray) -> FloatArray:
    """log p(like)/p(dislike) with Laplace's correction over the (soft) training labels."""
    return np.asarray(np.log(like_mass + 1.0) - np.log(dislike_mass + 1.0))


def feature_log_odds(
    s_q: FloatArray, n11: FloatArray, n10: FloatArray, n01: FloatArray, n00: FloatArray
) -> FloatArray:
    """log p(y_uq | like)/p(y_uq | dislike) per feature user (module docstring).

    Args:
        s_q: soft like value of each feature's cell at q.
        n11, n10: soft counts of (a likes, u likes) and (a likes, u dislikes) on co-filled items.
        n01, n00: the same with a disliking.
    """
    p_like = (n11 + 1.0) / (n11 + n10 + 2.0)  # p(u likes | a likes)
    p_dislike = (n01 + 1.0) / (n01 + n00 + 2.0)  # p(u likes | a dislikes)
    given_like = s_q * p_like + (1.0 - s_q) * (1.0 - p_like)
    given_dislike = s_q * p_dislike + (1.0 - s_q) * (1.0 - p_dislike)
    return np.asarray(np.log(given_like) - np.log(given_dislike))


def tanimoto(soft: sp.csr_matrix) -> FloatArray:
    """Item–item Tanimoto coefficient (Bilge Eq 8.2) from soft like values (Eq 8.3).

    S11 + S00 − S10 − S01 = Σ_u (2s_ui − 1)(2s_uj − 1) and S11 + S00 + S10 + S01 = #co-raters.

    Args:
        soft: CSR (n, m) of soft like values; stored entries are filled cells.

    Returns:
        float64 (m, m) in [−1, 1]; `NO_EVIDENCE` where no user filled both items.
    """
    d = soft.copy()
    d.data = 2.0 * soft.data - 1.0
    r = soft.copy()
    r.data = np.ones_like(soft.data)
    num = np.asarray((d.T @ d).toarray())
    den = np.asarray((r.T @ r).toarray())
    out = np.full(num.shape, NO_EVIDENCE)
    np.divide(num, den, out=out, where=den > 0)
    return out


def extraction_lists(similarity: FloatArray, e: int) -> IntArray:
    """For every item, the e other items of highest similarity (ties: smaller index).

    Returns:
        int64 array (m, min(e, m − 1)).
    """
    m = similarity.shape[0]
    keyed = -similarity.copy()
    keyed[np.arange(m), np.arange(m)] = np.inf  # an item is not its own neighbour
    return np.argsort(keyed, axis=1, kind="stable")[:, : min(e, m - 1)].astype(np.int64)


@dataclasses.dataclass(frozen=True)
class NBCOffline:
    """One pool's preprocessed data: the (densified) soft matrix and the extraction lists."""

    soft_csc: sp.csc_matrix
    extract: IntArray | None
    densified: int


class PPNBC(OfflineRecommender):
    """PPNBC with item extraction and densifying (Bilge Ch. 8; see the module docstring).

    Fitted on U′, the matrix of RRT releases (0/1 values at rated cells). Queried with the
    active user's fresh RRT release; answers P(like) per target item.

    Args:
        theta: the mechanism's public θ (a released value is right with probability θ); 1 for
            the non-private NBC on true binary ratings.
        e: extraction size (Ch. 8: 20 on MLP), or None to use every item (no extraction).
        d: densification rate, ρ ~ U(0, d] percent of each user's empty cells (Ch. 8: 3 on
            MLP); 0 for none.
        fill_active: fill the active user's unrated cells among q's extracted items with her
            mean vote.
        random_state: seed of the densifying draws (per training row).
    """

    name: ClassVar[str] = "ppnbc"
    capabilities: ClassVar[ModelCapabilities] = ModelCapabilities(
        ModelInput.RELEASES, Serving.QUERIES, ScoreKind.PROBABILITY
    )
    mechanism_params: ClassVar[tuple[str, ...]] = ("theta",)

    def __init__(
        self,
        *,
        theta: float = 0.7,
        e: int | None = None,
        d: float = 0.0,
        fill_active: bool = True,
        random_state: int = 0,
    ) -> None:
        self.theta = check_number("theta", theta, low=0.5, high=1.0)
        self.e = None if e is None else check_k(e, "e")
        self.d = check_number("d", d, low=0.0, high=100.0)
        if not isinstance(fill_active, bool):
            raise ValueError(f"`fill_active` must be true or false, got {fill_active!r}")
        self.fill_active = fill_active
        if isinstance(random_state, bool) or not isinstance(random_state, int) or random_state < 0:
            raise ValueError(f"`random_state` must be an int >= 0, got {random_state!r}")
        self.random_state = random_state

    # ---------------------------------------------------------------- fitting
    def _fit(self, train: sp.csr_matrix) -> None:
        _check_binary("train", train.data)
        soft = train.copy()
        soft.data = soft_like(train.data, self.theta)
        self._soft = soft

    def _build_offline(self, allowed: BoolArray) -> NBCOffline:
        soft, added = self._densify(allowed) if self.d > 0 else (self._soft, 0)
        extract = None
        if self.e is not None:
            extract = extraction_lists(tanimoto(soft[allowed]), self.e)
        csc = soft.tocsc()
        csc.sort_indices()
        return NBCOffline(csc, extract, added)

    def _densify(self, allowed: BoolArray) -> tuple[sp.csr_matrix, int]:
        """Algorithm 7 for the rows of the pool: PSPs by PPNBC from U′ (all items)."""
        soft = self._soft
        pool = np.flatnonzero(allowed)
        n, m = soft.shape
        actives, targets = [], []
        for row in pool.tolist():
            rng = rng_for(self.random_state, "densify", row)
            rho = rng.uniform(0.0, self.d)  # ρ ~ U(0, d]  (the open end has probability 0)
            empty = np.setdiff1d(
                np.arange(m), soft.indices[soft.indptr[row] : soft.indptr[row + 1]]
            )
            chosen = rng.permutation(empty)[: int(np.floor(rho / 100.0 * empty.size))]
            actives.append(np.full(chosen.size, row))
            targets.append(np.sort(chosen))
        act = np.concatenate(actives) if actives else np.zeros(0, np.int64)
        tgt = np.concatenate(targets) if targets else np.zeros(0, np.int64)
        if act.size == 0:
            return soft, 0
        like = soft[pool]
        ones = like.copy()
        ones.data = np.ones_like(like.data)
        dislike = ones - like
        # soft counts between every pool row (as the active user) and every pool row (feature)
        n11 = np.asarray((like @ like.T).toarray())
        n10 = np.asarray((like @ dislike.T).toarray())
        n01 = np.asarray((dislike @ like.T).toarray())
        n00 = np.asarray((dislike @ dislike.T).toarray())
        where = np.full(n, -1, dtype=np.int64)
        where[pool] = np.arange(pool.size)
        csc = soft.tocsc()
        csc.sort_indices()
        pos, rows, slot = column_entries(csc, tgt)
        a = where[act[slot]]
        u = where[rows]
        keep = (u >= 0) & (u != a)  # features: the pool's other rows
        pos, slot, a, u = pos[keep], slot[keep], a[keep], u[keep]
        ll = feature_log_odds(csc.data[pos], n11[a, u], n10[a, u], n01[a, u], n00[a, u])
        like_mass = np.asarray(like.sum(axis=1), dtype=np.float64).ravel()
        counts = np.diff(like.indptr).astype(np.float64)
        log_odds = prior_log_odds(like_mass, counts - like_mass)[where[act]]
        log_odds = log_odds + np.bincount(slot, weights=ll, minlength=tgt.size)
        psp = 1.0 / (1.0 + np.exp(-log_odds))
        added = sp.csr_matrix((psp, (act, tgt)), shape=(n, m))
        out = (soft + added).tocsr()  # disjoint supports: a sum is a union
        out.sort_indices()
        return out, int(tgt.size)

    # ---------------------------------------------------------------- online
    def _answer(
        self,
        offline: Any,
        query_indices: IntArray,
        query_values: FloatArray,
        items: IntArray,
        allowed: BoolArray,
    ) -> tuple[FloatArray, UInt32Array]:
        _check_binary("query_values", query_values)
        pre: NBCOffline = offline
        m = self.n_items_
        a_like = np.zeros(m)
        a_like[query_indices] = soft_like(query_values, self.theta)
        a_has = np.zeros(m)
        a_has[query_indices] = 1.0
        mean_vote = self._mean_vote(query_values)
        scores = np.zeros(items.size)
        counts = np.zeros(items.size, dtype=np.uint32)
        if pre.extract is None:
            # every item is a training example: a has no value at her targets (they are what she
            # asks), so one set of counts serves every q
            evidence = self._counts(
                pre.soft_csc, query_indices, a_like[query_indices], 1.0 - a_like[query_indices]
            )
        for t, q in enumerate(items.tolist()):
            if pre.extract is not None:
                cols = pre.extract[q]
                like, has = a_like[cols], a_has[cols]
                if self.fill_active:
                    like = np.where(has > 0, like, mean_vote)
                    has = np.ones_like(has)
                evidence = self._counts(pre.soft_csc, cols, like, has - like)
            scores[t], counts[t] = self._classify(pre.soft_csc, evidence, q, allowed)
        return 1.0 / (1.0 + np.exp(-scores)), counts

    @staticmethod
    def _counts(
        csc: sp.csc_matrix, cols: IntArray, a_like: FloatArray, a_dislike: FloatArray
    ) -> FloatArray:
        """The soft counts N_u(c, v) of every row on a's training items `cols`, shape (5, n):
        n11, n10, n01, n00 and the prior's (like, dislike) masses in the last row's first two
        cells (module docstring)."""
        pos, rows, slot = column_entries(csc, cols)
        s = csc.data[pos]
        n = csc.shape[0]
        out = np.zeros((5, n))
        out[0] = np.bincount(rows, weights=s * a_like[slot], minlength=n)
        out[1] = np.bincount(rows, weights=(1.0 - s) * a_like[slot], minlength=n)
        out[2] = np.bincount(rows, weights=s * a_dislike[slot], minlength=n)
        out[3] = np.bincount(rows, weights=(1.0 - s) * a_dislike[slot], minlength=n)
        out[4, :2] = a_like.sum(), a_dislike.sum()
        return out

    @staticmethod
    def _classify(
        csc: sp.csc_matrix, counts: FloatArray, q: int, allowed: BoolArray
    ) -> tuple[float, int]:
        """Log-odds of like for target q (Bilge Eq 8.1) and the number of feature users that
        share a training item with a."""
        fpos, frows, _ = column_entries(csc, np.array([q], dtype=np.int64))
        ok = allowed[frows]
        fpos, frows = fpos[ok], frows[ok]
        n11, n10, n01, n00 = (counts[j][frows] for j in range(4))
        ll = feature_log_odds(csc.data[fpos], n11, n10, n01, n00)
        prior = prior_log_odds(counts[4, :1], counts[4, 1:2])[0]
        return float(prior + ll.sum()), int(np.sum(n11 + n10 + n01 + n00 > 0))

    def _mean_vote(self, values: FloatArray) -> float:
        """Her like-rate from her masked votes, de-biased for θ and clipped to [0, 1]."""
        if self.theta == 0.5:
            return 0.5
        rate = (float(values.mean()) - (1.0 - self.theta)) / (2.0 * self.theta - 1.0)
        return float(np.clip(rate, 0.0, 1.0))


def _check_binary(name: str, values: FloatArray) -> None:
    bad = values[(values != 0.0) & (values != 1.0)]
    if bad.size:
        raise ValueError(
            f"`{name}` must hold binary (0/1) RRT releases, got value {float(bad[0])!r}"
        )


__all__ = [
    "NO_EVIDENCE",
    "PPNBC",
    "extraction_lists",
    "feature_log_odds",
    "prior_log_odds",
    "soft_like",
    "tanimoto",
]
