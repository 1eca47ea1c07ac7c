"""Where a backfill's Spark tasks put what they write (``--work-dir``): under ``<work-dir>/<job>``,
``sst/kg-<n>.sst`` (one per key group), ``stats/<split>.json``, ``errors/<split>.txt`` and the
dead letters.

A directory is written in place: on a cluster it must be one that every executor and the driver
mount at the same path. With ``s3://BUCKET/PREFIX`` a task writes each file on its own disk,
uploads it and removes it, so nothing on an executor is needed afterwards; the S3 settings
travel in the plan (a task must not depend on its executor's environment).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from weir.base.files import private_dir
from weir.engine.spark.plan import Plan
from weir.state.bulkstore import MANIFEST, SstObject, manifest_bytes
from weir.state.objectstore import (
    S3Bucket,
    StorageLocation,
    file_crc,
    open_store,
    storage_location,
)

SUBDIRS = ("sst", "stats", "errors", "dead")
S3_SETTINGS = ("AWS_", "WEIR_S3_")  # what configures S3 (``objectstore.S3Bucket``)


def sst_name(kg: int) -> str:
    return f"kg-{kg:05d}.sst"


class TaskOutput:
    """A Spark task's view of the backfill's output (``plan.out_dir``)."""

    def __init__(self, plan: Plan) -> None:
        self.where: StorageLocation = storage_location(plan.out_dir, "`work_dir`")
        self._bucket = S3Bucket(self.where, plan.storage_env) if self.remote else None

    @property
    def remote(self) -> bool:
        return self.where.scheme == "s3"

    def _local(self, key: str) -> Path:
        assert self.where.path is not None
        return self.where.path / key

    def put_text(self, key: str, text: str) -> None:
        """A small object (stats, an error), ``key`` relative to the output."""
        if self._bucket is not None:
            self._bucket.put_bytes(key, text.encode())
        else:
            self._local(key).write_text(text)

    @contextmanager
    def sst(self, kg: int) -> Iterator[tuple[Path, list[SstObject]]]:
        """A path to write key group ``kg``'s SST file at; on leaving, the file is stored and
        its description appended to the yielded list."""
        name = sst_name(kg)
        stored: list[SstObject] = []
        if self._bucket is None:
            path = self._local(f"sst/{name}")
            yield path, stored
            stored.append(SstObject(name, kg, path.stat().st_size, file_crc(path)))
            return
        scratch = Path(tempfile.mkdtemp(prefix="weir-backfill-"))
        try:
            path = scratch / name
            yield path, stored
            size, crc = self._bucket.put_file(f"sst/{name}", path)
            stored.append(SstObject(name, kg, size, crc))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    @contextmanager
    def dead_letters(self, split_file: str) -> Iterator[Path]:
        """A local JSONL file for a split's dead letters; with S3, uploaded on leaving when
        anything was written (the directory case appends to one file per Python worker)."""
        if self._bucket is None:
            yield self._local(f"dead-{os.getpid()}.jsonl")
            return
        scratch = Path(tempfile.mkdtemp(prefix="weir-backfill-"))
        try:
            path = scratch / f"{split_file}.jsonl"
            yield path
            if path.exists() and path.stat().st_size:
                self._bucket.put_file(f"dead/{path.name}", path)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


_OUTPUTS: dict[tuple[str, tuple[tuple[str, str], ...]], TaskOutput] = {}


def task_output(plan: Plan) -> TaskOutput:
    """The task's output, made once per Python worker (one S3 client for all its files)."""
    key = (plan.out_dir, tuple(sorted(plan.storage_env.items())))
    out = _OUTPUTS.get(key)
    if out is None:
        out = _OUTPUTS[key] = TaskOutput(plan)
    return out


class BackfillOutput:
    """The driver's view of the output: cleared before a run, read after it (stats, errors),
    and finished with the manifest of the SST files the tasks stored (``state.bulkstore``)."""

    def __init__(self, out_dir: Path | str) -> None:
        where = storage_location(out_dir, "`work_dir`")
        if where.path is not None:  # the tasks get an absolute path
            where = StorageLocation("file", path=where.path.resolve())
        self.where = where
        self.store = open_store(where)

    @property
    def url(self) -> str:
        return self.where.url

    @property
    def sst_url(self) -> str:
        return self.where.child("sst").url

    def task_env(self) -> dict[str, str]:
        """What a task needs to reach the output: the S3 settings of this process."""
        if self.where.scheme != "s3":
            return {}
        return {k: v for k, v in os.environ.items() if k.startswith(S3_SETTINGS)}

    def clear(self) -> None:
        """Remove what an earlier backfill left. A directory's parts are made private: a live
        job loads these files, so nobody else may write them."""
        if self.where.path is None:
            for sub in SUBDIRS:
                self.store.delete_prefix(sub)
            return
        for sub in SUBDIRS[:3]:
            shutil.rmtree(self.where.path / sub, ignore_errors=True)
            private_dir(self.where.path / sub)

    def texts(self, sub: str) -> list[str]:
        """The small objects the tasks wrote under ``sub`` (stats, errors), by name."""
        return [self.store.get_bytes(k).decode() for k in sorted(self.store.sizes(sub))]

    def write_manifest(self, written: list[dict[str, Any]]) -> None:
        files = [
            SstObject(str(w["path"]), int(w["kg"]), int(w["size"]), int(w["crc32"]))
            for w in written
            if w["path"] is not None
        ]
        self.store.put_bytes(f"sst/{MANIFEST}", manifest_bytes(files))


__all__ = ["SUBDIRS", "BackfillOutput", "TaskOutput", "sst_name", "task_output"]
