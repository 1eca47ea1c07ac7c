"""``python -m benchmarks.chaos``: the chaos run (``benchmarks.chaos.run``)."""

from __future__ import annotations

import sys

from benchmarks.chaos.run import main

sys.exit(main())
