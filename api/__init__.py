"""The HTTP query layer: ``create_app(registry)``.

Its names load on first use (PEP 562), so ``weir.client``, which lives in ``weir.api.client``,
imports without the server's stack (FastAPI, the registry, RocksDB).
"""

from __future__ import annotations

if __name__ != "weir.api":  # the checkout's root on sys.path makes `api` importable too
    raise ImportError(f"import weir.api, not {__name__}: this folder installs as weir.api")

from typing import TYPE_CHECKING

from weir.base.lazy import exports

if TYPE_CHECKING:
    from weir.api.app import create_app
    from weir.api.registry import JobHandle, Registry, handle_for
    from weir.api.settings import ApiSettings

__all__ = ["ApiSettings", "JobHandle", "Registry", "create_app", "handle_for"]

_HOMES = {
    "ApiSettings": "weir.api.settings",
    "JobHandle": "weir.api.registry",
    "Registry": "weir.api.registry",
    "create_app": "weir.api.app",
    "handle_for": "weir.api.registry",
}


__getattr__, __dir__ = exports(__name__, _HOMES)
