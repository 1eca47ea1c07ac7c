"""The Python client of the weir query API: ``from weir.client import Client``.

It lives in ``weir.api.client`` (beside the models it parses answers into), whose docstring
has an example; this module is its public name.
"""

from __future__ import annotations

from weir.api.client import *  # noqa: F403 - named once in weir.api.client.__all__
from weir.api.client import __all__ as __all__


def __dir__() -> list[str]:
    """The client's public names, not this module's own (``annotations``)."""
    return sorted(__all__)
