"""The disguised matrix of RPT releases and the feasible genuine counts (rpt_matrix)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from privrec.adversary.attacks.rpt_matrix import (
    DisguisedMatrix,
    disguised_matrix,
    feasible_genuine,
)
from privrec.adversary.observations import Observations
from privrec.shared.errors import ValidationError
from privrec.shared.mechanisms.base import DensePayload, SparsePayload
from tests.run_configs import make_run_config


def _obs(profiles: dict, **params: object) -> Observations:  # type: ignore[type-arg]
    pp = {"sigma_max": 1.0, "beta_max": 10} | params
    return Observations(make_run_config("rpt", pp, 5), profiles)


@pytest.mark.parametrize(
    ("observations", "field"),
    [
        (_obs({}), "profiles"),
        (
            _obs({"a": SparsePayload(5, np.array([0]), np.array([1.0]))}, sigma_max=0.0),
            "public_params.sigma_max",
        ),
        (
            _obs({"a": SparsePayload(5, np.array([0]), np.array([1.0]))}, beta_max=101),
            "public_params.beta_max",
        ),
        (_obs({"a": DensePayload(np.zeros(5))}), "profiles['a']"),
        (_obs({"a": SparsePayload(6, np.array([0]), np.array([1.0]))}), "profiles['a']"),
        (
            _obs({"a": SparsePayload(5, np.array([2, 1]), np.array([1.0, 2.0]))}),
            "profiles['a'].indices",
        ),
        (_obs({"a": SparsePayload(5, np.array([1]), np.array([np.nan]))}), "profiles['a'].values"),
    ],
)
def test_disguised_matrix_rejects_bad_input(observations: Observations, field: str) -> None:
    """Malformed observations raise ValidationError naming the field."""
    with pytest.raises(ValidationError) as info:
        disguised_matrix(observations)
    assert info.value.field == field


def _sparse(*indices: int) -> SparsePayload:
    return SparsePayload(5, np.array(indices, dtype=np.int64), np.arange(len(indices)) + 0.5)


def test_disguised_matrix_stacks_rows_whose_boundaries_step_down() -> None:
    """Releases are checked all at once: a row may start below where the last one ended, or
    be empty, and the matrix holds each release as its own row."""
    profiles = {"a": _sparse(3, 4), "b": _sparse(), "c": _sparse(0, 1, 4), "d": _sparse(2)}
    dm = disguised_matrix(_obs(profiles))
    assert dm.user_ids == ["a", "b", "c", "d"]
    assert dm.matrix.indptr.tolist() == [0, 2, 2, 5, 6]
    assert dm.matrix.indices.tolist() == [3, 4, 0, 1, 4, 2]
    assert dm.matrix.data.tolist() == [0.5, 1.5, 0.5, 1.5, 2.5, 0.5]


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (_sparse(1, 1), "profiles['c'].indices"),  # repeated within a row
        (_sparse(4, 2), "profiles['c'].indices"),
        (SparsePayload(5, np.array([5]), np.array([1.0])), "profiles['c'].indices"),
        (SparsePayload(5, np.array([-1]), np.array([1.0])), "profiles['c'].indices"),
        (SparsePayload(5, np.array([0, 1]), np.array([1.0, np.inf])), "profiles['c'].values"),
        (SparsePayload(5, np.array([0, 1]), np.array([1.0])), "profiles['c']"),
        (SparsePayload(4, np.array([0]), np.array([1.0])), "profiles['c']"),
    ],
)
def test_disguised_matrix_names_the_bad_release_among_good_ones(
    bad: SparsePayload, field: str
) -> None:
    """One malformed release among well-formed ones is named, whatever its neighbours."""
    profiles = {"a": _sparse(3, 4), "b": _sparse(), "c": bad, "d": _sparse(0, 2)}
    with pytest.raises(ValidationError) as info:
        disguised_matrix(_obs(profiles))
    assert info.value.field == field


def test_feasible_genuine_matches_procedure_1() -> None:
    """f = g + ⌊(m − g)β/100⌋ for β ∈ {1, β_max} lies inside the computed range of g."""
    m, beta_max = 1000, 25
    rows = []
    for g in (20, 100, 400):
        rows += [g + ((m - g) * b) // 100 for b in (1, beta_max)]
    indptr = np.concatenate([[0], np.cumsum(rows)])
    mat = sp.csr_matrix(
        (np.ones(indptr[-1]), np.concatenate([np.arange(f) for f in rows]), indptr),
        shape=(len(rows), m),
    )
    lo, hi = feasible_genuine(
        DisguisedMatrix([str(i) for i in range(len(rows))], mat, 1.0, beta_max)
    )
    g_true = np.repeat([20, 100, 400], 2)
    assert np.all((lo <= g_true) & (g_true <= hi))
