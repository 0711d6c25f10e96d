"""Readers of rating files: MovieLens-100K (GroupLens and RecBole forms), MovieLens-1M, CSV.

Each reader turns its files into `RatingData` through `shared.data.parsing` (canonical order,
precise `DataError`s naming file, line and reason):

* `read_ml100k_dir`: a directory holding GroupLens ``u.data``/``u.item`` or RecBole atomic files
  ``ml-100k.inter``/``ml-100k.item``; both forms of the full set read to identical data.
* `read_ml1m_ratings`: MovieLens-1M ``ratings.dat`` (with ``movies.dat`` beside it for genres).
* `read_csv`: any delimited file of (user, item, rating) rows.

Genres are mapped onto the 19 MovieLens-100K columns `ML100K_GENRES` in every format.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator, Sequence
from os import PathLike
from pathlib import Path

from privrec.shared.data.dataset import RatingData
from privrec.shared.data.parsing import (
    GenreTable,
    build_rating_data,
    genre_table,
    parse_triples,
    text_lines,
)
from privrec.shared.errors import DataError

ML100K_GENRES: tuple[str, ...] = (
    "unknown", "Action", "Adventure", "Animation", "Children's", "Comedy", "Crime",
    "Documentary", "Drama", "Fantasy", "Film-Noir", "Horror", "Musical", "Mystery", "Romance",
    "Sci-Fi", "Thriller", "War", "Western",
)  # fmt: skip
"""The 19 genre columns of MovieLens-100K, in the order of GroupLens ``u.genre``/``u.item``."""

ML100K_RATING_SCALE = (1.0, 5.0)
"""The rating scale of MovieLens-100K and -1M (whole stars 1..5)."""
ML100K_NAME = "ml-100k"
"""The data set's name: `RatingData.name`, its cache directory, and its `load_dataset` name."""

# --------------------------------------------------------------------------------------------
# MovieLens-100K, GroupLens form


def _read_grouplens_items(path: Path) -> GenreTable:
    """``u.item``: ``id|title|release date|video release date|IMDb URL|19 genre flags``."""
    n_fields = 5 + len(ML100K_GENRES)
    ids: list[int] = []
    flags: list[list[bool]] = []
    lines: list[int] = []
    for number, line in text_lines(path, "latin-1"):
        fields = line.split("|")
        where = f"{path}, line {number}"
        if len(fields) != n_fields:
            raise DataError(
                f"{where}: expected {n_fields} fields separated by '|', got {len(fields)}"
            )
        try:
            ids.append(int(fields[0]))
        except ValueError:
            raise DataError(f"{where}: movie id {fields[0]!r} is not an integer") from None
        row = fields[5:]
        bad = [(g, v) for g, v in zip(ML100K_GENRES, row, strict=True) if v not in ("0", "1")]
        if bad:
            raise DataError(f"{where}: genre flag {bad[0][0]!r} is {bad[0][1]!r}, expected 0 or 1")
        flags.append([v == "1" for v in row])
        lines.append(number)
    return genre_table(path, ids, flags, lines, ML100K_GENRES)


def _read_grouplens(directory: Path, name: str) -> RatingData:
    data_path = directory / "u.data"
    triples = parse_triples(
        data_path,
        ((number, line.split("\t")) for number, line in text_lines(data_path, "latin-1")),
        columns=(0, 1, 2),
        column_names=("user id", "item id", "rating"),
        n_fields=4,
        separator="\t",
        scale=ML100K_RATING_SCALE,
        time_column=3,
    )
    item_path = directory / "u.item"
    genres = _read_grouplens_items(item_path) if item_path.is_file() else None
    return build_rating_data(name, data_path, triples, ML100K_RATING_SCALE, genres)


# --------------------------------------------------------------------------------------------
# MovieLens-100K, RecBole atomic-file form


