"""A plain job's JSONL read as columns (``engine/spark/columnar.py``) gives what the line path
gives: the same pairs in the same order, the same late and dead counts and max event time, and
the same dead letters, byte for byte. The file mixes clean blocks with every kind of line the
two JSON readers could take differently, so both of the column path's branches run. And the
numpy selector keeps the pairs the streaming rule, applied pair by pair, keeps."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from weir.engine.runtime.loader import load_job
from weir.engine.spark.columnar import ColumnReader, PlainJob, column_batches, plain_job
from weir.engine.spark.inputs import file_batches
from weir.engine.spark.pairs import pairs_of_split
from weir.engine.spark.plan import Plan, backfill_operator
from weir.state.layout import MAX_KEY_BYTES

JOB = """
from weir import Job, WatermarkStrategy, agg, sources, windows
job = Job("cols")
(
    job.source(sources.jsonl("unused.jsonl"), timestamp="ts",
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=200))
    .key_by("id")
    .window({window}, allowed_lateness_ms={lateness})
    .aggregate("stats", n=agg.count(), total=agg.sum("value"), hi=agg.max("v2"))
)
"""
WINDOWS = {
    "tumbling": "windows.tumbling(ms=1_000)",
    "tumbling-offset": "windows.tumbling(ms=700, offset_ms=-300)",
    "sliding": "windows.sliding(size_ms=1_000, slide_ms=300)",
    "cumulate": "windows.cumulate(size_ms=2_000, step_ms=500)",
}
MIN, MAX = -(2**63), 2**63 - 1
# lines each reader could take differently from orjson: every one must end as the line path
# ends it (a dead letter, a late or a kept record)
ODD = [
    b"{not json}",
    b"",
    b"   ",
    b'{"id":"a","ts":5,"value":1,"v2":2} {"id":"b","ts":6,"value":1,"v2":2}',
    b'{"id":"a","ts":5,"value":1,"v2":2,"x":NaN}',
    b'{"id":"a","ts":5,"value":1,"v2":2,"x":-Infinity}',
    b'{"id":"a","ts":5,"value":1,"v2":2,"x":1.8e308}',
    b'{"id":"a","ts":5,"value":1,"v2":2,"x":' + b"9" * 320 + b"}",
    b'{"id":"a","ts":5,"value":1,"v2":2,"x":"\xff"}',
    b'{"id":"a","ts":5,"value":1,"v2":2,"x":' + b"[" * 1100 + b"]" * 1100 + b"}",
    b'{"id":7,"ts":5,"value":1,"v2":2}',
    b'{"id":"a","ts":5.0,"value":1,"v2":2}',
    b'{"id":"a","ts":5,"value":1.5,"v2":2}',
    b'{"id":"a","ts":5,"value":true,"v2":2}',
    b'{"id":"a","ts":5,"v2":2}',
    b'{"id":"a","ts":5,"value":1,"v2":null}',
    b'{"id":"a","value":1,"v2":2}',
    b'{"id":"a","id":"b","ts":5,"value":1,"v2":2}',
    b'{"id":"' + b"k" * MAX_KEY_BYTES + b'","ts":5,"value":1,"v2":2}',
    b'{"id":"' + b"k" * (MAX_KEY_BYTES + 1) + b'","ts":5,"value":1,"v2":2}',
    b'{"id":"' + "é".encode() * (MAX_KEY_BYTES // 2 + 1) + b'","ts":5,"value":1,"v2":2}',
    b'{"id":"a","ts":5,"value":18446744073709551615,"v2":2}',
    b'{"id":"a","ts":5,"value":1,"v2":2}\r',
    b"[1, 2]",
    b'\xef\xbb\xbf{"id":"a","ts":5,"value":1,"v2":2}',
    b'{"id":"a","ts":' + str(MIN).encode() + b',"value":1,"v2":2}',
    b'{"id":"a","ts":9223372036854775808,"value":1,"v2":2}',
]
# the end of time: after it every window is late, so it ends the file, in a clean block
END = [b'{"id":"a","ts":' + str(t).encode() + b',"value":1,"v2":2}' for t in (MAX - 1, MAX)]


def _lines(seed: int, n: int) -> list[bytes]:
    """Out-of-order events (some far behind: late), large and negative values, unicode keys,
    and now and then an odd line, at random places."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        if rng.random() < 0.01:
            out.append(rng.choice(ODD))
            continue
        lag = rng.randrange(2_000, 9_000) if rng.random() < 0.05 else rng.randrange(0, 250)
        rec = {"id": rng.choice(["a", "b", "c", "é-ü", "k\u0000", "long" * 20]),
               "event": "x" * rng.randrange(0, 40), "ts": i * 7 - lag,
               "value": rng.choice([1, -3, 2**53 + 1, 2**62, -(2**63)]),
               "v2": rng.randrange(-50, 50)}  # fmt: skip
        out.append(orjson.dumps(rec))
    return out


