"""balu-t4.2 compares its ML-1M rows only on MovieLens-1M itself, recognised by its size."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp

from privrec.shared.data import load_dataset
from privrec.shared.data.dataset import RatingData
from privrec.sim.reproduce.balu_mf import ML1M_SIZE, is_ml1m


def test_a_file_in_ml1m_format_is_not_ml1m(tmp_path: Path) -> None:
    """Any ratings.dat reads with the name "ml-1m"; only ML-1M's exact size makes it ML-1M."""
    dat = tmp_path / "ratings.dat"
    dat.write_text("1::1193::5::978300760\n2::661::3::978302109\n")
    small = load_dataset(dat)
    assert small.name == "ml-1m" and not is_ml1m(small)
    n_users, n_items, n_ratings = ML1M_SIZE
    cells = np.arange(n_ratings) * ((n_users * n_items) // n_ratings)  # distinct cells
    matrix = sp.csr_matrix(
        (np.ones(n_ratings), (cells // n_items, cells % n_items)), shape=(n_users, n_items)
    )
    full = RatingData("ml-1m", matrix, np.arange(n_users), np.arange(n_items), (1.0, 5.0))
    assert is_ml1m(full)
    assert not is_ml1m(RatingData("other", matrix, full.user_ids, full.item_ids, (1.0, 5.0)))
