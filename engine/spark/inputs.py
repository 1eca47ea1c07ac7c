"""What a backfill reads: files (JSONL, Parquet, CSV) and Kafka offset ranges.

**Files.** One file is one split, read in order, in batches, in the Spark task that owns it. The
format comes from ``--format`` or from the extension (``.jsonl``/``.json``/``.ndjson``,
``.parquet``, ``.csv``). Parquet and CSV rows become the dicts a JSON object with the same
fields decodes to, so a job's timestamp field, key selector and steps run unchanged:

- CSV: pyarrow infers each column's type over the whole file: numbers become ints or floats,
  ``true``/``false`` booleans, empty unquoted cells ``None``, anything else a string (date-like
  text stays text, as it would in JSON);
- Parquet: values as they are typed; timestamp and date columns become epoch milliseconds (weir's
  event time), decimals floats.

**Kafka.** ``kafka://host:port/topic?from=F&to=T&metadata=true|false`` reads each partition's
offsets ``[from, to)``, fixed when the backfill is planned:

- ``from``: ``earliest`` (the default), ``N`` (offset N in every partition) or ``P:N,P:N``
  (per partition; the partitions it does not name start at ``earliest``);
- ``to``: ``latest`` (the default: each partition's end as a first fetch reports it), ``N`` or
  ``P:N,P:N`` (the others end at ``latest``). ``to`` is exclusive, like Kafka's end offsets;
- numbers past what a partition holds are clamped to it; ``metadata`` is streaming's option
  (default: the job's Kafka source's, else false);
- the TLS and SASL options of every Kafka URL (``engine/kafka_security.py``), over the
  ``WEIR_KAFKA_*`` settings.

Each partition is one split, as when streaming.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weir.base.errors import ConfigError, SourceError
from weir.base.paths import file_path
from weir.base.redact import redact_url
from weir.base.settings import named
from weir.engine.job import Job
from weir.engine.kafka_security import OPTIONS as SECURITY_OPTIONS
from weir.engine.kafka_security import KafkaSecurity, security_of
from weir.engine.sources.base import SourceBatch
from weir.engine.sources.kafka import KafkaSource, url_parts

READ_BATCH = 8192
FORMATS = ("jsonl", "parquet", "csv")
_EXTENSIONS = {
    ".jsonl": "jsonl",
    ".json": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
    ".csv": "csv",
}
_KAFKA_OPTIONS = ("from", "to", "metadata")


@dataclass(frozen=True)
class FileInput:
    path: str
    format: str


@dataclass(frozen=True)
class KafkaInput:
    bootstrap: str
    topic: str
    ranges: dict[int, tuple[int, int]]  # partition -> [from, to)
    metadata: bool
    security: KafkaSecurity = KafkaSecurity()

    def splits(self) -> list[str]:
        """The partitions with something to read, as split names."""
        return [f"{self.topic}/{p}" for p, (a, b) in sorted(self.ranges.items()) if b > a]


@dataclass(frozen=True)
class BackfillInputs:
    """A backfill's ``--input`` values resolved: its files and its Kafka offset ranges (the
    worker's per-channel ``task.channels.Inputs`` is another thing)."""

    files: list[FileInput]
    kafka: list[KafkaInput]


def resolve_inputs(inputs: list[str], fmt: str | None, job: Job) -> BackfillInputs:
    """``--input`` values as files (globs expanded, formats known, Parquet footers read) and
    Kafka ranges (offsets fixed now); every error names the input and the fix."""
    if fmt is not None and fmt not in FORMATS:
        raise ConfigError(f"`format` {fmt!r}: use one of {', '.join(FORMATS)}")
    files: list[FileInput] = []
    kafka: list[KafkaInput] = []
    source = job.sources[0].source if job.sources else None
    metadata = isinstance(source, KafkaSource) and source.metadata
    for raw in inputs:
        if raw.startswith("kafka://"):
            kafka.append(plan_kafka(raw, metadata))
            continue
        for path in _expand(raw):
            f = FileInput(path, format_of(path, fmt))
            if f.format == "parquet":
                _check_parquet(f.path)
            files.append(f)
    if not files and not kafka:
        raise ConfigError("`input` names nothing to read; pass files, globs or kafka:// URLs")
    return BackfillInputs(files, kafka)


