"""Flink's window-aggregate SQL IT cases, ported: each Flink test's query as a weir SQL view and as
the equivalent job-API job, both giving Flink's expected rows, at parallelism 1, 2 and 4
(``weir.testing``'s in-process workers). They cover NULL group keys (printed ``null``), NULLs
skipped by SUM/MIN/MAX (a window of only NULLs is NULL), COUNT(col) and COUNT(DISTINCT), AVG over
integers and CAST of it, window offsets (positive and negative), HOP with gaps, CUMULATE,
``window_time`` and ``*_ROWTIME``, allowed lateness with updates, and SQL's watermark
(``max(ts) - delay``). Data and expected rows: ``tests/support/flink_sql_cases.py`` names the
files."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.flink_sql_cases import (
    MINIBATCH_DATA,
    MINIBATCH_TABLE,
    TIMESTAMP_DATA,
    TIMESTAMP_TABLE,
    WINDOW_DATA,
    WINDOW_TABLE,
    ConcatDistinct,
    DistinctCount,
    Format,
    WeightedAvg,
    dec2,
    flink_row,
    parts,
    row,
    text,
    time,
)
from weir import Job, WatermarkStrategy, agg, sources, testing, windows
from weir.engine.sql import load_script
from weir.engine.streams import DataStream

DAY, HOUR = 86_400_000, 3_600_000
SKIP = "skip"


@dataclass(frozen=True)
class Case:
    """One Flink test: ``view`` is its SELECT over ``table``; ``python`` builds the same view
    (operator ``v``) in the job API; ``expected`` are Flink's rows, ``columns`` how a result
    prints as one; ``upsert``: Flink's sink keeps the last row per window."""

    flink_test: str
    table: str
    view: str
    python: Callable[[], Job]
    columns: Sequence[tuple[str, Format]]
    expected: Sequence[str]
    events: Sequence[dict[str, Any]]
    settings: str = ""
    upsert: bool = False


def _source(delay_ms: int) -> tuple[Job, DataStream]:
    """A job API source with SQL's watermark, ``WATERMARK FOR ts AS ts - INTERVAL 'delay'``."""
    job = Job("flink")
    return job, job.source(
        sources.jsonl("/unused.jsonl"),
        timestamp="ts",
        watermarks=WatermarkStrategy.sql_delay(ms=delay_ms),
    )


STATS = "COUNT(*) AS c, SUM(bigdec) AS s, MAX(`double`) AS mx, MIN(`float`) AS mn, COUNT(DISTINCT `string`) AS cd, concat_distinct_agg(`string`) AS cat"  # noqa: E501
STATS_COLUMNS: list[tuple[str, Format]] = [
    ("c", text), ("s", dec2), ("mx", text), ("mn", text), ("cd", text), ("cat", parts),
]  # fmt: skip
KEYED: list[tuple[str, Format]] = [("key", text), ("start", time), ("end", time)]


def _stats() -> dict[str, Any]:
    return {
        "c": agg.count(),
        "s": agg.sum("bigdec", nulls=SKIP),
        "mx": agg.max("double", nulls=SKIP),
        "mn": agg.min("float", nulls=SKIP),
        "cd": agg.custom(DistinctCount("string")),
        "cat": agg.custom(ConcatDistinct("string")),
    }


def _window_stats(assigner: windows.WindowAssigner) -> Callable[[], Job]:
    def build() -> Job:
        job, events = _source(1_000)
        events.key_by("name").window(assigner).aggregate("v", **_stats())
        return job

    return build


def _tvf(call: str) -> str:
    return f"SELECT name, window_start, window_end, {STATS} FROM TABLE({call}) GROUP BY name, window_start, window_end"  # noqa: E501


TUMBLE = "TUMBLE(TABLE T1, DESCRIPTOR(ts), INTERVAL '5' SECOND"
HOP = "HOP(TABLE T1, DESCRIPTOR(ts), INTERVAL '12' HOUR, INTERVAL '1' DAY"
CUMULATE = "CUMULATE(TABLE T1, DESCRIPTOR(ts), INTERVAL '12' HOUR, INTERVAL '1' DAY"

