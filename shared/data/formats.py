"""Readers of the other public rating formats: RecBole atomic files, MovieLens 10M–32M,
Amazon 2023 rating-only CSV, Book-Crossing, LastFM-1K, Jester and a Netflix-prize directory.

Each turns its files into `RatingData` through `shared.data.parsing.build_rating_data` (rows
and columns sorted by id, duplicates refused with the line numbers). Ids that are not integers
(Amazon ASINs, ISBNs, LastFM user names, RecBole tokens) become their rank among the file's
sorted distinct tokens (`_codes`); integer ids are kept. A rating of 0 cannot be stored in the
sparse matrix (0 = unrated), so each reader says what it does with one:

* Book-Crossing's 0 is an implicit interaction ("read, not rated"): dropped, the explicit 1–10
  ratings are read;
* Jester's −10…10 continuous ratings are shifted by +11 onto 1…21 (so 0.0 is storable);
* LastFM-1K has no ratings: the value of (user, artist) is the number of plays (implicit
  feedback, scale 1…max); `[data] binarise` turns it into 0/1 interactions.
"""

from __future__ import annotations

import csv
import gzip
import re
from collections.abc import Iterable, Iterator
from os import PathLike
from pathlib import Path
from typing import TextIO

import numpy as np

from privrec.shared.data.dataset import RatingData
from privrec.shared.data.parsing import GenreTable, Triples, build_rating_data, text_lines
from privrec.shared.errors import DataError

MOVIELENS_HALF_STARS = (0.5, 5.0)
"""The scale of MovieLens 10M, 20M, 25M, 32M and latest-small (half stars)."""


def _open_text(path: Path, encoding: str) -> TextIO:
    try:
        if path.suffix == ".gz":
            return gzip.open(path, "rt", encoding=encoding, newline="")
        return path.open(encoding=encoding, newline="")
    except OSError as exc:
        raise DataError(f"{path}: cannot open: {exc.strerror or exc}") from exc


def _codes(path: Path, tokens: list[str], role: str) -> np.ndarray:
    """Integer ids of `tokens`: the integers themselves when every token is one, else each
    token's rank among the sorted distinct tokens."""
    try:
        return np.asarray([int(t) for t in tokens], dtype=np.int64)
    except ValueError:
        pass
    except OverflowError:
        raise DataError(f"{path}: a {role} id does not fit in 64 bits") from None
    _, codes = np.unique(np.asarray(tokens, dtype=object).astype(str), return_inverse=True)
    return codes.astype(np.int64)


def _triples(
    path: Path,
    rows: Iterable[tuple[int, str, str, str]],
    *,
    scale: tuple[float, float] | None,
    shift: float = 0.0,
    drop_zero: bool = False,
) -> tuple[Triples, tuple[float, float]]:
    """(line, user token, item token, rating text) rows → checked `Triples` and the scale."""
    users: list[str] = []
    items: list[str] = []
    ratings: list[float] = []
    lines: list[int] = []
    for number, user, item, text in rows:
        try:
            value = float(text)
        except ValueError:
            raise DataError(f"{path}, line {number}: rating {text!r} is not a number") from None
        if not np.isfinite(value):
            raise DataError(f"{path}, line {number}: rating {text!r} is not finite")
        if value == 0.0 and drop_zero:
            continue
        if scale is not None and not scale[0] <= value <= scale[1]:
            raise DataError(
                f"{path}, line {number}: rating {value:g} is outside the scale "
                f"{scale[0]:g}..{scale[1]:g}"
            )
        value += shift
        if value == 0.0:
            raise DataError(
                f"{path}, line {number}: rating is 0, which a sparse rating matrix cannot store"
            )
        users.append(user.strip())
        items.append(item.strip())
        ratings.append(value)
        lines.append(number)
    if not ratings:
        raise DataError(f"{path}: no ratings")
    values = np.asarray(ratings, dtype=np.float64)
    if scale is None:
        scale = (float(values.min()), float(values.max()))
        if scale[0] == scale[1]:
            scale = (min(scale[0], 0.0), max(scale[1], 1.0))
    else:
        scale = (scale[0] + shift, scale[1] + shift)
    triples = Triples(
        _codes(path, users, "user"),
        _codes(path, items, "item"),
        values,
        np.asarray(lines, dtype=np.int64),
    )
    return triples, scale


