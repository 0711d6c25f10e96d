"""Rating data for every node: MovieLens loaders, the synthetic generator, evaluation splits.

Public API:

* `RatingData`: the in-memory user × item rating matrix with ids, scale and genres.
* `load_dataset(name_or_path)`: ``"ml-100k"`` (fetched and cached), an ML-100K directory
  (GroupLens or RecBole form), an ML-1M ``ratings.dat``, or a CSV file.
* `fetch_ml100k()` (`fetch`: download, sha256 check, cache), and the readers `read_ml100k_dir`,
  `read_ml1m_ratings`, `read_csv` (`readers`, built on `parsing`): the pieces behind it
  (`catalogue`).
* `make_synthetic(n_users, n_items, seed=…)`: low-rank, popularity-skewed synthetic ratings.
* `user_folds`, `train_test_users`, `withhold`: seeded evaluation splits.
* `cache_dir()`: where downloads are cached (``$PRIVREC_CACHE_DIR`` or the user cache dir).
"""

from privrec.shared.data.cache import CACHE_ENV_VAR, cache_dir, dataset_cache_dir
from privrec.shared.data.catalogue import KNOWN_DATASETS, dataset_files, load_dataset
from privrec.shared.data.dataset import RatingData
from privrec.shared.data.fetch import ML100K_SHA256, ProgressCallback, fetch_ml100k
from privrec.shared.data.readers import (
    ML100K_GENRES,
    read_csv,
    read_ml1m_ratings,
    read_ml100k_dir,
)
from privrec.shared.data.splits import Withheld, train_test_users, user_folds, withhold
from privrec.shared.data.synthetic import make_synthetic

__all__ = [
    "CACHE_ENV_VAR",
    "KNOWN_DATASETS",
    "ML100K_GENRES",
    "ML100K_SHA256",
    "ProgressCallback",
    "RatingData",
    "Withheld",
    "cache_dir",
    "dataset_cache_dir",
    "dataset_files",
    "fetch_ml100k",
    "load_dataset",
    "make_synthetic",
    "read_csv",
    "read_ml1m_ratings",
    "read_ml100k_dir",
    "train_test_users",
    "user_folds",
    "withhold",
]
