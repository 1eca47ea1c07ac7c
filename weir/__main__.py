"""``python -m weir`` is the ``weir`` command."""

from __future__ import annotations

import os
import sys

# `python -m` puts the working directory first on sys.path; weir's dependencies, imported
# from here on, must come from site-packages, never from a module planted in a shared
# directory someone runs weir from (a job's own modules still import: the loader adds
# its directory, after site-packages)
if sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

from weir.app.cli import command  # noqa: E402 - after the path is fixed

if __name__ == "__main__":
    command()