def _recbole_header(path: Path, line: str, required: Sequence[str]) -> dict[str, int]:
    r"""Map field names of a RecBole header (``user_id:token\titem_id:token…``) to columns."""
    names = [field.split(":", 1)[0].strip() for field in line.split("\t")]
    columns = {field: index for index, field in enumerate(names)}
    missing = [field for field in required if field not in columns]
    if missing:
        raise DataError(
            f"{path}, line 1: header lacks field {missing[0]!r} (found {', '.join(names)})"
        )
    return columns


def _read_recbole_items(path: Path) -> GenreTable:
    """RecBole ``.item``: ``item_id:token``, …, ``class:token_seq`` (space-separated genres)."""
    genre_index = {genre: index for index, genre in enumerate(ML100K_GENRES)}
    lines_iter = text_lines(path, "utf-8")
    header = next(lines_iter, None)
    if header is None:
        raise DataError(f"{path}: empty file")
    columns = _recbole_header(path, header[1], ("item_id", "class"))
    n_fields = len(columns)
    id_col, class_col = columns["item_id"], columns["class"]
    ids: list[int] = []
    flags: list[list[bool]] = []
    lines: list[int] = []
    for number, line in lines_iter:
        where = f"{path}, line {number}"
        fields = line.split("\t")
        if len(fields) != n_fields:
            raise DataError(
                f"{where}: expected {n_fields} fields separated by '\\t', got {len(fields)}"
            )
        try:
            ids.append(int(fields[id_col]))
        except ValueError:
            raise DataError(f"{where}: item_id {fields[id_col]!r} is not an integer") from None
        row = [False] * len(ML100K_GENRES)
        for genre in fields[class_col].split():
            if genre not in genre_index:
                raise DataError(
                    f"{where}: unknown genre {genre!r} (known: {', '.join(ML100K_GENRES)})"
                )
            row[genre_index[genre]] = True
        flags.append(row)
        lines.append(number)
    return genre_table(path, ids, flags, lines, ML100K_GENRES)


def _read_recbole(inter_path: Path, name: str) -> RatingData:
    lines_iter = text_lines(inter_path, "utf-8")
    header = next(lines_iter, None)
    if header is None:
        raise DataError(f"{inter_path}: empty file")
    columns = _recbole_header(inter_path, header[1], ("user_id", "item_id", "rating"))
    triples = parse_triples(
        inter_path,
        ((number, line.split("\t")) for number, line in lines_iter),
        columns=(columns["user_id"], columns["item_id"], columns["rating"]),
        column_names=("user_id", "item_id", "rating"),
        n_fields=len(columns),
        separator="\t",
        scale=ML100K_RATING_SCALE,
        time_column=columns.get("timestamp"),
    )
    item_path = inter_path.with_suffix(".item")
    genres = _read_recbole_items(item_path) if item_path.is_file() else None
    return build_rating_data(name, inter_path, triples, ML100K_RATING_SCALE, genres)


def ml100k_files(directory: Path) -> list[Path]:
    """The files `read_ml100k_dir` reads in `directory` (ratings first), or [] if none."""
    if (directory / "u.data").is_file():
        item = directory / "u.item"
        return [directory / "u.data", *([item] if item.is_file() else [])]
    inter = directory / "ml-100k.inter"
    if not inter.is_file():
        candidates = sorted(directory.glob("*.inter"))
        if len(candidates) != 1:
            return []
        inter = candidates[0]
    item = inter.with_suffix(".item")
    return [inter, *([item] if item.is_file() else [])]


