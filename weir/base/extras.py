"""weir's optional parts and the extra that installs each: a missing one is refused in one line
naming the extra to install, before the part is used (``require``).

The distribution is ``weir-stream`` (the name ``weir`` on PyPI is an unrelated project); the
import name and the command are ``weir``. A plain install is the core (the job API, the engine,
RocksDB state, the HTTP API and its client); ``[kafka]``, ``[s3]``, ``[sql]`` and ``[spark]``
add the rest, ``[all]`` all of them.

Example:
    >>> require("sql", "a SQL job")  # sqlglot installed: nothing happens
"""

from __future__ import annotations

import importlib.util

from weir.base.errors import MissingExtra

__all__ = ["DISTRIBUTION", "EXTRAS", "install_hint", "require"]

DISTRIBUTION = "weir-stream"
# each extra and the modules it installs that weir imports
EXTRAS: dict[str, tuple[str, ...]] = {
    "kafka": ("confluent_kafka", "kafka", "crc32c"),
    "s3": ("obstore",),
    "sql": ("sqlglot",),
    "spark": ("pyspark", "pyarrow", "pandas"),
}


def install_hint(extra: str) -> str:
    """``pip install 'weir-stream[kafka]'``."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"


def require(extra: str, what: str) -> None:
    """Raise ``MissingExtra`` unless every module of ``extra`` can be imported; ``what`` is
    what needs it (``a Kafka source``), named in the message with the extra to install."""
    for module in EXTRAS[extra]:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise MissingExtra(
                f"{what} needs weir's {extra} extra, and {module} is not installed: "
                f"{install_hint(extra)}"
            )
