"""Every public name of ``weir``, ``weir.client`` and ``weir.testing`` has a docstring
(``make docstrings``, part of ``make check``).

Public means: each name in the module's ``__all__``; for a submodule named there (``weir.sinks``,
``weir.windows``, ...) the module itself and each name in its ``__all__`` (else each name not
starting with ``_`` that it defines); for a class, the class and each method, property and
class method it defines itself whose name does not start with ``_``. A docstring is the
object's own ``__doc__``: not one inherited from a base class, and not the signature a
dataclass writes when its class has none. The docs site's Python API reference is generated
from these docstrings, so a name without one is a blank entry there.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

MODULES = ("weir", "weir.client", "weir.testing")


def _own_doc(obj: Any) -> bool:
    doc = obj.__dict__.get("__doc__") if isinstance(obj, type) else getattr(obj, "__doc__", None)
    if not doc or not doc.strip():
        return False
    if isinstance(obj, type):  # a dataclass without a docstring gets its signature as one
        try:
            signature = str(inspect.signature(obj)).replace(" -> None", "")
        except (TypeError, ValueError):
            return True
        return bool(doc != obj.__name__ + signature)
    return True


def _module_names(module: ModuleType) -> list[str]:
    names = getattr(module, "__all__", None)
    if names is not None:
        return list(names)
    return [
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and getattr(value, "__module__", None) == module.__name__
        and (inspect.isclass(value) or inspect.isfunction(value))
    ]


def _members(cls: type) -> Iterator[tuple[str, Any]]:
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(value, (staticmethod, classmethod)):
            yield name, value.__func__
        elif isinstance(value, property):
            yield name, value.fget
        elif inspect.isfunction(value):
            yield name, value


def missing() -> list[str]:
    """The dotted names of public objects without a docstring of their own."""
    out: list[str] = []
    seen: set[int] = set()

    def check(path: str, obj: Any) -> None:
        if id(obj) in seen or not (
            inspect.ismodule(obj) or inspect.isclass(obj) or inspect.isroutine(obj)
        ):  # type aliases and constants have no docstring of their own at run time
            return
        seen.add(id(obj))
        if not _own_doc(obj):
            out.append(path)
        if inspect.ismodule(obj):
            for name in _module_names(obj):
                check(f"{path}.{name}", getattr(obj, name))
        elif inspect.isclass(obj):
            for name, member in _members(obj):
                check(f"{path}.{name}", member)

    for module_name in MODULES:
        module = importlib.import_module(module_name)
        check(module_name, module)
    return out


def main() -> int:
    absent = missing()
    for path in absent:
        print(f"no docstring: {path} (add a Google-style one: Args, Returns, Raises, Example)")
    if absent:
        return 1
    print(f"docstrings: every public name of {', '.join(MODULES)} has one")
    return 0


if __name__ == "__main__":
    sys.exit(main())
