"""Balu's information measures: what a BLIP or JLT release says about the profile (§3.3.3).

The one module for these closed forms (the reproduction `balu-mi` and the tests read them here;
Bilge's ch. 3 measures of RPT are `shared.privacy.measures`). p_ε itself is defined once, by the
mechanism: `shared.mechanisms.blip.flip_probability`.

How much a sanitized sketch says about one item of the profile (the single decoder's quantity
I(B̃_P; X)) and about the whole profile per item (the joint decoder's I(B̃_P; P)/c). By (3.14)
and (3.15) an adversary wanting error rates (α₂, η₁) can handle a catalogue of up to
N ≈ η₁·exp(I/(1 − α₂)) items, so a difference ΔI in nats lets the joint decoder "tackle" e^{ΔI}
times more items than the single one (§3.3.3.1, Figure 3.1's reading). All in nats.

BLIP, simple model of §3.1.2 (independent uniform hash positions):
    p = 1 − (1 − 1/L)^K  (3.5),   π_c = 1 − (1 − p)^c  (3.6),
    π̃_c = (1 − p_ε)π_c + p_ε(1 − π_c)  (3.7),   p_ε = 1/(1 + e^{ε/K})  (3.4);
    I(B̃; X) = L[h_b(π̃_c) − (1 − p)h_b(π̃_{c−1}) − p·h_b(p_ε)]  (3.16),
    I(B̃; X) ≈ L·p·(h_b(π̃) − h_b(p_ε))  (3.18),
    I(B̃; P) = L(h_b(π̃_c) − h_b(p_ε))  (3.19),
    h_b(π̃_c) − h_b(p_ε) ≤ log 2 − h_b(p_ε) ≤ (ε/K)·e^{ε/K}/(1 + e^{ε/K}) ≤ ε/K  (3.21).
Typical Bloom design: K = ⌈log 2·L/c⌉ (3.20), L = ⌈−c log P_fp/(log 2)²⌉ (3.22), giving
    (1/c)I(B̃; P) ~ −(log P_fp/log 2)·(1 − h_b((1 + 2^{−ε/(−log P_fp)})^{−1})/log 2)  (3.23),
    I(B̃; X) ~ log 2·(1/c)I(B̃; P)  (3.24): the joint decoder is 1/log 2 ≈ 1.44× as powerful.
JLT (differential entropies, §3.3.3.2):
    I(Ỹ; X) = (L/2) log(1 + 1/((c − 1) + Lσ²))  (3.25),
    I(Ỹ; P)/c = (L/(2c)) log(1 + c/(Lσ²))  (3.26),
with the bounds ε/(32 + 2ε(c − 1)/L) and ε/32 under (3.10) (σ² ≥ 16 ln(1/δ)/ε² and
ε < ln(1/δ)). (3.25)'s bound is printed "2ε(c−1)L"; the derivation gives 2ε(c−1)/L, used here
(Balu extraction §8.3).

References:
    R. Balu, PhD thesis, Univ. Rennes 1, 2016, §3.3, Eqs. (3.12)–(3.26), Figure 3.1.
    P. Moulin, "Universal fingerprinting: capacity and random-coding exponents", 2008 [Mou08].
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from privrec.shared.mechanisms.blip import flip_probability
from privrec.shared.types import FloatArray

ArrayLike = float | npt.NDArray[np.floating]
LN2 = math.log(2.0)


def binary_entropy(p: ArrayLike) -> FloatArray:
    """h_b(p) = −p log p − (1 − p) log(1 − p) in nats, Balu (3.17); h_b(0) = h_b(1) = 0.

    Args:
        p: a probability or an array of them.

    Returns:
        h_b(p), elementwise (divide by log 2 for bits).
    """
    q = np.asarray(p, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = -(q * np.log(q)) - (1.0 - q) * np.log1p(-q)
    result: FloatArray = np.where((q <= 0.0) | (q >= 1.0), 0.0, out)
    return result


def _flip(epsilon: ArrayLike, n_hashes: ArrayLike) -> FloatArray:
    """p_ε of (3.4) over arrays (`flip_probability` of the mechanism)."""
    return flip_probability(np.asarray(epsilon, dtype=np.float64), np.asarray(n_hashes))


def blip_codeword_density(n_bits: ArrayLike, n_hashes: ArrayLike) -> FloatArray:
    """p = P[X_j(ℓ) = 1] = 1 − (1 − 1/L)^K, Balu (3.5)."""
    big_l = np.asarray(n_bits, dtype=np.float64)
    out: FloatArray = -np.expm1(np.asarray(n_hashes) * np.log1p(-1.0 / big_l))
    return out


def blip_filter_density(c: ArrayLike, n_bits: ArrayLike, n_hashes: ArrayLike) -> FloatArray:
    """π_c = P[B_P(ℓ) = 1] = 1 − (1 − 1/L)^{cK}, Balu (3.6)."""
    big_l = np.asarray(n_bits, dtype=np.float64)
    out: FloatArray = -np.expm1(np.asarray(c) * np.asarray(n_hashes) * np.log1p(-1.0 / big_l))
    return out


def blip_release_density(
    c: ArrayLike, n_bits: ArrayLike, n_hashes: ArrayLike, epsilon: ArrayLike
) -> FloatArray:
    """π̃_c = (1 − p_ε)π_c + p_ε(1 − π_c), Balu (3.7).

    Args:
        c: the profile size.
        n_bits: L.
        n_hashes: K.
        epsilon: BLIP's ε.

    Returns:
        The probability that a released bit is 1, broadcast over the arguments.
    """
    pe = _flip(epsilon, n_hashes)
    pi = blip_filter_density(c, n_bits, n_hashes)
    out: FloatArray = (1.0 - pe) * pi + pe * (1.0 - pi)
    return out


def blip_single_information(
    c: ArrayLike, n_bits: ArrayLike, n_hashes: ArrayLike, epsilon: ArrayLike
) -> FloatArray:
    """I(B̃_P; X), the single decoder's information about one item, Balu (3.16).

    I = L[h_b(π̃_c) − (1 − p)h_b(π̃_{c−1}) − p·h_b(p_ε)], nats (simple model: independent
    uniform hash positions). Arguments as `blip_release_density`; ε = 0 gives 0.
    """
    big_l = np.asarray(n_bits, dtype=np.float64)
    p = blip_codeword_density(big_l, n_hashes)
    c_arr = np.asarray(c, dtype=np.float64)
    out: FloatArray = big_l * (
        binary_entropy(blip_release_density(c_arr, big_l, n_hashes, epsilon))
        - (1.0 - p) * binary_entropy(blip_release_density(c_arr - 1.0, big_l, n_hashes, epsilon))
        - p * binary_entropy(_flip(epsilon, n_hashes))
    )
    return out


def _blip_bit_gain(
    c: ArrayLike, n_bits: ArrayLike, n_hashes: ArrayLike, epsilon: ArrayLike
) -> FloatArray:
    """h_b(π̃_c) − h_b(p_ε): what one released bit says about the profile (3.18), (3.19)."""
    pit = blip_release_density(c, n_bits, n_hashes, epsilon)
    return binary_entropy(pit) - binary_entropy(_flip(epsilon, n_hashes))


def blip_single_information_approx(
    c: ArrayLike, n_bits: ArrayLike, n_hashes: ArrayLike, epsilon: ArrayLike
) -> FloatArray:
    """I(B̃_P; X) ≈ L·p·(h_b(π̃) − h_b(p_ε)), Balu (3.18) (π̃ = π̃_c: sizes not told apart).

    Can exceed the joint information per item (Digg at ε = 59); prefer (3.16) for checks.
    """
    big_l = np.asarray(n_bits, dtype=np.float64)
    p = blip_codeword_density(big_l, n_hashes)
    out: FloatArray = big_l * p * _blip_bit_gain(c, big_l, n_hashes, epsilon)
    return out


def blip_joint_information_per_item(
    c: ArrayLike, n_bits: ArrayLike, n_hashes: ArrayLike, epsilon: ArrayLike
) -> FloatArray:
    """I(B̃_P; P)/c, the joint decoder's information per item, Balu (3.19) divided by c.

    I(B̃_P; P) = L(h_b(π̃_c) − h_b(p_ε)), nats.
    """
    big_l = np.asarray(n_bits, dtype=np.float64)
    out: FloatArray = big_l * _blip_bit_gain(c, big_l, n_hashes, epsilon) / np.asarray(c)
    return out


def blip_bound_chain(epsilon: float, n_hashes: int) -> tuple[float, float, float, float]:
    """The four right-hand sides of (3.21), non-decreasing, nats per bit.

    Returns:
        log 2 − h_b(p_ε); its closed form log 2 − log(1 + e^{ε/K}) + (ε/K)e^{ε/K}/(1 + e^{ε/K})
        (equal to the first); (ε/K)e^{ε/K}/(1 + e^{ε/K}); ε/K. Each bounds the joint
        information per bit h_b(π̃_c) − h_b(p_ε).
    """
    t = epsilon / n_hashes
    pe = flip_probability(epsilon, n_hashes)
    sig = 1.0 / (1.0 + math.exp(-t))  # e^t/(1 + e^t)
    first = LN2 - float(binary_entropy(pe))
    second = LN2 - float(np.logaddexp(0.0, t)) + t * sig
    return first, second, t * sig, t


def typical_bloom_design(c: int, false_positive: float) -> tuple[int, int]:
    """(L, K) of the usual Bloom filter design for c items at false-positive rate P_fp.

    L = ⌈−c log P_fp/(log 2)²⌉ (3.22), then K = ⌈log 2·L/c⌉ (3.20).
    """
    big_l = math.ceil(-c * math.log(false_positive) / LN2**2)
    return big_l, math.ceil(LN2 * big_l / c)


def blip_typical_joint_per_item(epsilon: ArrayLike, false_positive: float) -> FloatArray:
    """(1/c)I(B̃_P; P) under the typical design, Balu (3.23) (independent of c)."""
    a = -math.log(false_positive)
    e = np.asarray(epsilon, dtype=np.float64)
    out: FloatArray = (a / LN2) * (1.0 - binary_entropy(1.0 / (1.0 + 2.0 ** (-e / a))) / LN2)
    return out


def blip_typical_single_information(epsilon: ArrayLike, false_positive: float) -> FloatArray:
    """I(B̃_P; X) ~ log 2·(1/c)I(B̃_P; P) under the typical design, Balu (3.24).

    The joint decoder is 1/log 2 ≈ 1.44 times as informative.
    """
    out: FloatArray = LN2 * blip_typical_joint_per_item(epsilon, false_positive)
    return out


def jlt_single_information(c: ArrayLike, dim: ArrayLike, sigma: ArrayLike) -> FloatArray:
    """I(Ỹ_P; X) = (L/2) log(1 + 1/((c − 1) + Lσ²)), Balu (3.25).

    Args:
        c: the profile size.
        dim: L, the sketch's dimension.
        sigma: the noise's standard deviation σ.
    """
    big_l = np.asarray(dim, dtype=np.float64)
    out: FloatArray = (
        0.5 * big_l * np.log1p(1.0 / ((np.asarray(c) - 1.0) + big_l * np.asarray(sigma) ** 2))
    )
    return out


def jlt_joint_information_per_item(c: ArrayLike, dim: ArrayLike, sigma: ArrayLike) -> FloatArray:
    """I(Ỹ_P; P)/c = (L/(2c)) log(1 + c/(Lσ²)), Balu (3.26) (∞ at σ = 0).

    Arguments as `jlt_single_information`.
    """
    big_l = np.asarray(dim, dtype=np.float64)
    c_arr = np.asarray(c, dtype=np.float64)
    s2 = np.asarray(sigma, dtype=np.float64) ** 2
    with np.errstate(divide="ignore"):
        out: FloatArray = 0.5 * big_l / c_arr * np.log1p(c_arr / (big_l * s2))
    return out


def jlt_single_bound(epsilon: ArrayLike, c: ArrayLike, dim: ArrayLike) -> FloatArray:
    """ε/(32 + 2ε(c − 1)/L), the bound of (3.25) as derived (printed with "·L").

    Valid under (3.10) only (σ² ≥ 16 ln(1/δ)/ε² and ε < ln(1/δ)).
    """
    e = np.asarray(epsilon, dtype=np.float64)
    out: FloatArray = e / (32.0 + 2.0 * e * (np.asarray(c) - 1.0) / np.asarray(dim))
    return out


def jlt_joint_bound(epsilon: ArrayLike) -> FloatArray:
    """ε/32, the bound of (3.26) (valid under (3.10) only)."""
    out: FloatArray = np.asarray(epsilon, dtype=np.float64) / 32.0
    return out


def figure_3_1(
    c_values: npt.ArrayLike, l_values: npt.ArrayLike, epsilon: float = 20.0
) -> tuple[FloatArray, FloatArray]:
    """Balu Figure 3.1 over a (c, L) grid with K = ⌈log 2·L/c⌉ (3.20).

    Args:
        c_values: the profile sizes (rows).
        l_values: the filter lengths L (columns).
        epsilon: BLIP's ε (the figure's 20).

    Returns:
        The joint decoder's I(B̃;P)/c (left panel) and I(B̃;P)/c − I(B̃;X) (right panel), each
        of shape (len(c_values), len(l_values)).
    """
    c = np.asarray(c_values, dtype=np.float64)[:, None]
    big_l = np.asarray(l_values, dtype=np.float64)[None, :]
    k = np.ceil(LN2 * big_l / c)
    joint = blip_joint_information_per_item(c, big_l, k, epsilon)
    single = blip_single_information(c, big_l, k, epsilon)
    return joint, joint - single


__all__ = [
    "binary_entropy",
    "blip_bound_chain",
    "blip_codeword_density",
    "blip_filter_density",
    "blip_joint_information_per_item",
    "blip_release_density",
    "blip_single_information",
    "blip_single_information_approx",
    "blip_typical_joint_per_item",
    "blip_typical_single_information",
    "figure_3_1",
    "jlt_joint_bound",
    "jlt_joint_information_per_item",
    "jlt_single_bound",
    "jlt_single_information",
    "typical_bloom_design",
]
