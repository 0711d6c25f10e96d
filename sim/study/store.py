"""A study's directory: what is in it, which runs are finished, and who may write to it.

::

    RUN_DIR/
      study.toml            the study (base configuration + [sweep]); its identity
      runs/<hash>/          one ordinary run directory per point and seed (`spec.run_name`)
        done.json           written last, atomically: the run is finished (`RunRecord`)
        failed.json         the error of a run that failed (removed when it is redone)
      summary.csv  study.json  study.md  plots/     the results (`sim.study.results`)
      logs/worker-N.log     each worker's own output
      .sweep.lock           held by the sweep that runs in it

A run counts as finished only when its `done.json` names it; anything else in its directory
(a run that was interrupted, killed or crashed half-way) is removed and the run is redone, so
no run is counted twice or half. The identity check (`check`) reads and never writes: an
`--out` that holds another study, or something that is not a study, is refused before anything
in it changes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from privrec.shared.errors import ConfigError
from privrec.sim.study.spec import Run, StudySpec

STUDY_FILE = "study.toml"
RUNS_DIR = "runs"
DONE_FILE = "done.json"
FAILED_FILE = "failed.json"
LOCK_FILE = ".sweep.lock"
SUMMARY, STUDY_JSON, STUDY_MD, PLOTS = "summary.csv", "study.json", "study.md", "plots"
"""The results (`sim.study.results`)."""


@dataclasses.dataclass(frozen=True)
class RunRecord:
    """What `done.json` says of a finished run.

    Attributes:
        name: the run directory's name (`spec.run_name` of its configuration).
        point: the point's index in the study.
        axes: axis key → value.
        seed: the run's seed.
        seconds: the run's wall time in its worker.
        launcher: the launcher it ran on ("inprocess", "processes").
        where: "local" or "ray".
    """

    name: str
    point: int
    axes: dict[str, Any]
    seed: int
    seconds: float
    launcher: str
    where: str = "local"

    @classmethod
    def of(cls, run: Run, seconds: float, launcher: str, where: str) -> RunRecord:
        """The record of a finished run."""
        return cls(run.name, run.point, dict(run.axes), run.seed, seconds, launcher, where)


def write_atomically(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file and a rename: readers see the old
    content or the new, never a part."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def read_done(job_dir: Path) -> dict[str, Any] | None:
    """The `done.json` of a job's directory if it is there, whole, and names the directory."""
    try:
        raw = json.loads((job_dir / DONE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return raw if isinstance(raw, dict) and raw.get("name") == job_dir.name else None


def read_record(run_dir: Path) -> RunRecord | None:
    """The `RunRecord` of a study's finished run (`read_done`)."""
    raw = read_done(run_dir)
    fields = {f.name for f in dataclasses.fields(RunRecord)}
    try:
        return None if raw is None else RunRecord(**{k: raw[k] for k in fields if k in raw})
    except TypeError:
        return None


class StudyDir:
    """The directory of one study (module docstring)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    @property
    def study_file(self) -> Path:
        """The study's study.toml."""
        return self.root / STUDY_FILE

    def run_dir(self, run: Run | str) -> Path:
        """The run directory of `run` (or of a run name)."""
        return self.root / RUNS_DIR / (run if isinstance(run, str) else run.name)

    def read_spec(self) -> StudySpec:
        """The study recorded in `study.toml`.

        Raises:
            ConfigError: there is none, or it cannot be read.
        """
        try:
            raw = tomllib.loads(self.study_file.read_text())
        except FileNotFoundError:
            raise ConfigError(f"{self.root}: not a study directory (no {STUDY_FILE})") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{self.study_file}: not valid TOML: {exc}") from exc
        return StudySpec.from_document(raw)

    def check(self, spec: StudySpec) -> None:
        """Refuse an `--out` that holds another study or something else; reads only.

        Raises:
            ConfigError: naming what differs, and what to do instead.
        """
        if not self.root.exists():
            return
        if not self.root.is_dir():
            raise ConfigError(f"--out {self.root}: exists and is not a directory")
        if not self.study_file.exists():
            if any(self.root.iterdir()):
                raise ConfigError(
                    f"--out {self.root}: the directory holds files but no {STUDY_FILE}, so it "
                    "is not a study; choose another --out"
                )
            return
        try:
            recorded = self.read_spec()
        except ConfigError as exc:
            raise ConfigError(f"--out {self.root}: its {STUDY_FILE} is unreadable: {exc}") from exc
        if recorded.identity() != spec.identity():
            what = "; ".join(spec.differences(recorded))
            raise ConfigError(
                f"--out {self.root} holds a different study ({what}); choose another --out, "
                f"or continue that study with --config {self.study_file}"
            )

    @contextlib.contextmanager
    def opened(self, spec: StudySpec) -> Iterator[None]:
        """Create the directory and `study.toml` (after `check`) and hold its lock.

        Raises:
            ConfigError: another sweep holds the lock.
        """
        from filelock import FileLock, Timeout

        self.root.mkdir(parents=True, exist_ok=True)
        lock = FileLock(self.root / LOCK_FILE)
        try:
            lock.acquire(timeout=0)
        except Timeout:
            raise ConfigError(
                f"--out {self.root}: another privrec sweep is running in it; wait for it or "
                "stop it (it is resumed by running it again)"
            ) from None
        try:
            if not self.study_file.exists():
                write_atomically(self.study_file, spec.to_toml())
            (self.root / RUNS_DIR).mkdir(exist_ok=True)
            yield
        finally:
            lock.release()

    def results_written(self) -> list[str]:
        """The result files present (summary.csv, study.json, study.md, plots/*.png), relative
        to the study directory; empty unless summary.csv, study.json and study.md all are."""
        if not all((self.root / name).exists() for name in (SUMMARY, STUDY_JSON, STUDY_MD)):
            return []
        plots = sorted(f"{PLOTS}/{p.name}" for p in (self.root / PLOTS).glob("*.png"))
        return [SUMMARY, STUDY_JSON, *plots, STUDY_MD]

    # ------------------------------------------------------------------ runs
    def is_done(self, run: Run) -> bool:
        """True when the run has a record (it finished)."""
        return read_record(self.run_dir(run)) is not None

    def records(self) -> list[RunRecord]:
        """Every finished run's record, in name order."""
        base = self.root / RUNS_DIR
        if not base.is_dir():
            return []
        found = (read_record(d) for d in sorted(base.iterdir()) if d.is_dir())
        return [r for r in found if r is not None]

    def failures(self) -> dict[str, Mapping[str, Any]]:
        """Run name → the `failed.json` of each run whose last attempt failed."""
        out: dict[str, Mapping[str, Any]] = {}
        for path in sorted((self.root / RUNS_DIR).glob(f"*/{FAILED_FILE}")):
            with contextlib.suppress(OSError, ValueError):
                out[path.parent.name] = json.loads(path.read_text())
        return out


__all__ = [
    "DONE_FILE",
    "FAILED_FILE",
    "PLOTS",
    "RUNS_DIR",
    "STUDY_FILE",
    "STUDY_JSON",
    "STUDY_MD",
    "SUMMARY",
    "RunRecord",
    "StudyDir",
    "read_done",
    "read_record",
    "write_atomically",
]
