"""Zhu's PNCF and its pieces: the exponential-mechanism selection (statistically, against the
exact sequential probabilities, with broken variants rejected), the truncation of Algorithm 2
and Theorem 3.4.1, the perturbation scale, the predictors (Eq 3.2.3, L878) and the privacy
statement and events."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from privrec.server.models import PNCF, CoRatedKNN
from privrec.server.models.dp_neighbourhood import (
    kth_largest,
    pure_dp_event,
    select_without_replacement,
    truncated_scores,
    truncation_width,
)
from privrec.server.models.pncf import Candidates, neighbourhood_prediction
from privrec.shared.accounting.accountant import compose_epsilon, naive_epsilon

# A p-value below this rejects; with the fixed seeds below each test is deterministic, and for
# a fresh seed a correct sampler fails with probability 1e-3 (the test's false-failure rate).
ALPHA = 1e-3


def _exact_set_probabilities(weights: np.ndarray, k: int) -> dict[frozenset[int], float]:
    """P(selected set) under k sequential draws without replacement ∝ weights (enumerated)."""
    out: dict[frozenset[int], float] = {}
    for seq in itertools.permutations(range(weights.size), k):
        p, left = 1.0, weights.sum()
        for j in seq:
            p *= weights[j] / left
            left -= weights[j]
        key = frozenset(seq)
        out[key] = out.get(key, 0.0) + p
    return out


def _chi2_pvalue(samples: list[frozenset[int]], exact: dict[frozenset[int], float]) -> float:
    """Chi-square goodness of fit of sampled sets to `exact` (an unexpected set: p = 0)."""
    keys = list(exact)
    counts = {key: 0 for key in keys}
    for s in samples:
        if s not in counts:
            return 0.0
        counts[s] += 1
    observed = np.array([counts[key] for key in keys], dtype=float)
    expected = np.array([exact[key] for key in keys]) * len(samples)
    return float(stats.chisquare(observed, expected).pvalue)


def _sets(mask: np.ndarray, n_trials: int, n_cand: int) -> list[frozenset[int]]:
    rows = mask.reshape(n_trials, n_cand)
    return [frozenset(np.flatnonzero(r).tolist()) for r in rows]


LOG_W = np.array([1.2, 0.4, 0.0, -0.5, 0.9])
TRIALS = 20_000


def _gumbel_top_k(log_w: np.ndarray, k: int, seed: int) -> list[frozenset[int]]:
    """`select_without_replacement` on TRIALS independent segments of the same candidates."""
    n = log_w.size
    rng = np.random.default_rng(seed)
    seg = np.repeat(np.arange(TRIALS), n)
    mask = select_without_replacement(
        seg, np.tile(log_w, TRIALS), rng.gumbel(size=n * TRIALS), np.tile(np.arange(n), TRIALS), k
    )
    return _sets(mask, TRIALS, n)


def test_selection_follows_sequential_draws_without_replacement() -> None:
    """k = 2 of 5: the selected sets follow the exact probabilities of Zhu Algorithm 2
    (chi-square, 9 df, p ≥ 1e-3)."""
    samples = _gumbel_top_k(LOG_W, 2, seed=11)
    assert _chi2_pvalue(samples, _exact_set_probabilities(np.exp(LOG_W), 2)) > ALPHA
    # k = 3 too
    samples3 = _gumbel_top_k(LOG_W, 3, seed=12)
    assert _chi2_pvalue(samples3, _exact_set_probabilities(np.exp(LOG_W), 3)) > ALPHA


def test_the_test_rejects_broken_selections() -> None:
    """Draws with replacement (sets of one item occur), and weights exp(2·q) instead of
    exp(q) (a wrong ε), are both rejected by the same test."""
    exact = _exact_set_probabilities(np.exp(LOG_W), 2)
    rng = np.random.default_rng(13)
    p = np.exp(LOG_W) / np.exp(LOG_W).sum()
    with_replacement = [frozenset(rng.choice(5, size=2, p=p).tolist()) for _ in range(TRIALS)]
    assert _chi2_pvalue(with_replacement, exact) < ALPHA
    assert _chi2_pvalue(_gumbel_top_k(2 * LOG_W, 2, seed=14), exact) < ALPHA


def _algorithm_2_literal(
    c1_log_w: np.ndarray,
    c0_size: int,
    c0_log_w: float,
    k: int,
    rng: np.random.Generator,
    *,
    block_weighted: bool = True,
) -> frozenset[int]:
    """Zhu Algorithm 2 as printed: C₀ is one candidate of weight |C₀|·exp(·) (or, broken,
    exp(·) alone); drawing it picks a remaining member uniformly; k rounds without
    replacement. C₁ items are 0..len−1, C₀ members follow."""
    c1 = list(range(c1_log_w.size))
    c0 = list(range(c1_log_w.size, c1_log_w.size + c0_size))
    chosen: list[int] = []
    for _ in range(k):
        w1 = np.exp(c1_log_w[c1]) if c1 else np.zeros(0)
        w0 = (len(c0) if block_weighted else 1) * math.exp(c0_log_w) if c0 else 0.0
        total = w1.sum() + w0
        u = rng.random() * total
        if u < w1.sum():
            pick = c1[int(np.searchsorted(np.cumsum(w1), u, side="right"))]
            c1.remove(pick)
        else:
            pick = c0[int(rng.integers(len(c0)))]
            c0.remove(pick)
        chosen.append(pick)
    return frozenset(chosen)


def test_c0_block_equals_truncated_scores_and_its_unit_weight_is_rejected() -> None:
    """The C₀ block of Algorithm 2 (weight |C₀|·exp(ε(s_k − w)/(4k·RS)), uniform inside)
    samples exactly like giving each C₀ member the truncated score, which is how PNCF samples;
    a block of unit weight (the careless reading) is rejected."""
    c1 = np.array([1.0, 0.6, 0.2])
    floor = -0.4
    per_member = np.concatenate([c1, np.full(3, floor)])
    exact = _exact_set_probabilities(np.exp(per_member), 2)
    rng = np.random.default_rng(21)
    literal = [_algorithm_2_literal(c1, 3, floor, 2, rng) for _ in range(TRIALS)]
    assert _chi2_pvalue(literal, exact) > ALPHA
    ours = _gumbel_top_k(per_member, 2, seed=22)
    assert _chi2_pvalue(ours, exact) > ALPHA
    broken = [
        _algorithm_2_literal(c1, 3, floor, 2, rng, block_weighted=False) for _ in range(TRIALS)
    ]
    assert _chi2_pvalue(broken, exact) < ALPHA


# ------------------------------------------------------------------ truncation, hand values
def _cands(score: list[float], rs: list[float], seg: list[int] | None = None) -> Candidates:
    n = len(score)
    seg_arr = np.zeros(n, dtype=np.int64) if seg is None else np.array(seg)
    t = int(seg_arr.max()) + 1
    return Candidates(
        seg_arr,
        np.arange(n, dtype=np.int64),
        np.array(score),
        np.array(rs),
        np.full(n, 4.0),
        np.ones(n, dtype=bool),
        np.zeros(t),
        np.full(t, 3.0),
    )


def test_truncation_width_theorem_3_4_1() -> None:
    """w = min(s_k, (4k·RS/ε)·ln(k(|v| − k)/ρ)); 0 when |v| ≤ k."""
    w = truncation_width(
        np.array([0.5, 0.9, 0.7]),
        np.array([0.01, 0.001, 0.5]),
        np.array([100, 100, 2]),
        k=2,
        eps=1.0,
        rho=0.1,
    )
    expected0 = min(0.5, 4 * 2 * 0.01 * math.log(2 * 98 / 0.1))  # = 0.5: saturated
    expected1 = 4 * 2 * 0.001 * math.log(2 * 98 / 0.1)  # 0.0607 < 0.9
    np.testing.assert_allclose(w, [expected0, expected1, 0.0])
    assert expected1 < 0.9


def test_truncated_scores_and_kth_largest() -> None:
    """s_k is the k-th largest; ŝ = max(s, s_k − w); C₀ = {s < s_k − w}."""
    seg = np.array([0, 0, 0, 0, 1, 1])
    score = np.array([0.9, 0.5, 0.1, -0.3, 0.2, 0.4])
    s_k = kth_largest(seg, score, np.arange(6), 2, 2)
    np.testing.assert_allclose(s_k, [0.5, 0.2])
    trunc = truncated_scores(seg, score, s_k, np.array([0.3, 0.0]))
    np.testing.assert_allclose(trunc.scores, [0.9, 0.5, 0.2, 0.2, 0.2, 0.4])
    np.testing.assert_array_equal(trunc.in_c0, [False, False, True, True, False, False])


def test_selection_log_weights_hand_example() -> None:
    """ε = 1, k = 2, s = (0.9, 0.5, 0.1, −0.3), RS = (0.1, 0.2, 0.1, 0.5): w saturates at
    s_k = 0.5, so the floor is 0 and C₀ = {−0.3}; log-weights ε·ŝ/(4k·RS) with the pair's RS
    (C₀ with the largest, 0.5); RS&NM keeps −0.3; GS&NM (PCC: GS = 2) divides by 16."""
    cands = _cands([0.9, 0.5, 0.1, -0.3], [0.1, 0.2, 0.1, 0.5])
    pncf = PNCF(k=2, epsilon=1.0).selection_log_weights(cands)
    np.testing.assert_allclose(pncf, [0.9 / 0.8, 0.5 / 1.6, 0.1 / 0.8, 0.0])
    rs_nm = PNCF(k=2, variant="rs_nm").selection_log_weights(cands)
    np.testing.assert_allclose(rs_nm, [0.9 / 0.8, 0.5 / 1.6, 0.1 / 0.8, -0.3 / 4.0])
    gs_nm = PNCF(k=2, variant="gs_nm").selection_log_weights(cands)
    np.testing.assert_allclose(gs_nm, np.array([0.9, 0.5, 0.1, -0.3]) / 16.0)
    by_max = PNCF(k=2, selection_sensitivity="max").selection_log_weights(cands)
    np.testing.assert_allclose(by_max, np.array([0.9, 0.5, 0.1, 0.0]) / 4.0)
    beta = PNCF(k=2, smooth_beta=math.log(2)).selection_log_weights(cands)  # RS/2 (Lemma 2)
    np.testing.assert_allclose(beta, 2 * pncf)


def test_perturbation_scale_and_laplace_noise() -> None:
    """Algorithm 1: 2k·RS/ε; Eq 3.4.1: 2·RS/ε; the noise added to the selected similarities
    has mean |noise|/scale ≈ 1 (a standard Laplace; 20,000 draws, SE 0.007, tolerance 0.04
    = 5.7 SE), and no other candidate than the selected contributes."""
    cands = _cands([0.5] * 3, [0.1, 0.2, 0.4])
    np.testing.assert_allclose(PNCF(k=3, epsilon=0.5).perturbation_scale(cands), [1.2, 2.4, 4.8])
    np.testing.assert_allclose(
        PNCF(k=3, epsilon=0.5, perturbation="eq-3.4.1").perturbation_scale(cands), [0.4, 0.8, 1.6]
    )
    n = 20_000
    big = _cands([0.3] * n, [0.05] * n, seg=list(range(n)))  # one candidate per target
    model = PNCF(k=1, epsilon=1.0)
    selected, noisy = model._neighbours(big, (), np.array([0]), np.array([4.0]), np.arange(n))
    assert selected.all()
    scaled = (noisy - 0.3) / model.perturbation_scale(big)
    assert abs(np.abs(scaled).mean() - 1.0) < 0.04
    assert abs(np.median(scaled)) < 0.04


# ------------------------------------------------------------------ predictors
def test_neighbourhood_prediction_eq_3_2_3_and_fallback() -> None:
    """Σ s·r / Σ|s| over the selected usable neighbours; none → the fallback, count 0."""
    cands = Candidates(
        np.array([0, 0, 0, 1]),
        np.arange(4),
        np.array([0.8, -0.2, 0.5, 0.3]),
        None,
        np.array([4.0, 2.0, 5.0, 1.0]),
        np.array([True, True, True, True]),
        np.zeros(2),
        np.array([3.5, 3.5]),
    )
    selected = np.array([True, True, False, False])
    out, counts = neighbourhood_prediction(cands, selected, cands.score)
    np.testing.assert_allclose(out, [(0.8 * 4 - 0.2 * 2) / 1.0, 3.5])
    np.testing.assert_array_equal(counts, [2, 0])


def _toy() -> sp.csr_matrix:
    return sp.csr_matrix(
        np.array(
            [
                [5.0, 4.0, 0.0, 1.0],
                [4.0, 5.0, 2.0, 0.0],
                [1.0, 2.0, 5.0, 4.0],
                [0.0, 1.0, 4.0, 5.0],
                [5.0, 5.0, 1.0, 2.0],
            ]
        )
    )


def test_item_based_knn_hand_example() -> None:
    """Query rates items 1, 2, 3 (4, 2, 1); predicting item 0 with k = 2 COS neighbours: the
    two most similar of her items to item 0, weighted by their similarity (Eq 3.2.3)."""
    train = _toy()
    model = CoRatedKNN(k=2, similarity="cos").fit(train)
    dense = train.toarray()

    def cos(i: int, j: int) -> float:
        co = (dense[:, i] > 0) & (dense[:, j] > 0)
        a, b = dense[co, i], dense[co, j]
        return float(a @ b / np.sqrt((a @ a) * (b @ b)))

    sims = {j: cos(0, j) for j in (1, 2, 3)}
    top = sorted(sims, key=lambda j: -sims[j])[:2]
    ratings = {1: 4.0, 2: 2.0, 3: 1.0}
    expected = sum(sims[j] * ratings[j] for j in top) / sum(abs(sims[j]) for j in top)
    got, n = model.predict(np.array([1, 2, 3]), np.array([4.0, 2.0, 1.0]), np.array([0]))
    assert got[0] == pytest.approx(expected)
    assert n[0] == 2


def test_user_based_knn_l878() -> None:
    """User-based: r̄_a + Σ s(a,v)(r_vα − r̄_v)/Σ|s(a,v)| over the raters of α."""
    train = _toy()
    model = CoRatedKNN(k=10, mode="user", similarity="cos").fit(train)
    q_idx, q_val = np.array([0, 1]), np.array([5.0, 4.0])
    dense = train.toarray()
    num = den = 0.0
    for v in range(5):
        if dense[v, 3] == 0:
            continue
        co = dense[v, q_idx] > 0
        a, b = q_val[co], dense[v, q_idx][co]
        s = float(a @ b / np.sqrt((a @ a) * (b @ b))) if co.any() else 0.0
        mean_v = dense[v][dense[v] > 0].mean()
        num += s * (dense[v, 3] - mean_v)
        den += abs(s)
    got, _ = model.predict(q_idx, q_val, np.array([3]))
    assert got[0] == pytest.approx(4.5 + num / den)


@pytest.mark.parametrize("mode", ["item", "user"])
def test_pncf_with_huge_epsilon_is_the_non_private_model(mode: str) -> None:
    """ε → ∞ with the 'max' sensitivity: the draws become the top-k and the noise vanishes
    (continuous ratings and dense data, so that no two similarities tie)."""
    rng = np.random.default_rng(5)
    filled = rng.random((30, 12)) < 0.8
    r, c = np.nonzero(filled)
    train = sp.csr_matrix((rng.uniform(1, 5, r.size), (r, c)), shape=(30, 12))
    plain = CoRatedKNN(k=3, mode=mode, similarity="cos").fit(train)
    private = PNCF(k=3, mode=mode, similarity="cos", epsilon=1e9, selection_sensitivity="max")
    private.fit(train)
    q_idx, q_val = np.array([0, 2, 5, 7, 9]), np.array([4.0, 5.0, 1.0, 3.0, 2.0])
    items = np.arange(12)
    np.testing.assert_allclose(
        private.predict(q_idx, q_val, items)[0], plain.predict(q_idx, q_val, items)[0], atol=1e-6
    )


def test_same_question_same_answer_other_seed_other_answer() -> None:
    """An answer's noise is keyed by (seed, fold, query, item): a repeated query gets the same
    answer; another seed gives another."""
    train = _toy()
    q = (np.array([1, 2, 3]), np.array([4.0, 2.0, 1.0]))
    a = PNCF(k=2, epsilon=0.5).fit(train)
    first = a.predict(*q, np.array([0, 0]))[0]
    assert first[0] == first[1]
    np.testing.assert_array_equal(first, a.predict(*q, np.array([0, 0]))[0])
    b = PNCF(k=2, epsilon=0.5, random_state=1).fit(train)
    assert b.predict(*q, np.array([0]))[0][0] != first[0]


# ------------------------------------------------------------------ privacy
def test_pure_dp_event_has_the_stated_epsilon() -> None:
    """Binary RR with p = 2/(e^ε + 1) is exactly ε-DP; ε beyond 700 is recorded non-private."""
    for eps in (0.01, 0.5, 3.0):
        assert naive_epsilon([(pure_dp_event(eps), 1)], 0.0) == pytest.approx(eps)
    assert compose_epsilon([pure_dp_event(800.0)], 1e-6) == math.inf


@pytest.mark.parametrize(
    ("perturbation", "per_prediction"), [("algorithm-1", 1.0), ("eq-3.4.1", 18.0)]
)
def test_output_privacy_states_the_per_prediction_epsilon(
    perturbation: str, per_prediction: float
) -> None:
    """Algorithm 1: ε per prediction (selection ε/2 in k draws of ε/(2k), perturbation ε/2);
    Eq 3.4.1 as printed: (k + 1)·ε/2. Charged to the raters of the predicted item."""
    claim = PNCF(k=35, epsilon=1.0, perturbation=perturbation).output_privacy()
    assert claim.statement.epsilon == pytest.approx(per_prediction)
    assert claim.answer_scope == "raters" and claim.fit_event is None
    assert claim.answer_event is not None
    assert naive_epsilon([(claim.answer_event, 1)], 0.0) == pytest.approx(per_prediction)
    assert "local-sensitivity" in claim.statement.flags
    assert "claim-not-certified" in claim.statement.flags


def test_item_based_gs_nm_is_certified_user_based_is_not() -> None:
    """GS&NM item-based is a genuine ε-DP mechanism (no flag); user-based predictions use the
    neighbours' ratings unperturbed (flagged)."""
    assert PNCF(variant="gs_nm").output_privacy().statement.flags == ()
    flags = PNCF(variant="gs_nm", mode="user").output_privacy().statement.flags
    assert "neighbour-ratings-unperturbed" in flags and "claim-not-certified" in flags


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"epsilon": 0}, "`epsilon` must be > 0"),
        ({"variant": "dp"}, "`variant` must be one of"),
        ({"rho": 1.0}, "`rho` must lie in (0, 1)"),
        ({"k": 0}, "`k` must be an int >= 1"),
        ({"mode": "user", "candidates": "all"}, "`candidates` 'all'"),
        ({"perturbation": "both"}, "`perturbation` must be one of"),
        ({"random_state": -1}, "`random_state` must be an int >= 0"),
    ],
)
def test_bad_parameters_name_themselves(kwargs: dict[str, object], needle: str) -> None:
    with pytest.raises(ValueError) as info:
        PNCF(**kwargs)  # type: ignore[arg-type]
    assert needle in str(info.value)


def test_adopt_fit_shares_states_across_answer_time_parameters() -> None:
    """A PNCF of another k and ε answers from an adopted fit exactly as from its own; a model
    whose states differ (another similarity) refuses."""
    train = _toy()
    fitted = PNCF(k=2, epsilon=0.5).fit(train)
    own = PNCF(k=3, epsilon=2.0).fit(train)
    adopted = PNCF(k=3, epsilon=2.0).adopt_fit(fitted)
    q = (np.array([1, 2, 3]), np.array([4.0, 2.0, 1.0]))
    np.testing.assert_array_equal(
        adopted.predict(*q, np.arange(4))[0], own.predict(*q, np.arange(4))[0]
    )
    with pytest.raises(ValueError, match="cannot adopt the fit"):
        PNCF(k=3, similarity="cos").adopt_fit(fitted)