WINDOW_AGGREGATE = [
    Case(
        "WindowAggregateITCase.testEventTimeTumbleWindow",
        WINDOW_TABLE,
        _tvf(TUMBLE + ")"),
        _window_stats(windows.tumbling(ms=5_000)),
        KEYED + STATS_COLUMNS,
        [
            "a,2020-10-10T00:00,2020-10-10T00:00:05,4,11.10,5.0,1.0,2,Hi|Comment#1",
            "a,2020-10-10T00:00:05,2020-10-10T00:00:10,1,3.33,null,3.0,1,Comment#2",
            "b,2020-10-10T00:00:05,2020-10-10T00:00:10,2,6.66,6.0,3.0,2,Hello|Hi",
            "b,2020-10-10T00:00:15,2020-10-10T00:00:20,1,4.44,4.0,4.0,1,Hi",
            "b,2020-10-10T00:00:30,2020-10-10T00:00:35,1,3.33,3.0,3.0,1,Comment#3",
            "null,2020-10-10T00:00:30,2020-10-10T00:00:35,1,7.77,7.0,7.0,0,null",
        ],
        WINDOW_DATA,
    ),
    Case(
        "WindowAggregateITCase.testEventTimeTumbleWindowWithOffset",
        WINDOW_TABLE,
        _tvf("TUMBLE(TABLE T1, DESCRIPTOR(ts), INTERVAL '1' DAY, INTERVAL '8' HOUR)"),
        _window_stats(windows.tumbling(ms=DAY, offset_ms=8 * HOUR)),
        KEYED + STATS_COLUMNS,
        [
            "a,2020-10-09T08:00,2020-10-10T08:00,6,19.98,5.0,1.0,3,Hi|Comment#1|Comment#2",
            "b,2020-10-09T08:00,2020-10-10T08:00,4,14.43,6.0,3.0,3,Hello|Hi|Comment#3",
            "null,2020-10-09T08:00,2020-10-10T08:00,1,7.77,7.0,7.0,0,null",
        ],
        WINDOW_DATA,
    ),
    Case(
        "WindowAggregateITCase.testEventTimeTumbleWindowWithNegativeOffset",
        WINDOW_TABLE,
        _tvf("TUMBLE(TABLE T1, DESCRIPTOR(ts), INTERVAL '1' DAY, INTERVAL '-8' HOUR)"),
        _window_stats(windows.tumbling(ms=DAY, offset_ms=-8 * HOUR)),
        KEYED + STATS_COLUMNS,
        [
            "a,2020-10-09T16:00,2020-10-10T16:00,6,19.98,5.0,1.0,3,Hi|Comment#1|Comment#2",
            "b,2020-10-09T16:00,2020-10-10T16:00,4,14.43,6.0,3.0,3,Hello|Hi|Comment#3",
            "null,2020-10-09T16:00,2020-10-10T16:00,1,7.77,7.0,7.0,0,null",
        ],
        WINDOW_DATA,
    ),
    Case(
        "WindowAggregateITCase.testEventTimeHopWindow",
        WINDOW_TABLE,
        _tvf("HOP(TABLE T1, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND)"),
        _window_stats(windows.sliding(size_ms=10_000, slide_ms=5_000)),
        KEYED + STATS_COLUMNS,
        [
            "a,2020-10-09T23:59:55,2020-10-10T00:00:05,4,11.10,5.0,1.0,2,Hi|Comment#1",
            "a,2020-10-10T00:00,2020-10-10T00:00:10,6,19.98,5.0,1.0,3,Comment#2|Hi|Comment#1",
            "a,2020-10-10T00:00:05,2020-10-10T00:00:15,1,3.33,null,3.0,1,Comment#2",
            "b,2020-10-10T00:00,2020-10-10T00:00:10,2,6.66,6.0,3.0,2,Hello|Hi",
            "b,2020-10-10T00:00:05,2020-10-10T00:00:15,2,6.66,6.0,3.0,2,Hello|Hi",
            "b,2020-10-10T00:00:10,2020-10-10T00:00:20,1,4.44,4.0,4.0,1,Hi",
            "b,2020-10-10T00:00:15,2020-10-10T00:00:25,1,4.44,4.0,4.0,1,Hi",
            "b,2020-10-10T00:00:25,2020-10-10T00:00:35,1,3.33,3.0,3.0,1,Comment#3",
            "b,2020-10-10T00:00:30,2020-10-10T00:00:40,1,3.33,3.0,3.0,1,Comment#3",
            "null,2020-10-10T00:00:25,2020-10-10T00:00:35,1,7.77,7.0,7.0,0,null",
            "null,2020-10-10T00:00:30,2020-10-10T00:00:40,1,7.77,7.0,7.0,0,null",
        ],
        WINDOW_DATA,
    ),
    Case(
        "WindowAggregateITCase.testEventTimeHopWindowWithOffset",
        WINDOW_TABLE,
        _tvf(HOP + ", INTERVAL '8' HOUR)"),
        _window_stats(windows.sliding(size_ms=DAY, slide_ms=12 * HOUR, offset_ms=8 * HOUR)),
        KEYED + STATS_COLUMNS,
        [
            "a,2020-10-09T08:00,2020-10-10T08:00,6,19.98,5.0,1.0,3,Hi|Comment#1|Comment#2",
            "a,2020-10-09T20:00,2020-10-10T20:00,6,19.98,5.0,1.0,3,Hi|Comment#1|Comment#2",
            "b,2020-10-09T08:00,2020-10-10T08:00,4,14.43,6.0,3.0,3,Hello|Hi|Comment#3",
            "b,2020-10-09T20:00,2020-10-10T20:00,4,14.43,6.0,3.0,3,Hello|Hi|Comment#3",
            "null,2020-10-09T08:00,2020-10-10T08:00,1,7.77,7.0,7.0,0,null",
            "null,2020-10-09T20:00,2020-10-10T20:00,1,7.77,7.0,7.0,0,null",
        ],
        WINDOW_DATA,
    ),
    Case(
        "WindowAggregateITCase.testEventTimeHopWindowWithNegativeOffset",
        WINDOW_TABLE,
        _tvf(HOP + ", INTERVAL '-8' HOUR)"),
        _window_stats(windows.sliding(size_ms=DAY, slide_ms=12 * HOUR, offset_ms=-8 * HOUR)),
        KEYED + STATS_COLUMNS,
        [
            "a,2020-10-09T04:00,2020-10-10T04:00,6,19.98,5.0,1.0,3,Hi|Comment#1|Comment#2",
            "a,2020-10-09T16:00,2020-10-10T16:00,6,19.98,5.0,1.0,3,Hi|Comment#1|Comment#2",
            "b,2020-10-09T04:00,2020-10-10T04:00,4,14.43,6.0,3.0,3,Hello|Hi|Comment#3",
            "b,2020-10-09T16:00,2020-10-10T16:00,4,14.43,6.0,3.0,3,Hello|Hi|Comment#3",
            "null,2020-10-09T04:00,2020-10-10T04:00,1,7.77,7.0,7.0,0,null",
            "null,2020-10-09T16:00,2020-10-10T16:00,1,7.77,7.0,7.0,0,null",
        ],
        WINDOW_DATA,
    ),
    Case(
        "WindowAggregateITCase.testEventTimeCumulateWindow",
        WINDOW_TABLE,
        _tvf("CUMULATE(TABLE T1, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '15' SECOND)"),
        _window_stats(windows.cumulate(size_ms=15_000, step_ms=5_000)),
        KEYED + STATS_COLUMNS,
        [
            "a,2020-10-10T00:00,2020-10-10T00:00:05,4,11.10,5.0,1.0,2,Hi|Comment#1",
            "a,2020-10-10T00:00,2020-10-10T00:00:10,6,19.98,5.0,1.0,3,Hi|Comment#1|Comment#2",
            "a,2020-10-10T00:00,2020-10-10T00:00:15,6,19.98,5.0,1.0,3,Hi|Comment#1|Comment#2",
            "b,2020-10-10T00:00,2020-10-10T00:00:10,2,6.66,6.0,3.0,2,Hello|Hi",
            "b,2020-10-10T00:00,2020-10-10T00:00:15,2,6.66,6.0,3.0,2,Hello|Hi",
            "b,2020-10-10T00:00:15,2020-10-10T00:00:20,1,4.44,4.0,4.0,1,Hi",
            "b,2020-10-10T00:00:15,2020-10-10T00:00:25,1,4.44,4.0,4.0,1,Hi",
            "b,2020-10-10T00:00:15,2020-10-10T00:00:30,1,4.44,4.0,4.0,1,Hi",
            "b,2020-10-10T00:00:30,2020-10-10T00:00:35,1,3.33,3.0,3.0,1,Comment#3",
            "b,2020-10-10T00:00:30,2020-10-10T00:00:40,1,3.33,3.0,3.0,1,Comment#3",
            "b,2020-10-10T00:00:30,2020-10-10T00:00:45,1,3.33,3.0,3.0,1,Comment#3",
            "null,2020-10-10T00:00:30,2020-10-10T00:00:35,1,7.77,7.0,7.0,0,null",
            "null,2020-10-10T00:00:30,2020-10-10T00:00:40,1,7.77,7.0,7.0,0,null",
            "null,2020-10-10T00:00:30,2020-10-10T00:00:45,1,7.77,7.0,7.0,0,null",
        ],
        WINDOW_DATA,
    ),
    Case(
        "WindowAggregateITCase.testEventTimeCumulateWindowWithOffset",
        WINDOW_TABLE,
        _tvf(CUMULATE + ", INTERVAL '8' HOUR)"),
        _window_stats(windows.cumulate(size_ms=DAY, step_ms=12 * HOUR, offset_ms=8 * HOUR)),
        KEYED + STATS_COLUMNS,
        [
            "a,2020-10-09T08:00,2020-10-10T08:00,6,19.98,5.0,1.0,3,Hi|Comment#1|Comment#2",
            "b,2020-10-09T08:00,2020-10-10T08:00,4,14.43,6.0,3.0,3,Hello|Hi|Comment#3",
            "null,2020-10-09T08:00,2020-10-10T08:00,1,7.77,7.0,7.0,0,null",
        ],
        WINDOW_DATA,
    ),
    Case(
        "WindowAggregateITCase.testEventTimeCumulateWindowWithNegativeOffset",
        WINDOW_TABLE,
        _tvf(CUMULATE + ", INTERVAL '-8' HOUR)"),
        _window_stats(windows.cumulate(size_ms=DAY, step_ms=12 * HOUR, offset_ms=-8 * HOUR)),
        KEYED + STATS_COLUMNS,
        [
            "a,2020-10-09T16:00,2020-10-10T04:00,6,19.98,5.0,1.0,3,Hi|Comment#1|Comment#2",
            "a,2020-10-09T16:00,2020-10-10T16:00,6,19.98,5.0,1.0,3,Hi|Comment#1|Comment#2",
            "b,2020-10-09T16:00,2020-10-10T04:00,4,14.43,6.0,3.0,3,Hello|Hi|Comment#3",
            "b,2020-10-09T16:00,2020-10-10T16:00,4,14.43,6.0,3.0,3,Hello|Hi|Comment#3",
            "null,2020-10-09T16:00,2020-10-10T04:00,1,7.77,7.0,7.0,0,null",
            "null,2020-10-09T16:00,2020-10-10T16:00,1,7.77,7.0,7.0,0,null",
        ],
        WINDOW_DATA,
    ),
]


