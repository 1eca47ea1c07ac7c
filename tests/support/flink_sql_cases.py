"""Flink's window-aggregate test data and the aggregates its SQL IT cases register, for the ported
cases in ``tests/unit/test_flink_sql_windows.py`` (and the runs of them in the integration tier).

Sources (apache/flink, ``flink-table/flink-table-planner/src/test/scala/org/apache/flink/table/
planner/runtime/``): ``utils/TestData.scala`` (``windowDataWithTimestamp``, ``timestampData``),
``stream/sql/WindowAggregateITCase.scala``, ``stream/sql/GroupWindowITCase.scala`` and
``stream/table/MiniBatchGroupWindowITCase.scala``. Flink's ``TIMESTAMP(3)`` rowtime is epoch
milliseconds here (``BIGINT``), read as UTC; its ``DECIMAL(10, 2)`` column is a ``DOUBLE`` (weir
has no exact decimal type), printed with two decimals as Flink prints the decimal.

Rows compare as Flink's test sinks print them: ``,``-joined, ``null`` for NULL, times as Java's
``LocalDateTime.toString`` (``2020-10-10T00:00:05``, ``…T00:00:04.999``). One normalisation:
``concat_distinct_agg``'s order of its distinct strings depends on how Flink's slices merge (the
same window prints ``Hi|Comment#1|Comment#2`` in one case and ``Comment#2|Hi|Comment#1`` in
another), so its parts are compared sorted.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any

UTC = dt.UTC


def ms(text: str) -> int:
    """``2020-10-10 00:00:01`` (UTC) as epoch milliseconds."""
    return int(dt.datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


def ldt(millis: int) -> str:
    """Epoch milliseconds as Java's ``LocalDateTime.toString`` prints them (UTC)."""
    t = dt.datetime.fromtimestamp(millis / 1000, tz=UTC)
    text = t.strftime("%Y-%m-%dT%H:%M")
    if t.second or t.microsecond:
        text += t.strftime(":%S")
    if t.microsecond:
        text += f".{t.microsecond // 1000:03d}"
    return text


# TestData.windowDataWithTimestamp: ts, int, double, float, bigdec, string, name
_WINDOW_ROWS: list[
    tuple[str, int, float | None, float | None, float | None, str | None, str | None]
]
_WINDOW_ROWS = [
    ("2020-10-10 00:00:01", 1, 1.0, 1.0, 1.11, "Hi", "a"),
    ("2020-10-10 00:00:02", 2, 2.0, 2.0, 2.22, "Comment#1", "a"),
    ("2020-10-10 00:00:03", 2, 2.0, 2.0, 2.22, "Comment#1", "a"),
    ("2020-10-10 00:00:04", 5, 5.0, 5.0, 5.55, None, "a"),
    ("2020-10-10 00:00:07", 3, 3.0, 3.0, None, "Hello", "b"),
    ("2020-10-10 00:00:06", 6, 6.0, 6.0, 6.66, "Hi", "b"),  # out of order
    ("2020-10-10 00:00:08", 3, None, 3.0, 3.33, "Comment#2", "a"),
    ("2020-10-10 00:00:04", 5, 5.0, None, 5.55, "Hi", "a"),  # late event
    ("2020-10-10 00:00:16", 4, 4.0, 4.0, 4.44, "Hi", "b"),
    ("2020-10-10 00:00:32", 7, 7.0, 7.0, 7.77, None, None),
    ("2020-10-10 00:00:34", 1, 3.0, 3.0, 3.33, "Comment#3", "b"),
]
WINDOW_DATA = [
    {"ts": ms(t), "int": i, "double": d, "float": f, "bigdec": b, "string": s, "name": n}
    for t, i, d, f, b, s, n in _WINDOW_ROWS
]
# WindowAggregateITCase's table T1: WATERMARK FOR rowtime AS rowtime - INTERVAL '1' SECOND
WINDOW_TABLE = """
CREATE TABLE T1 (
  ts BIGINT, `int` INT, `double` DOUBLE, `float` FLOAT, bigdec DOUBLE, `string` STRING,
  name STRING,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('url' = 'file:///unused.jsonl');
CREATE FUNCTION concat_distinct_agg AS 'tests.support.flink_sql_cases.ConcatDistinct';
"""

# TestData.timestampData (GroupWindowITCase's testTable): ts (ms), int, double, float, bigdec,
# string, name; WATERMARK FOR rowtime AS rowtime - INTERVAL '0.01' SECOND
_TIMESTAMP_ROWS = [
    (1, 1, 1.0, 1.0, 1.0, "Hi", "a"),
    (2, 2, 2.0, 2.0, 2.0, "Hallo", "a"),
    (3, 2, 2.0, 2.0, 2.0, "Hello", "a"),
    (4, 5, 5.0, 5.0, 5.0, "Hello", "a"),
    (7, 3, 3.0, 3.0, 3.0, "Hello", "b"),
    (6, 5, 5.0, 5.0, 5.0, "Hello", "a"),
    (8, 3, 3.0, 3.0, 3.0, "Hello world", "a"),
    (16, 4, 4.0, 4.0, 4.0, "Hello world", "b"),
    (32, 4, 4.0, 4.0, 4.0, None, None),
]
TIMESTAMP_DATA = [
    {"ts": t, "int": i, "double": d, "float": f, "bigdec": b, "string": s, "name": n}
    for t, i, d, f, b, s, n in _TIMESTAMP_ROWS
]
TIMESTAMP_TABLE = """
CREATE TABLE testTable (
  ts BIGINT, `int` INT, `double` DOUBLE, `float` FLOAT, bigdec DOUBLE, `string` STRING,
  name STRING,
  WATERMARK FOR ts AS ts - INTERVAL '0.01' SECOND
) WITH ('url' = 'file:///unused.jsonl');
CREATE FUNCTION concat_distinct_agg AS 'tests.support.flink_sql_cases.ConcatDistinct';
"""

