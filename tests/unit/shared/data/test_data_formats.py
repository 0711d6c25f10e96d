"""The other rating formats, the fetch-by-name registry and the [data] filters, on small files
written by the tests in each format."""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

from privrec.shared.config import DataSection
from privrec.shared.data import load_dataset
from privrec.shared.data import remote as remote_module
from privrec.shared.data.filters import binarise, k_core
from privrec.shared.data.remote import REMOTE_DATASETS, Checksum, RemoteDataset, fetch_remote
from privrec.shared.errors import ConfigError, DataError


def _dense(data: object) -> np.ndarray:
    return data.ratings.toarray()  # type: ignore[attr-defined,no-any-return]


def test_recbole_atomic_inter_and_item(tmp_path: Path) -> None:
    """A RecBole .inter with token ids and a float rating, its .item's token_seq as genres."""
    inter = tmp_path / "books.inter"
    inter.write_text(
        "user_id:token\titem_id:token\trating:float\ttimestamp:float\n"
        "u2\tb9\t4\t1\nu1\tb9\t2.5\t2\nu1\ta3\t5\t3\n"
    )
    (tmp_path / "books.item").write_text("item_id:token\tgenre:token_seq\nb9\tsf drama\na3\tsf\n")
    data = load_dataset(inter)
    # tokens rank: users u1 < u2, items a3 < b9
    np.testing.assert_array_equal(_dense(data), [[5.0, 2.5], [0.0, 4.0]])
    assert data.rating_scale == (2.5, 5.0)
    assert data.genre_names == ("drama", "sf")
    np.testing.assert_array_equal(data.genres, [[False, True], [True, True]])


def test_recbole_atomic_without_rating_reads_interactions(tmp_path: Path) -> None:
    """No rating field: every row is an interaction of value 1, scale (0, 1)."""
    inter = tmp_path / "clicks.inter"
    inter.write_text("user_id:token\titem_id:token\n1\t7\n1\t8\n2\t8\n")
    data = load_dataset(inter)
    np.testing.assert_array_equal(_dense(data), [[1.0, 1.0], [0.0, 1.0]])
    np.testing.assert_array_equal(data.user_ids, [1, 2])
    assert data.rating_scale == (0.0, 1.0)


def test_movielens_half_star_csv_and_ml1m_format(tmp_path: Path) -> None:
    """ML-20M-style ratings.csv (half stars) and an ML-1M-format ratings.dat."""
    csv_file = tmp_path / "ratings.csv"
    csv_file.write_text("userId,movieId,rating,timestamp\n1,10,0.5,1\n2,10,4.5,2\n2,30,3.0,3\n")
    data = load_dataset(csv_file)
    np.testing.assert_array_equal(_dense(data), [[0.5, 0.0], [4.5, 3.0]])
    assert data.rating_scale == (0.5, 5.0)
    dat = tmp_path / "ml" / "ratings.dat"
    dat.parent.mkdir()
    dat.write_text("1::1193::5::978300760\n1::661::3::978302109\n2::661::4::978300000\n")
    ml1m = load_dataset(dat.parent)
    np.testing.assert_array_equal(ml1m.item_ids, [661, 1193])
    np.testing.assert_array_equal(_dense(ml1m), [[3.0, 5.0], [4.0, 0.0]])


