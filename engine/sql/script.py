"""A ``.sql`` job file: statements that declare the job, its one source table, its aggregate
functions and its views (each view one queryable operator), in Flink's syntax.

    SET 'pipeline.name' = 'ad-stats';
    CREATE TABLE events (id STRING, event STRING, ts BIGINT, `value` DOUBLE,
        WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
      WITH ('connector' = 'url', 'url' = 'generator://ads?rate=1000',
            'allowed-lateness' = '5 s');
    CREATE FUNCTION median AS 'mypkg.aggs.Median';
    CREATE VIEW impressions AS SELECT id, window_start, window_end, COUNT(*) AS n …;
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlglot import exp

from weir.base.errors import ConfigError, WeirError
from weir.engine import agg
from weir.engine.agg import AggregateFunction
from weir.engine.job import DataStream, Job
from weir.engine.nodes import SqlStep, StatelessNode
from weir.engine.sources import from_url
from weir.engine.sql.build import TTL_SETTING, attach, other_view
from weir.engine.sql.columns import check_type, checker, declared
from weir.engine.sql.dialect import WeirFlink, parse, too_deep
from weir.engine.sql.errors import SqlError, SqlUnsupported
from weir.engine.sql.query import TableDef, at
from weir.engine.sql.select import plan_query
from weir.engine.sql.windowing import interval_ms
from weir.engine.watermarks import WatermarkStrategy

JOB_SETTINGS = ("pipeline.name", "pipeline.max-parallelism")
LATENESS_SETTING = "table.exec.emit.allow-lateness"
VIEW_SETTINGS = (LATENESS_SETTING, TTL_SETTING)  # hold for the views after them
TABLE_OPTIONS = ("connector", "url", "allowed-lateness", "idle-timeout")
DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|sec|min|h|d)?\s*$", re.IGNORECASE)
DURATION_MS = {"ms": 1, "s": 1_000, "sec": 1_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
TIME_TYPES = {exp.DType.BIGINT, exp.DType.INT}


def duration_ms(raw: str, what: str) -> int:
    """A Flink duration option (``'5 s'``, ``'500 ms'``, ``'2 min'``, a bare number of ms)."""
    found = DURATION.match(raw)
    if not found:
        raise SqlError(f"{what} = {raw!r} is not a duration; write e.g. '5 s', '500 ms', '2 min'")
    return int(found.group(1)) * DURATION_MS[(found.group(2) or "ms").lower()]


@dataclass
class _Script:
    source: str
    default_name: str
    settings: dict[str, str] = field(default_factory=dict)
    job: Job | None = None
    table: TableDef | None = None
    stream: DataStream | None = None
    functions: dict[str, AggregateFunction] = field(default_factory=dict)
    lateness_ms: int | None = None
    ttl_ms: int | None = None

    def run(self, statements: list[exp.Expr]) -> Job:
        for s in statements:  # the job's own settings hold wherever they are written
            if isinstance(s, exp.Set):
                self._settings(s, jobwide=True)
        for s in statements:
            self._statement(s)
        if self.job is None:
            raise SqlError(f"{self.source} declares no table; add CREATE TABLE … WITH ('url' = …)")
        if not self.job.operators:
            raise SqlError(
                f"{self.source} defines no view; add CREATE VIEW name AS SELECT … GROUP BY …"
            )
        return self.job

    def _statement(self, s: exp.Expr) -> None:
        if isinstance(s, exp.Set):
            self._settings(s, jobwide=False)
        elif isinstance(s, exp.Create) and s.kind == "TABLE":
            self._table(s)
        elif isinstance(s, exp.Create) and s.kind == "FUNCTION":
            self._function(s)
        elif isinstance(s, exp.Create) and s.kind == "VIEW":
            self._view(s)
        elif isinstance(s, exp.Insert):
            raise SqlUnsupported(
                f"INSERT INTO {s.this.sql(WeirFlink)}: a query's results are its "
                "view's state (served over "
                "HTTP) and go to `sink_url`; write CREATE VIEW name AS SELECT …"
            )
        elif isinstance(s, exp.Select):
            raise SqlUnsupported(
                f"a bare SELECT{at(s)}: name it, CREATE VIEW name AS SELECT …; the name is its "
                "operator's and its URL's (/{job}/{name}/state/{key})"
            )
        else:
            raise SqlUnsupported(
                f"statement {s.sql(WeirFlink)[:60]!r}: a .sql job holds SET, CREATE TABLE, CREATE "
                "FUNCTION and CREATE VIEW statements"
            )

    def _settings(self, s: exp.Set, *, jobwide: bool) -> None:
        for item in s.expressions:
            eq = item.this if isinstance(item, exp.SetItem) else None
            if not isinstance(eq, exp.EQ):
                raise SqlError(f"{s.sql(WeirFlink)}: write SET 'key' = 'value'")
            key, value = eq.this.name, eq.expression.name
            if key in JOB_SETTINGS and jobwide:
                self.settings[key] = value
            elif key == LATENESS_SETTING and not jobwide:
                self.lateness_ms = duration_ms(value, f"SET '{key}'")
            elif key == TTL_SETTING and not jobwide:
                self.ttl_ms = duration_ms(value, f"SET '{key}'")
            elif key not in JOB_SETTINGS and key not in VIEW_SETTINGS:
                known = ", ".join(f"'{k}'" for k in (*JOB_SETTINGS, *VIEW_SETTINGS))
                raise SqlError(f"SET '{key}' is not a setting weir knows; it knows {known}")

    def _new_job(self) -> Job:
        name = self.settings.get("pipeline.name", self.default_name)
        raw = self.settings.get("pipeline.max-parallelism", "128")
        if not raw.isdigit():
            raise SqlError(f"SET 'pipeline.max-parallelism' = {raw!r} is not a whole number")
        return Job(name, max_parallelism=int(raw))

    def _table(self, s: exp.Create) -> None:
        if self.job is not None:
            raise SqlUnsupported(
                f"CREATE TABLE {s.this.sql(WeirFlink)[:40]}: a job reads one source table, and "
                f"{self.table.name if self.table else ''!r} is declared already"
            )
        schema = s.this
        if not isinstance(schema, exp.Schema):
            raise SqlError(
                f"CREATE TABLE {schema.sql(WeirFlink)}: declare its columns, (id STRING, …)"
            )
        name = schema.this.name
        columns, time_col, bound = _columns(schema)
        types = {c: (check_type(c, d.args.get("kind")), _not_null(d)) for c, d in columns.items()}
        options = _options(s, name)
        watermarks = WatermarkStrategy.sql_delay(ms=bound)  # SQL's rule: max(ts) - delay
        if "idle-timeout" in options:
            watermarks = watermarks.with_idleness(
                duration_ms(options["idle-timeout"], "idle-timeout")
            )
        lateness = duration_ms(options.get("allowed-lateness", "0"), "'allowed-lateness'")
        self.job = self._new_job()
        try:
            source = from_url(options["url"])
        except ConfigError as exc:
            raise SqlError(f"CREATE TABLE {name} WITH ('url' = …): {exc}") from None
        stream = self.job.source(source, timestamp=time_col, watermarks=watermarks)
        check = checker(types, name)  # the declared types, once per record
        step = SqlStep(check.__qualname__, check=declared(types))
        self.stream = stream.step(StatelessNode("map", check, sql=step))
        self.table = TableDef(
            name, tuple(columns), time_col, lateness, _primary_key(schema), _proctime(schema)
        )

    def _function(self, s: exp.Create) -> None:
        name = s.this.name
        target = s.expression.name if isinstance(s.expression, exp.Literal) else ""
        self.functions[name] = _import_aggregate(name, target)

    def _view(self, s: exp.Create) -> None:
        if self.table is None or self.stream is None:
            raise SqlError(f"CREATE VIEW {s.this.name}: declare its table first, CREATE TABLE …")
        name, tables = s.this.name, {self.table.name: self.table}
        streams = {self.table.name: self.stream}
        view = other_view(s.expression, name, tables, streams, self.functions, self.ttl_ms)
        if view is not None:
            return
        plan = plan_query(s.expression, name, tables, self.functions, self.lateness_ms)
        attach(plan, self.stream, self.ttl_ms)


def _not_null(column: exp.ColumnDef) -> bool:
    constraints = column.args.get("constraints") or []
    return any(isinstance(c.args.get("kind"), exp.NotNullColumnConstraint) for c in constraints)


def _primary_key(schema: exp.Schema) -> tuple[str, ...] | None:
    """The table's ``PRIMARY KEY (…) NOT ENFORCED`` columns (a versioned table's key)."""
    found = [k for k in schema.expressions if isinstance(k, exp.PrimaryKey)]
    if not found:
        return None
    names = tuple(c.name for c in found[0].expressions)
    known = {c.name for c in schema.expressions if isinstance(c, exp.ColumnDef)}
    if unknown := [n for n in names if n not in known]:
        raise SqlError(f"PRIMARY KEY ({', '.join(unknown)}): no such column in the table")
    return names


def _computed(column: exp.ColumnDef) -> exp.Expr | None:
    """A computed column's expression (``c AS expr``), else None."""
    for constraint in column.args.get("constraints") or []:
        kind = constraint.args.get("kind")
        if isinstance(kind, exp.ComputedColumnConstraint):
            found: exp.Expr = kind.this
            return found
    return None


