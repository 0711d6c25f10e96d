"""A synthetic rating data set: low-rank preferences, popularity skew, log-normal activity.

The generator serves tests and populations larger than any real data set. Its model, for user u
and item i:

* **Popularity.** Items get popularity ranks ``r_i``, a random permutation of 1..n_items, and
  weights ``p_i ∝ r_i^(-a)`` (Zipf-like, ``a = popularity_exponent``; ``a = 0`` is uniform).
* **Activity.** Each user gets a log-normal weight ``w_u = exp(σ z_u)``, ``z_u ~ N(0, 1)``,
  ``σ = activity_sigma``. Target counts are ``t_u = clip(c · w_u, floor, cap)`` with ``c`` set so
  that ``Σ t_u = density · n_users · n_items``; ``floor = min(min_ratings, n_items // 2)`` and
  ``cap = 0.9 · n_items``.
* **Selection.** User u rates item i independently with probability
  ``π_ui = 1 − exp(−λ_u p_i)``, with ``λ_u`` solving ``Σ_i π_ui = t_u``. This is exactly the set of
  distinct items among Poisson(λ_u) popularity-weighted draws with replacement, which is how
  light users are sampled; heavy users are sampled cell by cell (same law). A user whose count
  falls below ``floor`` is drawn again (rejection), so the law is the one above conditioned on
  at least ``floor`` ratings per user. Which items are rated does not depend on the ratings
  (missing completely at random given popularity and activity).
* **Ratings.** Factors ``U_u, V_i ~ N(0, I_rank)``; the latent score is
  ``x_ui = μ + s · (U_u · V_i) / √rank + ν · ε_ui`` with ``ε ~ N(0, 1)``, ``μ = mean_rating``
  (default ``low + 0.625 · (high − low)``, 3.5 on 1..5), ``s = signal``, ``ν = noise``. The rating
  is ``clip(round(x_ui), low, high)``. ``(U_u · V_i)/√rank`` has mean 0 and variance 1 (kurtosis
  ``3 + 6/rank``), so the latent score has standard deviation ``√(s² + ν²)``.

Statistics (defaults: rank 5, density 0.05, a = 1, σ = 1, floor 20, 1..5, s = 1, ν = 0.5);
``tests/unit/shared/data/test_data_synthetic.py`` checks each of them:

* density ≈ ``density`` (within 1–2 %) whenever ``density · n_items ≥ floor``; otherwise every
  user sits at the floor and the density is about ``(floor + 3) / n_items`` (conditioning on at
  least ``floor`` adds about 3 ratings to a user whose target is the floor of 20);
* every user has at least ``floor`` ratings; the standard deviation of log ratings-per-user is
  ≈ σ when few users reach the floor or the cap (0.99 on 10,000 items; 0.86 on 2,000 items,
  where the floor and cap bind more often);
* item rating counts: an item's expected count is ``Σ_u π_ui``, which is ``∝ p_i`` for items
  no user saturates; the 10 % most rated items hold about 47 % of all ratings on 2,000 items
  with a = 1 (uniform, a = 0: about 11 %);
* ratings: mean ≈ 3.46, standard deviation ≈ 1.04, histogram ≈ 4 / 13 / 33 / 33 / 17 % for
  1 / 2 / 3 / 4 / 5, on any size (ML-100K: mean 3.53, sd 1.13, 6 / 11 / 27 / 34 / 21 %).

Every random draw comes from `shared.seeding.rng_for(seed, "synthetic", purpose, ...)`; users are
processed in fixed-size blocks with one stream per block, so the output depends only on the
arguments (bit for bit), not on timing or machine load.

Speed: 100,000 users × 10,000 items at density 0.05 (≈ 50 M ratings) take a few seconds;
1,000,000 users × 1,000 items (≈ 51 M ratings) about 12 s. Memory: the result is 12 bytes per
rating (float64 value, int32 item); the peak adds the blocks' parts (int32 items and the ratings
in the smallest integer dtype holding them, 5 bytes per rating on 1..5) and one block of about
0.5 M user × item booleans: about 1 GB at a million users.
"""