def _expand(raw: str) -> list[str]:
    path = file_path(raw, named("input"))
    if path is None:
        raise ConfigError(
            f"`input` {redact_url(raw)!r}: use a path, a file:/// URL or kafka://host:port/topic"
        )
    found = sorted(glob.glob(path)) if any(c in path for c in "*?[") else [path]
    if not found:
        raise ConfigError(f"`input` {raw} matches no file; check the pattern")
    for f in found:
        if not os.path.isfile(f):
            raise ConfigError(
                f"`input` {raw}: {f} is not a file; pass files (JSONL, Parquet, CSV), globs or "
                "kafka://host:port/topic URLs"
            )
    return [os.path.abspath(f) for f in found]


def format_of(path: str, given: str | None) -> str:
    if given is not None:
        return given
    ext = Path(path).suffix.lower()
    fmt = _EXTENSIONS.get(ext)
    if fmt is None:
        raise ConfigError(
            f"`input` {path}: cannot tell its format from the extension {ext or '(none)'!r}; "
            "pass `format` jsonl|parquet|csv, or name it .jsonl/.json/.ndjson, .parquet or .csv"
        )
    return fmt


def _check_parquet(path: str) -> None:
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    try:
        pq.read_metadata(path)
    except (OSError, pa.ArrowException) as exc:
        raise ConfigError(
            f"`input` {path}: not a readable Parquet file ({exc}); check the file, or pass "
            "`format` if it holds JSONL or CSV"
        ) from None


# -- files, in the Spark task that owns one -------------------------------------------------------


def file_batches(path: str, fmt: str, size: int = READ_BATCH) -> Iterator[SourceBatch]:
    """The file's records in order, ``size`` at a time, then an end batch."""
    import pyarrow as pa

    try:
        if fmt == "jsonl":
            yield from _jsonl_batches(path, size)
            return
        table_batches = (
            _parquet_batches(path, size) if fmt == "parquet" else _csv_batches(path, size)
        )
        for b in table_batches:
            yield SourceBatch(json_records(b), decoded=True)
        yield SourceBatch([], decoded=True, end=True)
    except (OSError, pa.ArrowException) as exc:
        raise SourceError(
            f"`input` {path}: cannot read it as {fmt} ({exc}); check the file or `format`"
        ) from None


def _jsonl_batches(path: str, size: int) -> Iterator[SourceBatch]:
    from weir.engine.sources.file import JsonlSource

    reader = JsonlSource(Path(path)).open(path)
    try:
        while True:
            batch = reader.read_batch(size)
            yield batch
            if batch.end:
                return
    finally:
        reader.close()


def _parquet_batches(path: str, size: int) -> Iterator[Any]:
    import pyarrow.parquet as pq

    with pq.ParquetFile(path) as pf:
        yield from pf.iter_batches(batch_size=size)


def _csv_batches(path: str, size: int) -> Iterator[Any]:
    """Types inferred over the whole file (pyarrow's streaming reader would fix them from the
    first block and fail on a later one); columns it reads as dates or times are read again as
    the text they are. Only an empty, unquoted cell is null (``""`` is an empty string, and
    ``NA`` a string)."""
    import pyarrow as pa
    import pyarrow.csv as pcsv  # type: ignore[import-untyped]

    nulls = {"null_values": [""], "strings_can_be_null": True, "quoted_strings_can_be_null": False}
    table = pcsv.read_csv(path, convert_options=pcsv.ConvertOptions(**nulls))
    temporal = {f.name: pa.string() for f in table.schema if pa.types.is_temporal(f.type)}
    if temporal:
        options = pcsv.ConvertOptions(column_types=temporal, **nulls)
        table = pcsv.read_csv(path, convert_options=options)
    yield from table.to_batches(max_chunksize=size)


def json_records(batch: Any) -> list[dict[str, Any]]:
    """An Arrow batch's rows as the dicts JSON objects with those fields decode to: temporal
    columns become epoch milliseconds, decimals floats, the rest as pyarrow gives them."""
    cols = [_json_column(c) for c in batch.columns]
    if any(c is not o for c, o in zip(cols, batch.columns, strict=True)):
        import pyarrow as pa

        batch = pa.RecordBatch.from_arrays(cols, names=batch.schema.names)
    rows: list[dict[str, Any]] = batch.to_pylist()
    return rows