def test_amazon_gzip_book_crossing_jester_lastfm(tmp_path: Path) -> None:
    """Each reader on a file in its format, with its rule for the values (module docstring)."""
    amazon = tmp_path / "Office_Products.csv.gz"
    with gzip.open(amazon, "wt") as out:
        out.write("user_id,parent_asin,rating,timestamp\nAX,B01,5.0,1\nAY,B01,1.0,2\n")
    np.testing.assert_array_equal(_dense(load_dataset(amazon)), [[5.0], [1.0]])
    bx = tmp_path / "BX-Book-Ratings.csv"
    bx.write_bytes(b'"User-ID";"ISBN";"Book-Rating"\n"7";"034545104X";"0"\n"7";"0155061224";"8"\n')
    books = load_dataset(bx)
    assert books.n_ratings == 1 and books.rating_scale == (1.0, 10.0)  # the implicit 0 dropped
    jester = tmp_path / "jester_ratings.dat"
    jester.write_text("1 5 0.0\n1 7 -9.5\n2 5 10.0\n")
    np.testing.assert_array_equal(_dense(load_dataset(jester)), [[11.0, 1.5], [21.0, 0.0]])
    lastfm = tmp_path / "userid-timestamp-artid-artname-traid-traname.tsv"
    play = "user_000001\t2009-05-04T23:08:57Z\tmbid\t{}\t\tsong\n"
    lastfm.write_text(play.format("Deep Dish") * 3 + play.format("Björk"))
    plays = load_dataset(lastfm)
    np.testing.assert_array_equal(_dense(plays), [[1.0, 3.0]])  # artists by rank: Björk first
    assert plays.rating_scale == (1.0, 3.0)


def test_netflix_prize_directory_both_layouts(tmp_path: Path) -> None:
    """training_set/mv_*.txt and combined_data_*.txt read to the same matrix."""
    ts = tmp_path / "a" / "training_set"
    ts.mkdir(parents=True)
    (ts / "mv_0000001.txt").write_text("1:\n6,3,2005-09-06\n9,5,2005-05-13\n")
    (ts / "mv_0000002.txt").write_text("2:\n9,1,2005-10-19\n")
    combined = tmp_path / "b"
    combined.mkdir()
    (combined / "combined_data_1.txt").write_text("1:\n6,3,2005-09-06\n9,5,2005-05-13\n2:\n9,1,x\n")
    a, b = load_dataset(ts.parent), load_dataset(combined)
    np.testing.assert_array_equal(_dense(a), [[3.0, 0.0], [5.0, 1.0]])
    np.testing.assert_array_equal(_dense(a), _dense(b))
    (combined / "combined_data_1.txt").write_text("6,3,2005-09-06\n")
    with pytest.raises(DataError, match=r"combined_data_1.txt, line 1: expected 'MovieID:'"):
        load_dataset(combined)


def test_binarise_and_k_core(tmp_path: Path) -> None:
    """Ratings >= 4 become 1; the (2, 2)-core of a matrix is found by repeated removal: user 2
    (one rating) goes, which leaves item 3 with one rater, which goes too."""
    f = tmp_path / "r.csv"
    rows = [(1, 1, 5), (1, 2, 4), (1, 3, 2), (2, 3, 5), (3, 1, 3), (3, 2, 4), (4, 1, 4), (4, 2, 1)]
    f.write_text("".join(f"{u},{i},{r}\n" for u, i, r in rows))
    data = load_dataset(f)
    core = k_core(data, 2, 2)
    np.testing.assert_array_equal(core.user_ids, [1, 3, 4])
    np.testing.assert_array_equal(core.item_ids, [1, 2])
    assert (np.diff(core.ratings.indptr) >= 2).all()
    ones = binarise(data, 4.0)
    assert set(ones.ratings.data) == {1.0} and ones.n_ratings == 5 and ones.rating_scale == (0, 1)
    with pytest.raises(DataError, match=r"the \(9, 1\)-core of r is empty"):
        k_core(data, 9, 1)
    with pytest.raises(DataError, match=r"data.binarise = 9 is outside"):
        binarise(data, 9.0)
    with pytest.raises(ConfigError, match=r"data.min_user_ratings: must be an int >= 0"):
        DataSection(min_user_ratings=-1)


def _archive(tmp_path: Path, member: str, payload: bytes) -> Path:
    path = tmp_path / "served.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(member, payload)
    return path


def _served(monkeypatch: pytest.MonkeyPatch, name: str, dataset: RemoteDataset) -> None:
    monkeypatch.setitem(REMOTE_DATASETS, name, dataset)