def _window_time_job() -> Job:
    job, events = _source(1_000)
    events.key_by("name").window(windows.tumbling(ms=5_000)).aggregate(
        "v", window_time=agg.window_time(), c=agg.count()
    )
    return job


def _window_only_job() -> Job:
    job, events = _source(1_000)
    events.key_by(lambda r: "*").window(windows.tumbling(ms=5_000)).aggregate("v", **_stats())
    return job


def _field_conflict_job() -> Job:
    job, events = _source(1_000)
    events.key_by(lambda r: "*").window(windows.tumbling(ms=5_000)).aggregate(
        "v",
        window_time=agg.window_time(),
        start_time=agg.min("ts", nulls=SKIP),
        end_time=agg.max("ts", nulls=SKIP),
    )
    return job


WINDOW_COLUMNS = [
    Case(
        "WindowAggregateITCase.testTumbleWindowOutputWindowTime",
        WINDOW_TABLE,
        "SELECT name, window_start, window_end, window_time, COUNT(*) AS c "
        f"FROM TABLE({TUMBLE})) GROUP BY name, window_start, window_end, window_time",
        _window_time_job,
        [*KEYED, ("window_time", time), ("c", text)],
        [
            "a,2020-10-10T00:00,2020-10-10T00:00:05,2020-10-10T00:00:04.999,4",
            "a,2020-10-10T00:00:05,2020-10-10T00:00:10,2020-10-10T00:00:09.999,1",
            "b,2020-10-10T00:00:05,2020-10-10T00:00:10,2020-10-10T00:00:09.999,2",
            "b,2020-10-10T00:00:15,2020-10-10T00:00:20,2020-10-10T00:00:19.999,1",
            "b,2020-10-10T00:00:30,2020-10-10T00:00:35,2020-10-10T00:00:34.999,1",
            "null,2020-10-10T00:00:30,2020-10-10T00:00:35,2020-10-10T00:00:34.999,1",
        ],
        WINDOW_DATA,
    ),
    Case(
        "WindowAggregateITCase.testTumbleWindowGroupOnWindowOnly",
        WINDOW_TABLE,
        f"SELECT window_start, window_end, {STATS} FROM TABLE({TUMBLE})) "
        "GROUP BY window_start, window_end",
        _window_only_job,
        [("start", time), ("end", time), *STATS_COLUMNS],
        [
            "2020-10-10T00:00,2020-10-10T00:00:05,4,11.10,5.0,1.0,2,Hi|Comment#1",
            "2020-10-10T00:00:05,2020-10-10T00:00:10,3,9.99,6.0,3.0,3,Hello|Hi|Comment#2",
            "2020-10-10T00:00:15,2020-10-10T00:00:20,1,4.44,4.0,4.0,1,Hi",
            "2020-10-10T00:00:30,2020-10-10T00:00:35,2,11.10,7.0,3.0,1,Comment#3",
        ],
        WINDOW_DATA,
    ),
    Case(
        "WindowAggregateITCase.testFieldNameConflict",
        WINDOW_TABLE,
        "SELECT window_time, MIN(ts) AS start_time, MAX(ts) AS end_time "
        f"FROM TABLE({TUMBLE})) GROUP BY window_start, window_end, window_time",
        _field_conflict_job,
        [("window_time", time), ("start_time", time), ("end_time", time)],
        [
            "2020-10-10T00:00:04.999,2020-10-10T00:00:01,2020-10-10T00:00:04",
            "2020-10-10T00:00:09.999,2020-10-10T00:00:06,2020-10-10T00:00:08",
            "2020-10-10T00:00:19.999,2020-10-10T00:00:16,2020-10-10T00:00:16",
            "2020-10-10T00:00:34.999,2020-10-10T00:00:32,2020-10-10T00:00:34",
        ],
        WINDOW_DATA,
    ),
]


