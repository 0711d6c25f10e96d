"""One typed registry per family (mechanisms, models, attacks): name → class, and building one.

Each family keeps a `Registry[Base]` whose members are classes with a `name` class attribute
(the config value). A new member joins with one line, ``MODELS.register(MyModel)`` (or as a
class decorator), and everything that dispatches on the family — the config checks, the
aggregator, the adversary, the contract suites — sees it.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import numbers
from collections.abc import Iterator, Mapping
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from privrec.shared.errors import ConfigError


class Named(Protocol):
    """What a registry member declares: its registry (and config) name."""

    name: str


T = TypeVar("T")


class _Deferred(NamedTuple):
    """A member not imported yet: ``module.attribute``."""

    module: str
    attribute: str


class Registry(Mapping[str, type[T]], Generic[T]):
    """A read-only mapping name → class of one family, with `register` and `build`.

    Args:
        kind: what the members are, for error messages ("mechanism", "model", "attack").
        key: the config key that names a member, e.g. "mechanism.name".
        base: the family's base class; `register` refuses anything else.
        declares: the class attributes every member must set besides `name` (what the
            compatibility check and the dispatch read without building a member, e.g. a
            mechanism's `releases`); `register` refuses a class that leaves one unset.
    """

    def __init__(self, kind: str, key: str, base: type, declares: tuple[str, ...] = ()) -> None:
        self.kind, self.key, self.base, self.declares = kind, key, base, declares
        self._members: dict[str, type[T] | _Deferred] = {}

    # ------------------------------------------------------------------ Mapping
    def __getitem__(self, name: str) -> type[T]:
        member = self._members[name]
        if isinstance(member, _Deferred):
            cls = getattr(importlib.import_module(member.module), member.attribute)
            if (own := self._check(cls)) != name:
                raise TypeError(
                    f"{member.module}.{member.attribute} is registered as {self.kind} "
                    f"{name!r} but its `name` is {own!r}"
                )
            self._members[name] = member = cls
        return member

    def __iter__(self) -> Iterator[str]:
        return iter(self._members)

    def __len__(self) -> int:
        return len(self._members)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {sorted(self._members)})"

    # ------------------------------------------------------------------ membership
    def register(self, cls: type[T]) -> type[T]:
        """Add `cls` under its `name` (usable as a class decorator); returns `cls`.

        Raises:
            TypeError: `cls` is not a subclass of the family's base, has no string `name`, or
                leaves one of the family's `declares` unset.
            ValueError: another class is registered under the same name.
        """
        name = self._check(cls)
        if name in self._members and self[name] is not cls:
            raise ValueError(f"{self.kind} name {name!r} is taken by {self[name].__name__}")
        self._members[name] = cls
        return cls

    def register_lazy(self, name: str, module: str, attribute: str) -> None:
        """Add the class ``module.attribute`` under `name` without importing `module`: it is
        imported, and checked like `register` does, when `name` is first looked up.

        Raises:
            ValueError: `name` is taken.
        """
        if name in self._members:
            raise ValueError(f"{self.kind} name {name!r} is taken")
        self._members[name] = _Deferred(module, attribute)

    def _check(self, cls: object) -> str:
        """`cls`'s name, if it can be a member (see `register`)."""
        if not (isinstance(cls, type) and issubclass(cls, self.base)):
            raise TypeError(f"a {self.kind} must subclass {self.base.__name__}, got {cls!r}")
        name = getattr(cls, "name", None)
        if not isinstance(name, str) or not name:
            raise TypeError(f"{cls.__name__} must set a non-empty string `name`")
        if missing := [attribute for attribute in self.declares if not hasattr(cls, attribute)]:
            raise TypeError(
                f"{self.kind} {name!r} ({cls.__name__}) must declare "
                + ", ".join(f"`{attribute}`" for attribute in missing)
            )
        return name

    def unregister(self, name: str) -> None:
        """Remove member `name` (KeyError if there is none)."""
        del self._members[name]

    @contextlib.contextmanager
    def registered(self, cls: type[T]) -> Iterator[type[T]]:
        """`cls` registered for the duration of a `with` block (examples and tests)."""
        self.register(cls)
        try:
            yield cls
        finally:
            self.unregister(str(getattr(cls, "name")))  # noqa: B009 (`name` checked by register)

    # ------------------------------------------------------------------ building
    def lookup(self, name: str) -> type[T]:
        """The class registered as `name`.

        Raises:
            ConfigError: no such member (naming the config key and the known names).
        """
        try:
            return self[name]
        except KeyError:
            raise ConfigError(
                f"{self.key}: unknown {self.kind} {name!r}; known: {sorted(self._members)}"
            ) from None

    def build(self, name: str, params: Mapping[str, Any] | None = None) -> T:
        """`self[name](**params)`, with errors naming the config key.

        Raises:
            ConfigError: unknown name, unknown parameter, or invalid value (naming it).
        """
        cls = self.lookup(name)
        params = dict(params or {})
        where = f"{self.key.split('.', maxsplit=1)[0]}.{name}"
        valid = parameter_names(cls)
        unknown = sorted(set(params) - valid) if valid is not None else []
        if unknown:
            raise ConfigError(
                f"{where}: unknown parameter{'s' if len(unknown) > 1 else ''} "
                f"{', '.join(map(repr, unknown))}; valid: {sorted(valid or ())}"
            )
        for parameter, value in params.items():
            if (expected := _numeric_parameter(cls, parameter)) and not _is_number(value):
                raise ConfigError(
                    f"{where}: parameter {parameter!r} must be {expected}, got {value!r}"
                )
        try:
            return cls(**params)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: {exc}") from exc


def _numeric_parameter(cls: type, parameter: str) -> str | None:
    """The kind named in a refusal: "a number" or "an integer" when `cls`'s `parameter` is
    annotated float or int (a value of another type would otherwise fail inside the
    constructor, or pass through as a string)."""
    param = inspect.signature(cls).parameters.get(parameter)
    annotation = getattr(param, "annotation", None)
    name = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", None)
    return {"float": "a number", "int": "an integer"}.get(str(name))


def _is_number(value: object) -> bool:
    """A real number, numpy's scalars included (booleans are not)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def parameter_names(cls: type) -> frozenset[str] | None:
    """The keyword parameters `cls(...)` accepts, or None when it takes `**kwargs`."""
    params = list(inspect.signature(cls).parameters.values())
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return frozenset(
        p.name
        for p in params
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    )


__all__ = ["Named", "Registry", "parameter_names"]
