"""Is a run's output complete? What `privrec report` checks before it scores a run directory.

A shard that died before it wrote its predictions, or wrote them for only part of its test
users, and an adversary that died before it wrote every attack's output, leave a run
directory that scores *some* users: `privrec report` once scored 500 of 1,000 predictions with
exit 0 and no warning (issue 27, finding 3). `missing_outputs` lists what the run's
configuration says should be there and is not; `privrec report` refuses such a run with one line
naming it, or, with ``--allow-incomplete``, scores it and flags it in ``report.json``
(``incomplete``) and in its summary.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from privrec.adversary.attacks import make_attack
from privrec.shared.capabilities import Serving
from privrec.shared.config import ExperimentConfig
from privrec.shared.data.dataset import RatingData
from privrec.shared.population import population_plan, shard_rows
from privrec.shared.run_config import PublicRunConfig
from privrec.shared.serde import read_npz


def missing_outputs(
    config: ExperimentConfig,
    data: RatingData,
    run_dir: Path,
    run_config: PublicRunConfig,
    attack_dir: Path,
) -> list[str]:
    """What the run should have produced and did not, one line each (empty: complete).

    Predictions: every shard's file, holding every test user of its slice of the population
    (`shared.population.population_plan`), unless the model publishes one result instead.
    Attack outputs: one per configured attack that applies to the run's mechanism.

    Raises:
        DataError: a prediction file that cannot be read.
    """
    problems = []
    if run_config.capabilities.serving is not Serving.PUBLISHED:
        n = config.population.shards
        for shard in range(n):
            plans = population_plan(data, config, shard_rows(data.n_users, shard, n))
            expected = {p.user_id for p in plans if p.withheld.size}
            path = run_dir / "predictions" / f"shard-{shard}.npz"
            if not path.exists():
                if expected:
                    problems.append(
                        f"predictions/{path.name} is missing ({len(expected)} test users)"
                    )
                continue
            found = set(np.unique(read_npz(path, "prediction file")["user_ids"]).tolist())
            if not expected <= found:
                problems.append(
                    f"predictions/{path.name} holds {len(expected & found)} of its "
                    f"{len(expected)} test users"
                )
    for name in config.adversary.attacks:
        if run_config.mechanism_name not in make_attack(name).applies_to:
            continue  # skipped by design (`adversary.replay.run_attacks`)
        if not (attack_dir / f"{name}.npz").exists():
            problems.append(f"attack output {name} is missing from {attack_dir.name}/")
    return problems


def incomplete_note(problems: list[str]) -> str:
    """The one line a summary shows for an incomplete run."""
    return f"INCOMPLETE run: {'; '.join(problems)}"


__all__ = ["incomplete_note", "missing_outputs"]
