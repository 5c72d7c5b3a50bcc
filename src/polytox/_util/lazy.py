"""A package face whose public names load from their modules on first use (PEP 562).

A package's ``__init__`` lists its public names in ``__all__``; those that live in implementation modules
with heavy or optional dependencies (DuckDB, Starlette, torch) are resolved by the ``__getattr__`` this
returns, so importing the package, or one light module inside it, stays cheap.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(
    package: str, names: Mapping[str, str], deprecated: Mapping[str, str] | None = None
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``names`` maps each lazily loaded public name to the module
    (relative, like ``".score"``, or absolute) that defines it. ``deprecated`` maps a former name to the name
    it now has (itself in ``names`` or defined in ``package``): the alias works and warns."""

    def __getattr__(name: str) -> Any:
        if deprecated and name in deprecated:
            new = deprecated[name]
            warnings.warn(f"{package}.{name} is deprecated: use {package}.{new}", DeprecationWarning, stacklevel=2)
            return getattr(importlib.import_module(package), new)
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module, package), name)

    return __getattr__
