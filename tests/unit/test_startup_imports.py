"""What a node imports when it starts (docs/decisions/startup.md).

A `privrec server`, `privrec clients` or `privrec adversary` process imports the command line
and its node's module; none may pull in dp-accounting (its package imports scipy.optimize,
.signal and .stats, ≈ 1.9 s), numba (≈ 0.3 s) or the models and attacks it does not run:
start-up is most of a small run's wall time. Checked in a fresh interpreter, since this test
process has imported everything.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("dp_accounting", "numba", "scipy.stats", "scipy.signal", "scipy.optimize")


def _imported(code: str) -> dict[str, bool]:
    probe = (
        f"import json, sys\n{code}\nprint(json.dumps({{m: m in sys.modules for m in {HEAVY!r}}}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    return dict(json.loads(out.splitlines()[-1]))


@pytest.mark.parametrize(
    "node",
    [
        "privrec.server.node",
        "privrec.client.shard",
        "privrec.adversary.node",
        "privrec.server.models",
        "privrec.adversary.attacks",
    ],
)
def test_a_node_starts_without_the_heavy_imports(node: str) -> None:
    assert _imported(f"import privrec.sim.cli, {node}") == dict.fromkeys(HEAVY, False)


def test_the_probe_sees_a_heavy_import_when_there_is_one() -> None:
    """The check can fail: stating a privacy claim or building a numba model imports them."""
    seen = _imported(
        "from privrec.shared.mechanisms import make_mechanism\n"
        "make_mechanism('oue', {'epsilon': 1.0}).event()\n"
        "from privrec.server.models import MODELS\n"
        "MODELS['ppcf']"
    )
    assert seen["dp_accounting"] and seen["numba"]
