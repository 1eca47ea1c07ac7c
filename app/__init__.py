"""The ``weir`` command line, process supervision, HTTP serving and the demo job."""

from __future__ import annotations

if __name__ != "weir.app":  # the checkout's root on sys.path makes `app` importable too
    raise ImportError(f"import weir.app, not {__name__}: this folder installs as weir.app")