# -- GroupWindowITCase: the legacy group windows ----------------------------------------------

HOP_4_5 = "HOP(ts, INTERVAL '0.004' SECOND, INTERVAL '0.005' SECOND)"


def _sliding_window_job() -> Job:
    job, events = _source(10)
    events.key_by("string").window(windows.sliding(size_ms=5, slide_ms=4)).aggregate(
        "v",
        window_time=agg.window_time(),
        c1=agg.count(),
        s1=agg.count(),  # SUM(1)
        ci=agg.count("int"),
        cdf=agg.custom(DistinctCount("float")),
        cat=agg.custom(ConcatDistinct("name")),
    )
    return job


SESSION_DATA = [
    {"ts": t, "int": i, "string": s, "name": n}
    for t, i, s, n in [
        (1, 1, "Hello", "a"), (2, 2, "Hello", "b"), (8, 8, "Hello", "a"),
        (9, 9, "Hello World", "b"), (4, 4, "Hello", "c"), (16, 16, "Hello", "d"),
    ]
]  # fmt: skip
SESSION_TABLE = """
CREATE TABLE T1 (ts BIGINT, `int` INT, `string` STRING, name STRING,
  WATERMARK FOR ts AS ts - INTERVAL '0.01' SECOND) WITH ('url' = 'file:///unused.jsonl');
"""
SESSION_5 = "SESSION(ts, INTERVAL '0.005' SECOND)"


