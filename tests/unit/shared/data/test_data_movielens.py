"""MovieLens / CSV readers, `load_dataset` dispatch, and the verified, atomic ML-100K cache."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest
from _data_fixtures import GENRES, RATINGS, write_grouplens

from privrec.shared.data import (
    ML100K_GENRES,
    RatingData,
    dataset_files,
    fetch_ml100k,
    load_dataset,
    movielens,
    read_csv,
    read_ml1m_ratings,
    read_ml100k_dir,
)
from privrec.shared.data import cache as cache_module
from privrec.shared.errors import DataError


def assert_same_data(a: RatingData, b: RatingData) -> None:
    assert a.name == b.name
    assert a.ratings.shape == b.ratings.shape
    assert (a.ratings != b.ratings).nnz == 0
    np.testing.assert_array_equal(a.ratings.indptr, b.ratings.indptr)
    np.testing.assert_array_equal(a.ratings.indices, b.ratings.indices)
    np.testing.assert_array_equal(a.user_ids, b.user_ids)
    np.testing.assert_array_equal(a.item_ids, b.item_ids)
    assert a.rating_scale == b.rating_scale
    assert a.genre_names == b.genre_names
    if a.genres is None:
        assert b.genres is None
    else:
        np.testing.assert_array_equal(a.genres, b.genres)


def assert_canonical(data: RatingData) -> None:
    """Sorted ids, sorted CSR indices, float64, no explicit zeros."""
    assert np.all(np.diff(data.user_ids) > 0)
    assert np.all(np.diff(data.item_ids) > 0)
    assert data.ratings.dtype == np.float64
    assert data.ratings.has_canonical_format
    assert np.all(data.ratings.data != 0)


# ------------------------------------------------------------------------------ ML-100K readers


def test_read_ml100k_dir_grouplens_parses_ratings_and_genres(grouplens_dir: Path) -> None:
    """u.data/u.item give sorted ids, the right cells, scale (1, 5) and 19 genre flags."""
    data = read_ml100k_dir(grouplens_dir)
    assert_canonical(data)
    assert data.name == "ml-100k"
    assert (data.n_users, data.n_items, data.n_ratings) == (4, 5, len(RATINGS))
    np.testing.assert_array_equal(data.user_ids, [1, 3, 5, 7])
    np.testing.assert_array_equal(data.item_ids, [10, 20, 30, 40, 50])
    dense = data.ratings.toarray()
    for user, item, rating, _ in RATINGS:
        row = int(np.flatnonzero(data.user_ids == user)[0])
        col = int(np.flatnonzero(data.item_ids == item)[0])
        assert dense[row, col] == rating
    assert data.rating_scale == (1.0, 5.0)
    assert data.genre_names == ML100K_GENRES
    assert data.genres is not None and data.genres.shape == (5, 19)
    for col, item in enumerate(data.item_ids):
        names = {ML100K_GENRES[g] for g in np.flatnonzero(data.genres[col])}
        assert names == set(GENRES[int(item)])


def test_read_ml100k_dir_recbole_equals_grouplens(grouplens_dir: Path, recbole_dir: Path) -> None:
    """The RecBole atomic files and the GroupLens files give identical RatingData."""
    assert_same_data(read_ml100k_dir(grouplens_dir), read_ml100k_dir(recbole_dir))


def test_read_ml100k_dir_without_item_file_has_no_genres(grouplens_dir: Path) -> None:
    """Genres are optional: without u.item, `genres` is None."""
    (grouplens_dir / "u.item").unlink()
    data = read_ml100k_dir(grouplens_dir)
    assert data.genres is None and data.genre_names == ()


def test_read_ml100k_dir_without_files_raises(tmp_path: Path) -> None:
    """A directory without ML-100K files is a DataError naming it."""
    with pytest.raises(DataError, match="no MovieLens-100K files"):
        read_ml100k_dir(tmp_path)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("1\t10\t3", r"u\.data, line 3: expected 4 fields separated by '\\t', got 3"),
        ("1\tx\t3\t0", r"u\.data, line 3: item id 'x' is not an integer"),
        ("q\t10\t3\t0", r"u\.data, line 3: user id 'q' is not an integer"),
        ("1\t10\tfive\t0", r"u\.data, line 3: rating 'five' is not a number"),
        ("1\t10\t6\t0", r"u\.data, line 3: rating 6 is outside the scale 1\.\.5"),
        ("1\t10\tnan\t0", r"u\.data, line 3: rating 'nan' is not finite"),
        ("1\t10\t0\t0", r"u\.data, line 3: rating is 0"),
    ],
)
def test_read_ml100k_dir_malformed_u_data_names_file_and_line(
    grouplens_dir: Path, line: str, message: str
) -> None:
    """A malformed u.data line raises DataError with file, line number and reason."""
    (grouplens_dir / "u.data").write_text(f"3\t20\t4\t1\n7\t30\t1\t1\n{line}\n5\t50\t5\t1\n")
    with pytest.raises(DataError, match=message):
        read_ml100k_dir(grouplens_dir)


def test_read_ml100k_dir_duplicate_rating_names_both_lines(grouplens_dir: Path) -> None:
    """A repeated (user, item) pair is an error naming both lines."""
    (grouplens_dir / "u.data").write_text("1\t10\t3\t0\n3\t20\t4\t0\n1\t10\t5\t0\n")
    with pytest.raises(
        DataError, match=r"line 3: duplicate rating of user 1 for item 10 \(first at line 1\)"
    ):
        read_ml100k_dir(grouplens_dir)


def test_read_ml100k_dir_malformed_u_item(grouplens_dir: Path) -> None:
    """Bad genre flags and wrong field counts in u.item name the line."""
    path = grouplens_dir / "u.item"
    lines = path.read_bytes().decode("latin-1").splitlines()
    lines[1] = lines[1][:-1] + "2"
    path.write_bytes(("\n".join(lines) + "\n").encode("latin-1"))
    with pytest.raises(DataError, match=r"u\.item, line 2: genre flag 'Western' is '2'"):
        read_ml100k_dir(grouplens_dir)
    lines[1] = "20|title only"
    path.write_bytes(("\n".join(lines) + "\n").encode("latin-1"))
    with pytest.raises(
        DataError, match=r"u\.item, line 2: expected 24 fields separated by '\|', got 2"
    ):
        read_ml100k_dir(grouplens_dir)


def test_read_ml100k_dir_rated_item_missing_from_item_file(grouplens_dir: Path) -> None:
    """An item with ratings but no u.item row is an error naming the item."""
    write_grouplens(grouplens_dir, genres={k: v for k, v in GENRES.items() if k != 30})
    with pytest.raises(DataError, match=r"u\.item: item 30 has ratings in u\.data but no row"):
        read_ml100k_dir(grouplens_dir)


def test_read_ml100k_dir_recbole_errors(recbole_dir: Path) -> None:
    """RecBole files: unknown genre, missing header field and bad line are precise errors."""
    item = recbole_dir / "ml-100k.item"
    text = item.read_text(encoding="utf-8")
    item.write_text(text.replace("Film-Noir", "Noir"), encoding="utf-8")
    with pytest.raises(DataError, match=r"ml-100k\.item, line 4: unknown genre 'Noir'"):
        read_ml100k_dir(recbole_dir)
    item.write_text(text, encoding="utf-8")
    inter = recbole_dir / "ml-100k.inter"
    inter.write_text("user_id:token\titem:token\trating:float\n1\t10\t3\n")
    with pytest.raises(DataError, match=r"line 1: header lacks field 'item_id'"):
        read_ml100k_dir(recbole_dir)
    inter.write_text("user_id:token\titem_id:token\trating:float\n1\t10\t3\n2\t10\n")
    with pytest.raises(DataError, match=r"ml-100k\.inter, line 3: expected 3 fields"):
        read_ml100k_dir(recbole_dir)


# ------------------------------------------------------------------------------ ML-1M and CSV


def test_read_ml1m_ratings_with_movies(tmp_path: Path) -> None:
    """ratings.dat is '::'-separated; movies.dat beside it supplies genres."""
    (tmp_path / "ratings.dat").write_text(
        "1::1193::5::978300760\n1::661::3::978302109\n2::1193::4::1\n"
    )
    (tmp_path / "movies.dat").write_bytes(
        "661::James (1996)::Animation|Children's|Musical\n1193::Cuckoo's Nest (1975)::Drama\n"
        "5::Père (1995)::Comedy\n".encode("latin-1")
    )
    data = read_ml1m_ratings(tmp_path / "ratings.dat")
    assert_canonical(data)
    assert data.name == "ml-1m"
    np.testing.assert_array_equal(data.user_ids, [1, 2])
    np.testing.assert_array_equal(data.item_ids, [661, 1193])
    np.testing.assert_array_equal(data.ratings.toarray(), [[3, 5], [0, 4]])
    assert data.genres is not None
    assert [ML100K_GENRES[g] for g in np.flatnonzero(data.genres[0])] == [
        "Animation",
        "Children's",
        "Musical",
    ]


def test_read_ml1m_ratings_malformed_line(tmp_path: Path) -> None:
    """A short ratings.dat line names file and line."""
    (tmp_path / "ratings.dat").write_text("1::1193::5::978300760\n1::661\n")
    with pytest.raises(
        DataError, match=r"ratings\.dat, line 2: expected 4 fields separated by '::', got 2"
    ):
        read_ml1m_ratings(tmp_path / "ratings.dat")


def test_read_csv_header_guess_and_inferred_scale(tmp_path: Path) -> None:
    """A header is detected, extra columns ignored, the scale inferred from min/max."""
    path = tmp_path / "ratings.csv"
    path.write_text("userId,movieId,rating,timestamp\n1,31,2.5,0\n1,1029,3.0,0\n7,31,4.5,0\n")
    data = read_csv(path)
    assert_canonical(data)
    assert data.name == "ratings"
    assert data.rating_scale == (2.5, 4.5)
    np.testing.assert_array_equal(data.ratings.toarray(), [[2.5, 3.0], [4.5, 0.0]])


def test_read_csv_named_columns_delimiter_and_scale(tmp_path: Path) -> None:
    """Columns by name, a ';' delimiter, quoted fields and an explicit scale."""
    path = tmp_path / "r.csv"
    path.write_text('score;"who";what\n4;10;7\n1;11;7\n')
    data = read_csv(
        path,
        user_col="who",
        item_col="what",
        rating_col="score",
        delimiter=";",
        rating_scale=(1, 5),
    )
    assert data.rating_scale == (1.0, 5.0)
    np.testing.assert_array_equal(data.user_ids, [10, 11])
    np.testing.assert_array_equal(data.ratings.toarray(), [[4.0], [1.0]])


def test_read_csv_without_header(tmp_path: Path) -> None:
    """A file whose first row is numeric has no header; the first row is a rating."""
    path = tmp_path / "plain.csv"
    path.write_text("1,2,3\n2,2,5\n")
    data = read_csv(path)
    assert data.n_ratings == 2
    assert data.rating_scale == (3.0, 5.0)


@pytest.mark.parametrize(
    ("content", "kwargs", "message"),
    [
        ("u,i,r\n1,2,3\n1,x,4\n", {}, r"plain\.csv, line 3: item id \('i'\) 'x' is not an integer"),
        ("u,i,r\n1,2,3\n1,3\n", {}, r"plain\.csv, line 3: expected at least 3 fields"),
        ("u,i,r\n1,2,3\n1,3,9\n", {"rating_scale": (1, 5)}, r"line 3: rating \('r'\) 9 is outside"),
        ("u,i,r\n1,2,3\n", {"rating_col": "stars"}, r"line 1: no rating column 'stars' in header"),
        ("u,i,r\n1,2,3\n1,3,3\n", {}, r"every rating is 3; pass `rating_scale`"),
        ("", {}, r"plain\.csv: no ratings"),
        ("1,2,3\n", {"rating_scale": (5, 1)}, r"`rating_scale` must be \(low, high\)"),
    ],
)
def test_read_csv_errors(tmp_path: Path, content: str, kwargs: dict, message: str) -> None:
    """CSV problems are DataErrors naming file, line and column."""
    path = tmp_path / "plain.csv"
    path.write_text(content)
    with pytest.raises(DataError, match=message):
        read_csv(path, **kwargs)


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
    with pytest.raises(
        DataError, match=r"'ml-10m': no such file or directory, and not a known data set"
    ):
        load_dataset("ml-10m")
    (tmp_path / "r.json").write_text("{}")
    with pytest.raises(DataError, match=r"r\.json: unknown rating file type"):
        load_dataset(tmp_path / "r.json")
    with pytest.raises(DataError, match=r"holds no known rating files"):
        load_dataset(tmp_path)


# ------------------------------------------------------------------------------ fetch and cache


def _fake_sources(
    monkeypatch: pytest.MonkeyPatch, recbole_dir: Path, calls: list[str], *, corrupt: bool = False
) -> None:
    """Replace both sources: GroupLens unreachable, RecBole serving the fixture files."""
    blobs = {name: (recbole_dir / name).read_bytes() for name in ("ml-100k.inter", "ml-100k.item")}
    hashes = dict(movielens.ML100K_SHA256)
    hashes.update({name: hashlib.sha256(blob).hexdigest() for name, blob in blobs.items()})
    monkeypatch.setattr(movielens, "ML100K_SHA256", hashes)

    def grouplens(progress, timeout):
        calls.append("grouplens")
        raise movielens._SourceUnavailable("offline")

    def recbole(progress, timeout):
        calls.append("recbole")
        served = dict(blobs)
        if corrupt:
            served["ml-100k.inter"] = served["ml-100k.inter"] + b"9\t9\t1\t0\n"
        return served

    sources = {
        "grouplens": movielens._Source(
            "grouplens", "fake GroupLens", ("u.data", "u.item"), grouplens
        ),
        "recbole": movielens._Source(
            "recbole", "fake wheel", ("ml-100k.inter", "ml-100k.item"), recbole
        ),
    }
    monkeypatch.setattr(movielens, "_SOURCES", sources)


def test_fetch_ml100k_falls_back_verifies_and_caches(
    monkeypatch: pytest.MonkeyPatch, recbole_dir: Path, isolated_cache: Path
) -> None:
    """GroupLens fails, RecBole is used; files and a manifest land in $PRIVREC_CACHE_DIR."""
    calls: list[str] = []
    _fake_sources(monkeypatch, recbole_dir, calls)
    directory = fetch_ml100k()
    assert calls == ["grouplens", "recbole"]
    assert directory == isolated_cache / "datasets" / "ml-100k"
    assert_same_data(read_ml100k_dir(directory), read_ml100k_dir(recbole_dir))
    manifest = json.loads((directory / "privrec-source.json").read_text())
    assert manifest["source"] == "recbole"
    assert not list(directory.glob(".*.partial"))
    # A valid cache is used as is: no source is asked again.
    assert fetch_ml100k() == directory
    assert calls == ["grouplens", "recbole"]
    assert load_dataset("ml-100k").n_ratings == len(RATINGS)


def test_fetch_ml100k_refetches_a_corrupt_cached_file(
    monkeypatch: pytest.MonkeyPatch, recbole_dir: Path
) -> None:
    """A cached file whose sha256 mismatches is deleted and fetched again."""
    calls: list[str] = []
    _fake_sources(monkeypatch, recbole_dir, calls)
    directory = fetch_ml100k(sources=("recbole",))
    good = (directory / "ml-100k.inter").read_bytes()
    (directory / "ml-100k.inter").write_bytes(good[:-10])
    assert fetch_ml100k(sources=("recbole",)) == directory
    assert calls == ["recbole", "recbole"]
    assert (directory / "ml-100k.inter").read_bytes() == good


def test_fetch_ml100k_bad_download_names_file_and_both_hashes(
    monkeypatch: pytest.MonkeyPatch, recbole_dir: Path
) -> None:
    """A download with a wrong sha256: DataError naming file and both hashes; nothing cached."""
    calls: list[str] = []
    _fake_sources(monkeypatch, recbole_dir, calls, corrupt=True)
    expected = movielens.ML100K_SHA256["ml-100k.inter"]
    served = (recbole_dir / "ml-100k.inter").read_bytes() + b"9\t9\t1\t0\n"
    actual = hashlib.sha256(served).hexdigest()
    with pytest.raises(DataError) as excinfo:
        fetch_ml100k()
    message = str(excinfo.value)
    assert "ml-100k.inter" in message and expected in message and actual in message
    assert "grouplens: offline" in message
    directory = cache_module.dataset_cache_dir("ml-100k")
    assert not (directory / "ml-100k.inter").exists()


def test_fetch_ml100k_rejects_unknown_source() -> None:
    """Source names are validated."""
    with pytest.raises(ValueError, match="`sources` must name some of"):
        fetch_ml100k(sources=("kaggle",))


def test_atomic_write_interrupted_keeps_old_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If the rename never happens, the old file is intact and no partial file is left."""
    target = tmp_path / "u.data"
    cache_module.atomic_write_bytes(target, b"old")

    def interrupted(src: str, dst: str) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        cache_module.atomic_write_bytes(target, b"new content")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["u.data"]


