"""Drawing and saving a study's figures: in this process, or spread over the sweep's idle workers.

Drawing is most of the time a study spends after its last run (issue 26, bench/sweep.py: the
four figures of the 12-run bench, ≈ 3 s of CPU to build and save, one of them 1.4 s), and it
would run on one core while the others sit idle. A figure arrives here as a
`sim.study.plots.Recipe`: a drawing function and its data, not yet drawn. When the sweep still
has its local workers (`sim.study.pool.LocalPool`, matplotlib already imported for the runs'
own figures), `in_workers` hands each recipe to them: pickled (plain data: the statistics, the
headlines) into a private directory, and a worker draws and saves it (a ``"call"`` job,
`save_pickled`); the largest first, so the longest drawing starts at once. The PNG bytes are
those of `in_turn` (checked by `tests/integration/test_sweep.py`); a figure whose job fails is
drawn and saved here instead, with a warning.
"""

from __future__ import annotations

import logging
import pickle
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from matplotlib.figure import Figure

from privrec.sim.study.plots import DPI, Recipe
from privrec.sim.study.pool import Backend

logger = logging.getLogger(__name__)

Render = Callable[[Mapping[str, Recipe], Path], Callable[[], None]]
"""Starts drawing each figure and saving it as ``DIR/NAME.png`` (the recipes by name, the
directory) and returns what waits until every one is saved."""
POLL_S = 0.2


def save(fig: Figure, path: Path) -> None:
    """Write `fig` as a study's PNG: `DPI`, its title in the metadata."""
    fig.savefig(path, dpi=DPI, metadata={"Title": fig.get_suptitle()})


def in_turn(figures: Mapping[str, Recipe], plots_dir: Path) -> Callable[[], None]:
    """The default `Render`: each figure drawn and saved here, one after the other, before it
    returns."""
    for name, recipe in figures.items():
        save(recipe(), plots_dir / f"{name}.png")
    return lambda: None


def save_pickled(figure: str, png: str, work_dir: Path) -> None:
    """A worker's job: the recipe pickled at `figure` drawn and saved as `png` (`work_dir` is
    the job's scratch directory, unused)."""
    with Path(figure).open("rb") as f:
        recipe = pickle.load(f)  # written by the sweep that started this worker
    save(recipe(), Path(png))


def in_workers(backend: Backend) -> Render:
    """A `Render` that has `backend`'s workers save the figures (module docstring)."""

    def render(figures: Mapping[str, Recipe], plots_dir: Path) -> Callable[[], None]:
        scratch = tempfile.TemporaryDirectory(prefix="privrec-figures-")
        pending: dict[str, str] = {}
        for name in sorted(figures, key=lambda n: -figures[n].panels):  # the largest first
            path = Path(scratch.name) / f"{name}.pickle"
            path.write_bytes(pickle.dumps(figures[name]))
            pending[f"figure-{name}"] = name
            backend.submit(
                {
                    "kind": "call",
                    "dir": str(Path(scratch.name) / f"figure-{name}"),
                    "record": {"name": f"figure-{name}"},
                    "function": f"{__name__}:save_pickled",
                    "kwargs": {"figure": str(path), "png": str(plots_dir / f"{name}.png")},
                }
            )

        def wait() -> None:
            with scratch:
                while pending:
                    for kind, event in backend.events(POLL_S):
                        if kind != "finished":
                            continue
                        name = pending.pop(event["name"])
                        if not event["ok"]:
                            logger.warning("a worker failed to save %s: %s", name, event["error"])
                            save(figures[name](), plots_dir / f"{name}.png")

        return wait

    return render


__all__ = ["Render", "in_turn", "in_workers", "save", "save_pickled"]
