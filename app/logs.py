"""Logging is configured once, here: ``key=value`` fields, lazy ``%s`` arguments."""

from __future__ import annotations

import logging

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure(level: str = "INFO") -> None:
    logging.basicConfig(level=level.upper(), format=FORMAT)
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)
    quiet_clients()


def quiet_clients() -> None:
    """kafka-python logs every connection at INFO; weir logs what matters about them."""
    logging.getLogger("kafka").setLevel(logging.ERROR)
