"""Files only their owner may read: secrets, and run outputs that hold per-user data.

Each user's withheld items and predictions (`predictions/`), the adversary's copy of the feed
and its per-user estimates, the auxiliary users' raw profiles: another local account may enter a
run folder (to read its report), but not these (docs/threat_model.md, "A local account"). They
are created 0600, never world-readable, not even for a moment (the mode is given when the file
is created, not changed afterwards), and written atomically (a temporary name renamed into
place) unless appended to. `read_json_object` and `read_toml` read a run's JSON records and
its config files.
"""

from __future__ import annotations

import contextlib
import json
import os
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from privrec.shared.errors import ConfigError

PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700


def private_dir(path: Path) -> Path:
    """`path` made (with its parents) and closed to other accounts; returns it."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, PRIVATE_DIR)
    return path


@contextlib.contextmanager
def private_writer(path: Path) -> Iterator[BinaryIO]:
    """A binary file to write whole: created 0600 under a temporary name, renamed to `path`
    when the block ends without an error (removed when it does not)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)


def write_private(path: Path, data: bytes) -> None:
    """Write `data` to `path` (0600, atomically)."""
    with private_writer(path) as f:
        f.write(data)


def open_private_append(path: Path) -> BinaryIO:
    """`path` opened for appending, created 0600 if new (and made 0600 if it was not)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, PRIVATE_FILE)
    os.fchmod(fd, PRIVATE_FILE)
    return os.fdopen(fd, "ab")


def read_json_object(path: Path) -> dict[str, Any] | None:
    """The JSON object in the file at `path`, or None (no file, unreadable, not a JSON object)."""
    try:
        loaded = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return loaded if isinstance(loaded, dict) else None


def read_toml(path: str | Path) -> dict[str, Any]:
    """The TOML document at `path`.

    Raises:
        ConfigError: the file is missing or not valid TOML (naming the file).
    """
    p = Path(path)
    try:
        return tomllib.loads(p.read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {p}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p}: not valid TOML: {exc}") from exc


__all__ = [
    "PRIVATE_DIR",
    "PRIVATE_FILE",
    "open_private_append",
    "private_dir",
    "private_writer",
    "read_json_object",
    "read_toml",
    "write_private",
]