def _json_column(col: Any) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    t = col.type
    if pa.types.is_timestamp(t):
        return col.cast(pa.timestamp("ms", t.tz), safe=False).cast(pa.int64())
    if pa.types.is_date32(t):
        return pc.multiply(col.cast(pa.int32()).cast(pa.int64()), 86_400_000)
    if pa.types.is_date64(t):
        return col.cast(pa.int64())
    if pa.types.is_duration(t):
        return col.cast(pa.duration("ms"), safe=False).cast(pa.int64())
    if pa.types.is_decimal(t):
        return col.cast(pa.float64())
    return col


# -- Kafka ranges, on the driver ------------------------------------------------------------------

Offsets = tuple[str | int, dict[int, int]]  # the default (a word or a number), per partition


def parse_kafka_url(url: str) -> tuple[str, str, Offsets, Offsets, bool | None]:
    """``kafka://host:port/topic?from=&to=&metadata=`` -> bootstrap, topic, from, to, metadata
    (None: not given)."""
    found = url_parts(url)
    shown = redact_url(url)
    if found is None:
        raise ConfigError(f"`input` {shown}: use kafka://host:port/topic?from=earliest&to=latest")
    bootstrap, topic, options = found
    unknown = sorted(set(options) - set(_KAFKA_OPTIONS) - set(SECURITY_OPTIONS))
    if unknown:
        raise ConfigError(
            f"`input` {shown}: unknown option {unknown[0]!r}; a backfill reads offsets "
            f"[from, to) and takes {', '.join(_KAFKA_OPTIONS)} and the security options "
            f"{', '.join(SECURITY_OPTIONS)}"
        )
    metadata = options.get("metadata")
    if metadata is not None and metadata.lower() not in ("true", "false", "1", "0"):
        raise ConfigError(f"`input` {shown}: metadata={metadata!r}; use metadata=true or false")
    return (
        bootstrap,
        topic,
        _offsets(shown, "from", options.get("from", "earliest"), "earliest"),
        _offsets(shown, "to", options.get("to", "latest"), "latest"),
        None if metadata is None else metadata.lower() in ("true", "1"),
    )


def _offsets(url: str, name: str, raw: str, word: str) -> Offsets:
    raw = raw.strip()
    if raw == word:
        return word, {}
    if raw.isdigit():
        return int(raw), {}
    per: dict[int, int] = {}
    for item in raw.split(","):
        p, sep, n = (s.strip() for s in item.partition(":"))
        if not (sep and p.isdigit() and n.isdigit()):
            raise ConfigError(
                f"`input` {url}: {name}={raw!r} is not an offset; use {name}={word}, {name}=N "
                f"(offset N in every partition) or {name}=P:N,P:N (per partition)"
            )
        per[int(p)] = int(n)
    return word, per


def plan_kafka(url: str, default_metadata: bool = False) -> KafkaInput:
    """Fix each partition's offset range now, from the broker's first and end offsets."""
    bootstrap, topic, (from_all, from_per), (to_all, to_per), metadata = parse_kafka_url(url)
    found = url_parts(url)
    security = security_of(url, found[2] if found else {})
    source = KafkaSource(bootstrap, topic, security=security)
    bounds = source.offset_bounds()
    missing = sorted((set(from_per) | set(to_per)) - set(bounds))
    if missing:
        raise ConfigError(
            f"`input` {redact_url(url)}: topic {topic!r} has no partition {missing[0]} (it has "
            f"{', '.join(map(str, sorted(bounds)))})"
        )
    ranges: dict[int, tuple[int, int]] = {}
    for p, (first, end) in sorted(bounds.items()):
        a = from_per.get(p, from_all)
        b = to_per.get(p, to_all)
        if isinstance(a, int) and isinstance(b, int) and a > b:
            raise ConfigError(
                f"`input` {redact_url(url)}: from={a} is after to={b} in partition {p}"
            )
        lo = max(first, a) if isinstance(a, int) else first
        hi = min(end, b) if isinstance(b, int) else end
        ranges[p] = (min(lo, hi), hi)
    chosen = default_metadata if metadata is None else metadata
    return KafkaInput(bootstrap, topic, ranges, chosen, security)
