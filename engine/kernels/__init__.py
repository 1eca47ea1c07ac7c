"""Column kernels: compiled (Cython, built by the package's build) with a pure-Python twin each.

One place selects the implementation, as msgpack picks ``_cmsgpack`` or ``fallback`` and PyYAML
``CLoader`` or ``Loader``: ``load()`` returns a ``Kernels`` of one implementation's functions,
and ``KERNELS`` is the one this process uses (loaded on first use). ``WEIR_KERNELS`` chooses:

- unset or ``auto``: the compiled kernels, or the twins when the extension modules are missing
  (a source checkout that was never built), with one WARNING;
- ``python``: the twins;
- ``compiled``: the compiled kernels, and ``KernelsError`` when they are missing.

Example:
    >>> from weir.engine.kernels import load
    >>> load("python").name
    'python'

The kernels and their interfaces (``docs/decisions/0007-columnar-execution.md``):

- ``scan_lines(block, fields)``: the JSONL field scanner (``scan``; ``scan.scan_block`` wraps it);
  ``count_byte(data, byte)``: ``data.count(byte)`` in one vectorised pass, which the file
  reader counts a block's lines with (``sources.file``);
- ``watermarks``, ``tumbling_ends``, ``sliding_expand``, ``lateness``: time in bulk (``timek``);
- ``Interner``: keys to dense ids, key groups, partitions; ``span_groups``, ``list_groups``:
  key groups of a batch's keys without interning them (routing); ``pack_strs``,
  ``gather_spans``: a batch's keys as one buffer and offsets (the exchange) (``intern``);
- ``WindowAcc``: the fold into per-window arrays (``fold``; ``fold.fold_window`` wraps it);
- ``str_equals``, ``str_startswith``, ``str_contains``, ``str_isin``: string predicates
  (``strk``), which the expression evaluator (``expr``) calls;
- ``record_columns(recs, fields)``: fields of decoded records as the scanner's tagged columns
  (``recs``), where per-record steps made dicts.
- ``find_windows(entries, key, crc)``: a key's rows in its bucket's cells (``cellk``), which
  the query API's point lookup calls (``state/cells.py``); ``encode_packed(rows, state_id,
  end, gen)``: packed rows (``cellcodec.PackedRows``) as cells, byte for byte
  ``cellcodec.encode_cells`` (``cellk``), which the state writer calls; ``merge_cells(cells)``:
  one cell's generations (oldest first) as one cell, byte for byte ``cells.merge``.
- ``batch_values(buf, start, first, stop, check_crc)``, ``record_values(...)``: a Kafka fetch's
  record batches as one block of values with their ends and offsets (``kbatch``), which the
  raw Kafka source calls (``sources.kafka_raw``).
"""

from __future__ import annotations

import importlib
import logging
import os
from dataclasses import dataclass
from typing import Any

from weir.base.errors import WeirError
from weir.base.settings import Choice, Setting

logger = logging.getLogger(__name__)
IMPLEMENTATIONS = ("compiled", "python")
# kernel module -> its twin; each pair exports the same names
_MODULES = {
    "_scan": "scan",
    "_timek": "timek",
    "_intern": "intern",
    "_fold": "fold",
    "_strk": "strk",
    "_recs": "recs",
    "_cellk": "cellk",
    "_kbatch": "kbatch",
}
_NAMES = {
    "scan": ("scan_lines", "count_byte"),
    "timek": ("watermarks", "tumbling_ends", "sliding_expand", "lateness"),
    "intern": (
        "Interner",
        "crc32_of",
        "span_groups",
        "list_groups",
        "pack_strs",
        "gather_spans",
    ),
    "fold": ("WindowAcc",),
    "strk": ("str_equals", "str_startswith", "str_contains", "str_isin"),
    "recs": ("record_columns",),
    "cellk": ("find_windows", "encode_packed", "merge_cells"),
    "kbatch": ("batch_values", "record_values"),
}


class KernelsError(WeirError):
    """The kernels asked for cannot be loaded (``WEIR_KERNELS``)."""


@dataclass(frozen=True)
class Kernels:
    """One implementation's kernels (see the module docstring for each)."""

    name: str
    scan_lines: Any
    count_byte: Any
    watermarks: Any
    tumbling_ends: Any
    sliding_expand: Any
    lateness: Any
    Interner: Any
    crc32_of: Any
    span_groups: Any
    list_groups: Any
    pack_strs: Any
    gather_spans: Any
    WindowAcc: Any
    str_equals: Any
    str_startswith: Any
    str_contains: Any
    str_isin: Any
    record_columns: Any
    find_windows: Any
    encode_packed: Any
    merge_cells: Any
    batch_values: Any
    record_values: Any


def _functions(prefix: str, compiled: bool) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for ext, twin in _MODULES.items():
        module = importlib.import_module(f"{prefix}.{ext if compiled else twin}")
        found.update({name: getattr(module, name) for name in _NAMES[twin]})
    return found


# declared once; the reference pages list it with a run's other variables
KERNELS_SETTING = Setting(
    "kernels",
    "the column kernels a process uses: compiled (Cython), python (the pure-Python twins) or "
    "auto (compiled when built, else python, with a WARNING)",
    "auto",
    Choice(("auto", "compiled", "python")),
    env="WEIR_KERNELS",
    env_only=True,
)


def load(choice: str | None = None) -> Kernels:
    """The kernels of ``choice``: ``"compiled"``, ``"python"`` or ``"auto"`` (the compiled ones
    when built, else the twins); default: ``WEIR_KERNELS``, else ``"auto"``.

    Raises:
        KernelsError: ``choice`` is unknown, or ``"compiled"`` and the extension is missing.
    """
    choice = (choice or os.environ.get(KERNELS_SETTING.env) or "auto").strip().lower()
    if choice not in (*IMPLEMENTATIONS, "auto"):
        raise KernelsError(
            f"{KERNELS_SETTING.env}={choice!r} is not a kernel implementation; use compiled, "
            "python or auto (the default)"
        )
    if choice == "python":
        return Kernels(name="python", **_functions(__name__, compiled=False))
    try:
        return Kernels(name="compiled", **_functions(__name__, compiled=True))
    except ImportError as exc:
        if choice == "compiled":
            raise KernelsError(
                f"{KERNELS_SETTING.env}=compiled but the compiled kernels are missing ({exc}); "
                "build them with `pip install -e .` (gcc and the Python headers are needed), or "
                f"set {KERNELS_SETTING.env}=python"
            ) from exc
        logger.warning(
            "kernels=python reason=%s: the compiled kernels are not built; the pure-Python "
            "twins run instead, far slower (reinstall weir to build them)",
            exc,
        )
        return Kernels(name="python", **_functions(__name__, compiled=False))


_loaded: list[Kernels] = []


def __getattr__(name: str) -> Any:
    """``KERNELS``, loaded on first use (PEP 562): the expression IR (``ir``, ``rows``) is
    part of the job API, and building a job loads neither numpy nor the extension modules."""
    if name == "KERNELS":
        if not _loaded:
            _loaded.append(load())
        return _loaded[0]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