from __future__ import annotations

import functools
import logging
import math

import numpy as np
import scipy.sparse as sp

from privrec.shared.data.dataset import RatingData
from privrec.shared.seeding import rng_for
from privrec.shared.types import BoolArray, FloatArray, IntArray

logger = logging.getLogger(__name__)

_BLOCK_CELLS = 1 << 19
"""Users are processed in blocks of about this many user × item cells (one bool each; small
blocks stay in cache). Changing it changes the output for a given seed."""

_DENSE_LAMBDA = 0.2
"""A user whose Poisson draw count λ_u exceeds this times n_items is sampled cell by cell."""

_FLOAT32_MIN_THRESHOLD = 1e-3
"""float32 exponential draws (3x faster) are used only when every λ·p is at least this: their
resolution near 0 is about 1e-7, which would distort the inclusion of very rare items."""

_CAP_FRACTION = 0.9
_MAX_REDRAWS = 10_000


def _popularity(n_items: int, exponent: float, seed: int) -> FloatArray:
    """Zipf-like weights over items, in random rank order, summing to 1."""
    ranks = rng_for(seed, "synthetic", "popularity").permutation(n_items) + 1.0
    weights: FloatArray = np.power(ranks, -exponent)
    normalised: FloatArray = weights / float(weights.sum())
    return normalised


def _target_counts(
    *, n_users: int, n_items: int, density: float, sigma: float, floor: int, seed: int
) -> FloatArray:
    """Log-normal target ratings per user, clipped to [floor, cap], summing to the density."""
    cap = max(float(floor), _CAP_FRACTION * n_items)
    weights = np.exp(sigma * rng_for(seed, "synthetic", "activity").standard_normal(n_users))
    total = density * n_users * n_items
    if total <= floor * n_users:
        return np.full(n_users, float(floor))
    if total >= cap * n_users:
        return np.full(n_users, cap)
    # Σ clip(c·w, floor, cap) is increasing in c: bisect on log c.
    lo, hi = math.log(max(floor, 1e-9) / weights.max()), math.log(cap / weights.min())
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if np.clip(math.exp(mid) * weights, floor, cap).sum() < total:
            lo = mid
        else:
            hi = mid
    return np.clip(math.exp(0.5 * (lo + hi)) * weights, floor, cap)


def _poisson_rates(targets: FloatArray, p: FloatArray) -> FloatArray:
    """λ_u with Σ_i (1 − exp(−λ_u p_i)) = t_u, by interpolation on a fine log grid of λ."""
    grid = np.geomspace(1e-3, 60.0 / p.min(), 1024)
    expected = np.array([-np.expm1(-lam * p).sum() for lam in grid])
    return np.exp(np.interp(targets, expected, np.log(grid)))


def _alias_table(p: FloatArray) -> tuple[FloatArray, IntArray]:
    """Walker/Vose alias table: draw j uniform, keep j w.p. prob[j], else take alias[j]."""
    n = p.size
    scaled = p * n
    prob = np.ones(n)
    alias = np.arange(n, dtype=np.int64)
    small = [int(j) for j in np.flatnonzero(scaled < 1.0)]
    large = [int(j) for j in np.flatnonzero(scaled >= 1.0)]
    while small and large:
        s, g = small.pop(), large.pop()
        prob[s] = scaled[s]
        alias[s] = g
        scaled[g] -= 1.0 - scaled[s]
        (small if scaled[g] < 1.0 else large).append(g)
    return prob, alias