def test_cache_dir_honours_env_var(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """PRIVREC_CACHE_DIR overrides the platform cache directory; unset falls back to it."""
    monkeypatch.setenv("PRIVREC_CACHE_DIR", str(tmp_path / "c"))
    assert cache_module.cache_dir() == tmp_path / "c"
    monkeypatch.delenv("PRIVREC_CACHE_DIR")
    assert cache_module.cache_dir().name == "privrec"


# ------------------------------------------------------------------------------ network


@pytest.mark.network
def test_fetch_ml100k_from_recbole_wheel_real() -> None:
    """The real recbole 1.2.1 wheel from the package index gives the full ML-100K (fresh cache)."""
    directory = fetch_ml100k(sources=("recbole",))
    data = read_ml100k_dir(directory)
    assert (data.n_users, data.n_items, data.n_ratings) == (943, 1682, 100_000)
    np.testing.assert_array_equal(data.user_ids, np.arange(1, 944))
    np.testing.assert_array_equal(data.item_ids, np.arange(1, 1683))
    assert data.rating_scale == (1.0, 5.0)
    assert data.genre_names == ML100K_GENRES
    assert data.genres is not None and data.genres.shape == (1682, 19)
    # Per-genre item counts of GroupLens u.item.
    expected = [2, 251, 135, 42, 122, 505, 109, 50, 725, 22, 24, 92, 56, 61, 247, 101, 251, 71, 27]
    np.testing.assert_array_equal(data.genres.sum(axis=0), expected)
    assert data.user_counts().min() == 20
    # The .inter body is byte-identical to GroupLens u.data: its hash is the published one.
    body = (directory / "ml-100k.inter").read_bytes().split(b"\n", 1)[1]
    assert hashlib.sha256(body).hexdigest() == movielens.ML100K_SHA256["u.data"]
