"""Named splits (`[evaluation] split`, `shared.data.splits.cell_roles` and the population plan):
each split's rule by hand, and the property that no split ever puts a test cell in the
training data of the model that answers it, over random data sets, parameters and samples of
test users (40 seeded draws per split; deterministic, so it cannot fail by chance)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from privrec.client.agent import UserAgent
from privrec.shared.config import ExperimentConfig
from privrec.shared.data.dataset import RatingData
from privrec.shared.data.splits import (
    TEST,
    TRAIN,
    VALIDATION,
    cell_roles,
    split_fingerprint,
)
from privrec.shared.errors import ConfigError, DataError
from privrec.shared.population import population_plan
from privrec.shared.protocol import excluded_fold, fold_of
from privrec.sim.referee_trivial import TrainingPools
from tests.run_configs import make_run_config

SPLITS = ("thesis", "ratio", "leave-one-out", "temporal", "file")


def random_data(rng: np.random.Generator) -> RatingData:
    """A random population with timestamps (ties included) and uneven activity."""
    n_users, n_items = int(rng.integers(8, 40)), int(rng.integers(10, 60))
    rows, cols = [], []
    for u in range(n_users):
        k = int(rng.integers(1, n_items))
        cols += np.sort(rng.choice(n_items, size=k, replace=False)).tolist()
        rows += [u] * k
    n = len(rows)
    ratings = sp.csr_matrix((rng.integers(1, 6, n).astype(float), (rows, cols)), (n_users, n_items))
    ratings.sort_indices()
    times = ratings.copy()
    times.data = rng.integers(0, 50, n).astype(float)  # few distinct times: ties
    return RatingData(
        "random",
        ratings,
        rng.permutation(10 * n_users)[:n_users] + 1,
        np.arange(n_items) + 100,
        (1.0, 5.0),
        timestamps=times,
    )


def split_config(
    split: str, rng: np.random.Generator, data: RatingData, tmp: Path
) -> ExperimentConfig:
    ev: dict[str, object] = {"split": split, "test_users": int(rng.integers(0, data.n_users + 1))}
    if split == "ratio":
        train = float(rng.uniform(0.3, 0.9))
        ev |= {"ratio_train": train, "ratio_validation": float(rng.uniform(0, 0.95 - train))}
    if split == "temporal":
        ev["temporal_test"] = float(rng.uniform(0.05, 0.6))
    if split == "file":
        row, col = data.ratings.nonzero()
        pick = rng.random(row.size) < 0.2
        pairs = zip(row[pick], col[pick], strict=True)
        lines = [f"{data.user_ids[r]},{data.item_ids[c]}" for r, c in pairs]
        path = tmp / f"split-{rng.integers(1 << 30)}.csv"
        path.write_text("user_id,item_id\n" + "\n".join(lines) + "\n")
        ev["split_file"] = str(path)
    return ExperimentConfig.from_dict(
        {"run": {"seed": int(rng.integers(0, 1000))}, "data": {"withheld": 2}, "evaluation": ev}
    )


@pytest.mark.parametrize("split", SPLITS)
def test_no_split_puts_a_test_cell_in_training(split: str, tmp_path: Path) -> None:
    """For every test user, none of her test cells is in what the model answering her was
    fitted on: the releases of the users in her pool (whole profiles outside her fold under
    the thesis protocol; everyone's training ratings under a named split, which the client
    releases through `UserAgent.released_profile`), and the referee's trivial predictors'
    pools count exactly those cells. Validation cells are neither released nor tested."""
    rng = np.random.default_rng(sum(map(ord, split)))
    for _ in range(40):
        data = random_data(rng)
        config = split_config(split, rng, data, tmp_path)
        plans = population_plan(data, config)
        n_folds = config.data.n_folds if split == "thesis" else 0
        rc = dataclasses.replace(
            make_run_config("rpt", {"sigma_max": 1.0, "beta_max": 0}, data.n_items),
            n_folds=n_folds,
            fold_seed=config.run.seed,
        )
        released = {
            p.user_id: set(
                UserAgent.from_plan(p, config.run.seed).released_profile(rc.holdout).items.tolist()
            )
            for p in plans
        }
        pools = TrainingPools.of_run(plans, rc)
        for plan in plans:
            test = set(plan.withheld.tolist())
            in_pool = excluded_fold(plan.user_id, rc.n_folds, rc.fold_seed) is None or (
                fold_of(plan.user_id, rc.n_folds, rc.fold_seed)
                != excluded_fold(plan.user_id, rc.n_folds, rc.fold_seed)
            )
            if in_pool:  # her own releases train the model that answers her
                assert not test & released[plan.user_id], (split, plan.user_id)
            assert test <= set(plan.profile.items.tolist())
            if test:  # the pool's counts are the releases of the users in it, nothing else
                _, counts = pools.pool(plan.user_id)
                want = np.zeros(data.n_items)
                for other in plans:
                    if n_folds == 0 or fold_of(other.user_id, n_folds, rc.fold_seed) != fold_of(
                        plan.user_id, n_folds, rc.fold_seed
                    ):
                        want[sorted(released[other.user_id])] += 1
                np.testing.assert_array_equal(counts, want)
        if split != "thesis":
            roles = cell_roles(data, config.evaluation, config.run.seed)
            row_of = np.repeat(np.arange(data.n_users), np.diff(data.ratings.indptr))
            for plan in plans:  # nothing but training cells is released
                mine = roles[row_of == plan.row]
                items = data.ratings.indices[row_of == plan.row]
                assert released[plan.user_id] == set(items[mine == TRAIN].tolist())
                assert not set(items[mine == VALIDATION].tolist()) & set(plan.withheld.tolist())


def test_ratio_leave_one_out_and_temporal_by_hand() -> None:
    """Ratio: round(0.5·4) = 2 training, round(0.75·4) − 2 = 1 validation, 1 test per user of
    four ratings. Leave-one-out: her latest rating (a tie to the larger item). Temporal: the
    latest half of all ratings, one cut-off for everyone (here all of the first user's)."""
    ratings = sp.csr_matrix(np.array([[1, 2, 3, 4], [5, 4, 3, 2]], dtype=float))
    times = sp.csr_matrix(np.array([[10, 40, 30, 40], [1, 2, 3, 4]], dtype=float))
    data = RatingData("h", ratings, np.array([1, 2]), np.arange(4), (1.0, 5.0), timestamps=times)
    ev = ExperimentConfig().evaluation
    ratio = cell_roles(
        data, dataclasses.replace(ev, split="ratio", ratio_train=0.5, ratio_validation=0.25), 0
    )
    for row in (ratio[:4], ratio[4:]):
        assert sorted(row.tolist()) == [TRAIN, TRAIN, VALIDATION, TEST]
    loo = cell_roles(data, dataclasses.replace(ev, split="leave-one-out"), 0)
    assert loo.tolist() == [TRAIN, TRAIN, TRAIN, TEST, TRAIN, TRAIN, TRAIN, TEST]
    temporal = cell_roles(data, dataclasses.replace(ev, split="temporal", temporal_test=0.5), 0)
    assert temporal.tolist() == [TEST] * 4 + [TRAIN] * 4  # times 10..40 are the latest four


def test_fingerprint_names_the_test_set() -> None:
    """Same cells in any order, same fingerprint; another cell, seed or split, another one."""
    a = split_fingerprint("ratio", 0, [1, 2, 2], [5, 6, 7])
    assert a == split_fingerprint("ratio", 0, [2, 1, 2], [7, 5, 6])
    assert a != split_fingerprint("ratio", 1, [1, 2, 2], [5, 6, 7])
    assert a != split_fingerprint("ratio", 0, [1, 2, 2], [5, 6, 8])
    assert a != split_fingerprint("temporal", 0, [1, 2, 2], [5, 6, 7])


def test_split_errors_name_what_is_wrong(tmp_path: Path) -> None:
    """A temporal split of a data set without times, a split file naming a pair that is no
    rating, and config mistakes each say what is wrong."""
    data = RatingData(
        "csv", sp.csr_matrix(np.ones((2, 3))), np.array([1, 2]), np.arange(3), (1.0, 5.0)
    )
    ev = ExperimentConfig().evaluation
    with pytest.raises(DataError, match=r"needs each rating's time.*'csv' has none"):
        cell_roles(data, dataclasses.replace(ev, split="temporal"), 0)
    bad = tmp_path / "split.csv"
    bad.write_text("1,0\n2,7\n")
    with pytest.raises(DataError, match=r"split.csv, line 2: user 2 or item 7 is not in the data"):
        cell_roles(data, dataclasses.replace(ev, split="file", split_file=str(bad)), 0)
    with pytest.raises(ConfigError, match=r"evaluation\.split: must be one of"):
        ExperimentConfig.from_dict({"evaluation": {"split": "random"}})
    with pytest.raises(ConfigError, match=r"evaluation\.split_file: is set exactly when"):
        ExperimentConfig.from_dict({"evaluation": {"split": "file"}})
    with pytest.raises(ConfigError, match=r"evaluation\.ratio_train"):
        ExperimentConfig.from_dict({"evaluation": {"ratio_train": 0.95, "ratio_validation": 0.1}})


def test_filters_keep_each_rating_with_its_time() -> None:
    """`[data] binarise` and the k-core cut the timestamps with the ratings, so a temporal
    split of a filtered data set reads each kept rating's own time."""
    from privrec.shared.data.filters import binarise, k_core

    data = random_data(np.random.default_rng(7))
    assert data.timestamps is not None

    def cells(d: RatingData) -> zip[tuple[int, int]]:  # (row, column) of each stored cell
        rows = np.repeat(np.arange(d.n_users), np.diff(d.ratings.indptr))
        return zip(rows.tolist(), d.ratings.indices.tolist(), strict=True)

    when = {
        (int(data.user_ids[r]), int(data.item_ids[c])): t
        for (r, c), t in zip(cells(data), data.timestamps.data, strict=True)
    }
    for filtered in (binarise(data, 4.0), k_core(data, 3, 2), k_core(binarise(data, 3.0), 2, 2)):
        ts = filtered.timestamps
        assert ts is not None
        np.testing.assert_array_equal(ts.indptr, filtered.ratings.indptr)
        np.testing.assert_array_equal(ts.indices, filtered.ratings.indices)
        for (r, c), t in zip(cells(filtered), ts.data, strict=True):
            assert when[(int(filtered.user_ids[r]), int(filtered.item_ids[c]))] == t
