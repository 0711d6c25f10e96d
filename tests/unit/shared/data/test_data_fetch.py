"""The verified, atomic ML-100K cache and its two sources (shared.data.fetch)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from _data_fixtures import RATINGS, assert_same_data

from privrec.shared.data import (
    ML100K_GENRES,
    fetch_ml100k,
    load_dataset,
    read_ml100k_dir,
)
from privrec.shared.data import cache as cache_module
from privrec.shared.data import fetch as fetch_module
from privrec.shared.errors import DataError

# ------------------------------------------------------------------------------ fetch and cache


def _fake_sources(
    monkeypatch: pytest.MonkeyPatch, recbole_dir: Path, calls: list[str], *, corrupt: bool = False
) -> None:
    """Replace both sources: GroupLens unreachable, RecBole serving the fixture files."""
    blobs = {name: (recbole_dir / name).read_bytes() for name in ("ml-100k.inter", "ml-100k.item")}
    hashes = dict(fetch_module.ML100K_SHA256)
    hashes.update({name: hashlib.sha256(blob).hexdigest() for name, blob in blobs.items()})
    monkeypatch.setattr(fetch_module, "ML100K_SHA256", hashes)

    def grouplens(progress, timeout):
        calls.append("grouplens")
        raise fetch_module._SourceUnavailable("offline")

    def recbole(progress, timeout):
        calls.append("recbole")
        served = dict(blobs)
        if corrupt:
            served["ml-100k.inter"] = served["ml-100k.inter"] + b"9\t9\t1\t0\n"
        return served

    sources = {
        "grouplens": fetch_module._Source(
            "grouplens", "fake GroupLens", ("u.data", "u.item"), grouplens
        ),
        "recbole": fetch_module._Source(
            "recbole", "fake wheel", ("ml-100k.inter", "ml-100k.item"), recbole
        ),
    }
    monkeypatch.setattr(fetch_module, "_SOURCES", sources)


def test_fetch_ml100k_falls_back_verifies_and_caches(
    monkeypatch: pytest.MonkeyPatch, recbole_dir: Path, isolated_cache: Path
) -> None:
    """GroupLens fails, RecBole is used; files and a manifest land in $PRIVREC_CACHE_DIR."""
    calls: list[str] = []
    _fake_sources(monkeypatch, recbole_dir, calls)
    directory = fetch_ml100k()
    assert calls == ["grouplens", "recbole"]
    assert directory == isolated_cache / "datasets" / "ml-100k"
    assert_same_data(read_ml100k_dir(directory), read_ml100k_dir(recbole_dir))
    manifest = json.loads((directory / "privrec-source.json").read_text())
    assert manifest["source"] == "recbole"
    assert not list(directory.glob(".*.partial"))
    # A valid cache is used as is: no source is asked again.
    assert fetch_ml100k() == directory
    assert calls == ["grouplens", "recbole"]
    assert load_dataset("ml-100k").n_ratings == len(RATINGS)


def test_fetch_ml100k_refetches_a_corrupt_cached_file(
    monkeypatch: pytest.MonkeyPatch, recbole_dir: Path
) -> None:
    """A cached file whose sha256 mismatches is deleted and fetched again."""
    calls: list[str] = []
    _fake_sources(monkeypatch, recbole_dir, calls)
    directory = fetch_ml100k(sources=("recbole",))
    good = (directory / "ml-100k.inter").read_bytes()
    (directory / "ml-100k.inter").write_bytes(good[:-10])
    assert fetch_ml100k(sources=("recbole",)) == directory
    assert calls == ["recbole", "recbole"]
    assert (directory / "ml-100k.inter").read_bytes() == good


def test_fetch_ml100k_bad_download_names_file_and_both_hashes(
    monkeypatch: pytest.MonkeyPatch, recbole_dir: Path
) -> None:
    """A download with a wrong sha256: DataError naming file and both hashes; nothing cached."""
    calls: list[str] = []
    _fake_sources(monkeypatch, recbole_dir, calls, corrupt=True)
    expected = fetch_module.ML100K_SHA256["ml-100k.inter"]
    served = (recbole_dir / "ml-100k.inter").read_bytes() + b"9\t9\t1\t0\n"
    actual = hashlib.sha256(served).hexdigest()
    with pytest.raises(DataError) as excinfo:
        fetch_ml100k()
    message = str(excinfo.value)
    assert "ml-100k.inter" in message and expected in message and actual in message
    assert "grouplens: offline" in message
    directory = cache_module.dataset_cache_dir("ml-100k")
    assert not (directory / "ml-100k.inter").exists()


def test_fetch_ml100k_rejects_unknown_source() -> None:
    """Source names are validated."""
    with pytest.raises(ValueError, match="`sources` must name some of"):
        fetch_ml100k(sources=("kaggle",))


# ------------------------------------------------------------------------------ network


@pytest.mark.network
def test_fetch_ml100k_from_recbole_wheel_real() -> None:
    """The real recbole 1.2.1 wheel from the package index gives the full ML-100K (fresh cache)."""
    directory = fetch_ml100k(sources=("recbole",))
    data = read_ml100k_dir(directory)
    assert (data.n_users, data.n_items, data.n_ratings) == (943, 1682, 100_000)
    np.testing.assert_array_equal(data.user_ids, np.arange(1, 944))
    np.testing.assert_array_equal(data.item_ids, np.arange(1, 1683))
    assert data.rating_scale == (1.0, 5.0)
    assert data.genre_names == ML100K_GENRES
    assert data.genres is not None and data.genres.shape == (1682, 19)
    # Per-genre item counts of GroupLens u.item.
    expected = [2, 251, 135, 42, 122, 505, 109, 50, 725, 22, 24, 92, 56, 61, 247, 101, 251, 71, 27]
    np.testing.assert_array_equal(data.genres.sum(axis=0), expected)
    assert data.user_counts().min() == 20
    # The .inter body is byte-identical to GroupLens u.data: its hash is the published one.
    body = (directory / "ml-100k.inter").read_bytes().split(b"\n", 1)[1]
    assert hashlib.sha256(body).hexdigest() == fetch_module.ML100K_SHA256["u.data"]
