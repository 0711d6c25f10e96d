"""`KEY=VALUE` overrides of an experiment configuration (`privrec sim --set`, the sweep's axes).

A key is the dotted path of a TOML key: ``section.key`` (``model.k``), or a key inside one of
the free tables ``mechanism.params`` and ``model.params`` (``mechanism.params.epsilon``). A value
is read as a TOML value (``2``, ``0.5``, ``true``, ``"blip"``, ``["rpt_bayes"]``), and a word
that is not TOML (``blip``) as a string, so ``--set mechanism.name=blip`` needs no quotes. The
overridden document is then validated by `ExperimentConfig.from_dict`, exactly like the file:
an unknown key or a value of the wrong type is a `ConfigError` naming the key.
"""

from __future__ import annotations

import copy
import dataclasses
import tomllib
from collections.abc import Iterable, Mapping
from typing import Any

from privrec.shared.config import SECTIONS, ExperimentConfig
from privrec.shared.errors import ConfigError

TABLES = ("mechanism.params", "model.params")
"""The free tables whose keys are the mechanism's and the model's own parameters."""

_CLOSERS = {"[": "]", "{": "}"}


def parse_value(text: str) -> Any:
    """A value as TOML reads it (``2`` → 2, ``0.5`` → 0.5, ``true`` → True, ``"x"`` → "x",
    ``[1, 2]`` → [1, 2]); text that is no TOML value is the string itself."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def split_values(text: str) -> list[str]:
    """`text` split at the commas outside brackets, braces and quotes: ``0.5,1,2`` →
    ``["0.5", "1", "2"]``, ``["a","b"],["c"]`` → ``['["a","b"]', '["c"]']``; an empty text
    has no values."""
    parts: list[str] = []
    depth: list[str] = []
    quote = ""
    start = 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in _CLOSERS:
            depth.append(_CLOSERS[ch])
        elif depth and ch == depth[-1]:
            depth.pop()
        elif ch == "," and not depth:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts] if text.strip() else []


def parse_assignment(text: str, option: str = "--set") -> tuple[str, str]:
    """``KEY=VALUE`` → (KEY, VALUE text).

    Raises:
        ConfigError: no ``=``, or an empty key.
    """
    key, eq, value = text.partition("=")
    key = key.strip()
    if not eq or not key:
        raise ConfigError(f"{option}: expected KEY=VALUE (e.g. model.k=50), got {text!r}")
    return key, value.strip()


def check_key(key: str) -> None:
    """`key` names a configuration key: ``section.key`` of a known section and key, or
    ``mechanism.params.NAME`` / ``model.params.NAME``.

    Raises:
        ConfigError: naming the key and what is known.
    """
    section, _, rest = key.partition(".")
    if section not in SECTIONS:
        raise ConfigError(f"{key}: unknown section [{section}]; known: {sorted(SECTIONS)}")
    known = {f.name for f in dataclasses.fields(SECTIONS[section])}
    field, _, sub = rest.partition(".")
    if field not in known:
        raise ConfigError(f"{key}: unknown key; known in [{section}]: {sorted(known)}")
    if sub and f"{section}.{field}" not in TABLES:
        raise ConfigError(f"{key}: {section}.{field} is not a table (only {', '.join(TABLES)} are)")
    if sub and "." in sub:
        raise ConfigError(f"{key}: a parameter name has no dots")


def override(config: ExperimentConfig, assignments: Mapping[str, Any]) -> ExperimentConfig:
    """`config` with each ``key → value`` of `assignments` set, validated like a TOML file.

    Raises:
        ConfigError: an unknown key, or a value the file would refuse (naming the key).
    """
    if not assignments:
        return config
    raw = copy.deepcopy(config.to_dict())
    for key, value in assignments.items():
        check_key(key)
        section, field, *param = key.split(".")
        if param:
            table = raw[section][field]
            table[param[0]] = value
        else:
            raw[section][field] = value
    return ExperimentConfig.from_dict(raw)


def override_texts(config: ExperimentConfig, texts: Iterable[str]) -> ExperimentConfig:
    """`config` with ``KEY=VALUE`` texts (`privrec sim --set`) applied in order; a key given
    twice keeps its last value."""
    assignments: dict[str, Any] = {}
    for text in texts:
        key, value = parse_assignment(text)
        assignments[key] = parse_value(value)
    return override(config, assignments)


__all__ = [
    "TABLES",
    "check_key",
    "override",
    "override_texts",
    "parse_assignment",
    "parse_value",
    "split_values",
]
