"""Small ML-100K files in both forms and a RatingData equality check, shared by the data tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from privrec.shared.data import ML100K_GENRES, RatingData

# (user, item, rating, timestamp): 4 users, 5 items, unsorted as in u.data.
RATINGS = [
    (3, 20, 4, 881250949),
    (1, 10, 5, 891717742),
    (7, 30, 1, 878887116),
    (1, 20, 3, 880606923),
    (3, 40, 2, 886397596),
    (5, 50, 5, 884182806),
    (7, 10, 2, 881171488),
    (1, 50, 4, 891628467),
]
# item -> genre names (item 40 is "unknown" only)
GENRES = {
    10: ["Animation", "Children's", "Comedy"],
    20: ["Action", "Adventure", "Thriller"],
    30: ["Film-Noir", "Sci-Fi"],
    40: ["unknown"],
    50: ["Drama", "Western"],
}


def write_grouplens(directory: Path, ratings=RATINGS, genres=GENRES) -> Path:
    """Write ``u.data`` and ``u.item`` (latin-1, with an accented title) into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "u.data").write_text("".join(f"{u}\t{i}\t{r}\t{t}\n" for u, i, r, t in ratings))
    lines = []
    for item, names in genres.items():
        flags = "|".join("1" if g in names else "0" for g in ML100K_GENRES)
        lines.append(f"{item}|Café {item} (1995)|01-Jan-1995||http://x/{item}|{flags}\n")
    (directory / "u.item").write_bytes("".join(lines).encode("latin-1"))
    return directory


def write_recbole(directory: Path, ratings=RATINGS, genres=GENRES) -> Path:
    """Write ``ml-100k.inter`` and ``ml-100k.item`` (RecBole atomic files) into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    header = "user_id:token\titem_id:token\trating:float\ttimestamp:float\n"
    body = "".join(f"{u}\t{i}\t{r}\t{t}\n" for u, i, r, t in ratings)
    (directory / "ml-100k.inter").write_text(header + body)
    item_lines = ["item_id:token\tmovie_title:token_seq\trelease_year:token\tclass:token_seq\n"]
    item_lines += [
        f"{item}\tCafé {item}\t1995\t{' '.join(names)}\n" for item, names in genres.items()
    ]
    (directory / "ml-100k.item").write_text("".join(item_lines), encoding="utf-8")
    return directory


def assert_same_data(a: RatingData, b: RatingData) -> None:
    """`a` and `b` hold the same ratings, ids, scale and genres (CSR structure included)."""
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