def _session_job() -> Job:
    job, events = _source(10)
    events.key_by("string").window(windows.session(gap_ms=5)).aggregate(
        "v",
        window_time=agg.window_time(),
        c1=agg.count(),
        s1=agg.count(),
        ci=agg.count("int"),
        si=agg.sum("int", nulls=SKIP),
        cdn=agg.custom(DistinctCount("name")),
    )
    return job


LATENESS_DATA = [
    {"long": t, "int": i, "string": s}
    for t, i, s in [
        (1, 1, "Hi"), (2, 2, "Hello"), (4, 2, "Hello"), (8, 3, "Hello world"),
        (4, 3, "Hello"), (16, 3, "Hello world"), (9, 4, "Hello world"), (3, 1, "Hi"),
    ]
]  # fmt: skip
LATENESS_TABLE = """
CREATE TABLE T1 (`long` BIGINT, `int` INT, `string` STRING, WATERMARK FOR `long` AS `long`)
  WITH ('url' = 'file:///unused.jsonl');
CREATE FUNCTION weightAvgFun AS 'tests.support.flink_sql_cases.WeightedAvg';
"""


def _lateness_job() -> Job:
    job = Job("flink")
    events = job.source(
        sources.jsonl("/unused.jsonl"), timestamp="long", watermarks=WatermarkStrategy.sql_delay(0)
    )
    events.key_by("string").window(windows.tumbling(ms=5), allowed_lateness_ms=10).aggregate(
        "v",
        cdl=agg.custom(DistinctCount("long")),
        ci=agg.count("int"),
        avg=agg.cast(agg.avg("int"), "int"),
        wavg=agg.custom(WeightedAvg("long", "int")),
        lo=agg.min("int", nulls=SKIP),
        hi=agg.max("int", nulls=SKIP),
        total=agg.sum("int", nulls=SKIP),
    )
    return job