def _select_block(
    lam: FloatArray,
    p: FloatArray,
    alias: tuple[FloatArray, IntArray],
    rng: np.random.Generator,
) -> BoolArray:
    """Rated-cell mask of one block of users (rows) × all items."""
    n_items = p.size
    mask = np.zeros((lam.size, n_items), dtype=bool)
    dense = lam > _DENSE_LAMBDA * n_items
    # Light users: Poisson(λ) draws with replacement; duplicates collapse in the mask.
    counts = np.where(dense, 0, rng.poisson(lam))
    rows = np.repeat(np.arange(lam.size), counts)
    picks = rng.integers(0, n_items, size=rows.size)
    keep = rng.random(rows.size) < alias[0][picks]
    mask[rows, np.where(keep, picks, alias[1][picks])] = True
    # Heavy users: cell by cell, P(E < λ p) = 1 − exp(−λ p) for E ~ Exp(1).
    heavy = np.flatnonzero(dense)
    if heavy.size:
        mask[heavy] = _dense_rows(lam[heavy], p, rng)
    return mask


def _enforce_floor(
    mask: BoolArray,
    flat: IntArray,
    lam: FloatArray,
    p: FloatArray,
    *,
    floor: int,
    rng: np.random.Generator,
) -> IntArray:
    """Redraw rows with fewer than `floor` ratings (same law, cell by cell) until none is left.

    This conditions each user's row on having at least `floor` ratings. Returns the flat
    indices of the final mask (recomputed only if a row was redrawn).
    """
    n_items = mask.shape[1]
    short = np.flatnonzero(np.bincount(flat // n_items, minlength=mask.shape[0]) < floor)
    if short.size == 0:
        return flat
    for _ in range(_MAX_REDRAWS):
        mask[short] = _dense_rows(lam[short], p, rng)
        short = short[np.count_nonzero(mask[short], axis=1) < floor]
        if short.size == 0:
            return np.flatnonzero(mask)
    raise RuntimeError(f"could not give every user {floor} ratings after {_MAX_REDRAWS} redraws")


def _dense_rows(lam: FloatArray, p: FloatArray, rng: np.random.Generator) -> BoolArray:
    """Independent Bernoulli(1 − exp(−λ_u p_i)) cells for the given users (rows)."""
    if lam.size and lam.min() * p.min() >= _FLOAT32_MIN_THRESHOLD:
        thresholds = np.outer(lam.astype(np.float32), p.astype(np.float32))
        return rng.standard_exponential(thresholds.shape, dtype=np.float32) < thresholds
    return rng.standard_exponential((lam.size, p.size)) < np.outer(lam, p)


def _genres(item_factors: FloatArray, n_genres: int, seed: int) -> BoolArray:
    """Genre flags aligned with the item factors: each item has its best genre, plus any whose
    affinity exceeds 1 standard deviation (≈ 16 % of items per genre)."""
    rank = item_factors.shape[1]
    directions = rng_for(seed, "synthetic", "genres").standard_normal((n_genres, rank))
    affinity = item_factors @ directions.T / math.sqrt(rank)
    flags = affinity > 1.0
    flags[np.arange(flags.shape[0]), np.argmax(affinity, axis=1)] = True
    return flags


class SyntheticRatings:
    """The rating matrix of `make_synthetic`, generated block by block.

    The population-level draws (factors, popularity, activity and the Poisson rates λ_u) are
    made once, here: O(n_users) numbers, well under a second at a million users. The ratings
    come in blocks of `block_size` consecutive users, block b from its own streams
    (``("synthetic", "selection", b)`` and ``("synthetic", "noise", b)``): any block can be
    generated alone, in any order, and `rows` gives any range of users by generating only the
    blocks it overlaps. A client shard hosting a contiguous range of users thus generates only
    its own (`shared.population.load_population` with `rows`), and `matrix()` equals the
    concatenation of every block bit for bit.

    Args: those of `make_synthetic` (validated there).
    """

    def __init__(
        self,
        n_users: int,
        n_items: int,
        *,
        rank: int,
        density: float,
        popularity_exponent: float,
        activity_sigma: float,
        min_ratings: int,
        rating_scale: tuple[int, int],
        mean_rating: float | None,
        signal: float,
        noise: float,
        seed: int,
    ) -> None:
        self.n_users, self.n_items, self.seed = n_users, n_items, seed
        low, high = int(rating_scale[0]), int(rating_scale[1])
        self.scale = (low, high)
        self.mu = low + 0.625 * (high - low) if mean_rating is None else float(mean_rating)
        self.weight, self.noise = signal / math.sqrt(rank), noise
        self.density, self.popularity_exponent = density, popularity_exponent
        self.activity_sigma = activity_sigma
        self.floor = rating_floor(n_items, min_ratings)
        self.block_size = max(1, _BLOCK_CELLS // n_items)
        """Users per block (the unit of generation; changing it changes the output)."""
        factor_rng = rng_for(seed, "synthetic", "factors")
        # Stored (rank, n) so that each factor is a contiguous vector for the gathers below.
        self.user_factors = factor_rng.standard_normal((rank, n_users)).astype(np.float32)
        self.item_factors = factor_rng.standard_normal((rank, n_items)).astype(np.float32)
        self._selection: tuple[FloatArray, FloatArray, tuple[FloatArray, IntArray]] | None = None

    def _selection_law(self) -> tuple[FloatArray, FloatArray, tuple[FloatArray, IntArray]]:
        """(λ_u of every user, item popularity p, p's alias table), made on first use."""
        if self._selection is None:
            p = _popularity(self.n_items, self.popularity_exponent, self.seed)
            targets = _target_counts(
                n_users=self.n_users,
                n_items=self.n_items,
                density=self.density,
                sigma=self.activity_sigma,
                floor=self.floor,
                seed=self.seed,
            )
            self._selection = (_poisson_rates(targets, p), p, _alias_table(p))
        return self._selection

    def blocks_of(self, start: int, stop: int) -> range:
        """The numbers of the blocks that hold users `start` ... `stop - 1`."""
        if stop <= start:
            return range(0)
        return range(start // self.block_size, (stop - 1) // self.block_size + 1)

    def block(self, number: int) -> tuple[IntArray, np.ndarray, np.ndarray]:
        """Block `number`: (ratings per user, int32 items, ratings in the smallest integer
        dtype holding them), users in order and items ascending within each user."""
        lam_all, p, alias = self._selection_law()
        n_items, rank = self.n_items, self.user_factors.shape[0]
        low, high = self.scale
        start = number * self.block_size
        stop = min(self.n_users, start + self.block_size)
        rng = rng_for(self.seed, "synthetic", "selection", number)
        lam = lam_all[start:stop]
        mask = _select_block(lam, p, alias, rng)
        flat = _enforce_floor(mask, np.flatnonzero(mask), lam, p, floor=self.floor, rng=rng)
        rows = flat // n_items
        counts = np.bincount(rows, minlength=stop - start)
        cols = flat - rows * n_items
        # U_u · V_i at the rated cells; float32 (its error is far below the noise and rounding).
        scores = np.zeros(flat.size, dtype=np.float32)
        for k in range(rank):
            term = self.item_factors[k][cols]
            term *= np.repeat(self.user_factors[k][start:stop], counts)
            scores += term
        noise_rng = rng_for(self.seed, "synthetic", "noise", number)
        latent = noise_rng.standard_normal(flat.size, dtype=np.float32)
        latent *= self.noise
        latent += self.weight * scores
        latent += self.mu
        np.rint(latent, out=latent)
        np.clip(latent, low, high, out=latent)
        return (
            counts.astype(np.int64),
            cols.astype(np.int32),
            latent.astype(np.min_scalar_type(high)),
        )

    def rows(self, start: int, stop: int) -> sp.csr_matrix:
        """The ratings of users `start` ... `stop - 1` (CSR, float64, shape
        (stop - start, n_items)), generating only the blocks that hold them."""
        start, stop = max(0, start), min(self.n_users, max(start, stop))
        numbers = self.blocks_of(start, stop)
        parts = [self.block(number) for number in numbers]
        counts = np.concatenate([c for c, _, _ in parts]) if parts else np.zeros(0, np.int64)
        skip = start - numbers.start * self.block_size if parts else 0
        first = int(counts[:skip].sum())  # the cells of the first block's earlier users
        indptr = np.zeros(stop - start + 1, dtype=np.int64)
        np.cumsum(counts[skip : skip + stop - start], out=indptr[1:])
        cells = slice(first, first + int(indptr[-1]))
        # the small parts joined, then one float64 copy of the range (at a million users the
        # peak is the parts, their join and the result: 1 + 1 + 8 bytes a rating)
        small = np.concatenate([v for _, _, v in parts]) if parts else np.zeros(0, np.uint8)
        cols = np.concatenate([i for _, i, _ in parts]) if parts else np.zeros(0, np.int32)
        del parts
        data = small[cells].astype(np.float64)
        del small
        index_dtype = np.int32 if indptr[-1] < np.iinfo(np.int32).max else np.int64
        matrix = sp.csr_matrix(
            (data, cols[cells].astype(index_dtype, copy=False), indptr.astype(index_dtype)),
            shape=(stop - start, self.n_items),
        )
        matrix.has_sorted_indices = True
        return matrix

    def matrix(self) -> sp.csr_matrix:
        """Every user's ratings (`rows(0, n_users)`)."""
        return self.rows(0, self.n_users)


_generator = functools.lru_cache(maxsize=2)(SyntheticRatings)
"""`SyntheticRatings` of given arguments, made once per process: a shard making its users a
chunk at a time (`make_synthetic(rows=...)`) draws the population-level parameters once, not
once per chunk (at a million users each draw is a few hundred milliseconds)."""


def rating_floor(n_items: int, min_ratings: int = 20) -> int:
    """The fewest ratings any synthetic user has: ``min(min_ratings, n_items // 2)`` (the
    generator redraws a user below it)."""
    return max(0, min(min_ratings, n_items // 2))


def make_synthetic(
    n_users: int,
    n_items: int,
    *,
    rank: int = 5,
    density: float = 0.05,
    popularity_exponent: float = 1.0,
    activity_sigma: float = 1.0,
    min_ratings: int = 20,
    rating_scale: tuple[int, int] = (1, 5),
    mean_rating: float | None = None,
    signal: float = 1.0,
    noise: float = 0.5,
    n_genres: int = 0,
    seed: int,
    name: str = "synthetic",
    users: bool = True,
    rows: range | None = None,
) -> RatingData:
    """Generate a synthetic `RatingData` (model and statistics in the module docstring).

    Args:
        n_users: number of users (rows), > 0.
        n_items: number of items (columns), > 0.
        rank: dimension of the user and item preference factors, > 0.
        density: target fraction of rated cells, in (0, 1).
        popularity_exponent: Zipf exponent ``a`` of item popularity, >= 0.
        activity_sigma: σ of the log-normal user activity, >= 0.
        min_ratings: every user gets at least ``min(min_ratings, n_items // 2)`` ratings.
        rating_scale: (low, high) integers with 0 < low < high; ratings are integers in it.
        mean_rating: μ, the latent score's mean; default ``low + 0.625 · (high − low)``.
        signal: s, the standard deviation of the low-rank part of the latent score, >= 0.
        noise: ν, the standard deviation of the per-rating Gaussian noise, >= 0.
        n_genres: if > 0, items get this many genre flags derived from their factors
            (``genre_names`` ``"genre-00"``, …); 0 leaves `genres` None.
        seed: run seed; every draw comes from ``rng_for(seed, "synthetic", …)``.
        name: `RatingData.name`.
        users: False: the catalogue alone (items, rating scale, genres: the same as with users)
            and no user, without generating a rating: what a node that holds no user's data
            reads (`shared.population.load_catalogue`; a million users' ratings took 13 s).
        rows: a contiguous range of users: only those (rows ``rows.start`` ... of the full
            data, same ratings bit for bit, user ids ``rows``), generating only the blocks
            that hold them (`SyntheticRatings.rows`): what a client shard hosting them makes.

    Returns:
        `RatingData` with ``user_ids = 0..n_users-1`` (none without `users`; `rows` with it) and
        ``item_ids = 0..n_items-1``.

    Raises:
        ValueError: a parameter out of range (the message names it and echoes the value).
    """
    _validate(
        n_users=n_users, n_items=n_items, rank=rank, density=density,
        popularity_exponent=popularity_exponent, activity_sigma=activity_sigma,
        min_ratings=min_ratings, rating_scale=rating_scale, signal=signal, noise=noise,
        n_genres=n_genres,
    )  # fmt: skip
    low, high = int(rating_scale[0]), int(rating_scale[1])
    generator = _generator(
        n_users, n_items, rank=rank, density=density, popularity_exponent=popularity_exponent,
        activity_sigma=activity_sigma, min_ratings=min_ratings, rating_scale=(low, high),
        mean_rating=mean_rating, signal=signal, noise=noise, seed=seed,
    )  # fmt: skip
    if users and rows is not None:
        if rows.step != 1 or not 0 <= rows.start <= rows.stop <= n_users:
            raise ValueError(f"`rows` must be a contiguous range within the users, got {rows!r}")
        matrix = generator.rows(rows.start, rows.stop)
        user_ids = np.arange(rows.start, rows.stop, dtype=np.int64)
    elif users:
        matrix = generator.matrix()
        user_ids = np.arange(n_users, dtype=np.int64)
    else:
        matrix, user_ids = sp.csr_matrix((0, n_items), dtype=np.float64), np.zeros(0, np.int64)
    item_factors = generator.item_factors
    genres = _genres(item_factors.T.astype(np.float64), n_genres, seed) if n_genres > 0 else None
    logger.debug("synthetic %d x %d: %d ratings", matrix.shape[0], n_items, matrix.nnz)
    return RatingData(
        name=name,
        ratings=matrix,
        user_ids=user_ids,
        item_ids=np.arange(n_items, dtype=np.int64),
        rating_scale=(float(low), float(high)),
        genres=genres,
        genre_names=tuple(f"genre-{g:02d}" for g in range(n_genres)) if genres is not None else (),
    )


def _validate(
    *,
    n_users: int,
    n_items: int,
    rank: int,
    density: float,
    popularity_exponent: float,
    activity_sigma: float,
    min_ratings: int,
    rating_scale: tuple[int, int],
    signal: float,
    noise: float,
    n_genres: int,
) -> None:
    checks = [
        ("n_users", n_users, isinstance(n_users, int | np.integer) and n_users > 0, "an int > 0"),
        ("n_items", n_items, isinstance(n_items, int | np.integer) and n_items > 0, "an int > 0"),
        ("rank", rank, isinstance(rank, int | np.integer) and rank > 0, "an int > 0"),
        ("density", density, 0.0 < density < 1.0, "in (0, 1)"),
        ("popularity_exponent", popularity_exponent, popularity_exponent >= 0.0, ">= 0"),
        ("activity_sigma", activity_sigma, activity_sigma >= 0.0, ">= 0"),
        ("min_ratings", min_ratings, min_ratings >= 0, ">= 0"),
        ("signal", signal, signal >= 0.0, ">= 0"),
        ("noise", noise, noise >= 0.0, ">= 0"),
        ("n_genres", n_genres, n_genres >= 0, ">= 0"),
    ]
    for name, value, ok, what in checks:
        if not ok:
            raise ValueError(f"`{name}` must be {what}, got {value!r}")
    if (
        len(rating_scale) != 2
        or any(float(v) != int(v) for v in rating_scale)
        or not 0 < rating_scale[0] < rating_scale[1]
    ):
        raise ValueError(
            "`rating_scale` must be integers (low, high) with 0 < low < high "
            f"(a stored 0 would read as unrated), got {rating_scale!r}"
        )


__all__ = ["SyntheticRatings", "make_synthetic", "rating_floor"]