def _run(tmp: Path, name: str, job: Path, src: Path, plain: PlainJob | None, **window: Any) -> Any:
    out = tmp / name
    for sub in ("sst", "stats", "errors"):
        (out / sub).mkdir(parents=True)
    plan = Plan(str(job), "cols", "stats", 128, window.get("from_ms"), window.get("to_ms"),
                str(out))  # fmt: skip
    batches = (
        file_batches(str(src), "jsonl")
        if plain is None
        else column_batches(str(src), plain, block_bytes=3_000)
    )
    cols: dict[str, list[Any]] = {}
    for batch in pairs_of_split(plan, str(src), batches, plain):
        for k, v in batch.items():
            cols.setdefault(k, []).extend(v.tolist() if hasattr(v, "tolist") else list(v))
    stats = [json.loads(p.read_text()) for p in (out / "stats").glob("*.json")]
    # the chain writes a batch's dead letters stage by stage, so where batches end moves them
    # (in streaming too): compared as sorted lines
    dead = sorted(b"".join(p.read_bytes() for p in out.glob("dead-*.jsonl")).splitlines())
    return cols, stats, dead


@pytest.mark.parametrize("window", list(WINDOWS))
@pytest.mark.parametrize(("lateness", "bounds"), [(0, {}), (400, {"from_ms": 300, "to_ms": 9_000})])
def test_columns_give_the_line_paths_pairs_counts_and_dead_letters(
    tmp_path: Path, window: str, lateness: int, bounds: dict[str, int]
) -> None:
    job = tmp_path / "job.py"
    job.write_text(JOB.format(window=WINDOWS[window], lateness=lateness))
    src = tmp_path / "in.jsonl"
    lines = _lines(len(window) + lateness, 3_000) + END
    src.write_bytes(b"\n".join(lines))  # no final newline
    loaded = load_job(job)
    plain = plain_job(loaded, backfill_operator(loaded, None))
    assert plain == PlainJob("ts", "id", ("value", "v2"))
    seen = list(column_batches(str(src), plain, block_bytes=3_000))
    tables = sum(1 for b in seen if hasattr(b, "num_rows"))
    assert tables > 50 and len(seen) - tables > 5  # both branches ran, many times

    want = _run(tmp_path, "lines", job, src, None, **bounds)
    got = _run(tmp_path, "columns", job, src, plain, **bounds)
    assert got[0] == want[0]  # every pair, in order, every column (ints stay ints: *__int)
    assert got[1] == want[1]  # late, dead, max event time
    assert got[2] == want[2]  # the dead letters, byte for byte
    assert want[1][0]["late"] > 20 and want[1][0]["dead"] >= 5 and len(want[0]["key"]) > 1_000


FILTERED = JOB.replace(
    '.key_by("id")',
    '.filter(col("event").str.starts_with("xxx") | (col("v2") > 30))'
    '.filter(col("value") // col("v2") != 3).key_by("id")',
).replace("from weir import", "from weir import col,")


def test_expression_filters_run_on_the_columns_as_the_line_path_runs_them(tmp_path: Path) -> None:
    """A job whose filters are expressions stays plain: the blocks where they fail on no row
    they reach are read as columns, the others (v2 == 0: a division by zero) go line by line,
    and the pairs, counts and dead letters are the line path's."""
    job = tmp_path / "job.py"
    job.write_text(FILTERED.format(window=WINDOWS["sliding"], lateness=300))
    src = tmp_path / "in.jsonl"
    lines = _lines(11, 3_000) + END
    src.write_bytes(b"\n".join(lines))
    loaded = load_job(job)
    plain = plain_job(loaded, backfill_operator(loaded, None))
    assert plain is not None and len(plain.filters) == 2
    seen = list(column_batches(str(src), plain, block_bytes=3_000))
    tables = [b for b in seen if hasattr(b, "num_rows")]
    assert len(tables) > 10 and len(seen) - len(tables) > 10  # both branches, many times
    kept = sum(sum(t.column("__weir_keep").to_pylist()) for t in tables)
    assert 0 < kept < sum(t.num_rows for t in tables)  # the filters dropped some rows

    want = _run(tmp_path, "lines", job, src, None)
    got = _run(tmp_path, "columns", job, src, plain)
    assert got == want
    assert b"division by zero" in b"".join(want[2])


