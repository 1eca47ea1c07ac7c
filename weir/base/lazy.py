"""What a package ``__init__`` needs to load its parts on first use (PEP 562).

``keep_functions``: a package whose functions share their names with its submodules
(``sources.kafka()`` and ``weir.engine.sources.kafka``) keeps the functions when a submodule is
first imported late, inside a function or by another module. The import system sets a
submodule on its package when it loads it, which would replace the function of the same name.
"""

from __future__ import annotations

import sys
from types import FunctionType, ModuleType
from typing import Any

__all__ = ["keep_functions"]


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
