"""`oue_decoder`: the Bayes decoder of OUE releases with a population prior, linear in users.

An OUE release (Wang et al. 2017, §4.4) reports each bit j of the one-hot item set on its own:
Pr[b_j = 1] = p if j ∈ P, q otherwise. The adversary, who sees every release and the public
(p, q), decodes each user's item set:

* **Prior.** π_j, the fraction of users holding item j, from all the releases themselves (the
  frequency oracle's unbiased estimate, Wang et al. §4: π̂_j = (Σ_u b_uj / N − q)/(p − q)),
  clipped to [1/(2N), 1 − 1/(2N)]: no side knowledge beyond the transcript.
* **Posterior** of "j ∈ P" given b_j, item by item (the bits are independent given P):
  odds = π_j/(1 − π_j) · (p/q if b_j = 1 else (1 − p)/(1 − q)); the score is the log-odds.
* **Size.** ĉ_u = (|b_u| − N_items·q)/(p − q), E[|b_u|] = c p + (N_items − c) q inverted,
  rounded and clamped to [1, N_items] (Balu §3.1.3's role for BLIP, here exact in mean).
* **Output.** The posterior of an unset item grows with its prior, so the ĉ items of highest
  posterior (P̂, taken by the referee, Balu §3.5.2) are among her set bits and her ĉ unset
  items of highest prior: per user only these |b_u| + ĉ_u items are output with their
  log-odds, never all N_items (the referee ranks the items left out below every output one;
  none of them can enter P̂, only the presence AUC sees them as ties).

Everything runs in blocks of users over one dense bit block at a time: time and memory are
linear in the number of users (`bench/population.py`). This attack is ours (the OUE paper
has none); Balu's single decoder is its analogue for BLIP. Knowledge: the releases and the
public parameters only.

References:
    T. Wang, J. Blocki, N. Li, S. Jha, "Locally differentially private protocols for frequency
    estimation", USENIX Security 2017, §4, §4.4.
    R. Balu, PhD thesis, Univ. Rennes 1, 2016, §3.1.3, §3.5.2.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from privrec.adversary.attacks.base import Attack, AttackOutput, OutputKind, PackedEstimates
from privrec.adversary.observations import Observations
from privrec.shared.errors import ValidationError
from privrec.shared.mechanisms.base import BitPayload
from privrec.shared.mechanisms.oue import OptimisedUnaryEncoding
from privrec.shared.types import BoolArray, FloatArray, IntArray

BLOCK = 4096
"""Users decoded per block (one dense block of BLOCK x N_items bits)."""


def stack_bits(payloads: Sequence[object], n_items: int, offset: int = 0) -> BoolArray:
    """OUE releases as one (n, N_items) bool block; `offset` numbers them in errors."""
    bits = np.zeros((len(payloads), n_items), dtype=bool)
    for k, pl in enumerate(payloads):
        if not isinstance(pl, BitPayload) or np.shape(pl.bits) != (n_items,):
            raise ValidationError(
                f"profiles[{offset + k}]", f"expected an OUE bit vector of length {n_items}"
            )
        bits[k] = pl.bits
    return bits


def bit_blocks(payloads: Iterable[object], n_items: int) -> Iterator[BoolArray]:
    """The releases of `payloads` stacked `BLOCK` at a time (one block decoded at a time)."""
    it = iter(payloads)
    offset = 0
    while block := list(itertools.islice(it, BLOCK)):
        yield stack_bits(block, n_items, offset)
        offset += len(block)


def population_prior(
    payloads: Iterable[object], n_items: int, p: float, q: float
) -> tuple[FloatArray, IntArray]:
    """π̂_j = (Σ_u b_uj / N − q)/(p − q), clipped to [1/(2N), 1 − 1/(2N)] (module docstring),
    and each release's number of set bits |b_u| (for the sizes of the outputs)."""
    ones = np.zeros(n_items)
    weights = []
    for bits in bit_blocks(payloads, n_items):
        ones += bits.sum(axis=0)
        weights.append(bits.sum(axis=1))
    weight = np.concatenate(weights) if weights else np.zeros(0, np.int64)
    n = max(weight.size, 1)
    half = 0.5 / n
    prior: FloatArray = np.clip((ones / n - q) / (p - q), half, 1.0 - half)
    return prior, weight


def set_size(weight: IntArray, n_items: int, p: float, q: float) -> IntArray:
    """ĉ_u = (|b_u| − N_items·q)/(p − q), rounded and clamped to [1, N_items]."""
    c_hat: IntArray = np.clip(np.rint((weight - n_items * q) / (p - q)), 1, n_items).astype(
        np.int64
    )
    return c_hat