def test_fetch_checks_the_pinned_checksum_before_extracting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file:// archive with the pinned sha256 is cached and read; one byte off, the fetch
    fails with one line naming the data set, the address and --data PATH, and caches nothing."""
    monkeypatch.setenv("PRIVREC_CACHE_DIR", str(tmp_path / "cache"))
    ratings = b"1::10::5::0\n2::10::3::0\n"
    archive = _archive(tmp_path, "ml-x/ratings.dat", ratings)
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    reader = REMOTE_DATASETS["ml-1m"].reader
    good = RemoteDataset(
        "ml-x", archive.as_uri(), "test", Checksum("sha256", digest, "test"), "ml-x/ratings.dat",
        reader,
    )  # fmt: skip
    _served(monkeypatch, "ml-x", good)
    assert load_dataset("ml-x").n_ratings == 2
    bad = RemoteDataset(
        "ml-y", archive.as_uri(), "test", Checksum("sha256", "0" * 64, "test"), "ml-x/ratings.dat",
        reader,
    )  # fmt: skip
    _served(monkeypatch, "ml-y", bad)
    with pytest.raises(DataError) as err:
        fetch_remote("ml-y")
    message = str(err.value)
    assert "\n" not in message and archive.as_uri() in message and "--data PATH" in message
    assert f"sha256 {digest}" in message
    assert not bad.cached_file.exists()


def test_fetch_checks_a_member_checksum_in_a_tar_archive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LastFM-1K's way: no archive checksum, the member's md5 checked after extraction."""
    monkeypatch.setenv("PRIVREC_CACHE_DIR", str(tmp_path / "cache"))
    payload = b"user_000001\t2009\tm\tArtist\t\tsong\n"
    archive = tmp_path / "l.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo("d/plays.tsv")
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    md5 = hashlib.md5(payload).hexdigest()
    for name, pinned in (("ok", md5), ("off", "f" * 32)):
        dataset = RemoteDataset(
            name, archive.as_uri(), "t", None, "d/plays.tsv", REMOTE_DATASETS["lastfm-1k"].reader,
            member_checksum=Checksum("md5", pinned, "t"),
        )  # fmt: skip
        _served(monkeypatch, name, dataset)
    assert fetch_remote("ok").read_bytes() == payload
    with pytest.raises(DataError, match=r"off: d/plays.tsv from .* has md5"):
        fetch_remote("off")


def test_offline_and_unpinned_fetches_exit_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`privrec data fetch ml-1m` with no network, and `jester` (no checksum to pin): one
    `privrec: error:` line naming the data set, its address and --data PATH; exit 2."""
    from privrec.sim.cli import main

    monkeypatch.setenv("PRIVREC_CACHE_DIR", str(tmp_path / "cache"))
    unreachable = "http://127.0.0.1:9/ml-1m.zip"  # the discard port: connection refused
    offline = RemoteDataset(
        "ml-1m", unreachable, "t", REMOTE_DATASETS["ml-1m"].checksum, "ml-1m/ratings.dat",
        REMOTE_DATASETS["ml-1m"].reader,
    )  # fmt: skip
    monkeypatch.setitem(remote_module.REMOTE_DATASETS, "ml-1m", offline)
    for name, address in (("ml-1m", unreachable), ("jester", REMOTE_DATASETS["jester"].url)):
        assert main(["data", "fetch", name]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"privrec: error: {name}: ")
        assert address in err[0] and "--data PATH" in err[0]


def test_every_known_data_set_names_its_licence_and_pin() -> None:
    """Each registry entry has an https/http address, a licence line, and a pinned checksum of
    the stated length, except Jester (refused: nothing published to pin)."""
    lengths = {"sha256": 64, "md5": 32}
    for name, dataset in REMOTE_DATASETS.items():
        assert dataset.url.startswith(("https://", "http://")) and dataset.licence
        pins = [c for c in (dataset.checksum, dataset.member_checksum) if c is not None]
        assert (name == "jester") == (not pins)
        for pin in pins:
            assert len(pin.hexdigest) == lengths[pin.algorithm] and pin.source