MERGE_DATA = [
    {"ts": t, "b": b, "c": c}
    for t, b, c in [
        (1, 2, "Hello"), (2, 2, "Hello"), (8, 2, "Hello"), (10, 3, "Hello"),
        (9, 9, "Hello World"), (4, 1, "Hello"), (16, 16, "Hello"),
    ]
]  # fmt: skip


def _merge_job() -> Job:
    job, events = _source(10)
    events.key_by("c").window(windows.session(gap_ms=5)).aggregate(
        "v", cd=agg.custom(DistinctCount("b"))
    )
    return job


GROUP_WINDOW = [
    Case(
        "GroupWindowITCase.testEventTimeSlidingWindow",
        TIMESTAMP_TABLE,
        f"SELECT `string`, HOP_START{HOP_4_5[3:]}, HOP_ROWTIME{HOP_4_5[3:]} AS window_time, "
        "COUNT(1) AS c1, SUM(1) AS s1, COUNT(`int`) AS ci, COUNT(DISTINCT `float`) AS cdf, "
        f"concat_distinct_agg(name) AS cat FROM testTable GROUP BY `string`, {HOP_4_5}",
        _sliding_window_job,
        [
            ("key", text),
            ("start", time),
            ("window_time", time),
            ("c1", text),
            ("s1", text),
            ("ci", text),
            ("cdf", text),
            ("cat", parts),
        ],  # fmt: skip
        [
            "Hallo,1970-01-01T00:00,1970-01-01T00:00:00.004,1,1,1,1,a",
            "Hello world,1970-01-01T00:00:00.004,1970-01-01T00:00:00.008,1,1,1,1,a",
            "Hello world,1970-01-01T00:00:00.008,1970-01-01T00:00:00.012,1,1,1,1,a",
            "Hello world,1970-01-01T00:00:00.012,1970-01-01T00:00:00.016,1,1,1,1,b",
            "Hello world,1970-01-01T00:00:00.016,1970-01-01T00:00:00.020,1,1,1,1,b",
            "Hello,1970-01-01T00:00,1970-01-01T00:00:00.004,2,2,2,2,a",
            "Hello,1970-01-01T00:00:00.004,1970-01-01T00:00:00.008,3,3,3,2,a|b",
            "Hi,1970-01-01T00:00,1970-01-01T00:00:00.004,1,1,1,1,a",
            "null,1970-01-01T00:00:00.028,1970-01-01T00:00:00.032,1,1,1,1,null",
            "null,1970-01-01T00:00:00.032,1970-01-01T00:00:00.036,1,1,1,1,null",
        ],
        TIMESTAMP_DATA,
    ),
    Case(
        "GroupWindowITCase.testEventTimeSessionWindow",
        SESSION_TABLE,
        f"SELECT `string`, SESSION_START{SESSION_5[7:]}, SESSION_ROWTIME{SESSION_5[7:]} AS "
        "window_time, COUNT(1) AS c1, SUM(1) AS s1, COUNT(`int`) AS ci, SUM(`int`) AS si, "
        f"COUNT(DISTINCT name) AS cdn FROM T1 GROUP BY `string`, {SESSION_5}",
        _session_job,
        [
            ("key", text),
            ("start", time),
            ("window_time", time),
            ("c1", text),
            ("s1", text),
            ("ci", text),
            ("si", text),
            ("cdn", text),
        ],  # fmt: skip
        [
            "Hello World,1970-01-01T00:00:00.009,1970-01-01T00:00:00.013,1,1,1,9,1",
            "Hello,1970-01-01T00:00:00.016,1970-01-01T00:00:00.020,1,1,1,16,1",
            "Hello,1970-01-01T00:00:00.001,1970-01-01T00:00:00.012,4,4,4,15,3",
        ],
        SESSION_DATA,
    ),
    Case(
        "GroupWindowITCase.testEventTimeTumblingWindowWithAllowLateness",
        LATENESS_TABLE,
        "SELECT `string`, TUMBLE_START(`long`, INTERVAL '0.005' SECOND) AS w_start, "
        "TUMBLE_END(`long`, INTERVAL '0.005' SECOND), COUNT(DISTINCT `long`) AS cdl, "
        "COUNT(`int`) AS ci, CAST(AVG(`int`) AS INT) AS `avg`, weightAvgFun(`long`, `int`) "
        "AS wavg, MIN(`int`) AS lo, MAX(`int`) AS hi, SUM(`int`) AS total FROM T1 "
        "GROUP BY `string`, TUMBLE(`long`, INTERVAL '0.005' SECOND)",
        _lateness_job,
        [
            *KEYED,
            ("cdl", text),
            ("ci", text),
            ("avg", text),
            ("wavg", text),
            ("lo", text),
            ("hi", text),
            ("total", text),
        ],  # fmt: skip
        [
            "Hi,1970-01-01T00:00,1970-01-01T00:00:00.005,1,1,1,1,1,1,1",
            "Hello,1970-01-01T00:00,1970-01-01T00:00:00.005,2,3,2,3,2,3,7",
            "Hello world,1970-01-01T00:00:00.015,1970-01-01T00:00:00.020,1,1,3,16,3,3,3",
            "Hello world,1970-01-01T00:00:00.005,1970-01-01T00:00:00.010,2,2,3,8,3,4,7",
        ],
        LATENESS_DATA,
        settings="SET 'table.exec.emit.allow-lateness' = '10 ms';",
        upsert=True,
    ),
    Case(
        "GroupWindowITCase.testDistinctAggWithMergeOnEventTimeSessionGroupWindow",
        "CREATE TABLE MyTable (ts BIGINT, b INT, c STRING, WATERMARK FOR ts AS ts - INTERVAL "
        "'0.01' SECOND) WITH ('url' = 'file:///unused.jsonl');",
        f"SELECT c, COUNT(DISTINCT b) AS cd, SESSION_END{SESSION_5[7:]} FROM MyTable "
        f"GROUP BY c, {SESSION_5}",
        _merge_job,
        [("key", text), ("cd", text), ("end", time)],
        [
            "Hello World,1,1970-01-01T00:00:00.014",
            "Hello,1,1970-01-01T00:00:00.021",
            "Hello,3,1970-01-01T00:00:00.015",
        ],
        MERGE_DATA,
    ),
]