def decode_block(
    bits: BoolArray, log_prior_odds: FloatArray, order: IntArray, p: float, q: float
) -> tuple[IntArray, IntArray, FloatArray, IntArray]:
    """Decode one block of users (module docstring): their estimates over the set bits and
    the ĉ unset items of highest prior, as (items per user, items, log-odds, ĉ per user) with
    each user's items increasing, users in row order.

    Args:
        bits: bool (n, N_items), the releases.
        log_prior_odds: float (N_items,), ln(π_j/(1 − π_j)).
        order: the items by decreasing prior (ties to the smaller index).
        p, q: OUE's public probabilities.
    """
    n, n_items = bits.shape
    set_llr, unset_llr = math.log(p / q), math.log((1.0 - p) / (1.0 - q))
    weight = bits.sum(axis=1)
    c_hat = set_size(weight, n_items, p, q)
    # unset items in prior order; the first ĉ of them in each row are kept (they lie among
    # the first ĉ + |b| items of that order, so only that many columns are scanned)
    width = int(min(n_items, (c_hat + weight).max(initial=0)))
    head = order[:width]
    unset_ordered = ~bits[:, head]
    kept = unset_ordered & (np.cumsum(unset_ordered, axis=1, dtype=np.int32) <= c_hat[:, None])
    chosen = bits.copy()
    chosen[:, head] |= kept
    rows, items = np.nonzero(chosen)  # row-major: per row, items increasing
    scores = log_prior_odds[items] + np.where(bits[rows, items], set_llr, unset_llr)
    counts = np.bincount(rows, minlength=n)
    return counts, items.astype(np.int32), scores.astype(np.float64), c_hat


class OueDecoder(Attack):
    """The Bayes decoder of OUE releases with the population prior (module docstring)."""

    name = "oue_decoder"
    knowledge = "OUE item-set releases + their public parameters (the prior from all releases)"
    applies_to = ("oue",)

    def _fit(self, observations: Observations) -> AttackOutput:
        mech = observations.run_config.mechanism()
        if not isinstance(mech, OptimisedUnaryEncoding):
            raise ValidationError("run_config.mechanism", "oue_decoder needs OUE releases")
        p, q, n_items = float(mech.p), float(mech.q), observations.n_items
        if not q < p:
            raise ValidationError("oue.epsilon", "must be > 0 (at ε = 0 OUE releases noise)")
        targets = observations.targets()
        user_ids = list(targets)
        prior, weight = population_prior(observations.profiles.values(), n_items, p, q)
        if len(targets) < len(observations.profiles):  # the targets' weights, in their order
            weight = weight[[uid in targets for uid in observations.profiles]]
        log_odds = np.log(prior) - np.log1p(-prior)
        order = np.argsort(-prior, kind="stable")
        # each user's output holds her |b_u| set items and min(ĉ_u, N_items − |b_u|) unset
        # ones (decode_block): the packed arrays are allocated once, at their exact size
        c_hat = set_size(weight, n_items, p, q)
        indptr = np.zeros(len(user_ids) + 1, dtype=np.int64)
        np.cumsum(weight + np.minimum(c_hat, n_items - weight), out=indptr[1:])
        items = np.empty(int(indptr[-1]), dtype=np.int32)
        scores = np.empty(int(indptr[-1]), dtype=np.float64)
        start = 0
        for bits in bit_blocks(targets.values(), n_items):
            counts, block_items, block_scores, _ = decode_block(bits, log_odds, order, p, q)
            stop = start + bits.shape[0]
            if not np.array_equal(counts, np.diff(indptr[start : stop + 1])):
                raise RuntimeError("oue_decoder: a block's output sizes differ from |b| + ĉ")
            items[indptr[start] : indptr[stop]] = block_items
            scores[indptr[start] : indptr[stop]] = block_scores
            start = stop
        per_user = PackedEstimates(user_ids, indptr, items, scores)
        sizes = dict(zip(user_ids, c_hat.tolist(), strict=True))
        c_mean = float(np.mean(c_hat)) if c_hat.size else float("nan")
        return AttackOutput(
            attack=self.name,
            kind=OutputKind.ITEM_SET,
            knowledge=type(self).knowledge,
            per_user=per_user,
            diagnostics={"users": float(len(per_user)), "c_hat_mean": c_mean},
            set_sizes=sizes,
        )


__all__ = [
    "OueDecoder",
    "bit_blocks",
    "decode_block",
    "population_prior",
    "set_size",
    "stack_bits",
]