def _csv_rows(
    path: Path,
    columns: tuple[str, str, str | None],
    *,
    delimiter: str,
    encoding: str = "utf-8",
) -> Iterator[tuple[int, str, str, str]]:
    """(line, user, item, rating) of a delimited file with a header naming the columns; a
    missing rating column (None) reads every row as 1 (an interaction)."""
    with _open_text(path, encoding) as handle:
        reader = csv.reader(handle, delimiter=delimiter)
        try:
            header = [field.strip().split(":", 1)[0] for field in next(reader, [])]
            wanted = [c for c in columns if c is not None]
            missing = [c for c in wanted if c not in header]
            if missing:
                raise DataError(
                    f"{path}, line 1: header lacks column {missing[0]!r} "
                    f"(found {', '.join(header)})"
                )
            at = [header.index(c) if c is not None else -1 for c in columns]
            for row in reader:
                if not row:
                    continue
                if len(row) <= max(at):
                    raise DataError(
                        f"{path}, line {reader.line_num}: expected at least {max(at) + 1} "
                        f"fields separated by {delimiter!r}, got {len(row)}"
                    )
                rating = row[at[2]] if at[2] >= 0 else "1"
                yield reader.line_num, row[at[0]], row[at[1]], rating
        except (csv.Error, UnicodeDecodeError) as exc:
            raise DataError(f"{path}, line {reader.line_num}: {exc}") from exc


# ------------------------------------------------------------------------------ the formats
def read_movielens_csv(path: str | PathLike[str], *, name: str | None = None) -> RatingData:
    """MovieLens 20M/25M/32M/latest ``ratings.csv`` (``userId,movieId,rating,timestamp``),
    half stars 0.5…5."""
    file = Path(path)
    rows = _csv_rows(file, ("userId", "movieId", "rating"), delimiter=",")
    triples, scale = _triples(file, rows, scale=MOVIELENS_HALF_STARS)
    return build_rating_data(name or file.parent.name, file, triples, scale)


def read_movielens_dat(
    path: str | PathLike[str], *, name: str | None = None, scale: tuple[float, float] = (1.0, 5.0)
) -> RatingData:
    """MovieLens 1M/10M ``ratings.dat`` (``UserID::MovieID::Rating::Timestamp``); ML-10M has
    half stars (`scale` (0.5, 5))."""
    file = Path(path)

    def rows() -> Iterator[tuple[int, str, str, str]]:
        for number, line in text_lines(file, "latin-1"):
            fields = line.split("::")
            if len(fields) != 4:
                raise DataError(
                    f"{file}, line {number}: expected 4 fields separated by '::', got {len(fields)}"
                )
            yield number, fields[0], fields[1], fields[2]

    triples, scale = _triples(file, rows(), scale=scale)
    return build_rating_data(name or file.parent.name, file, triples, scale)


def read_amazon_ratings(path: str | PathLike[str], *, name: str | None = None) -> RatingData:
    """Amazon Reviews 2023 rating-only CSV (``user_id,parent_asin,rating,timestamp``, may be
    gzipped), stars 1…5."""
    file = Path(path)
    rows = _csv_rows(file, ("user_id", "parent_asin", "rating"), delimiter=",")
    triples, scale = _triples(file, rows, scale=(1.0, 5.0))
    return build_rating_data(name or file.name.split(".")[0], file, triples, scale)


def read_book_crossing(path: str | PathLike[str], *, name: str = "book-crossing") -> RatingData:
    """Book-Crossing ``BX-Book-Ratings.csv`` (``"User-ID";"ISBN";"Book-Rating"``, latin-1):
    the explicit ratings 1…10 (0 = implicit, dropped; module docstring)."""
    file = Path(path)
    rows = _csv_rows(file, ("User-ID", "ISBN", "Book-Rating"), delimiter=";", encoding="latin-1")
    triples, _ = _triples(file, rows, scale=(0.0, 10.0), drop_zero=True)
    return build_rating_data(name, file, triples, (1.0, 10.0))


def read_jester(path: str | PathLike[str], *, name: str = "jester") -> RatingData:
    """Jester ``jester_ratings.dat`` (``user item rating``, whitespace-separated, −10…10),
    shifted by +11 onto 1…21 (module docstring)."""
    file = Path(path)

    def rows() -> Iterator[tuple[int, str, str, str]]:
        for number, line in text_lines(file, "utf-8"):
            fields = line.split()
            if len(fields) != 3:
                raise DataError(f"{file}, line {number}: expected 3 fields, got {len(fields)}")
            yield number, fields[0], fields[1], fields[2]

    triples, scale = _triples(file, rows(), scale=(-10.0, 10.0), shift=11.0)
    return build_rating_data(name, file, triples, scale)


def read_lastfm_1k(path: str | PathLike[str], *, name: str = "lastfm-1k") -> RatingData:
    """LastFM-1K ``userid-timestamp-artid-artname-traid-traname.tsv``: the number of plays of
    each (user, artist name) — implicit feedback, scale 1…max plays."""
    file = Path(path)
    plays: dict[tuple[str, str], list[int]] = {}
    for number, line in text_lines(file, "utf-8"):
        fields = line.split("\t")
        if len(fields) != 6:
            raise DataError(
                f"{file}, line {number}: expected 6 tab-separated fields, got {len(fields)}"
            )
        key = (fields[0], fields[3])
        if key in plays:
            plays[key][1] += 1
        else:
            plays[key] = [number, 1]
    rows = ((first, user, artist, str(n)) for (user, artist), (first, n) in plays.items())
    triples, scale = _triples(file, rows, scale=None)
    return build_rating_data(name, file, triples, (1.0, max(scale[1], 2.0)))


