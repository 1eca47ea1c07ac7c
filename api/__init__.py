"""The HTTP query layer: ``create_app(registry)``."""

from __future__ import annotations

from weir.api.app import create_app
from weir.api.registry import JobHandle, Registry, handle_for
from weir.api.settings import ApiSettings

__all__ = ["ApiSettings", "JobHandle", "Registry", "create_app", "handle_for"]