def _proctime(schema: exp.Schema) -> str | None:
    """The table's processing-time attribute, ``pt AS PROCTIME()`` (lookup joins read it);
    any other computed column is refused by name."""
    found = None
    for item in schema.expressions:
        expr = _computed(item) if isinstance(item, exp.ColumnDef) else None
        if expr is None:
            continue
        if not (isinstance(expr, exp.Anonymous) and expr.name.upper() == "PROCTIME"):
            raise SqlUnsupported(
                f"computed column {item.sql(WeirFlink)}: weir's tables compute none but a "
                "processing-time attribute (pt AS PROCTIME()); derive values in the view"
            )
        if found is not None:
            raise SqlError(f"CREATE TABLE: two processing-time attributes, {found} and {item.name}")
        found = item.name
    return found


def _columns(schema: exp.Schema) -> tuple[dict[str, exp.ColumnDef], str, int]:
    """The columns, the time attribute and its watermark delay (ms)."""
    columns: dict[str, exp.ColumnDef] = {}
    watermark: exp.WatermarkColumnConstraint | None = None
    for item in schema.expressions:
        if isinstance(item, exp.ColumnDef) and _computed(item) is not None:
            continue  # ``pt AS PROCTIME()`` (``_proctime``): a time, not a field of the records
        if isinstance(item, exp.ColumnDef):
            columns[item.name] = item
        elif isinstance(item, exp.WatermarkColumnConstraint):
            watermark = item
        elif not isinstance(item, exp.PrimaryKey):
            raise SqlUnsupported(
                f"{item.sql(WeirFlink)} in CREATE TABLE: weir reads columns, PRIMARY KEY and "
                "WATERMARK"
            )
    table = schema.this.name
    if watermark is None:
        raise SqlError(
            f"CREATE TABLE {table} has no time attribute; add WATERMARK FOR ts AS ts - INTERVAL "
            "'2' SECOND (ts: a BIGINT column of epoch milliseconds)"
        )
    time_col = watermark.this.name
    if time_col not in columns:
        raise SqlError(f"WATERMARK FOR {time_col}: table {table} has no column {time_col!r}")
    kind = columns[time_col].args.get("kind")
    if isinstance(kind, exp.DataType) and kind.this not in TIME_TYPES:
        raise SqlUnsupported(
            f"WATERMARK FOR {time_col}: {time_col} is {kind.sql(WeirFlink)}; weir's "
            "event time is epoch "
            f"milliseconds, declare it `{time_col} BIGINT`"
        )
    return columns, time_col, _bound(watermark, time_col)


