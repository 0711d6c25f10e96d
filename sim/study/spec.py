"""What a study is: a base configuration, axes, seeds; and the runs they expand to.

A study varies configuration keys along axes. `grid` axes combine as a product; `zip` axes
vary together (value i of each with value i of the others: paired axes, e.g. a mechanism with
its own parameter), and the zipped rows combine with the grid as one more axis. Each
combination is a *point*; each point runs once per seed, and each such *run* is an ordinary
`privrec sim` run of its resolved configuration (the base with the point's values and the
seed), in a directory named by a short hash of that configuration (`run_name`).

The same study is given on the command line (``--grid KEY=V1,V2 --zip ... --seeds N``) or as a
``[sweep]`` table in the configuration file, so a study is one file that can be committed::

    [sweep]
    seeds = 5                                   # base seed + 0..4, or a list: [0, 7, 9]
    [sweep.grid]
    mechanism.name = ["blip", "jlt"]
    mechanism.params.epsilon = [0.5, 1, 2, 4, 8]

Axis values are read as TOML values (`shared.overrides.parse_value`); every run's configuration
is validated like a file before any run starts.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Self

from privrec.shared.config import ExperimentConfig
from privrec.shared.errors import ConfigError
from privrec.shared.files import read_toml
from privrec.shared.overrides import (
    check_key,
    override,
    parse_assignment,
    parse_value,
    split_values,
)

SWEEP_KEYS = ("seeds", "grid", "zip")
"""The keys of a ``[sweep]`` table."""
HASH_CHARS = 12
"""Hex digits of a run directory's name (48 bits: no collision among a study's runs)."""


@dataclasses.dataclass(frozen=True)
class Axis:
    """One varied key and its values, in order."""

    key: str
    values: tuple[Any, ...]


@dataclasses.dataclass(frozen=True)
class Run:
    """One run of a study: a point (its axis values) with a seed.

    Attributes:
        point: the point's index in the study's order.
        axes: axis key → value of this point.
        seed: the run's seed.
        config: the resolved configuration (base + axes + seed).
        name: the run directory's name, `run_name(config)`.
    """

    point: int
    axes: Mapping[str, Any]
    seed: int
    config: ExperimentConfig
    name: str

    def describe(self) -> str:
        """``sigma_max=0.5, seed 2``: the run as a reader names it."""
        values = ", ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in self.axes.items())
        return f"{values}, seed {self.seed}" if values else f"seed {self.seed}"


def run_name(config: ExperimentConfig) -> str:
    """The first `HASH_CHARS` hex digits of the SHA-256 of the resolved configuration's TOML:
    the same configuration and seed always name the same directory."""
    return hashlib.sha256(config.to_toml().encode()).hexdigest()[:HASH_CHARS]


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _axis(key: str, values: Sequence[Any], option: str, *, distinct: bool = True) -> Axis:
    """An axis, checked: a known key (not the seed), at least one value, no value twice
    (`distinct`; a zipped axis may repeat a value, its rows may not repeat)."""
    check_key(key)
    if key == "run.seed":
        raise ConfigError(f"{option} run.seed: the seeds are not an axis; use --seeds")
    if not isinstance(values, list | tuple):
        raise ConfigError(f"{option} {key}: the axis needs a list of values, got {values!r}")
    if not values:
        raise ConfigError(f"{option} {key}: the axis has no values (give KEY=V1,V2,...)")
    seen = [_canonical(v) for v in values]
    twice = sorted({v for v in seen if seen.count(v) > 1})
    if twice and distinct:
        raise ConfigError(f"{option} {key}: value {twice[0]} is given twice")
    return Axis(key, tuple(values))


def _listed(values: Any) -> Any:
    """A sequence (a range, a numpy array) as a list; a string or scalar as it is (refused)."""
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        return values
    return [v.item() if hasattr(v, "item") else v for v in values]


def parse_axis(text: str, option: str = "--grid", *, distinct: bool = True) -> Axis:
    """``KEY=V1,V2,...`` (each value a TOML value or a bare word) → an `Axis`."""
    key, values = parse_assignment(text, option)
    return _axis(key, [parse_value(v) for v in split_values(values)], option, distinct=distinct)


def parse_seeds(value: Any, base_seed: int, option: str = "--seeds") -> tuple[int, ...]:
    """A count N (the seeds base_seed, …, base_seed + N − 1) or a list of seeds; as text
    (``3``, ``0,4,9``) or as a TOML value.

    Raises:
        ConfigError: a count < 1, an empty list, a negative or repeated seed, a non-integer.
    """
    if isinstance(value, str):
        parsed = [parse_value(p) for p in split_values(value)]
        value = parsed[0] if len(parsed) == 1 else parsed
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise ConfigError(f"{option}: must be a count >= 1 or a list of seeds, got {value}")
        return tuple(range(base_seed, base_seed + value))
    if not isinstance(value, list | tuple) or not value:
        raise ConfigError(f"{option}: must be a count >= 1 or a list of seeds, got {value!r}")
    if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in value):
        raise ConfigError(f"{option}: every seed must be an int >= 0, got {value!r}")
    if len(set(value)) != len(value):
        raise ConfigError(f"{option}: a seed is given twice in {value!r}")
    return tuple(value)


def _flatten_axes(table: Any, where: str, prefix: str = "", *, distinct: bool = True) -> list[Axis]:
    """``[sweep.grid]``'s axes: nested tables (TOML's dotted keys) down to their value lists."""
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: must be a table of KEY = [values], got {table!r}")
    axes = []
    for key, value in table.items():
        full = f"{prefix}{key}"
        if isinstance(value, dict):  # a dotted key (mechanism.params.epsilon) nests tables
            axes += _flatten_axes(value, where, f"{full}.", distinct=distinct)
        else:
            axes.append(_axis(full, value, where, distinct=distinct))
    return axes


@dataclasses.dataclass(frozen=True)
class StudySpec:
    """A study: the base configuration, its axes and seeds (module docstring).

    Raises (on construction):
        ConfigError: an axis key given twice, zip axes of different lengths.
    """

    base: ExperimentConfig
    grid: tuple[Axis, ...] = ()
    zipped: tuple[Axis, ...] = ()
    seeds: tuple[int, ...] = (0,)

    def __post_init__(self) -> None:
        keys = [a.key for a in self.axes]
        twice = sorted({k for k in keys if keys.count(k) > 1})
        if twice:
            raise ConfigError(f"{twice[0]}: the axis is given twice (in --grid/--zip or [sweep])")
        lengths = {a.key: len(a.values) for a in self.zipped}
        if len(set(lengths.values())) > 1:
            raise ConfigError(
                f"--zip: zipped axes vary together and need as many values each, got {lengths}"
            )
        rows = [
            _canonical([a.values[i] for a in self.zipped])
            for i in range(min(lengths.values(), default=0))
        ]
        twice = sorted({r for r in rows if rows.count(r) > 1})
        if twice:
            keys = [a.key for a in self.zipped]
            raise ConfigError(f"--zip {', '.join(keys)}: the values {twice[0]} are given twice")

    @property
    def axes(self) -> tuple[Axis, ...]:
        """Every axis, grid first, in the order given."""
        return self.grid + self.zipped

    def points(self) -> list[dict[str, Any]]:
        """Every point's axis values: the grid's product (the last axis fastest), with the
        zipped rows as one more axis."""
        rows = [
            [(a.key, a.values[i]) for a in self.zipped]
            for i in range(len(self.zipped[0].values) if self.zipped else 1)
        ]
        grid = [[(a.key, v) for v in a.values] for a in self.grid]
        return [dict([*combo, *row]) for combo in itertools.product(*grid) for row in rows]

    def runs(self) -> list[Run]:
        """Every run, seed by seed (all points of the first seed first, so a study stopped
        early has whole seeds), each with its validated configuration.

        Raises:
            ConfigError: a point's configuration is refused (naming the key and value).
        """
        points = self.points()
        configs = [override(self.base, values) for values in points]
        out = []
        for seed in self.seeds:
            for i, (values, config) in enumerate(zip(points, configs, strict=True)):
                resolved = config.replace("run", seed=seed)
                out.append(Run(i, values, seed, resolved, run_name(resolved)))
        return out

    # ------------------------------------------------------------------ the study file
    def sweep_table(self) -> dict[str, Any]:
        """The ``[sweep]`` table that describes this study's axes and seeds."""
        table: dict[str, Any] = {"seeds": list(self.seeds)}
        if self.grid:
            table["grid"] = {a.key: list(a.values) for a in self.grid}
        if self.zipped:
            table["zip"] = {a.key: list(a.values) for a in self.zipped}
        return table

    def to_toml(self) -> str:
        """The study as one file: the resolved base configuration and its ``[sweep]`` table
        (``privrec sweep --config`` reads it back to the same study)."""
        import tomli_w

        return self.base.to_toml() + "\n" + tomli_w.dumps({"sweep": self.sweep_table()})

    def identity(self) -> str:
        """What makes two studies the same: the resolved base, the axes and the seeds."""
        return self.to_toml()

    def differences(self, other: StudySpec) -> list[str]:
        """What differs from `other`, in words (empty when they are the same study)."""
        out = []
        if self.seeds != other.seeds:
            out.append(f"seeds {list(other.seeds)} → {list(self.seeds)}")
        mine, theirs = self.sweep_table(), other.sweep_table()
        for part in ("grid", "zip"):
            if mine.get(part) != theirs.get(part):
                out.append(f"{part} {theirs.get(part, {})} → {mine.get(part, {})}")
        if self.base.to_toml() != other.base.to_toml():
            a, b = other.base.to_dict(), self.base.to_dict()
            changed = [
                f"{s}.{k}" for s in a for k in a[s] if a[s][k] != b.get(s, {}).get(k, object())
            ]
            out.append(f"base configuration ({', '.join(changed) or 'values'})")
        return out

    @classmethod
    def from_document(
        cls,
        raw: Mapping[str, Any],
        *,
        overrides: Mapping[str, Any] | None = None,
        grid: Iterable[str] = (),
        zipped: Iterable[str] = (),
        seeds: str | None = None,
    ) -> Self:
        """A study from a parsed TOML document (its ``[sweep]`` table, if any, and the
        configuration), with command-line axes and seeds on top: an axis given on the command
        line replaces the file's axis of the same key; `seeds` replaces the file's.

        Raises:
            ConfigError: naming the key or option at fault.
        """
        doc = dict(raw)
        table = doc.pop("sweep", {})
        if not isinstance(table, dict):
            raise ConfigError(f"[sweep] must be a table, got {table!r}")
        unknown = sorted(set(table) - set(SWEEP_KEYS))
        if unknown:
            raise ConfigError(f"sweep.{unknown[0]}: unknown key; known: {list(SWEEP_KEYS)}")
        base = override(ExperimentConfig.from_dict(doc), overrides or {})
        file_grid = _flatten_axes(table.get("grid", {}), "[sweep.grid]")
        file_zip = _flatten_axes(table.get("zip", {}), "[sweep.zip]", distinct=False)
        cli_grid = [parse_axis(t, "--grid") for t in grid]
        cli_zip = [parse_axis(t, "--zip", distinct=False) for t in zipped]
        given = {a.key for a in cli_grid + cli_zip}
        seed_value: Any = seeds if seeds is not None else table.get("seeds", 1)
        where = "--seeds" if seeds is not None else "sweep.seeds"
        return cls(
            base=base,
            grid=tuple([a for a in file_grid if a.key not in given] + cli_grid),
            zipped=tuple([a for a in file_zip if a.key not in given] + cli_zip),
            seeds=parse_seeds(seed_value, base.run.seed, where),
        )

    @classmethod
    def from_axes(
        cls,
        base: ExperimentConfig,
        grid: Mapping[str, Sequence[Any]] | None = None,
        zipped: Mapping[str, Sequence[Any]] | None = None,
        seeds: int | Sequence[int] = 1,
    ) -> Self:
        """A study from Python values: ``grid={"mechanism.params.epsilon": [1, 2]}``.

        Raises:
            ConfigError: as for the command line.
        """
        return cls(
            base=base,
            grid=tuple(_axis(k, _listed(v), "grid") for k, v in (grid or {}).items()),
            zipped=tuple(
                _axis(k, _listed(v), "zip", distinct=False) for k, v in (zipped or {}).items()
            ),
            seeds=parse_seeds(seeds if isinstance(seeds, int) else list(seeds), base.run.seed),
        )

    @classmethod
    def load(
        cls,
        path: str | Path | None,
        *,
        overrides: Mapping[str, Any] | None = None,
        grid: Iterable[str] = (),
        zipped: Iterable[str] = (),
        seeds: str | None = None,
    ) -> Self:
        """`from_document` of the TOML file at `path` (None: the default configuration)."""
        raw = read_toml(path) if path is not None else {}
        return cls.from_document(raw, overrides=overrides, grid=grid, zipped=zipped, seeds=seeds)


__all__ = [
    "HASH_CHARS",
    "Axis",
    "Run",
    "StudySpec",
    "parse_axis",
    "parse_seeds",
    "run_name",
]