_NETFLIX_MOVIE = re.compile(r"^(\d+):$")


def read_netflix_dir(path: str | PathLike[str], *, name: str = "netflix") -> RatingData:
    """A user-supplied Netflix-prize directory: ``training_set/mv_*.txt`` (one file per movie:
    ``MovieID:`` then ``CustomerID,Rating,Date`` rows) or the ``combined_data_*.txt`` files
    (several ``MovieID:`` blocks each). Stars 1…5."""
    directory = Path(path)
    files = sorted((directory / "training_set").glob("mv_*.txt")) or sorted(
        directory.glob("combined_data_*.txt")
    )
    if not files:
        raise DataError(
            f"{directory}: no Netflix-prize files (expected training_set/mv_*.txt or "
            "combined_data_*.txt)"
        )

    def rows() -> Iterator[tuple[int, str, str, str]]:
        for file in files:
            movie: str | None = None
            for number, line in text_lines(file, "latin-1"):
                header = _NETFLIX_MOVIE.match(line.strip())
                if header:
                    movie = header.group(1)
                    continue
                fields = line.split(",")
                if movie is None or len(fields) != 3:
                    raise DataError(
                        f"{file}, line {number}: expected 'MovieID:' or CustomerID,Rating,Date"
                    )
                yield number, fields[0], movie, fields[1]

    triples, scale = _triples(directory, rows(), scale=(1.0, 5.0))
    return build_rating_data(name, directory, triples, scale)


def _atomic_header(path: Path) -> list[str]:
    with _open_text(path, "utf-8") as handle:
        first = handle.readline().rstrip("\r\n")
    return [field.split(":", 1)[0].strip() for field in first.split("\t")]


def _atomic_genres(path: Path, item_ids: np.ndarray, item_tokens: list[str]) -> GenreTable | None:
    """The first ``token_seq`` field of a RecBole ``.item`` file as genre flags."""
    with _open_text(path, "utf-8") as handle:
        header = handle.readline().rstrip("\r\n").split("\t")
        seq = [i for i, f in enumerate(header) if f.endswith(":token_seq")]
        names = [f.split(":", 1)[0] for f in header]
        if not seq or "item_id" not in names:
            return None
        rows = [line.rstrip("\r\n").split("\t") for line in handle if line.strip()]
    at_id, at_seq = names.index("item_id"), seq[0]
    tags = {row[at_id]: row[at_seq].split() if len(row) > at_seq else [] for row in rows}
    vocab = tuple(sorted({t for ts in tags.values() for t in ts}))
    index = {t: k for k, t in enumerate(vocab)}
    flags = np.zeros((len(item_tokens), len(vocab)), dtype=bool)
    for k, token in enumerate(item_tokens):
        if token not in tags:
            raise DataError(f"{path}: item {token!r} has interactions but no row here")
        flags[k, [index[t] for t in tags[token]]] = True
    return GenreTable(path, item_ids, flags, vocab)


def read_recbole_atomic(path: str | PathLike[str], *, name: str | None = None) -> RatingData:
    """A RecBole atomic ``.inter`` file (tab-separated, typed header ``user_id:token
    item_id:token rating:float …``; without a ``rating`` field every row is an interaction of
    value 1) and, beside it, the ``.item`` file's first ``token_seq`` field as genres."""
    file = Path(path)
    header = _atomic_header(file)
    rating = "rating" if "rating" in header else None
    rows = list(_csv_rows(file, ("user_id", "item_id", rating), delimiter="\t"))
    triples, scale = _triples(file, rows, scale=None)
    data = build_rating_data(name or file.stem, file, triples, scale)
    item_file = file.with_suffix(".item")
    if not item_file.is_file():
        return data
    by_code = dict(zip(triples.items.tolist(), (r[2].strip() for r in rows), strict=True))
    ordered = [by_code[int(code)] for code in data.item_ids]
    genres = _atomic_genres(item_file, data.item_ids, ordered)
    if genres is None:
        return data
    return RatingData(
        data.name, data.ratings, data.user_ids, data.item_ids, data.rating_scale,
        genres.flags, genres.names,
    )  # fmt: skip


__all__ = [
    "MOVIELENS_HALF_STARS",
    "read_amazon_ratings",
    "read_book_crossing",
    "read_jester",
    "read_lastfm_1k",
    "read_movielens_csv",
    "read_movielens_dat",
    "read_netflix_dir",
    "read_recbole_atomic",
]