def read_ml100k_dir(path: str | PathLike[str], *, name: str = ML100K_NAME) -> RatingData:
    r"""Read MovieLens-100K from a directory in either of its two forms.

    * GroupLens: ``u.data`` (tab-separated ``user item rating timestamp``) and, optionally,
      ``u.item`` (latin-1, ``|``-separated, the last 19 fields genre flags).
    * RecBole atomic files: ``ml-100k.inter`` with a typed header such as
      ``user_id:token\titem_id:token\trating:float\ttimestamp:float`` and, optionally,
      ``ml-100k.item`` whose ``class:token_seq`` field lists genres separated by spaces
      (``Animation Children's Comedy``), mapped onto `ML100K_GENRES`.

    When both are present the GroupLens files are read. Both forms of the full set give the same
    `RatingData`: 943 × 1,682, 100,000 ratings, scale (1, 5), genres of shape (1682, 19).

    Args:
        path: the directory.
        name: the `RatingData.name` to set.

    Returns:
        The ratings; `genres` is None when the directory has no item file.

    Raises:
        DataError: no ML-100K files in `path`, or a malformed line (file, line number, reason),
            a duplicate (user, item) pair, a rating outside 1..5, or a rated item missing from
            the item file.
    """
    directory = Path(path)
    files = ml100k_files(directory) if directory.is_dir() else []
    if not files:
        raise DataError(f"{directory}: no MovieLens-100K files (expected u.data, or ml-100k.inter)")
    if files[0].name == "u.data":
        return _read_grouplens(directory, name)
    return _read_recbole(files[0], name)


# --------------------------------------------------------------------------------------------
# MovieLens-1M and CSV


def _read_ml1m_movies(path: Path) -> GenreTable:
    """ML-1M ``movies.dat``: ``MovieID::Title::Genre|Genre…`` (latin-1)."""
    genre_index = {genre: index for index, genre in enumerate(ML100K_GENRES)}
    ids: list[int] = []
    flags: list[list[bool]] = []
    lines: list[int] = []
    for number, line in text_lines(path, "latin-1"):
        where = f"{path}, line {number}"
        fields = line.split("::")
        if len(fields) < 3:
            raise DataError(f"{where}: expected 3 fields separated by '::', got {len(fields)}")
        try:
            ids.append(int(fields[0]))
        except ValueError:
            raise DataError(f"{where}: MovieID {fields[0]!r} is not an integer") from None
        row = [False] * len(ML100K_GENRES)
        for genre in filter(None, fields[-1].split("|")):
            if genre not in genre_index:
                raise DataError(
                    f"{where}: unknown genre {genre!r} (known: {', '.join(ML100K_GENRES)})"
                )
            row[genre_index[genre]] = True
        flags.append(row)
        lines.append(number)
    return genre_table(path, ids, flags, lines, ML100K_GENRES)


def read_ml1m_ratings(path: str | PathLike[str], *, name: str = "ml-1m") -> RatingData:
    """Read MovieLens-1M ``ratings.dat`` (``UserID::MovieID::Rating::Timestamp``, scale 1..5).

    If ``movies.dat`` lies beside it, its genres (18 ML-1M genres, a subset of `ML100K_GENRES`;
    the ``unknown`` column stays False) fill `genres` for the rated movies.

    Args:
        path: the ``ratings.dat`` file.
        name: the `RatingData.name` to set.

    Returns:
        The ratings of every user and movie that occurs in the file.

    Raises:
        DataError: a malformed line (file, line number, reason), a duplicate pair, a rating
            outside 1..5.
    """
    file = Path(path)
    triples = parse_triples(
        file,
        ((number, line.split("::")) for number, line in text_lines(file, "latin-1")),
        columns=(0, 1, 2),
        column_names=("UserID", "MovieID", "Rating"),
        n_fields=4,
        separator="::",
        scale=ML100K_RATING_SCALE,
        time_column=3,
    )
    movies = file.with_name("movies.dat")
    genres = _read_ml1m_movies(movies) if movies.is_file() else None
    return build_rating_data(name, file, triples, ML100K_RATING_SCALE, genres)


def _resolve_column(path: Path, column: int | str, header: list[str] | None, role: str) -> int:
    if isinstance(column, str):
        if header is None:
            raise DataError(
                f"{path}: {role} column {column!r} is a name but the file has no header"
            )
        if column not in header:
            raise DataError(
                f"{path}, line 1: no {role} column {column!r} in header ({', '.join(header)})"
            )
        return header.index(column)
    if column < 0:
        raise DataError(f"{path}: {role} column index must be >= 0, got {column}")
    return column


