"""Logging is configured once, here: ``key=value`` fields, lazy ``%s`` arguments."""

from __future__ import annotations

import logging

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure(level: str = "INFO") -> None:
    logging.basicConfig(level=level.upper(), format=FORMAT)
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)
