"""The data sets privrec knows by name, and how a name or path becomes `RatingData`.

`load_dataset` is the one entry point the nodes use: ``"ml-100k"`` is fetched into the cache if
needed (`shared.data.fetch`), a path is dispatched on its kind to the matching reader
(`shared.data.readers`). `dataset_files` lists the files such a load reads (for
``privrec data info``).
"""

from __future__ import annotations

import gzip
from os import PathLike
from pathlib import Path

from privrec.shared.data.dataset import RatingData
from privrec.shared.data.fetch import ProgressCallback, fetch_ml100k
from privrec.shared.data.formats import (
    read_amazon_ratings,
    read_book_crossing,
    read_jester,
    read_lastfm_1k,
    read_movielens_csv,
    read_netflix_dir,
    read_recbole_atomic,
)
from privrec.shared.data.readers import (
    ML100K_NAME,
    ml100k_files,
    read_csv,
    read_ml1m_ratings,
    read_ml100k_dir,
)
from privrec.shared.data.remote import REMOTE_DATASETS, fetch_remote
from privrec.shared.errors import DataError

KNOWN_DATASETS: tuple[str, ...] = (ML100K_NAME, *REMOTE_DATASETS)
"""Names that `load_dataset` and `fetch` resolve without a path."""


def _resolve(
    name_or_path: str | PathLike[str], progress: ProgressCallback | None
) -> tuple[str, Path]:
    """(kind, path) of what `load_dataset` would read; fetches a known name if needed."""
    text = str(name_or_path)
    if isinstance(name_or_path, str) and text.lower() == ML100K_NAME:
        return "ml-100k", fetch_ml100k(progress=progress)
    if isinstance(name_or_path, str) and text.lower() in REMOTE_DATASETS:
        return f"remote:{text.lower()}", fetch_remote(text.lower())
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        if ml100k_files(path):
            return "ml-100k", path
        if (path / "ratings.dat").is_file():
            return "ml-1m", path / "ratings.dat"
        if (path / "training_set").is_dir() or any(path.glob("combined_data_*.txt")):
            return "netflix", path
        raise DataError(
            f"{path}: directory holds no known rating files (u.data, ml-100k.inter, ratings.dat, "
            "a Netflix-prize training_set/ or combined_data_*.txt)"
        )
    if path.is_file():
        suffix = path.suffix.lower()
        if path.name in ("u.data", "u.item") or path.name.startswith("ml-100k."):
            return "ml-100k", path.parent
        if suffix in (".inter", ".item"):
            return "recbole", path.with_suffix(".inter")
        if path.name in _BY_FILE_NAME:
            return _BY_FILE_NAME[path.name], path
        if path.name.endswith((".csv.gz", ".csv")) and _header(path).startswith(
            "user_id,parent_asin"
        ):
            return "amazon", path
        if suffix == ".csv" and _header(path).startswith("userId,movieId,rating"):
            return "movielens-csv", path
        if suffix == ".dat":
            return "ml-1m", path
        if suffix in (".csv", ".tsv"):
            return "csv", path
        raise DataError(
            f"{path}: unknown rating file type (expected a .csv/.tsv, ratings.dat, "
            "u.data or .inter file, or a directory)"
        )
    raise DataError(
        f"{text!r}: no such file or directory, and not a known data set "
        f"(known: {', '.join(KNOWN_DATASETS)})"
    )


_BY_FILE_NAME = {
    "BX-Book-Ratings.csv": "book-crossing",
    "jester_ratings.dat": "jester",
    "userid-timestamp-artid-artname-traid-traname.tsv": "lastfm-1k",
}
_READERS = {
    "recbole": read_recbole_atomic,
    "netflix": read_netflix_dir,
    "amazon": read_amazon_ratings,
    "movielens-csv": read_movielens_csv,
    "book-crossing": read_book_crossing,
    "jester": read_jester,
    "lastfm-1k": read_lastfm_1k,
}


def _header(path: Path) -> str:
    """The first line of a (possibly gzipped) text file, "" if unreadable."""
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8-sig", errors="replace") as handle:
            return str(handle.readline()).strip().replace('"', "")
    except OSError:
        return ""


def load_dataset(
    name_or_path: str | PathLike[str], *, progress: ProgressCallback | None = None
) -> RatingData:
    """Load a data set by name or path.

    * ``"ml-100k"``: fetched into the cache if needed (`fetch_ml100k`), then read. A name wins
      over a same-named directory in the working directory; write ``./ml-100k`` for that.
    * another name of `KNOWN_DATASETS` (`shared.data.remote`): fetched with its pinned checksum;
    * a directory with ML-100K files (``u.data`` or one ``*.inter``), with ``ratings.dat``, or a
      Netflix-prize directory (``training_set/`` or ``combined_data_*.txt``);
    * ``u.data`` / ``ml-100k.inter`` file: its directory is read as ML-100K; any other
      ``*.inter``: a RecBole atomic file (`read_recbole_atomic`);
    * ``BX-Book-Ratings.csv``, ``jester_ratings.dat``, LastFM-1K's ``userid-timestamp-…tsv``,
      an Amazon 2023 rating-only ``*.csv[.gz]``, a MovieLens ``ratings.csv``: their readers
      (`shared.data.formats`);
    * ``*.dat``: MovieLens-1M ratings (`read_ml1m_ratings`);
    * ``*.csv`` (``,``) or ``*.tsv`` (tab): `read_csv` with columns 0, 1, 2 = user, item, rating,
      header guessed, scale inferred.

    Args:
        name_or_path: a name from `KNOWN_DATASETS` or a path.
        progress: passed to `fetch_ml100k` when a download is needed.

    Returns:
        The data set.

    Raises:
        DataError: an unknown name or path, or any reader error.
    """
    kind, path = _resolve(name_or_path, progress)
    if kind == "ml-100k":
        return read_ml100k_dir(path)
    if kind == "ml-1m":
        return read_ml1m_ratings(path)
    if kind.startswith("remote:"):
        return REMOTE_DATASETS[kind.removeprefix("remote:")].reader(path)
    if kind in _READERS:
        return _READERS[kind](path)
    return read_csv(path, delimiter="\t" if path.suffix.lower() == ".tsv" else ",")


def dataset_files(
    name_or_path: str | PathLike[str], *, progress: ProgressCallback | None = None
) -> list[Path]:
    """The files `load_dataset(name_or_path)` reads, ratings file first (fetching if needed)."""
    kind, path = _resolve(name_or_path, progress)
    if kind == "ml-100k":
        return ml100k_files(path)
    if kind == "ml-1m":
        movies = path.with_name("movies.dat")
        return [path, *([movies] if movies.is_file() else [])]
    return [path]


__all__ = ["KNOWN_DATASETS", "dataset_files", "load_dataset"]
