"""The public data sets `privrec data fetch NAME` knows: address, pinned checksum, licence.

Each `RemoteDataset` is fetched from its canonical address into the cache
(``<cache>/datasets/NAME``, `shared.data.cache`), its archive checked against a pinned
checksum **before** anything is extracted, and read by the format's reader
(`shared.data.formats`). The checksums and where each was found (no download is possible on
the machine this was written on, so none was computed here):

* sha256 from tensorflow-datasets ``tensorflow_datasets/url_checksums/movielens.txt`` (URL,
  size, sha256 per archive): ML-1M, ML-20M, ML-25M, ML-latest-small (and ML-100K, which equals
  the pin in `shared.data.fetch`).
* md5 only, as GroupLens publishes it (``ml-10m.zip.md5``, ``ml-32m.zip.md5``), found pinned in
  public code (eli-osherovich/papers_with_code ``datasets/movielens/dl_config.py`` for ML-10M; a
  download script quoting GroupLens's ``ml-32m.zip.md5`` for ML-32M): no sha256 was found.
* Amazon Reviews 2023, Office_Products, rating-only: md5 from sisinflab/DataRec
  ``datarec/datasets/amazon_office/amz_office_2023.py``.
* Book-Crossing: md5 and size from PIReTship/bookdata-tools ``bx/dvc.lock``; its canonical
  address (Freiburg) has been offline for years, so this fetch is expected to fail and the
  error names the manual route.
* LastFM-1K: no archive checksum was found; the archive's own README publishes the md5 of its
  ratings member (``userid-timestamp-artid-artname-traid-traname.tsv``), which is checked after
  extraction instead.
* Jester: no checksum found anywhere: **not fetched** (privrec refuses an unpinned download);
  ``--data PATH`` reads a copy the user downloaded (`formats.read_jester`).

An md5 guards against corruption and substitution only as well as md5 can; it is pinned where
the publisher gives nothing stronger (docs/decisions/datasets.md). Only ML-100K has a package
fallback (the recbole wheel, `shared.data.fetch`): no package on PyPI ships the others.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from pathlib import Path

from privrec.shared.data import formats
from privrec.shared.data.cache import dataset_cache_dir, directory_lock
from privrec.shared.data.dataset import RatingData
from privrec.shared.data.readers import read_ml1m_ratings
from privrec.shared.errors import DataError

logger = logging.getLogger(__name__)

GROUPLENS = "https://files.grouplens.org/datasets/movielens/"
MOVIELENS_LICENCE = (
    "GroupLens MovieLens usage licence: research use, no redistribution, cite Harper & "
    "Konstan, ACM TiiS 5(4), 2015"
)
TFDS = "tensorflow-datasets url_checksums/movielens.txt"


@dataclasses.dataclass(frozen=True)
class Checksum:
    """A pinned digest of a file and where it was found."""

    algorithm: str  # "sha256" or "md5"
    hexdigest: str
    source: str


@dataclasses.dataclass(frozen=True)
class RemoteDataset:
    """A data set fetched by name.

    Attributes:
        name: the `privrec data fetch` name.
        url: the canonical address of the archive.
        licence: its licence, in a line.
        checksum: the archive's pinned digest, or None (then `member_checksum` or no fetch).
        member: the archive member holding the ratings (None: the download is the file).
        reader: turns the cached ratings file into `RatingData`.
        member_checksum: a pinned digest of the extracted member (when the archive has none).
    """

    name: str
    url: str
    licence: str
    checksum: Checksum | None
    member: str | None
    reader: Callable[[Path], RatingData]
    member_checksum: Checksum | None = None

    @property
    def cached_file(self) -> Path:
        """Where the ratings file lives in the cache."""
        leaf = Path(self.member).name if self.member else self.url.rsplit("/", 1)[-1]
        return dataset_cache_dir(self.name) / leaf

    @property
    def pinned(self) -> bool:
        """True when the download's bytes (or its member's) are checked against a checksum."""
        return self.checksum is not None or self.member_checksum is not None


def _ml(
    name: str, checksum: Checksum, member: str, reader: Callable[[Path], RatingData]
) -> RemoteDataset:
    return RemoteDataset(
        name, f"{GROUPLENS}{name}.zip", MOVIELENS_LICENCE, checksum, member, reader
    )


def _named(reader: Callable[..., RatingData], name: str) -> Callable[[Path], RatingData]:
    return lambda path: reader(path, name=name)


_TFDS_SHA256 = {  # tensorflow-datasets url_checksums/movielens.txt
    "ml-1m": "a6898adb50b9ca05aa231689da44c217cb524e7ebd39d264c56e2832f2c54e20",
    "ml-20m": "96f243c338a8665f6bcc89c53edf6ee39162a846940de6b7c8c48aeada765ff3",
    "ml-25m": "8b21cfb7eb1706b4ec0aac894368d90acf26ebdfb6aced3ebd4ad5bd1eb9c6aa",
    "ml-latest-small": "696d65a3dfceac7c45750ad32df2c259311949efec81f0f144fdfb91ebc9e436",
}
_AMAZON_2023 = "https://mcauleylab.ucsd.edu/public_datasets/data/amazon_2023/benchmark/0core/"
_LASTFM_MEMBER = "lastfm-dataset-1K/userid-timestamp-artid-artname-traid-traname.tsv"


def _tfds(name: str) -> Checksum:
    return Checksum("sha256", _TFDS_SHA256[name], TFDS)


def _half_stars_dat(path: Path) -> RatingData:
    return formats.read_movielens_dat(path, name="ml-10m", scale=formats.MOVIELENS_HALF_STARS)


REMOTE_DATASETS: dict[str, RemoteDataset] = {
    d.name: d
    for d in (
        _ml("ml-1m", _tfds("ml-1m"), "ml-1m/ratings.dat", read_ml1m_ratings),
        _ml(
            "ml-10m",
            Checksum(
                "md5",
                "ce571fd55effeba0271552578f2648bd",
                "GroupLens ml-10m.zip.md5, pinned in eli-osherovich/papers_with_code",
            ),
            "ml-10M100K/ratings.dat",
            _half_stars_dat,
        ),
        _ml(
            "ml-20m",
            _tfds("ml-20m"),
            "ml-20m/ratings.csv",
            _named(formats.read_movielens_csv, "ml-20m"),
        ),
        _ml(
            "ml-25m",
            _tfds("ml-25m"),
            "ml-25m/ratings.csv",
            _named(formats.read_movielens_csv, "ml-25m"),
        ),
        _ml(
            "ml-32m",
            Checksum(
                "md5",
                "d472be332d4daa821edc399621853b57",
                "GroupLens ml-32m.zip.md5, as quoted by public download scripts",
            ),
            "ml-32m/ratings.csv",
            _named(formats.read_movielens_csv, "ml-32m"),
        ),
        _ml(
            "ml-latest-small",
            _tfds("ml-latest-small"),
            "ml-latest-small/ratings.csv",
            _named(formats.read_movielens_csv, "ml-latest-small"),
        ),
        RemoteDataset(
            "amazon-office",
            _AMAZON_2023 + "rating_only/Office_Products.csv.gz",
            "Amazon Reviews 2023 (Hou et al., arXiv:2403.03952, McAuley Lab): research use",
            Checksum(
                "md5",
                "d4c05697d3acd22d1c23a01b64b25a16",
                "sisinflab/DataRec datarec/datasets/amazon_office/amz_office_2023.py",
            ),
            None,
            _named(formats.read_amazon_ratings, "amazon-office"),
        ),
        RemoteDataset(
            "lastfm-1k",
            "http://mtg.upf.edu/static/datasets/last.fm/lastfm-dataset-1K.tar.gz",
            "Last.fm Dataset 1K (Celma 2010): non-commercial use, with permission of Last.fm",
            None,
            _LASTFM_MEMBER,
            _named(formats.read_lastfm_1k, "lastfm-1k"),
            member_checksum=Checksum(
                "md5",
                "64747b21563e3d2aa95751e0ddc46b68",
                "the archive's README.txt (Version 1.0, May 2010)",
            ),
        ),
        RemoteDataset(
            "book-crossing",
            "http://www2.informatik.uni-freiburg.de/~cziegler/BX/BX-CSV-Dump.zip",
            "Book-Crossing (Ziegler et al., WWW 2005): research use, cite the paper",
            Checksum(
                "md5",
                "37d647ee9e18ba134ea6d78ee4fe5292",
                "PIReTship/bookdata-tools bx/dvc.lock (26,085,508 bytes)",
            ),
            "BX-Book-Ratings.csv",
            _named(formats.read_book_crossing, "book-crossing"),
        ),
        RemoteDataset(
            "jester",
            "https://eigentaste.berkeley.edu/dataset/archive/jester_dataset_2.zip",
            "Jester (Goldberg et al. 2001, Eigentaste): research use, cite the paper",
            None,
            "jester_ratings.dat",
            _named(formats.read_jester, "jester"),
        ),
    )
}
"""Every data set `privrec data fetch` knows besides ml-100k, by name."""


def _manual(dataset: RemoteDataset) -> str:
    return "download it by hand and pass the ratings file with --data PATH"


def _digest(path: Path, algorithm: str) -> str:
    digest = hashlib.new(algorithm)
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _check(path: Path, checksum: Checksum, dataset: RemoteDataset, what: str) -> None:
    actual = _digest(path, checksum.algorithm)
    if actual != checksum.hexdigest:
        raise DataError(
            f"{dataset.name}: {what} from {dataset.url} has {checksum.algorithm} {actual}, "
            f"pinned {checksum.hexdigest} ({checksum.source}); {_manual(dataset)}"
        )


def _extract(archive: Path, member: str, target: Path) -> None:
    """Copy `member` of a zip or tar archive to `target`."""
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as z, z.open(member) as src, target.open("wb") as dst:
            shutil.copyfileobj(src, dst)
        return
    with tarfile.open(archive) as tar:
        file = tar.extractfile(member)
        if file is None:
            raise KeyError(member)
        with file, target.open("wb") as dst:
            shutil.copyfileobj(file, dst)


def fetch_remote(name: str, *, timeout: float = 10.0) -> Path:
    """Make sure data set `name` is in the cache; return its ratings file.

    A cached file is used as is (its sha256 is in the cache's ``privrec-source.json``).
    Otherwise the archive is downloaded to a temporary file in the cache directory, checked
    against the pinned checksum, and its ratings member is extracted (then checked too when a
    member checksum is pinned) and moved into place.

    Raises:
        DataError: one line naming the data set, the address and the manual alternative, when
            the data set has no pinned checksum, the address cannot be reached, or a checksum
            does not match.
    """
    dataset = REMOTE_DATASETS[name]
    target = dataset.cached_file
    if target.is_file():
        return target
    if not dataset.pinned:
        raise DataError(
            f"{name}: no published checksum could be pinned for {dataset.url}, so privrec does "
            f"not download it; {_manual(dataset)}"
        )
    directory = target.parent
    directory.mkdir(parents=True, exist_ok=True)
    with directory_lock(directory), tempfile.TemporaryDirectory(dir=directory) as tmp:
        archive = Path(tmp) / "download"
        try:
            with (
                urllib.request.urlopen(dataset.url, timeout=timeout) as response,
                archive.open("wb") as out,
            ):
                shutil.copyfileobj(response, out, 1 << 20)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise DataError(
                f"{name}: cannot reach {dataset.url} ({reason}); {_manual(dataset)}"
            ) from exc
        if dataset.checksum is not None:
            _check(archive, dataset.checksum, dataset, "the archive")
        member = Path(tmp) / "member"
        if dataset.member is None:
            archive.replace(member)
        else:
            try:
                _extract(archive, dataset.member, member)
            except (KeyError, tarfile.TarError, zipfile.BadZipFile) as exc:
                raise DataError(f"{name}: {dataset.url} lacks {dataset.member}: {exc}") from exc
        if dataset.member_checksum is not None:
            _check(member, dataset.member_checksum, dataset, dataset.member or "the file")
        member.replace(target)
        manifest = {"dataset": name, "url": dataset.url, "sha256": _digest(target, "sha256")}
        (directory / "privrec-source.json").write_text(json.dumps(manifest, indent=2))
    logger.info("%s cached in %s", name, target)
    return target


def load_remote(name: str) -> RatingData:
    """Fetch (if needed) and read data set `name`."""
    return REMOTE_DATASETS[name].reader(fetch_remote(name))


__all__ = ["REMOTE_DATASETS", "Checksum", "RemoteDataset", "fetch_remote", "load_remote"]
