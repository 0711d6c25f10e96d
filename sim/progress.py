"""Progress of a run: one line per phase, what is being done, and timings for every step.

A progress callback is ``progress(label, done, total)`` (`Progress`), the signature the
reproduce entries share. The label is the phase, optionally followed by what is being done after
`SEP` (``"attack · rpt_bayes"``): a renderer keeps one line per phase and shows the detail on
it; a caller that does not know the convention just sees a longer label. ``total == 0`` means
the amount of work is unknown (the renderer shows elapsed time only).

`Steps` times the steps of a phase and reports them; `RichProgress` renders the callbacks as
rich progress lines with an estimate of the time left (for `privrec sim` and `privrec report`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any, Self

Progress = Callable[[str, int, int], None]
"""``progress(label, done, total)``: `label` is ``phase`` or ``phase · detail``."""

SEP = " · "


def label(phase: str, detail: str = "") -> str:
    """``phase · detail`` (or the phase alone)."""
    return f"{phase}{SEP}{detail}" if detail else phase


def split(text: str) -> tuple[str, str]:
    """(phase, detail) of a label."""
    phase, _, detail = text.partition(SEP)
    return phase, detail


class Steps:
    """The named steps of one phase, timed into `timings` as ``phase.step`` and reported as
    ``phase · step`` with the count of steps done (`total` steps are expected)."""

    def __init__(
        self, phase: str, total: int, progress: Progress | None, timings: dict[str, float]
    ) -> None:
        self.phase, self.total, self.progress, self.timings = phase, total, progress, timings
        self.done = 0

    @contextlib.contextmanager
    def step(self, name: str, detail: str = "") -> Iterator[None]:
        """Time the block as ``phase.name``; report ``phase · detail`` before and after."""
        if self.progress is not None:
            self.progress(label(self.phase, detail or name), self.done, self.total)
        t = time.perf_counter()
        try:
            yield
        finally:
            key = f"{self.phase}.{name}"
            self.timings[key] = self.timings.get(key, 0.0) + time.perf_counter() - t
            self.done += 1
            if self.progress is not None:
                self.progress(label(self.phase, detail or name), self.done, self.total)


class RichProgress:
    """Render progress callbacks with rich: a line per phase (bar, done/total, elapsed, time
    left), the current detail in the line's description. A context manager; call the instance
    as a `Progress`. With `held`, nothing is shown until `release()` (the calls made before
    are shown then): `privrec sim` shows no progress for a run whose configuration is refused.

    On a console that is not a terminal (a log file, CI), live bars would print only at the
    end; there each phase gets plain lines instead: when what is being done changes, when the
    phase completes, and otherwise at most every `PLAIN_EVERY_S` seconds.
    """

    PLAIN_EVERY_S = 10.0

    def __init__(self, console: Any, *, held: bool = False) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.progress import Progress as _Rich

        self._bar = _Rich(
            TextColumn("{task.description}"),
            BarColumn(bar_width=20),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(compact=True),
            console=console,
            transient=False,
        )
        self._tasks: dict[str, Any] = {}
        self._held = held
        self._pending: list[tuple[str, int, int]] = []
        self._started = False
        self._console = console
        self._plain = not console.is_terminal
        self._said: dict[str, tuple[str, bool, float]] = {}  # phase → (detail, complete, when)
        self._t0: dict[str, float] = {}

    def __enter__(self) -> Self:
        return self

    def release(self) -> None:
        """Show the progress from now on, starting with what was held back."""
        self._held = False
        pending, self._pending = self._pending, []
        for call in pending:
            self(*call)

    def __exit__(self, *exc: object) -> None:
        if self._started:
            self._bar.stop()

    def __call__(self, text: str, done: int, total: int) -> None:
        """Show `text` with `done` of `total` (held back until the display starts)."""
        if self._held:
            self._pending.append((text, done, total))
            return
        if self._plain:
            self._say(text, done, total)
            return
        if not self._started:
            self._bar.start()
            self._started = True
        phase, detail = split(text)
        description = f"{phase:<8} {detail}" if detail else phase
        if phase not in self._tasks:
            self._tasks[phase] = self._bar.add_task(description, total=total or None)
        task = self._tasks[phase]
        self._bar.update(task, description=description, completed=done, total=total or None)

    def _say(self, text: str, done: int, total: int) -> None:
        phase, detail = split(text)
        now = time.monotonic()
        start = self._t0.setdefault(phase, now)
        complete = bool(total) and done >= total
        said = self._said.get(phase)
        if (
            said is not None
            and said[:2] == (detail, complete)
            and now - said[2] < self.PLAIN_EVERY_S
        ):
            return
        self._said[phase] = (detail, complete, now)
        count = f"{done}/{total}" if total else ""
        self._console.print(f"{phase:<8} {detail} {count} ({now - start:.1f} s)", highlight=False)


__all__ = ["SEP", "Progress", "RichProgress", "Steps", "label", "split"]