# -- MiniBatchGroupWindowITCase: HOP with gaps (slide > size) and overlapping --------------------


def _hop_job(size: int, slide: int) -> Callable[[], Job]:
    def build() -> Job:
        job, events = _source(0)
        events.key_by("string").window(windows.sliding(size_ms=size, slide_ms=slide)).aggregate(
            "v", c=agg.count("int")
        )
        return job

    return build


def _hop_case(name: str, size: int, slide: int, expected: list[str], tvf: bool) -> Case:
    interval = f"INTERVAL '0.{slide:03d}' SECOND, INTERVAL '0.{size:03d}' SECOND"
    if tvf:
        view = (
            "SELECT `string`, window_start, window_end, COUNT(`int`) AS c FROM TABLE(HOP(TABLE "
            f"T2, DESCRIPTOR(ts), {interval})) GROUP BY `string`, window_start, window_end"
        )
    else:
        view = (
            f"SELECT `string`, COUNT(`int`) AS c, HOP_START(ts, {interval}), HOP_END(ts, "
            f"{interval}) FROM T2 GROUP BY `string`, HOP(ts, {interval})"
        )
    form = "the window TVF" if tvf else "the legacy group window"
    return Case(
        f"MiniBatchGroupWindowITCase.{name} ({form})",
        MINIBATCH_TABLE, view, _hop_job(size, slide),
        [("key", text), ("c", text), ("start", time), ("end", time)],
        expected, MINIBATCH_DATA,
    )  # fmt: skip


