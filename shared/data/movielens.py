"""MovieLens and plain-file rating data: fetching, verifying, reading.

MovieLens-100K (943 users × 1,682 items, 100,000 ratings on 1–5, 19 genre flags) is privrec's
primary data set. `fetch_ml100k` puts it in the cache (see `shared.data.cache`) from one of two
sources, tried in order:

1. ``grouplens``: the GroupLens archive ``ml-100k.zip``; its ``u.data`` and ``u.item`` are cached.
2. ``recbole``: the copy that the ``recbole==1.2.1`` wheel on PyPI carries under
   ``recbole/dataset_example/ml-100k/``. The wheel is downloaded with the running interpreter's
   pip (``pip download --no-deps --only-binary=:all:``, so the machine's index configuration
   applies); ``ml-100k.inter`` and ``ml-100k.item`` are read straight out of the zip.

Every file is checked against a pinned sha256 (`ML100K_SHA256`) before it is cached, and every
cached file is checked again before it is used; a mismatching cached file is deleted and fetched
again. The two sources hold the same ratings: the body of ``ml-100k.inter`` below its header
line is byte-identical to GroupLens ``u.data`` (both hash to ``06416e59…``), so both forms read to
identical `RatingData`.

Readers turn files into `RatingData`: rows are the users that have at least one rating, columns
the items that have at least one rating, both sorted by original id. A malformed line raises
`DataError` naming the file, the line number and what is wrong; so does a duplicate
(user, item) pair and a rating of 0 (a stored 0 would read as "unrated" in the CSR matrix).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import logging
import math
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from os import PathLike
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from privrec.shared.data.cache import (
    atomic_write_bytes,
    dataset_cache_dir,
    directory_lock,
    remove_stale_partials,
    sha256_bytes,
    sha256_file,
)
from privrec.shared.data.dataset import RatingData
from privrec.shared.errors import DataError
from privrec.shared.types import BoolArray, FloatArray, IntArray

logger = logging.getLogger(__name__)

ProgressCallback = Callable[[str, int, int | None], None]
"""``progress(description, completed, total)``: called as a fetch advances; `total` is None when
unknown (e.g. while pip runs). Units are bytes for downloads."""

ML100K_GENRES: tuple[str, ...] = (
    "unknown", "Action", "Adventure", "Animation", "Children's", "Comedy", "Crime",
    "Documentary", "Drama", "Fantasy", "Film-Noir", "Horror", "Musical", "Mystery", "Romance",
    "Sci-Fi", "Thriller", "War", "Western",
)  # fmt: skip
"""The 19 genre columns of MovieLens-100K, in the order of GroupLens ``u.genre``/``u.item``."""

ML100K_RATING_SCALE = (1.0, 5.0)
ML100K_NAME = "ml-100k"
KNOWN_DATASETS: tuple[str, ...] = (ML100K_NAME,)
"""Names that `load_dataset` and `fetch` resolve without a path."""

GROUPLENS_URL = "https://files.grouplens.org/datasets/movielens/ml-100k.zip"
RECBOLE_REQUIREMENT = "recbole==1.2.1"
_RECBOLE_MEMBER_DIR = "recbole/dataset_example/ml-100k/"

GROUPLENS_ZIP_SHA256 = "50d2a982c66986937beb9ffb3aa76efe955bf3d5c6b761f4e3a7cd717c6a3229"
"""sha256 of GroupLens ``ml-100k.zip`` (4,924,029 bytes; md5 ``0e33842e…`` as GroupLens lists)."""

ML100K_SHA256: Mapping[str, str] = {
    # GroupLens files, as published by several independent projects pinning the archive.
    "u.data": "06416e597f82b7342361e41163890c81036900f418ad91315590814211dca490",
    "u.item": "553841ebc7de3a0fd0d6b62a204ea30c1e651aacfb2814c7a6584ac52f2c5701",
    # recbole 1.2.1 wheel members. The .inter hash is given in DESIGN.md; the .item hash was
    # measured from the wheel on PyPI (its genre counts match GroupLens u.item exactly).
    "ml-100k.inter": "4edb74e2a81178c2ba9ff381495f754f996c4aea351b1272ca36b43da0935eff",
    "ml-100k.item": "51d7cdf777ce5c0f5b32c1d947a4a81fe07d75e78abbe761e0cd4d0756064532",
}
"""Pinned sha256 of every ML-100K file privrec caches."""

MANIFEST_NAME = "privrec-source.json"
"""Written beside the cached files: which source they came from, and their sha256."""


# --------------------------------------------------------------------------------------------
# fetching


class _SourceUnavailable(Exception):
    """A source could not be reached (network, pip); the next source is tried."""


@dataclasses.dataclass(frozen=True)
class _Source:
    """One place ML-100K can come from: its cached file names and how to download them."""

    name: str
    origin: str
    files: tuple[str, ...]
    download: Callable[[ProgressCallback | None, float], dict[str, bytes]]


def _report(
    progress: ProgressCallback | None, description: str, done: int, total: int | None
) -> None:
    if progress is not None:
        progress(description, done, total)


def _download_grouplens(progress: ProgressCallback | None, timeout: float) -> dict[str, bytes]:
    description = "ml-100k.zip (GroupLens)"
    chunks: list[bytes] = []
    try:
        with urllib.request.urlopen(GROUPLENS_URL, timeout=timeout) as response:
            length = response.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            done = 0
            _report(progress, description, done, total)
            while chunk := response.read(1 << 16):
                chunks.append(chunk)
                done += len(chunk)
                _report(progress, description, done, total)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise _SourceUnavailable(f"{GROUPLENS_URL} unreachable: {exc}") from exc
    blob = b"".join(chunks)
    _check_sha256("ml-100k.zip", blob, GROUPLENS_ZIP_SHA256, origin=GROUPLENS_URL)
    try:
        with zipfile.ZipFile(io.BytesIO(blob)) as archive:
            return {name: archive.read(f"ml-100k/{name}") for name in ("u.data", "u.item")}
    except (zipfile.BadZipFile, KeyError) as exc:
        raise DataError(f"ml-100k.zip from {GROUPLENS_URL}: {exc}") from exc


def _download_recbole(progress: ProgressCallback | None, timeout: float) -> dict[str, bytes]:
    # `timeout` is meant for the quick GroupLens probe; pip gets a generous bound of its own.
    del timeout
    description = f"pip download {RECBOLE_REQUIREMENT}"
    with tempfile.TemporaryDirectory(prefix="privrec-recbole-") as tmp:
        command = [
            sys.executable, "-m", "pip", "download", RECBOLE_REQUIREMENT,
            "--no-deps", "--only-binary=:all:", "--disable-pip-version-check", "--no-input",
            "--quiet", "-d", tmp,
        ]  # fmt: skip
        _report(progress, description, 0, None)
        logger.info(
            "fetching ml-100k from the %s wheel: %s", RECBOLE_REQUIREMENT, " ".join(command)
        )
        try:
            result = subprocess.run(
                command, capture_output=True, text=True, timeout=600, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise _SourceUnavailable(f"`pip download {RECBOLE_REQUIREMENT}` failed: {exc}") from exc
        if result.returncode != 0:
            tail = " | ".join(result.stderr.strip().splitlines()[-3:]) or "no output"
            raise _SourceUnavailable(
                f"`pip download {RECBOLE_REQUIREMENT}` exited with {result.returncode}: {tail}"
            )
        wheels = sorted(Path(tmp).glob("recbole-1.2.1-*.whl"))
        if not wheels:
            raise _SourceUnavailable(f"`pip download {RECBOLE_REQUIREMENT}` produced no wheel")
        size = wheels[0].stat().st_size
        _report(progress, description, size, size)
        try:
            with zipfile.ZipFile(wheels[0]) as archive:
                return {
                    name: archive.read(_RECBOLE_MEMBER_DIR + name)
                    for name in ("ml-100k.inter", "ml-100k.item")
                }
        except (zipfile.BadZipFile, KeyError) as exc:
            raise DataError(f"{wheels[0].name}: {exc}") from exc


_SOURCES: dict[str, _Source] = {
    "grouplens": _Source("grouplens", GROUPLENS_URL, ("u.data", "u.item"), _download_grouplens),
    "recbole": _Source(
        "recbole",
        f"{RECBOLE_REQUIREMENT} wheel (PyPI), {_RECBOLE_MEMBER_DIR}",
        ("ml-100k.inter", "ml-100k.item"),
        _download_recbole,
    ),
}
DEFAULT_SOURCES: tuple[str, ...] = ("grouplens", "recbole")


def _check_sha256(name: str, data: bytes, expected: str, *, origin: str) -> None:
    actual = sha256_bytes(data)
    if actual != expected:
        raise DataError(f"{name} from {origin}: sha256 mismatch: expected {expected}, got {actual}")


def _scrub_cache(directory: Path) -> set[str]:
    """Delete cached files whose sha256 is wrong; return the sources whose files are all valid."""
    complete: set[str] = set()
    for source in _SOURCES.values():
        ok = True
        for name in source.files:
            path = directory / name
            if not path.is_file():
                ok = False
                continue
            actual = sha256_file(path)
            if actual != ML100K_SHA256[name]:
                logger.warning(
                    "cached %s has sha256 %s, expected %s; deleting it and fetching again",
                    path, actual, ML100K_SHA256[name],
                )  # fmt: skip
                path.unlink()
                ok = False
        if ok:
            complete.add(source.name)
    return complete


def fetch_ml100k(
    *,
    progress: ProgressCallback | None = None,
    sources: Sequence[str] = DEFAULT_SOURCES,
    timeout: float = 10.0,
) -> Path:
    """Make sure MovieLens-100K is in the cache and return its directory.

    A valid cached copy (every file's sha256 as pinned in `ML100K_SHA256`) is returned at once.
    Otherwise `sources` are tried in order (``"grouplens"``: the GroupLens archive, probed with
    `timeout`; ``"recbole"``: the ``recbole==1.2.1`` wheel through pip) and the first that
    delivers files with the pinned hashes is written to the cache, each file atomically. The
    directory is locked while this happens, so concurrent callers download once.

    Args:
        progress: optional ``progress(description, completed, total)`` callback.
        sources: source names to try, in order (a subset of ``("grouplens", "recbole")``).
        timeout: seconds to wait for the GroupLens server.

    Returns:
        The cache directory holding either ``u.data``/``u.item`` or
        ``ml-100k.inter``/``ml-100k.item``; pass it to `read_ml100k_dir`.

    Raises:
        DataError: no source delivered valid files; the message lists each source's failure,
            for a checksum failure the file name and both hashes.
        ValueError: an unknown source name.
    """
    unknown = [name for name in sources if name not in _SOURCES]
    if unknown or not sources:
        raise ValueError(f"`sources` must name some of {sorted(_SOURCES)}, got {list(sources)!r}")
    chosen = [_SOURCES[name] for name in sources]
    directory = dataset_cache_dir(ML100K_NAME)
    with directory_lock(directory):
        remove_stale_partials(directory)
        complete = _scrub_cache(directory)
        if any(source.name in complete for source in chosen):
            logger.debug("ml-100k found in cache %s", directory)
            return directory
        failures: list[str] = []
        for source in chosen:
            try:
                blobs = source.download(progress, timeout)
                for name in source.files:
                    _check_sha256(name, blobs[name], ML100K_SHA256[name], origin=source.origin)
            except _SourceUnavailable as exc:
                logger.info("ml-100k source %s unavailable: %s", source.name, exc)
                failures.append(f"{source.name}: {exc}")
                continue
            except DataError as exc:
                logger.warning("ml-100k source %s delivered bad data: %s", source.name, exc)
                failures.append(f"{source.name}: {exc}")
                continue
            for name in source.files:
                atomic_write_bytes(directory / name, blobs[name])
            manifest = {
                "dataset": ML100K_NAME,
                "source": source.name,
                "origin": source.origin,
                "sha256": {name: ML100K_SHA256[name] for name in source.files},
            }
            atomic_write_bytes(directory / MANIFEST_NAME, json.dumps(manifest, indent=2).encode())
            logger.info("ml-100k cached in %s (source: %s)", directory, source.name)
            return directory
    raise DataError("could not fetch ml-100k: " + "; ".join(failures))


def read_manifest(directory: Path) -> dict[str, object] | None:
    """The source manifest `fetch_ml100k` wrote into `directory`, or None if there is none."""
    path = Path(directory) / MANIFEST_NAME
    try:
        loaded = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return loaded if isinstance(loaded, dict) else None


# --------------------------------------------------------------------------------------------
# line parsing


def _text_lines(path: Path, encoding: str) -> Iterator[tuple[int, str]]:
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
class _Triples:
    """Parsed (user, item, rating) rows with the line each came from."""

    users: IntArray
    items: IntArray
    ratings: FloatArray
    lines: IntArray


def _parse_triples(
    path: Path,
    rows: Iterable[tuple[int, Sequence[str]]],
    *,
    columns: tuple[int, int, int],
    column_names: tuple[str, str, str],
    n_fields: int | None,
    separator: str,
    scale: tuple[float, float] | None,
) -> _Triples:
    """Parse user id, item id and rating out of each row of fields, with precise errors."""
    cu, ci, cr = columns
    need = max(columns) + 1
    users: list[int] = []
    items: list[int] = []
    ratings: list[float] = []
    lines: list[int] = []
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
        users.append(user)
        items.append(item)
        ratings.append(rating)
        lines.append(number)
    try:
        user_array = np.asarray(users, dtype=np.int64)
        item_array = np.asarray(items, dtype=np.int64)
    except OverflowError:
        raise DataError(f"{path}: a user or item id does not fit in 64 bits") from None
    return _Triples(
        users=user_array,
        items=item_array,
        ratings=np.asarray(ratings, dtype=np.float64),
        lines=np.asarray(lines, dtype=np.int64),
    )


@dataclasses.dataclass
class _GenreTable:
    """Genre flags by original item id, and the file they came from."""

    path: Path
    item_ids: IntArray
    flags: BoolArray
    names: tuple[str, ...]


def _build(
    name: str,
    path: Path,
    triples: _Triples,
    rating_scale: tuple[float, float],
    genres: _GenreTable | None = None,
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
    matrix = sp.csr_matrix(
        (triples.ratings[order], cols.astype(index_dtype), indptr), shape=(n_users, n_items)
    )
    matrix.has_sorted_indices = True
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
    )


def _genre_table(
    path: Path, ids: list[int], flags: list[list[bool]], lines: list[int]
) -> _GenreTable:
    item_ids = np.asarray(ids, dtype=np.int64)
    order = np.argsort(item_ids, kind="stable")
    sorted_ids = item_ids[order]
    dup = np.flatnonzero(sorted_ids[1:] == sorted_ids[:-1])
    if dup.size:
        first, second = sorted((lines[order[dup[0]]], lines[order[dup[0] + 1]]))
        raise DataError(
            f"{path}, line {second}: item {sorted_ids[dup[0]]} listed twice (first at line {first})"
        )
    table = np.asarray(flags, dtype=bool).reshape(len(ids), len(ML100K_GENRES))
    return _GenreTable(path, sorted_ids, table[order], ML100K_GENRES)


# --------------------------------------------------------------------------------------------
# MovieLens-100K, GroupLens form


def _read_grouplens_items(path: Path) -> _GenreTable:
    """``u.item``: ``id|title|release date|video release date|IMDb URL|19 genre flags``."""
    n_fields = 5 + len(ML100K_GENRES)
    ids: list[int] = []
    flags: list[list[bool]] = []
    lines: list[int] = []
    for number, line in _text_lines(path, "latin-1"):
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
    return _genre_table(path, ids, flags, lines)


def _read_grouplens(directory: Path, name: str) -> RatingData:
    data_path = directory / "u.data"
    triples = _parse_triples(
        data_path,
        ((number, line.split("\t")) for number, line in _text_lines(data_path, "latin-1")),
        columns=(0, 1, 2),
        column_names=("user id", "item id", "rating"),
        n_fields=4,
        separator="\t",
        scale=ML100K_RATING_SCALE,
    )
    item_path = directory / "u.item"
    genres = _read_grouplens_items(item_path) if item_path.is_file() else None
    return _build(name, data_path, triples, ML100K_RATING_SCALE, genres)


# --------------------------------------------------------------------------------------------
# MovieLens-100K, RecBole atomic-file form


def _recbole_header(path: Path, line: str, required: Sequence[str]) -> dict[str, int]:
    """Map field names of a RecBole header (``user_id:token\\titem_id:token…``) to columns."""
    names = [field.split(":", 1)[0].strip() for field in line.split("\t")]
    columns = {field: index for index, field in enumerate(names)}
    missing = [field for field in required if field not in columns]
    if missing:
        raise DataError(
            f"{path}, line 1: header lacks field {missing[0]!r} (found {', '.join(names)})"
        )
    return columns


def _read_recbole_items(path: Path) -> _GenreTable:
    """RecBole ``.item``: ``item_id:token``, …, ``class:token_seq`` (space-separated genres)."""
    genre_index = {genre: index for index, genre in enumerate(ML100K_GENRES)}
    lines_iter = _text_lines(path, "utf-8")
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
    return _genre_table(path, ids, flags, lines)


def _read_recbole(inter_path: Path, name: str) -> RatingData:
    lines_iter = _text_lines(inter_path, "utf-8")
    header = next(lines_iter, None)
    if header is None:
        raise DataError(f"{inter_path}: empty file")
    columns = _recbole_header(inter_path, header[1], ("user_id", "item_id", "rating"))
    triples = _parse_triples(
        inter_path,
        ((number, line.split("\t")) for number, line in lines_iter),
        columns=(columns["user_id"], columns["item_id"], columns["rating"]),
        column_names=("user_id", "item_id", "rating"),
        n_fields=len(columns),
        separator="\t",
        scale=ML100K_RATING_SCALE,
    )
    item_path = inter_path.with_suffix(".item")
    genres = _read_recbole_items(item_path) if item_path.is_file() else None
    return _build(name, inter_path, triples, ML100K_RATING_SCALE, genres)


def _ml100k_files(directory: Path) -> list[Path]:
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
    """Read MovieLens-100K from a directory in either of its two forms.

    * GroupLens: ``u.data`` (tab-separated ``user item rating timestamp``) and, optionally,
      ``u.item`` (latin-1, ``|``-separated, the last 19 fields genre flags).
    * RecBole atomic files: ``ml-100k.inter`` with a typed header such as
      ``user_id:token\\titem_id:token\\trating:float\\ttimestamp:float`` and, optionally,
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
    files = _ml100k_files(directory) if directory.is_dir() else []
    if not files:
        raise DataError(f"{directory}: no MovieLens-100K files (expected u.data, or ml-100k.inter)")
    if files[0].name == "u.data":
        return _read_grouplens(directory, name)
    return _read_recbole(files[0], name)


# --------------------------------------------------------------------------------------------
# MovieLens-1M and CSV


def _read_ml1m_movies(path: Path) -> _GenreTable:
    """ML-1M ``movies.dat``: ``MovieID::Title::Genre|Genre…`` (latin-1)."""
    genre_index = {genre: index for index, genre in enumerate(ML100K_GENRES)}
    ids: list[int] = []
    flags: list[list[bool]] = []
    lines: list[int] = []
    for number, line in _text_lines(path, "latin-1"):
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
    return _genre_table(path, ids, flags, lines)


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
    triples = _parse_triples(
        file,
        ((number, line.split("::")) for number, line in _text_lines(file, "latin-1")),
        columns=(0, 1, 2),
        column_names=("UserID", "MovieID", "Rating"),
        n_fields=4,
        separator="::",
        scale=ML100K_RATING_SCALE,
    )
    movies = file.with_name("movies.dat")
    genres = _read_ml1m_movies(movies) if movies.is_file() else None
    return _build(name, file, triples, ML100K_RATING_SCALE, genres)


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

            triples = _parse_triples(
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
    return _build(name or file.stem, file, triples, rating_scale)


# --------------------------------------------------------------------------------------------
# dispatch


def _resolve(
    name_or_path: str | PathLike[str], progress: ProgressCallback | None
) -> tuple[str, Path]:
    """(kind, path) of what `load_dataset` would read; fetches a known name if needed."""
    text = str(name_or_path)
    if isinstance(name_or_path, str) and text.lower() in KNOWN_DATASETS:
        return "ml-100k", fetch_ml100k(progress=progress)
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        if _ml100k_files(path):
            return "ml-100k", path
        if (path / "ratings.dat").is_file():
            return "ml-1m", path / "ratings.dat"
        raise DataError(
            f"{path}: directory holds no known rating files (u.data, ml-100k.inter, ratings.dat)"
        )
    if path.is_file():
        suffix = path.suffix.lower()
        if path.name in ("u.data", "u.item") or suffix in (".inter", ".item"):
            return "ml-100k", path.parent
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


def load_dataset(
    name_or_path: str | PathLike[str], *, progress: ProgressCallback | None = None
) -> RatingData:
    """Load a data set by name or path.

    * ``"ml-100k"``: fetched into the cache if needed (`fetch_ml100k`), then read. A name wins
      over a same-named directory in the working directory; write ``./ml-100k`` for that.
    * a directory with ML-100K files (``u.data`` or ``*.inter``), or with ``ratings.dat``;
    * ``u.data`` / ``*.inter`` file: its directory is read as ML-100K;
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
    return read_csv(path, delimiter="\t" if path.suffix.lower() == ".tsv" else ",")


def dataset_files(
    name_or_path: str | PathLike[str], *, progress: ProgressCallback | None = None
) -> list[Path]:
    """The files `load_dataset(name_or_path)` reads, ratings file first (fetching if needed)."""
    kind, path = _resolve(name_or_path, progress)
    if kind == "ml-100k":
        return _ml100k_files(path)
    if kind == "ml-1m":
        movies = path.with_name("movies.dat")
        return [path, *([movies] if movies.is_file() else [])]
    return [path]


__all__ = [
    "DEFAULT_SOURCES",
    "GROUPLENS_URL",
    "KNOWN_DATASETS",
    "ML100K_GENRES",
    "ML100K_SHA256",
    "RECBOLE_REQUIREMENT",
    "ProgressCallback",
    "dataset_files",
    "fetch_ml100k",
    "load_dataset",
    "read_csv",
    "read_manifest",
    "read_ml1m_ratings",
    "read_ml100k_dir",
]
