"""Where privrec keeps downloaded data sets, and how it writes there safely.

The cache directory is ``$PRIVREC_CACHE_DIR`` when that variable is set (and not empty), otherwise
the platform's per-user cache directory for ``privrec`` (``~/.cache/privrec`` on Linux). The
variable is read on every call, so a test or a node can redirect it at run time.

Files are written atomically: the bytes go to a temporary file in the same directory, are flushed
to disk, and the temporary file is renamed over the target. A reader therefore sees either the
old complete file or the new complete file, never a partial one, even if the writer is killed.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import platformdirs

from privrec.shared.errors import DataError

logger = logging.getLogger(__name__)

CACHE_ENV_VAR = "PRIVREC_CACHE_DIR"
"""Environment variable that overrides the cache directory."""

_TMP_SUFFIX = ".partial"


def cache_dir() -> Path:
    """The root cache directory (not created).

    Returns:
        ``Path($PRIVREC_CACHE_DIR)`` if the variable is set and not empty, else
        ``platformdirs.user_cache_dir("privrec")``.
    """
    override = os.environ.get(CACHE_ENV_VAR, "").strip()
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_cache_dir("privrec"))


def dataset_cache_dir(name: str) -> Path:
    """The cache directory of one data set, ``<cache_dir>/datasets/<name>`` (not created)."""
    return cache_dir() / "datasets" / name


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of `data`."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path, *, chunk_size: int = 1 << 20) -> str:
    """Hex sha256 of the file at `path`, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that `path` is never seen half-written.

    The parent directory is created if needed. On any failure (including KeyboardInterrupt) the
    temporary file is removed and `path` keeps its previous content, if any.

    Args:
        path: destination file.
        data: the complete new content.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=_TMP_SUFFIX)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            if hasattr(os, "fchmod"):  # mkstemp creates 0600; a cache file is ordinary data
                os.fchmod(handle.fileno(), 0o644)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def remove_stale_partials(directory: Path) -> None:
    """Delete temporary files left in `directory` by writers that were killed mid-write.

    Call only while holding `directory_lock(directory)`, so no live writer is affected.
    """
    if not directory.is_dir():
        return
    for stale in directory.glob(f".*{_TMP_SUFFIX}"):
        logger.debug("removing stale partial file %s", stale)
        with contextlib.suppress(FileNotFoundError):
            stale.unlink()


LOCK_TIMEOUT_S = 900.0
"""How long a process waits for another one's download before giving up."""


@contextlib.contextmanager
def directory_lock(directory: Path, timeout: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold an exclusive lock on `directory` (``filelock``: ``flock`` on POSIX, ``msvcrt`` on
    Windows; the lock file is `directory/.lock`).

    Several client shards may start at once and all find the cache empty; the lock lets one of
    them download while the others wait and then find the files in place.

    Raises:
        DataError: another process held the lock for `timeout` seconds.
    """
    from filelock import FileLock, Timeout

    try:
        directory.mkdir(parents=True, exist_ok=True)
        lock = FileLock(directory / ".lock", timeout=timeout)
        lock.acquire()
    except Timeout:
        raise DataError(
            f"{directory}: another process has held its lock for {timeout:g} s "
            f"(a download in progress? else delete {directory / '.lock'})"
        ) from None
    except OSError as exc:
        # A read-only, pre-populated cache still works: reading needs no lock.
        logger.debug("cannot lock %s (%s); continuing without the lock", directory, exc)
        yield
        return
    try:
        yield
    finally:
        lock.release()


__all__ = [
    "CACHE_ENV_VAR",
    "LOCK_TIMEOUT_S",
    "atomic_write_bytes",
    "cache_dir",
    "dataset_cache_dir",
    "directory_lock",
    "remove_stale_partials",
    "sha256_bytes",
    "sha256_file",
]
