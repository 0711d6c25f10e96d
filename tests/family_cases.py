"""How the contract suites find their cases and the registries' members, instead of lists.

The mechanism, model and attack suites each define one base class per family (`__test__ =
False`) and a case per registered member (a subclass with `__test__ = True`). These helpers
discover both sides: the cases by walking the base's subclasses, the members by importing
every module of the family's package, so neither is a hand-kept copy of the registry.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Iterator
from types import ModuleType
from typing import TypeVar

T = TypeVar("T")


def _subclasses(cls: type[T]) -> Iterator[type[T]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def contract_cases(base: type[T]) -> list[type[T]]:
    """Every collected case below `base`: the subclasses whose `__test__` is true."""
    return [case for case in dict.fromkeys(_subclasses(base)) if getattr(case, "__test__", False)]


def family_members(package: ModuleType, base: type[T]) -> dict[str, type[T]]:
    """Every class of the package's modules that subclasses `base` and sets its own `name`."""
    members: dict[str, type[T]] = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for cls in vars(module).values():
            if (
                inspect.isclass(cls)
                and issubclass(cls, base)
                and cls.__module__ == module.__name__
                and "name" in vars(cls)
            ):
                members[cls.name] = cls  # type: ignore[attr-defined]
    return members
