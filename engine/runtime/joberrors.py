"""How a job file that fails to load is told: where (``path:line``, and the column of a syntax
error), the offending line (with a caret under a syntax error, as the SQL front end shows one),
and Python's own message, its "Did you mean" included.

Python adds "Did you mean" only when it prints an exception (``sys.excepthook``; on 3.11 the
``traceback`` module does not compute it), so the last line is taken from what the interpreter's
own hook prints, into a buffer.

Example:
    jobs/ads.py:7: the job file failed to load: AttributeError: module 'weir.engine.agg' has no
    attribute 'cuont'. Did you mean: 'count'?
      .aggregate("n", n=agg.cuont())
"""

from __future__ import annotations

import io
import linecache
import sys
import threading
from pathlib import Path
from types import TracebackType

__all__ = ["failed_to_load", "python_says", "syntax_error"]

_HOOK = threading.Lock()  # sys.stderr is swapped while the hook prints
# weir's own code: the folders under weir/ (links to the repository's folders in a checkout)
_ROOT = Path(__file__).parents[2]
_WEIR = (_ROOT.resolve(), *(p.resolve() for p in _ROOT.iterdir() if p.is_dir()))


def python_says(exc: BaseException) -> str:
    """The last line Python prints for ``exc``: ``Type: message``, with its suggestion."""
    buffer = io.StringIO()
    with _HOOK:
        before = sys.stderr
        sys.stderr = buffer
        try:
            sys.__excepthook__(type(exc), exc, exc.__traceback__)
        finally:
            sys.stderr = before
    lines = buffer.getvalue().rstrip().splitlines()
    return lines[-1] if lines else f"{type(exc).__name__}: {exc}"


def syntax_error(exc: SyntaxError) -> tuple[str, str]:
    """Where (``path:line:column``) and the offending line with a caret under the fault."""
    where = f"{exc.filename}:{exc.lineno}" + (f":{exc.offset}" if exc.offset else "")
    if not exc.text:
        return where, ""
    line = exc.text.rstrip("\n")
    shown = line.lstrip()
    if not exc.offset:
        return where, f"\n  {shown}"
    indent = len(line) - len(shown)
    end = exc.end_offset if exc.end_offset and exc.end_offset > exc.offset else exc.offset + 1
    caret = " " * max(exc.offset - 1 - indent, 0) + "^" * (end - exc.offset)
    return where, f"\n  {shown}\n  {caret}"


def failed_to_load(
    what: str, exc: BaseException, path: Path | None, short: str | None = None
) -> str:
    """``what`` (``job file jobs/ads.py``) failed: where in the user's code (``path``'s
    deepest frame, else the deepest frame outside weir and the import machinery), Python's
    message, and that line; ``short`` (``the job file``) stands for ``what`` when the place is
    in ``path``, which it names already."""
    if isinstance(exc, SyntaxError):
        where, context = syntax_error(exc)
        filename = exc.filename
    else:
        frame = _user_frame(exc.__traceback__, path)
        if frame is None:
            return f"{what} failed to load: {python_says(exc)}"
        filename, lineno = frame
        where = f"{filename}:{lineno}"
        line = linecache.getline(filename, lineno).strip()
        context = f"\n  {line}" if line else ""
    if short and path is not None and filename and Path(filename).resolve() == path.resolve():
        what = short
    return f"{where}: {what} failed to load: {python_says(exc)}{context}"


def _user_frame(tb: TracebackType | None, path: Path | None) -> tuple[str, int] | None:
    found: tuple[str, int] | None = None
    wanted = None if path is None else str(path.resolve())
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if _is_users(filename, wanted):
            found = (filename, tb.tb_lineno)
        tb = tb.tb_next
    return found


def _is_users(filename: str, wanted: str | None) -> bool:
    if filename.startswith("<"):
        return False  # <frozen importlib._bootstrap>, <string>
    resolved = Path(filename).resolve()
    if wanted is not None:
        return str(resolved) == wanted
    inside = any(resolved.is_relative_to(root) for root in _WEIR)
    return not inside and "site-packages" not in resolved.parts
