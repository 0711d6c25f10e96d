"""MovieLens-100K (both forms), MovieLens-1M and CSV readers (shared.data.readers)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _data_fixtures import GENRES, RATINGS, assert_same_data, write_grouplens

from privrec.shared.data import (
    ML100K_GENRES,
    RatingData,
    read_csv,
    read_ml1m_ratings,
    read_ml100k_dir,
)
from privrec.shared.errors import DataError


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
