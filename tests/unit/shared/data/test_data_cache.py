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
