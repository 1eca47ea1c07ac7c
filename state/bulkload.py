"""Checking SST files before a running job bulk-loads them (a live backfill).

The files come from outside the job (``weir backfill`` writes them; an admin request names
them), so nothing in them is trusted, neither their names nor what a request says they hold.
Each file is read key by key into a scratch RocksDB (rocksdict has no SST reader; ingesting the
file into an empty instance and iterating it is one) and every entry is checked:

- its key group (the key's first 2 bytes) is the one the file is named for, and one the loading
  worker owns;
- its state id is the operator's windows or their cleanup timers, nothing else;
- a window cell's key and every row of its value read back (``state/cells.py``; a session's
  key is well formed and its value a msgpack list), as the operator stores them; a timer key is
  well formed and its value a list of keys.

The entries that pass are written again, with ``SstFileWriter``, into a file of the worker's own
(``staged``), and that file is what gets ingested: a file swapped after its check, or one
carrying deletions or range tombstones the check cannot see by iterating, loads nothing
unchecked. The window ends found (windows and timers) are the backfill's range as its files say,
whatever the request claimed.
"""

from __future__ import annotations

import re
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocksdict import IngestExternalFileOptions, Options, Rdict, SstFileWriter

from weir.base.errors import StateError
from weir.state import cells, layout, slotpack
from weir.state.keygroups import KeyGroupRange

_HH = struct.Struct(">HH")
_TIMER_KEY_BYTES = 20
_KG_FILE = re.compile(r"kg-(\d+)\.sst")
BACKFILL_GLOB = "kg-*.sst"  # wider than a key group's name: the caller decides what a misfit means


def key_group_of(path: Path | str) -> int | None:
    """The key group a backfill file is named for (``kg-<n>.sst``; None: its name is not one)."""
    m = _KG_FILE.fullmatch(Path(path).name)
    return int(m.group(1)) if m else None


def backfill_files(sst_dir: Path) -> list[tuple[int, Path]]:
    """The files of ``sst_dir`` named for a key group, each with that key group, in name order."""
    named = ((key_group_of(p), p) for p in sorted(sst_dir.glob(BACKFILL_GLOB)))
    return [(kg, p) for kg, p in named if kg is not None]


@dataclass(frozen=True, slots=True)
class LoadRules:
    """What a worker accepts: its key groups, and the operator's two state ids."""

    op: str
    key_groups: KeyGroupRange
    windows_sid: int
    timers_sid: int
    cells: bool = True  # windows are cells (``state/cells.py``); sessions are rows


@dataclass(frozen=True, slots=True)
class StagedFile:
    """A checked copy of ``source`` at ``path`` (None: the file held no entry)."""

    source: Path
    path: Path | None
    entries: int
    min_end: int | None
    max_end: int | None


def stage_sst(
    source: Path, key_group: int, rules: LoadRules, into: Path, shown: Path | None = None
) -> StagedFile:
    """Check every entry of ``source`` (the file of ``key_group``) against ``rules`` and write
    them to ``into``. ``StateError`` names the file (``shown``, when ``source`` is a private
    copy of it) and the first entry refused."""
    scratch = into.with_name(f".scan-{into.name}")
    shutil.rmtree(scratch, ignore_errors=True)
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    db = Rdict(str(scratch), opts)
    try:
        label = source if shown is None else shown
        try:
            db.ingest_external_file([str(source)], IngestExternalFileOptions())
        except Exception as exc:  # rocksdict raises plain Exception subclasses
            raise StateError(
                f"backfill file {label} is not an SST file weir can read ({exc}); write "
                "backfills with weir backfill"
            ) from exc
        return _copy_checked(db, label, key_group, rules, into)
    finally:
        db.close()
        shutil.rmtree(scratch, ignore_errors=True)


def _copy_checked(
    db: Rdict, source: Path, key_group: int, rules: LoadRules, into: Path
) -> StagedFile:
    writer: SstFileWriter | None = None
    ends: list[int] = []
    count = 0
    it = db.iter()
    it.seek_to_first()
    while it.valid():
        key, value = bytes(it.key()), bytes(it.value())
        ends.append(_check_entry(source, key, value, key_group, rules))
        if writer is None:
            writer = SstFileWriter(Options(raw_mode=True))
            writer.open(str(into))
        writer[key] = value
        count += 1
        it.next()
    if writer is None:
        return StagedFile(source, None, 0, None, None)
    writer.finish()
    return StagedFile(source, into, count, min(ends), max(ends))


def _check_entry(source: Path, key: bytes, value: bytes, key_group: int, rules: LoadRules) -> int:
    """The window end (or timer time) of one entry; ``StateError`` when it is not allowed."""
    if len(key) < _HH.size:
        raise StateError(f"backfill file {source} holds a malformed key {key[:32]!r}")
    kg, sid = _HH.unpack_from(key)
    if kg != key_group or kg not in rules.key_groups:
        raise StateError(
            f"backfill file {source} holds a key of key group {kg}; it may hold only key "
            f"group {key_group}, its own, and this worker loads key groups "
            f"{rules.key_groups.start}-{rules.key_groups.end}"
        )
    if sid == rules.windows_sid and rules.cells:
        return _check_cell(source, key, value)
    if sid == rules.windows_sid:
        try:
            _, _, _, end = layout.decode_state_key(key)
        except (StateError, struct.error):
            raise StateError(
                f"backfill file {source} holds a malformed window key {key!r}"
            ) from None
        _expect(source, key, value, list, "a window's accumulators")
        return end
    if sid == rules.timers_sid:
        if len(key) != _TIMER_KEY_BYTES:
            raise StateError(f"backfill file {source} holds a malformed timer key {key!r}")
        keys = _expect(source, key, value, list, "a timer's list of keys")
        if not all(isinstance(k, str) for k in keys):
            raise StateError(f"backfill file {source}: timer {key!r} lists a key that is no str")
        return layout.decode_timer_key(key)[2]
    raise StateError(
        f"backfill file {source} holds state id {sid}; operator {rules.op!r} loads only state "
        f"ids {rules.windows_sid} (windows) and {rules.timers_sid} (their cleanup timers)"
    )


def _check_cell(source: Path, key: bytes, value: bytes) -> int:
    """A window cell's end; ``StateError`` unless its key and every row of it read back."""
    try:
        end = cells.decode_cell_key(key)[3]
        cells.Cell(value).rows()
    except Exception as exc:  # msgpack, numpy and struct raise several types for bad bytes
        raise StateError(
            f"backfill file {source} holds a malformed window cell {key[:40]!r}: {exc}"
        ) from exc
    return end


def _expect(source: Path, key: bytes, value: bytes, kind: type, what: str) -> Any:
    try:
        decoded = slotpack.unpackb(value)
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        raise StateError(
            f"backfill file {source}: the value of {key[:40]!r} is not msgpack ({exc})"
        ) from exc
    if not isinstance(decoded, kind):
        raise StateError(f"backfill file {source}: the value of {key[:40]!r} is not {what}")
    return decoded


__all__ = [
    "BACKFILL_GLOB",
    "LoadRules",
    "StagedFile",
    "backfill_files",
    "key_group_of",
    "stage_sst",
]
