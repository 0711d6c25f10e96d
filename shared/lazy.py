"""Names a module exports but imports on first use (PEP 562 module ``__getattr__``).

A node process imports only what it runs: dp-accounting's package, every model's kernels or
every attack's would add seconds to the start of a server, a shard or an adversary that never
uses them (docs/decisions/startup.md). A module that re-exports such names lists where each
lives and installs the pair this returns::

    __getattr__, __dir__ = deferred_names(__name__, {"PPCF": "privrec.server.models.knn"})

with the same names imported under ``if TYPE_CHECKING:`` for type checkers.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def deferred_names(
    module: str, where: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of `module` whose names `where` (name → the module
    that defines it) are imported when first looked up."""
    where = dict(where)

    def __getattr__(name: str) -> Any:
        if name in where:
            return getattr(importlib.import_module(where[name]), name)
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[module]), *where})

    return __getattr__, __dir__


__all__ = ["deferred_names"]
