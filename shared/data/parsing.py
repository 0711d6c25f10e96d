"""From the rows of a rating file to a canonical `RatingData`, with precise errors.

The format readers (`shared.data.readers`) split each line into fields; the helpers here turn
those fields into checked (user, item, rating) triples and genre tables, and assemble them:
rows are the users that have at least one rating, columns the items that have at least one
rating, both sorted by original id. A malformed line raises `DataError` naming the file, the line
number and what is wrong; so does a duplicate (user, item) pair and a rating of 0 (a stored 0
would read as "unrated" in the CSR matrix).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from privrec.shared.data.dataset import RatingData
from privrec.shared.errors import DataError
from privrec.shared.types import BoolArray, FloatArray, IntArray


def text_lines(path: Path, encoding: str) -> Iterator[tuple[int, str]]:
    """(1-based line number, line without its line break) for every non-blank line."""
    try:
        handle = path.open(encoding=encoding, errors="strict", newline="")
    except OSError as exc:
        raise DataError(f"{path}: cannot open: {exc.strerror or exc}") from exc
    with handle:
        try:
            for number, line in enumerate(handle, start=1):
                stripped = line.rstrip("\r\n")
                if stripped.strip():
                    yield number, stripped
        except UnicodeDecodeError as exc:
            raise DataError(f"{path}: not valid {encoding} text: {exc}") from exc


@dataclasses.dataclass
class Triples:
    """Parsed (user, item, rating) rows with the line each came from."""

    users: IntArray
    items: IntArray
    ratings: FloatArray
    lines: IntArray
    times: FloatArray | None = None
    """Each row's timestamp, when the format has one (`parse_triples`' `time_column`)."""


def parse_triples(
    path: Path,
    rows: Iterable[tuple[int, Sequence[str]]],
    *,
    columns: tuple[int, int, int],
    column_names: tuple[str, str, str],
    n_fields: int | None,
    separator: str,
    scale: tuple[float, float] | None,
    time_column: int | None = None,
) -> Triples:
    """Parse user id, item id and rating (and, given `time_column`, the timestamp) out of each
    row of fields, with precise errors."""
    cu, ci, cr = columns
    need = max(*columns, -1 if time_column is None else time_column) + 1
    users: list[int] = []
    items: list[int] = []
    ratings: list[float] = []
    lines: list[int] = []
    times: list[float] = []
    for number, fields in rows:
        where = f"{path}, line {number}"
        if n_fields is not None and len(fields) != n_fields:
            raise DataError(
                f"{where}: expected {n_fields} fields separated by {separator!r}, got {len(fields)}"
            )
        if len(fields) < need:
            raise DataError(
                f"{where}: expected at least {need} fields separated by {separator!r}, "
                f"got {len(fields)}"
            )
        try:
            user = int(fields[cu])
        except ValueError:
            raise DataError(
                f"{where}: {column_names[0]} {fields[cu]!r} is not an integer"
            ) from None
        try:
            item = int(fields[ci])
        except ValueError:
            raise DataError(
                f"{where}: {column_names[1]} {fields[ci]!r} is not an integer"
            ) from None
        try:
            rating = float(fields[cr])
        except ValueError:
            raise DataError(f"{where}: {column_names[2]} {fields[cr]!r} is not a number") from None
        if not math.isfinite(rating):
            raise DataError(f"{where}: {column_names[2]} {fields[cr]!r} is not finite")
        if rating == 0.0:
            raise DataError(
                f"{where}: {column_names[2]} is 0, which a sparse rating matrix cannot store "
                "(0 means unrated); shift the scale"
            )
        if scale is not None and not scale[0] <= rating <= scale[1]:
            raise DataError(
                f"{where}: {column_names[2]} {rating:g} is outside the scale "
                f"{scale[0]:g}..{scale[1]:g}"
            )
        if time_column is not None:
            try:
                times.append(float(fields[time_column]))
            except ValueError:
                raise DataError(
                    f"{where}: timestamp {fields[time_column]!r} is not a number"
                ) from None
        users.append(user)
        items.append(item)
        ratings.append(rating)
        lines.append(number)
    try:
        user_array = np.asarray(users, dtype=np.int64)
        item_array = np.asarray(items, dtype=np.int64)
    except OverflowError:
        raise DataError(f"{path}: a user or item id does not fit in 64 bits") from None
    return Triples(
        users=user_array,
        items=item_array,
        ratings=np.asarray(ratings, dtype=np.float64),
        lines=np.asarray(lines, dtype=np.int64),
        times=None if time_column is None else np.asarray(times, dtype=np.float64),
    )


@dataclasses.dataclass
class GenreTable:
    """Genre flags by original item id, and the file they came from."""

    path: Path
    item_ids: IntArray
    flags: BoolArray
    names: tuple[str, ...]


def build_rating_data(
    name: str,
    path: Path,
    triples: Triples,
    rating_scale: tuple[float, float],
    genres: GenreTable | None = None,
) -> RatingData:
    """Assemble a canonical `RatingData` (sorted ids, sorted CSR indices, no duplicates)."""
    if triples.users.size == 0:
        raise DataError(f"{path}: no ratings")
    user_ids, rows = np.unique(triples.users, return_inverse=True)
    item_ids, cols = np.unique(triples.items, return_inverse=True)
    order = np.lexsort((cols, rows))
    rows, cols = rows[order], cols[order]
    same = np.flatnonzero((rows[1:] == rows[:-1]) & (cols[1:] == cols[:-1]))
    if same.size:
        a, b = order[same[0]], order[same[0] + 1]
        first, second = sorted((int(triples.lines[a]), int(triples.lines[b])))
        raise DataError(
            f"{path}, line {second}: duplicate rating of user {triples.users[a]} for item "
            f"{triples.items[a]} (first at line {first})"
        )
    n_users, n_items = user_ids.size, item_ids.size
    index_dtype = np.int32 if max(rows.size, n_items) < np.iinfo(np.int32).max else np.int64
    indptr = np.zeros(n_users + 1, dtype=index_dtype)
    np.cumsum(np.bincount(rows, minlength=n_users), out=indptr[1:])
    # (data, indices, indptr) with a run-time index dtype, which scipy-stubs cannot type
    parts: Any = (triples.ratings[order], cols.astype(index_dtype), indptr)
    matrix: sp.csr_matrix = sp.csr_matrix(parts, shape=(n_users, n_items))
    matrix.has_sorted_indices = True
    timestamps: sp.csr_matrix | None = None
    if triples.times is not None:  # the ratings' structure, each cell's time (zeros kept)
        times: Any = (triples.times[order], matrix.indices, matrix.indptr)
        timestamps = sp.csr_matrix(times, shape=(n_users, n_items))
    genre_flags: BoolArray | None = None
    genre_names: tuple[str, ...] = ()
    if genres is not None:
        position = np.searchsorted(genres.item_ids, item_ids)
        position = np.minimum(position, genres.item_ids.size - 1)
        missing = genres.item_ids[position] != item_ids
        if missing.any():
            raise DataError(
                f"{genres.path}: item {item_ids[missing][0]} has ratings in {path.name} "
                f"but no row here ({int(missing.sum())} such items)"
            )
        genre_flags = genres.flags[position]
        genre_names = genres.names
    return RatingData(
        name=name,
        ratings=matrix,
        user_ids=user_ids.astype(np.int64),
        item_ids=item_ids.astype(np.int64),
        rating_scale=(float(rating_scale[0]), float(rating_scale[1])),
        genres=genre_flags,
        genre_names=genre_names,
        timestamps=timestamps,
    )


def genre_table(
    path: Path,
    ids: list[int],
    flags: list[list[bool]],
    lines: list[int],
    names: tuple[str, ...],
) -> GenreTable:
    """Sort genre rows by item id (refusing an id listed twice); `names` labels the columns."""
    item_ids = np.asarray(ids, dtype=np.int64)
    order = np.argsort(item_ids, kind="stable")
    sorted_ids = item_ids[order]
    dup = np.flatnonzero(sorted_ids[1:] == sorted_ids[:-1])
    if dup.size:
        first, second = sorted((lines[order[dup[0]]], lines[order[dup[0] + 1]]))
        raise DataError(
            f"{path}, line {second}: item {sorted_ids[dup[0]]} listed twice (first at line {first})"
        )
    table = np.asarray(flags, dtype=bool).reshape(len(ids), len(names))
    return GenreTable(path, sorted_ids, table[order], names)


__all__ = [
    "GenreTable",
    "Triples",
    "build_rating_data",
    "genre_table",
    "parse_triples",
    "text_lines",
]
