"""`load_dataset` / `dataset_files` dispatch on names and paths (shared.data.catalogue)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _data_fixtures import RATINGS

from privrec.shared.data import dataset_files, load_dataset
from privrec.shared.errors import DataError

# ------------------------------------------------------------------------------ load_dataset


def test_load_dataset_dispatches_on_path_kind(
    tmp_path: Path, grouplens_dir: Path, recbole_dir: Path
) -> None:
    """Directories, u.data/.inter files, ratings.dat and .csv/.tsv all load."""
    assert load_dataset(grouplens_dir).n_ratings == len(RATINGS)
    assert load_dataset(str(recbole_dir / "ml-100k.inter")).n_ratings == len(RATINGS)
    assert load_dataset(grouplens_dir / "u.data").genres is not None
    ml1m = tmp_path / "ml-1m"
    ml1m.mkdir()
    (ml1m / "ratings.dat").write_text("1::2::3::4\n")
    assert load_dataset(ml1m).name == "ml-1m"
    assert load_dataset(ml1m / "ratings.dat").n_ratings == 1
    (tmp_path / "x.tsv").write_text("1\t2\t3\n1\t3\t4\n")
    assert load_dataset(tmp_path / "x.tsv").n_ratings == 2
    assert dataset_files(grouplens_dir) == [grouplens_dir / "u.data", grouplens_dir / "u.item"]


def test_load_dataset_unknown_name_or_type_raises(tmp_path: Path) -> None:
    """Unknown names, unknown file types and empty directories are DataErrors naming them."""
    # (ml-10m, this test's unknown name before issue 25, is now fetched by name)
    with pytest.raises(
        DataError, match=r"'ml-99m': no such file or directory, and not a known data set"
    ):
        load_dataset("ml-99m")
    (tmp_path / "r.json").write_text("{}")
    with pytest.raises(DataError, match=r"r\.json: unknown rating file type"):
        load_dataset(tmp_path / "r.json")
    with pytest.raises(DataError, match=r"holds no known rating files"):
        load_dataset(tmp_path)