NON_OVERLAPPING_FULL = [
    "Hallo,1,1970-01-01T00:00,1970-01-01T00:00:00.005",
    "Hello,2,1970-01-01T00:00,1970-01-01T00:00:00.005",
    "Hi,1,1970-01-01T00:00,1970-01-01T00:00:00.005",
    "null,1,1970-01-01T00:00:00.030,1970-01-01T00:00:00.035",
]
# the stream/table GroupWindowITCase variant's rows for data2 (the same data)
NON_OVERLAPPING_SPLIT = [
    "Hallo,1,1970-01-01T00:00,1970-01-01T00:00:00.003",
    "Hi,1,1970-01-01T00:00,1970-01-01T00:00:00.003",
    "null,1,1970-01-01T00:00:00.030,1970-01-01T00:00:00.033",
]
OVERLAPPING_FULL = [
    "Hallo,1,1969-12-31T23:59:59.995,1970-01-01T00:00:00.005",
    "Hallo,1,1970-01-01T00:00,1970-01-01T00:00:00.010",
    "Hello world,1,1970-01-01T00:00,1970-01-01T00:00:00.010",
    "Hello world,1,1970-01-01T00:00:00.005,1970-01-01T00:00:00.015",
    "Hello world,1,1970-01-01T00:00:00.010,1970-01-01T00:00:00.020",
    "Hello world,1,1970-01-01T00:00:00.015,1970-01-01T00:00:00.025",
    "Hello,1,1970-01-01T00:00:00.005,1970-01-01T00:00:00.015",
    "Hello,2,1969-12-31T23:59:59.995,1970-01-01T00:00:00.005",
    "Hello,3,1970-01-01T00:00,1970-01-01T00:00:00.010",
    "Hi,1,1969-12-31T23:59:59.995,1970-01-01T00:00:00.005",
    "Hi,1,1970-01-01T00:00,1970-01-01T00:00:00.010",
    "null,1,1970-01-01T00:00:00.025,1970-01-01T00:00:00.035",
    "null,1,1970-01-01T00:00:00.030,1970-01-01T00:00:00.040",
]
HOPS = [
    _hop_case(name, size, slide, rows, tvf)
    for name, size, slide, rows in [
        ("testEventTimeSlidingGroupWindowOverTimeNonOverlappingFullPane", 5, 10,
         NON_OVERLAPPING_FULL),
        ("testEventTimeSlidingGroupWindowOverTimeNonOverlappingSplitPane", 3, 10,
         NON_OVERLAPPING_SPLIT),
        ("testEventTimeSlidingGroupWindowOverTimeOverlappingFullPane", 10, 5, OVERLAPPING_FULL),
    ]
    for tvf in (False, True)
]  # fmt: skip

CASES = WINDOW_AGGREGATE + WINDOW_COLUMNS + GROUP_WINDOW + HOPS


def _sql_job(case: Case, tmp_path: Path) -> Job:
    script = tmp_path / "flink.sql"
    script.write_text(
        f"SET 'pipeline.name' = 'flink';\n{case.table}\n{case.settings}\n"
        f"CREATE VIEW v AS {case.view};\n"
    )
    return load_script(script)


def _rows(case: Case, results: list[dict[str, Any]]) -> list[str]:
    if case.upsert:  # the sink keeps each window's last row
        results = list({(r["key"], r["start"], r["end"]): r for r in results}.values())
    else:
        assert all(r["final"] for r in results), "an append-only case emitted a window twice"
    return sorted(row(r, case.columns) for r in results)


def _expected(case: Case) -> list[str]:
    return sorted(flink_row(line, case.columns) for line in case.expected)


@pytest.mark.parametrize("parallelism", [1, 2, 4])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.flink_test)
def test_the_sql_view_gives_flinks_rows(case: Case, parallelism: int, tmp_path: Path) -> None:
    result = testing.run(_sql_job(case, tmp_path), case.events, parallelism=parallelism)
    assert _rows(case, result.by_operator["v"]) == _expected(case)
    assert not result.dead


@pytest.mark.parametrize("parallelism", [1, 2, 4])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.flink_test)
def test_the_job_api_gives_flinks_rows(case: Case, parallelism: int) -> None:
    result = testing.run(case.python(), case.events, parallelism=parallelism)
    assert _rows(case, result.by_operator["v"]) == _expected(case)
