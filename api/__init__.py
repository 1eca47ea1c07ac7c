"""The HTTP query layer: ``create_app(registry)``."""

from __future__ import annotations

from api.app import create_app
from api.registry import JobHandle, Registry, handle_for
from api.settings import ApiSettings

__all__ = ["ApiSettings", "JobHandle", "Registry", "create_app", "handle_for"]
