"""``python -m weir`` is the ``weir`` command."""

from __future__ import annotations

import sys

from weir.app.cli import main

if __name__ == "__main__":
    sys.exit(main())
