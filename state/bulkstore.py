"""A backfill's SST files in storage: a directory or ``s3://BUCKET/PREFIX`` (``objectstore``).

``weir backfill`` leaves ``kg-<n>.sst`` objects (one per key group) and a manifest,
``files.json``, naming each with its size and CRC-32 (zlib's, as checkpoints use). Whoever loads
them (a savepoint build, a running job's workers) downloads the files of its key groups and
checks both numbers as the bytes arrive, so a torn upload or a corrupted copy is refused before
RocksDB sees it. The manifest is integrity, not trust: a live load still checks every entry of
every file (``bulkload``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from weir.base.errors import StateError
from weir.base.files import private_dir
from weir.state.bulkload import key_group_of
from weir.state.keygroups import KeyGroupRange
from weir.state.objectstore import ObjectStore, StorageLocation, open_store

MANIFEST = "files.json"
_FIX = "write the backfill again with weir backfill"


@dataclass(frozen=True, slots=True)
class SstObject:
    """One key group's SST file as stored: its object name, size and CRC-32."""

    name: str
    key_group: int
    size: int
    crc32: int

    def to_json(self) -> dict[str, int]:
        return {"size": self.size, "crc32": self.crc32}


def manifest_bytes(files: Iterable[SstObject]) -> bytes:
    listed = {f.name: f.to_json() for f in sorted(files, key=lambda f: f.key_group)}
    return json.dumps({"files": listed}, indent=1).encode()


def read_manifest(store: ObjectStore) -> dict[str, SstObject]:
    """The files ``store``'s manifest lists (by name); ``StateError`` when it is missing or
    names anything but ``kg-<n>.sst`` with a size and a CRC-32."""
    if not store.exists(MANIFEST):
        raise StateError(f"{store.url}/{MANIFEST} is missing, so the backfill is not complete; "
                         f"{_FIX}")  # fmt: skip
    try:
        listed = json.loads(store.get_bytes(MANIFEST))["files"]
        out = {}
        for name, about in listed.items():
            kg = key_group_of(name)
            if kg is None:
                raise ValueError(f"{name!r} is not a key group's file (kg-<n>.sst)")
            out[name] = SstObject(name, kg, int(about["size"]), int(about["crc32"]))
        return out
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise StateError(f"{store.url}/{MANIFEST} is not a backfill manifest ({exc}); "
                         f"{_FIX}") from None  # fmt: skip


def stored_files(where: StorageLocation) -> list[str]:
    """The ``kg-*.sst``-like objects directly in ``where``, by name (what is there, whatever
    the manifest says)."""
    top = where.name
    keys = open_store(where.parent).sizes(top)
    names = (k.removeprefix(f"{top}/") for k in keys if k.count("/") == 1)
    return sorted(n for n in names if n.startswith("kg-") and n.endswith(".sst"))


def fetch_ssts(
    where: str | StorageLocation, key_groups: KeyGroupRange, into: Path
) -> list[tuple[int, Path]]:
    """Download the backfill files of ``key_groups`` under ``where`` into the directory
    ``into``, each checked against the manifest's size and CRC-32; returns them in key-group
    order. ``StateError`` names the first file that is missing or differs."""
    store = open_store(where)
    wanted = [f for f in read_manifest(store).values() if f.key_group in key_groups]
    private_dir(into)
    fetched = []
    for f in sorted(wanted, key=lambda f: f.key_group):
        dst = into / f.name
        crc = store.get_file(f.name, dst)
        size = dst.stat().st_size
        if size != f.size or crc != f.crc32:
            raise StateError(
                f"backfill file {store.url}/{f.name} has {size} bytes and CRC-32 {crc}, its "
                f"manifest says {f.size} and {f.crc32}: it changed or was cut short; {_FIX}"
            )
        fetched.append((f.key_group, dst))
    return fetched


__all__ = ["MANIFEST", "SstObject", "fetch_ssts", "manifest_bytes", "read_manifest", "stored_files"]
