"""Building a configured component (mechanism, model, attack) from its registry by name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from privrec.shared.errors import ConfigError


def build(
    registry: Mapping[str, type[Any]],
    key: str,
    kind: str,
    name: str,
    params: Mapping[str, Any] | None = None,
) -> Any:
    """`registry[name](**params)`, with errors naming the config key.

    Args:
        registry: name → class.
        key: the config key that names the component, e.g. "mechanism.name".
        kind: what the component is, e.g. "mechanism".
        name: the configured name.
        params: keyword parameters of the constructor.

    Raises:
        ConfigError: unknown name, unknown parameter, or invalid value (naming it).
    """
    try:
        cls = registry[name]
    except KeyError:
        raise ConfigError(f"{key}: unknown {kind} {name!r}; known: {sorted(registry)}") from None
    try:
        return cls(**dict(params or {}))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{key.split('.', maxsplit=1)[0]}.{name}: {exc}") from exc


__all__ = ["build"]
