"""`estimate_sum` (ModelInput.ESTIMATE_SUM) equals the column sum of the dense estimates."""

from __future__ import annotations

import numpy as np
import pytest

from privrec.server import training
from privrec.server.training import estimate_sum, estimates
from privrec.shared.mechanisms import make_mechanism
from privrec.shared.mechanisms.base import Profile


@pytest.mark.parametrize("block", [1, 7, 4096])
def test_block_sum_equals_dense_sum(monkeypatch: pytest.MonkeyPatch, block: int) -> None:
    """Whatever the block, the sum matches the dense (N, m) estimates summed (float order
    only: 1e-12), and N is the number of releases."""
    monkeypatch.setattr(training, "ESTIMATE_BLOCK", block)
    mech = make_mechanism("oue", {"epsilon": 2.0})
    rng = np.random.default_rng(0)
    rows = [
        mech.release(Profile(np.sort(rng.choice(30, 6, replace=False)), np.ones(6), 30), rng)
        for _ in range(25)
    ]
    out = estimate_sum(rows, mech, 30)
    assert out.n == 25
    np.testing.assert_allclose(out.total, estimates(rows, mech, 30).sum(axis=0), rtol=1e-12)
    empty = estimate_sum([], mech, 30)
    assert empty.n == 0 and not empty.total.any()
