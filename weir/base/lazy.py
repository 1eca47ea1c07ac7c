"""What a package ``__init__`` needs to load its parts on first use (PEP 562).

``exports``: a package's ``__getattr__`` and ``__dir__`` for names defined in modules it
imports only when one of them is first asked for.

``keep_functions``: a package whose functions share their names with its submodules
(``sources.kafka()`` and ``weir.engine.sources.kafka``) keeps the functions when a submodule is
first imported late, inside a function or by another module. The import system sets a
submodule on its package when it loads it, which would replace the function of the same name.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from types import FunctionType, ModuleType
from typing import Any

__all__ = ["exports", "keep_functions"]


def exports(
    package: str, homes: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``package``'s PEP 562 ``__getattr__`` and ``__dir__``: each name of ``homes`` is read
    from its home module, imported on first use (``"module"``, or ``"module:attr"`` where the
    attribute is named otherwise there); ``dir()`` lists them beside what is loaded.

    Example:
        >>> getattr_, dir_ = exports("pkg", {"dumps": "json", "loads_": "json:loads"})
        >>> getattr_("loads_")("[1]")
        [1]
    """

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attr = home.partition(":")
        return getattr(importlib.import_module(module), attr or name)

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *homes})

    return __getattr__, __dir__


class _KeepsFunctions(ModuleType):
    """A package whose functions are not replaced by the submodules of the same name."""

    def __setattr__(self, name: str, value: Any) -> None:
        if (
            isinstance(value, ModuleType)
            and value.__name__ == f"{self.__name__}.{name}"
            and isinstance(self.__dict__.get(name), FunctionType)
        ):
            return  # the submodule stays reachable as sys.modules[value.__name__]
        super().__setattr__(name, value)


def keep_functions(package: str) -> None:
    """Keep ``package``'s functions when a submodule of the same name is imported later."""
    sys.modules[package].__class__ = _KeepsFunctions