def read_csv(
    path: str | PathLike[str],
    *,
    user_col: int | str = 0,
    item_col: int | str = 1,
    rating_col: int | str = 2,
    delimiter: str = ",",
    has_header: bool | None = None,
    rating_scale: tuple[float, float] | None = None,
    name: str | None = None,
) -> RatingData:
    """Read ratings from a delimited text file (one rating per row; extra columns ignored).

    User and item ids must be integers (they become `RatingData.user_ids`/`item_ids`).

    Args:
        path: the file (UTF-8; a byte-order mark is ignored).
        user_col: column of the user id: a 0-based index, or a header name.
        item_col: column of the item id.
        rating_col: column of the rating.
        delimiter: field delimiter (quoting follows the csv module's defaults).
        has_header: whether the first row is a header; None guesses: it is a header when its
            rating field is not a number (or when a column is given by name).
        rating_scale: (lowest, highest); ratings outside are errors. None infers it from the
            smallest and largest rating in the file.
        name: the `RatingData.name`; default the file stem.

    Returns:
        The ratings; `genres` is None.

    Raises:
        DataError: unreadable file, missing column, malformed row (line number and reason),
            duplicate pair, rating outside `rating_scale`, a rating of 0, or all ratings equal
            with no `rating_scale` given.
    """
    file = Path(path)
    if rating_scale is not None:
        low, high = (float(v) for v in rating_scale)
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise DataError(
                f"`rating_scale` must be (low, high) with low < high, got {rating_scale!r}"
            )
        rating_scale = (low, high)
    try:
        handle = file.open(encoding="utf-8-sig", newline="")
    except OSError as exc:
        raise DataError(f"{file}: cannot open: {exc.strerror or exc}") from exc
    with handle:
        reader = csv.reader(handle, delimiter=delimiter)
        try:
            first = next(reader, None)
            while first is not None and not first:
                first = next(reader, None)
            if first is None:
                raise DataError(f"{file}: no ratings")
            first_line = reader.line_num
            by_name = any(isinstance(c, str) for c in (user_col, item_col, rating_col))
            if has_header is None:
                if by_name:
                    has_header = True
                else:
                    probe = (
                        first[rating_col]
                        if isinstance(rating_col, int) and 0 <= rating_col < len(first)
                        else ""
                    )
                    try:
                        float(probe)
                        has_header = False
                    except ValueError:
                        has_header = True
            header = [field.strip() for field in first] if has_header else None
            columns = (
                _resolve_column(file, user_col, header, "user"),
                _resolve_column(file, item_col, header, "item"),
                _resolve_column(file, rating_col, header, "rating"),
            )
            names = tuple(
                f"{role} ({header[c]!r})" if header is not None and c < len(header) else role
                for role, c in zip(("user id", "item id", "rating"), columns, strict=True)
            )

            def rows() -> Iterator[tuple[int, Sequence[str]]]:
                if not has_header:
                    yield first_line, first
                for row in reader:
                    if row:
                        yield reader.line_num, row

            triples = parse_triples(
                file,
                rows(),
                columns=columns,
                column_names=(names[0], names[1], names[2]),
                n_fields=None,
                separator=delimiter,
                scale=rating_scale,
            )
        except UnicodeDecodeError as exc:
            raise DataError(f"{file}: not valid UTF-8 text: {exc}") from exc
        except csv.Error as exc:
            raise DataError(f"{file}, line {reader.line_num}: {exc}") from exc
    if rating_scale is None:
        if triples.ratings.size == 0:
            raise DataError(f"{file}: no ratings")
        low, high = float(triples.ratings.min()), float(triples.ratings.max())
        if low == high:
            raise DataError(f"{file}: every rating is {low:g}; pass `rating_scale` explicitly")
        rating_scale = (low, high)
    return build_rating_data(name or file.stem, file, triples, rating_scale)


__all__ = [
    "ML100K_GENRES",
    "ML100K_NAME",
    "ML100K_RATING_SCALE",
    "ml100k_files",
    "read_csv",
    "read_ml1m_ratings",
    "read_ml100k_dir",
]