def _bound(watermark: exp.WatermarkColumnConstraint, time_col: str) -> int:
    expr = watermark.expression
    if isinstance(expr, exp.Column) and expr.name == time_col:
        return 0
    if (
        isinstance(expr, exp.Sub)
        and isinstance(expr.this, exp.Column)
        and expr.this.name == time_col
    ):
        return interval_ms(expr.expression, f"WATERMARK FOR {time_col}'s delay")
    raise SqlUnsupported(
        f"WATERMARK FOR {time_col} AS {expr.sql(WeirFlink)}: weir's watermarks are bounded "
        f"out-of-orderness, {time_col} - INTERVAL 'n' SECOND (or {time_col} for none)"
    )


def _options(s: exp.Create, table: str) -> dict[str, str]:
    props = s.args.get("properties")
    options: dict[str, str] = {}
    for p in props.expressions if props is not None else []:
        if not isinstance(p, exp.Property):
            raise SqlUnsupported(
                f"{p.sql(WeirFlink)} in CREATE TABLE {table}: write WITH ('key' = 'value')"
            )
        options[p.name] = p.args["value"].name
    unknown = sorted(set(options) - set(TABLE_OPTIONS))
    if unknown:
        raise SqlError(
            f"CREATE TABLE {table} WITH option(s) {', '.join(unknown)} unknown; "
            f"weir reads {', '.join(TABLE_OPTIONS)}"
        )
    if options.get("connector", "url") != "url":
        raise SqlError(
            f"CREATE TABLE {table}: connector {options['connector']!r}; weir's tables have "
            "'connector' = 'url' and 'url' = 'kafka://…' | 'file:///…' | 'generator://ads?…'"
        )
    if "url" not in options:
        raise SqlError(f"CREATE TABLE {table} has no 'url' option; add WITH ('url' = 'file:///…')")
    return options


def _import_aggregate(name: str, target: str) -> AggregateFunction:
    module_name, _, attr = target.rpartition(".")
    if not module_name:
        raise SqlError(
            f"CREATE FUNCTION {name} AS {target!r}: name a class or object as 'package.module.Name'"
        )
    try:
        found: Any = getattr(importlib.import_module(module_name), attr)
    except WeirError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever the user's module raises
        raise SqlError(
            f"CREATE FUNCTION {name} AS {target!r}: cannot load it ({type(exc).__name__}: {exc}); "
            "is its package importable from the job file's directory or PYTHONPATH?"
        ) from None
    function = found() if isinstance(found, type) else found
    try:
        return agg.custom(function).function
    except TypeError as exc:
        raise SqlError(f"CREATE FUNCTION {name} AS {target!r}: {exc}") from None


def load_script(path: Path) -> Job:
    """The job a ``.sql`` file declares; its name defaults to the file's stem."""
    text = path.read_text(encoding="utf-8")
    try:
        job = _Script(str(path), path.stem).run(parse(text, str(path)))
    except RecursionError:  # a long chain of operators compiles recursively
        raise too_deep(str(path)) from None
    job.validate()
    return job