@pytest.mark.parametrize("line", ODD + END, ids=range(len(ODD) + len(END)))
def test_a_block_with_a_line_orjson_reads_otherwise_is_left_to_the_line_path(
    line: bytes,
) -> None:
    """Each odd line, among clean ones: the block is read as columns only if orjson reads every
    line of it as a record with the job's fields of the job's types."""
    clean = b'{"id":"a","ts":5,"value":1,"v2":2}\n'
    block = clean * 3 + line + b"\n" + clean
    table = ColumnReader(PlainJob("ts", "id", ("value", "v2"))).read(block)
    recs = []
    for raw in block.split(b"\n")[:-1]:
        try:
            recs.append(orjson.loads(raw))
        except orjson.JSONDecodeError:
            recs.append(None)
    plain_recs = all(
        type(r) is dict and type(r.get("id")) is str and len(r["id"].encode()) <= MAX_KEY_BYTES
        and all(type(r.get(f)) is int and -(2**63) <= r[f] < 2**63 for f in ("ts", "value", "v2"))
        for r in recs
    )  # fmt: skip
    if table is not None:
        assert plain_recs and table.num_rows == len(recs)
        assert table.column("id").to_pylist() == [r["id"] for r in recs]
        assert table.column("value").to_pylist() == [r["value"] for r in recs]


def test_only_a_job_without_python_between_source_and_window_is_plain(tmp_path: Path) -> None:
    def plain(text: str) -> PlainJob | None:
        path = tmp_path / "j.py"
        path.write_text(text)
        job = load_job(path)
        return plain_job(job, backfill_operator(job, None))

    base = JOB.format(window=WINDOWS["tumbling"], lateness=0)
    assert plain(base) is not None
    assert plain(base.replace('.key_by("id")', '.filter(lambda r: True).key_by("id")')) is None
    with_columns = '.with_columns(v3=col("v2") * 2).key_by("id")'
    assert plain(FILTERED.format(window=WINDOWS["tumbling"], lateness=0)) is not None
    assert plain(FILTERED.format(window=WINDOWS["tumbling"], lateness=0).replace(
        '.key_by("id")', with_columns)) is None  # fmt: skip
    assert plain(base.replace('.key_by("id")', '.key_by(lambda r: r["id"])')) is None
    assert plain(base.replace('timestamp="ts"', 'timestamp=lambda r: r["ts"]')) is None
    assert plain(base.replace('agg.max("v2")', 'agg.max("id")')) is None  # a field read twice
    assert plain(base.replace(WINDOWS["tumbling"], "windows.session(gap_ms=100)")) is None


@pytest.mark.parametrize("window", [*WINDOWS, "sliding-big"])
def test_the_selector_keeps_the_pairs_the_per_record_rule_keeps(
    tmp_path: Path, window: str
) -> None:
    """``Selector`` (numpy) against the streaming rule applied pair by pair, as the backfill
    applied it before: event times all over the 64-bit range, its edges included."""
    from weir.engine.spark.selector import Selector
    from weir.engine.windows import is_late

    spec = WINDOWS.get(window, "windows.sliding(size_ms=2**62, slide_ms=2**61)")
    rng = random.Random(window)
    edges = [MIN, MIN + 1, MAX, MAX - 1, 2**61, -(2**61), 2**62 + 5, -(2**62) - 5, 0, -1]
    for lateness, lo, hi in [(0, None, None), (2**62, -(2**62), 2**62), (999, -5_000, 90_000)]:
        job = tmp_path / f"{lateness}.py"
        job.write_text(JOB.format(window=spec, lateness=lateness))
        op = backfill_operator(load_job(job), None)
        plan = Plan(str(job), "cols", "stats", 128, lo, hi, str(tmp_path))
        for near in (False, True):
            n = 400
            pool = edges if near else list(range(-10_000, 100_000, 7))
            ts = [rng.choice(pool) + (0 if near else rng.randrange(-3, 3)) for _ in range(n)]
            ts = [min(max(t, MIN), MAX) for t in ts]
            wms = [max(rng.choice(ts) - rng.randrange(0, 3_000), MIN) for _ in range(n)]
            for i in rng.sample(range(n), n // 3):  # on the edge: a window's last instant
                end = rng.choice(op.assigner.expand([ts[i]])[0])
                wms[i] = min(end - 1 + lateness + rng.choice([-1, 0, 0, 1]), MAX)
            recs = [{"value": i, "v2": -i} for i in range(n)]
            keys = [f"k{i % 13}" for i in range(n)]
            select = Selector(plan, op, "s")
            got = select.columns(keys, recs, ts, wms)

            ends, origin = op.assigner.expand(ts)
            idx = list(origin) if origin is not None else list(range(len(ends)))
            on = [j for j, i in enumerate(idx) if not is_late(ends[j], lateness, wms[i])]
            late = len(set(idx)) - len({idx[j] for j in on})
            kept = [
                j
                for j in on
                if (lo is None or lo <= ts[idx[j]]) and (hi is None or ts[idx[j]] < hi)
            ]
            assert list(got["end"]) == [ends[j] for j in kept]
            assert list(got["value"]) == [float(idx[j]) for j in kept]
            assert list(got["key"]) == [keys[idx[j]] for j in kept]
            assert select.late == late
