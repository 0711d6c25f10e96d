"""Fixtures of the data-layer tests: an isolated cache and small ML-100K files in both forms."""

from __future__ import annotations

from pathlib import Path

import pytest
from _data_fixtures import write_grouplens, write_recbole


@pytest.fixture(autouse=True)
def isolated_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Point PRIVREC_CACHE_DIR at a fresh directory so no test touches the user's cache."""
    cache = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("PRIVREC_CACHE_DIR", str(cache))
    return cache


@pytest.fixture
def grouplens_dir(tmp_path: Path) -> Path:
    return write_grouplens(tmp_path / "grouplens")


@pytest.fixture
def recbole_dir(tmp_path: Path) -> Path:
    return write_recbole(tmp_path / "recbole")
