"""Fetching MovieLens-100K into the cache: two sources, pinned sha256, atomic writes.

`fetch_ml100k` puts MovieLens-100K (943 users × 1,682 items, 100,000 ratings on 1–5, 19 genre
flags; privrec's primary data set) in the cache (see `shared.data.cache`) from one of two
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
identical `RatingData` (`shared.data.readers.read_ml100k_dir` reads either).
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from privrec.shared.data.cache import (
    atomic_write_bytes,
    dataset_cache_dir,
    directory_lock,
    remove_stale_partials,
    sha256_bytes,
    sha256_file,
)
from privrec.shared.data.readers import ML100K_NAME
from privrec.shared.errors import DataError
from privrec.shared.files import read_json_object

logger = logging.getLogger(__name__)

ProgressCallback = Callable[[str, int, int | None], None]
"""``progress(description, completed, total)``: called as a fetch advances; `total` is None when
unknown (e.g. while pip runs). Units are bytes for downloads."""

GROUPLENS_URL = "https://files.grouplens.org/datasets/movielens/ml-100k.zip"
RECBOLE_REQUIREMENT = "recbole==1.2.1"
_RECBOLE_MEMBER_DIR = "recbole/dataset_example/ml-100k/"

GROUPLENS_ZIP_SHA256 = "50d2a982c66986937beb9ffb3aa76efe955bf3d5c6b761f4e3a7cd717c6a3229"
"""sha256 of GroupLens ``ml-100k.zip`` (4,924,029 bytes; md5 ``0e33842e…`` as GroupLens lists)."""

ML100K_SHA256: Mapping[str, str] = {
    # GroupLens files, as published by several independent projects pinning the archive.
    "u.data": "06416e597f82b7342361e41163890c81036900f418ad91315590814211dca490",
    "u.item": "553841ebc7de3a0fd0d6b62a204ea30c1e651aacfb2814c7a6584ac52f2c5701",
    # recbole 1.2.1 wheel members. The .inter hash was pinned by the design
    # (docs/decisions/data.md); the .item hash was measured from the wheel on PyPI (its genre
    # counts match GroupLens u.item exactly).
    "ml-100k.inter": "4edb74e2a81178c2ba9ff381495f754f996c4aea351b1272ca36b43da0935eff",
    "ml-100k.item": "51d7cdf777ce5c0f5b32c1d947a4a81fe07d75e78abbe761e0cd4d0756064532",
}
"""Pinned sha256 of every ML-100K file privrec caches."""

MANIFEST_NAME = "privrec-source.json"
"""Written beside the cached files: which source they came from, and their sha256."""


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
    return read_json_object(Path(directory) / MANIFEST_NAME)


__all__ = [
    "DEFAULT_SOURCES",
    "GROUPLENS_URL",
    "GROUPLENS_ZIP_SHA256",
    "MANIFEST_NAME",
    "ML100K_SHA256",
    "RECBOLE_REQUIREMENT",
    "ProgressCallback",
    "fetch_ml100k",
    "read_manifest",
]
