"""Where the cache lives and how it writes (shared.data.cache)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from privrec.shared.data import cache as cache_module


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


def test_directory_lock_excludes_a_second_holder_and_times_out(tmp_path: Path) -> None:
    """While one holder has the directory, another waits; past its timeout it gets a DataError
    naming the lock file (filelock underneath)."""
    import threading

    from privrec.shared.data.cache import directory_lock
    from privrec.shared.errors import DataError

    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with directory_lock(tmp_path / "d"):
            held.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert held.wait(10)
        with pytest.raises(DataError, match=r"\.lock"), directory_lock(tmp_path / "d", 0.2):
            pass
    finally:
        release.set()
        thread.join()
    with directory_lock(tmp_path / "d", 0.2):  # free again
        pass