# MiniBatchGroupWindowITCase's data2 (Table API 'long.rowtime, watermark offset 0)
MINIBATCH_DATA = [
    {"ts": t, "int": i, "double": d, "float": f, "bigdec": b, "string": s}
    for t, i, d, f, b, s in [
        (1, 1, 1.0, 1.0, 1.0, "Hi"),
        (2, 2, 2.0, 2.0, 2.0, "Hallo"),
        (3, 2, 2.0, 2.0, 2.0, "Hello"),
        (4, 5, 5.0, 5.0, 5.0, "Hello"),
        (7, 3, 3.0, 3.0, 3.0, "Hello"),
        (8, 3, 3.0, 3.0, 3.0, "Hello world"),
        (16, 4, 4.0, 4.0, 4.0, "Hello world"),
        (32, 4, 4.0, 4.0, 4.0, None),
    ]
]
MINIBATCH_TABLE = """
CREATE TABLE T2 (
  ts BIGINT, `int` INT, `double` DOUBLE, `float` FLOAT, bigdec DOUBLE, `string` STRING,
  WATERMARK FOR ts AS ts
) WITH ('url' = 'file:///unused.jsonl');
"""


def _arg(value: Any, field: str | None) -> Any:
    """A UDAF's argument: SQL passes the value, the job API the record (``field`` names it)."""
    return value if field is None else value.get(field)


class ConcatDistinct:
    """Flink's ``JavaUserDefinedAggFunctions.ConcatDistinctAggFunction``: the distinct non-NULL
    strings joined by ``|`` in the order first seen, NULL when there is none. Called from SQL
    it gets the value; ``ConcatDistinct("string")`` reads a record's field (the job API)."""

    def __init__(self, field: str | None = None) -> None:
        self.field = field

    def create(self) -> list[str]:
        return []

    def add(self, acc: list[str], value: Any) -> list[str]:
        v = _arg(value, self.field)
        return acc if v is None or v in acc else [*acc, v]

    def merge(self, a: list[str], b: list[str]) -> list[str]:
        return a + [v for v in b if v not in a]

    def result(self, acc: list[str]) -> str | None:
        return "|".join(acc) if acc else None


class DistinctCount:
    """``COUNT(DISTINCT field)`` in the job API: the number of distinct non-NULL values."""

    def __init__(self, field: str) -> None:
        self.field = field

    def create(self) -> list[Any]:
        return []

    def add(self, acc: list[Any], record: Any) -> list[Any]:
        v = record.get(self.field)
        return acc if v is None or v in acc else [*acc, v]

    def merge(self, a: list[Any], b: list[Any]) -> list[Any]:
        return a + [v for v in b if v not in a]

    def result(self, acc: list[Any]) -> int:
        return len(acc)


class WeightedAvg:
    """Flink's ``JavaUserDefinedAggFunctions.WeightedAvg``: ``sum(value * weight) /
    sum(weight)`` in long arithmetic (``weightAvgFun(long, int)``). From SQL it gets ``(value,
    weight)``; ``WeightedAvg("long", "int")`` reads them from a record."""

    def __init__(self, value: str | None = None, weight: str | None = None) -> None:
        self.fields = (value, weight)

    def create(self) -> list[int]:
        return [0, 0]

    def add(self, acc: list[int], args: Any) -> list[int]:
        v, w = args if self.fields[0] is None else (args[self.fields[0]], args[self.fields[1]])
        return [acc[0] + v * w, acc[1] + w]

    def merge(self, a: list[int], b: list[int]) -> list[int]:
        return [a[0] + b[0], a[1] + b[1]]

    def result(self, acc: list[int]) -> int | None:
        return acc[0] // acc[1] if acc[1] else None


# -- rows as Flink's sinks print them ------------------------------------------------------------

Format = Callable[[Any], str]


def text(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def dec2(v: Any) -> str:
    """A ``DECIMAL(10, 2)``'s print form (weir's DOUBLE rounded to it)."""
    return "null" if v is None else f"{v:.2f}"


def parts(v: Any) -> str:
    """``concat_distinct_agg``'s parts, sorted (see the module docstring)."""
    return "null" if v is None else "|".join(sorted(v.split("|")))


def time(v: Any) -> str:
    return "null" if v is None else ldt(v)


def row(result: dict[str, Any], columns: Sequence[tuple[str, Format]]) -> str:
    """One result record as a Flink row: ``columns`` are (field, format) in the row's order."""
    return ",".join(fmt(result[field]) for field, fmt in columns)


def flink_row(line: str, columns: Sequence[tuple[str, Format]]) -> str:
    """A Flink expected row with its ``concat_distinct_agg`` parts sorted, as ``row`` has it."""
    values = line.split(",")
    return ",".join(
        parts(v) if fmt is parts and v != "null" else v
        for v, (_, fmt) in zip(values, columns, strict=True)
    )
