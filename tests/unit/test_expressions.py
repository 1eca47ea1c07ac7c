"""The expression API: what it builds (the IR the job graph carries for the columnar loop), the
mistakes it refuses by name, ``weir explain``'s text, and the dead letters a record an
expression fails on goes to, through ``weir.testing``."""

from __future__ import annotations

from typing import Any

import pytest

import weir
from weir import (
    ExpressionError,
    Job,
    JobDefinitionError,
    agg,
    coalesce,
    col,
    lit,
    sources,
    testing,
    when,
    windows,
)
from weir.engine import explain
from weir.engine.kernels import ir
from weir.engine.nodes import KeyByNode, StatelessNode


def _source(job: Job, **kw: Any) -> weir.DataStream:
    return job.source(sources.jsonl("unused.jsonl"), **kw)


def _window(keyed: weir.KeyedStream, **aggs: Any) -> None:
    keyed.window(windows.tumbling(ms=100)).aggregate("w", **(aggs or {"n": agg.count()}))


# -- what the graph carries ---------------------------------------------------------------------


def test_the_graph_carries_the_ir_where_the_columnar_loop_reads_it() -> None:
    job = Job("j")
    stream = _source(job, timestamp=col("t") * 1000)
    pred = (col("event") == "impression") & col("v").is_not_null()
    keyed = (
        stream.filter(pred)
        .with_columns(total=col("price") * col("qty"), src="web")
        .key_by(col("user").cast(str))
    )
    _window(keyed, s=agg.sum(col("total") / 100), m=agg.max(col("v")), c=agg.count(col("u")))
    source = job.sources[0]
    assert source.timestamp_expr == ir.Arith("mul", ir.Col("t"), ir.Lit(1000))
    assert callable(source.timestamp)
    flt = source.children[0]
    assert isinstance(flt, StatelessNode) and flt.kind == "filter" and flt.expr == pred.ir
    proj = flt.children[0]
    assert isinstance(proj, StatelessNode) and proj.kind == "with_columns"
    assert proj.columns == {
        "total": ir.Arith("mul", ir.Col("price"), ir.Col("qty")),
        "src": ir.Lit("web"),
    }
    key = proj.children[0]
    assert isinstance(key, KeyByNode) and key.key_expr == ir.Cast(ir.Col("user"), "str")
    aggs = job.operators["w"].aggregates  # type: ignore[union-attr]
    assert aggs["s"] == agg.Builtin("sum", expr=ir.Arith("div", ir.Col("total"), ir.Lit(100)))
    assert aggs["m"] == agg.Builtin("max", "v")  # a plain column stays a field
    assert aggs["c"] == agg.Builtin("count", "u", "skip")  # count's too: count("u") is the same


def test_a_plain_column_is_the_field_form() -> None:
    job = Job("j")
    _window(_source(job, timestamp=col("ts")).key_by(col("id")), s=agg.sum(col("v")))
    source = job.sources[0]
    key = source.children[0]
    assert source.timestamp == "ts" and source.timestamp_expr is None
    assert isinstance(key, KeyByNode) and key.key == "id" and key.key_expr is None
    assert job.operators["w"].aggregates["s"] == agg.sum("v")  # type: ignore[union-attr]


def test_lambdas_leave_the_expression_fields_empty() -> None:
    job = Job("j")
    _window(_source(job).filter(lambda e: e["v"] > 1).map(dict).key_by("id"))
    flt = job.sources[0].children[0]
    assert isinstance(flt, StatelessNode) and flt.expr is None and flt.columns is None


def test_weir_explain_prints_expressions() -> None:
    job = Job("j")
    keyed = (
        _source(job, timestamp=col("t") * 1000)
        .filter((col("event") == "impression") & (col("v") > 1))
        .with_columns(ratio=col("v") / col("n"))
        .key_by(col("id").cast(str))
    )
    _window(
        keyed,
        n=agg.count(col("u")),
        c=agg.count(col("u") * 2),
        s=agg.sum(col("v") * 2),
        k=agg.max(col("v") * 2, nulls="skip"),
        m=agg.min("v"),
    )
    text = explain.render(explain.describe(job))
    assert 'time: col("t") * 1000,' in text
    assert '    filter (col("event") == "impression") & (col("v") > 1)\n' in text
    assert '      with_columns ratio=col("v") / col("n")\n' in text
    assert '        key_by col("id").cast(str)\n' in text
    assert "n = count(u)" in text and 'c = count(col("u") * 2)' in text  # a column is a field
    assert 's = sum(col("v") * 2)' in text and 'k = max(col("v") * 2, nulls=skip)' in text
    assert "m = min(v)" in text


# -- mistakes refused by name -------------------------------------------------------------------


def _truth(e: weir.Expr) -> None:
    if e:
        pass


@pytest.mark.parametrize(
    "mistake",
    [
        lambda: col("a") > 1 and col("b") < 2,
        lambda: col("a") > 1 or col("b") < 2,
        lambda: not col("a"),
        lambda: 1 < col("a") < 5,
        lambda: col("a") in [1, 2],
        lambda: _truth(col("a") == 1),
    ],
    ids=["and", "or", "not", "chained", "in", "if"],
)
def test_python_logic_on_an_expression_names_the_operators(mistake: Any) -> None:
    with pytest.raises(
        TypeError, match=r"use & for and, \| for or, ~ for not, \.is_in\(\[\.\.\.\]\)"
    ):
        mistake()


def test_membership_in_an_expression_names_is_in() -> None:
    with pytest.raises(ExpressionError, match=r"not a container; test membership with \.is_in"):
        _ = 1 in col("a")


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: col("a") == None, r"is NULL for every record .* col\(\"a\"\)\.is_null\(\)"),  # noqa: E711
        (lambda: col("a") + 2**70, r"the int 1180591620717411303424 is outside int64"),
        (lambda: lit([1]), r"list \[1\] is not an expression or a literal"),
        (lambda: col(""), r"col\(''\): pass a field name"),
        (lambda: col("a").cast(bool), r"cast to int, float or str"),
        (lambda: col("a").is_in("ab"), r"pass a list of values"),
        (lambda: col("a").str.starts_with(1), r"str\.starts_with\(1\): pass a string"),
        (lambda: col("a").alias(""), r"alias\(''\)"),
        (lambda: coalesce(), r"pass one or more expressions"),
    ],
)
def test_bad_expressions_are_refused_when_built(build: Any, match: str) -> None:
    with pytest.raises(ExpressionError, match=match):
        build()


def test_bad_steps_are_refused_when_the_job_is_built() -> None:
    stream = _source(Job("j"))
    with pytest.raises(JobDefinitionError, match=r"give it \.alias\('name'\)"):
        stream.with_columns(lit(1))
    with pytest.raises(JobDefinitionError, match=r"field 'v' is given twice"):
        stream.with_columns(col("v") * 2, v=1)
    with pytest.raises(JobDefinitionError, match=r"with_columns\(x=\.\.\.\): .*object"):
        stream.with_columns(x=object())
    with pytest.raises(JobDefinitionError, match=r"pass one or more name=expression"):
        stream.with_columns()
    with pytest.raises(TypeError, match=r"agg\.sum\(3\): pass a field name or an expression"):
        agg.sum(3)  # type: ignore[arg-type]


def test_an_expression_is_not_hashable_nor_a_bool() -> None:
    with pytest.raises(TypeError):
        hash(col("a"))
    assert isinstance(col("a") == col("b"), weir.Expr)


# -- records an expression fails on -------------------------------------------------------------


def _dead(job: Job, events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(d["stage"], d["reason"]) for d in testing.run(job, events).dead]


def test_a_filter_that_fails_on_a_record_names_its_expression() -> None:
    job = Job("j")
    _window(_source(job).filter(col("v") / col("n") > 1).key_by("id"))
    assert _dead(
        job, [{"id": "a", "ts": 1, "v": 1, "n": 0}, {"id": "a", "ts": 2, "v": 4, "n": 2}]
    ) == [("filter", 'filter (col("v") / col("n") > 1) raised: 1 / 0: division by zero')]
    job = Job("k")
    _window(_source(job).filter(col("v")).key_by("id"))
    assert _dead(job, [{"id": "a", "ts": 1, "v": 3}]) == [
        ("filter", 'filter (col("v")) raised: int 3 is not a boolean')
    ]


def test_with_columns_key_and_time_failures_name_their_expressions() -> None:
    job = Job("j")
    stream = _source(job, timestamp=col("s") * 1000)
    keyed = stream.with_columns(r=col("v") % col("n")).key_by(col("k") + 1)
    _window(keyed)
    events = [
        {"s": 1, "v": 1, "n": 0, "k": 1},
        {"s": 1, "v": 1, "n": 1, "k": "x"},
        {"s": 1, "v": 1, "n": 1},
        {"s": None},
        {"s": 2**62, "v": 1, "n": 1, "k": 1},
        {"s": 1, "v": 1, "n": 1, "k": 1},
    ]
    assert _dead(job, events) == [
        ("timestamp", 'timestamp (col("s") * 1000) is NULL; an event time must be an integer '
                      "(epoch milliseconds)"),
        ("timestamp", 'timestamp (col("s") * 1000) raised: 4611686018427387904 * 1000 '
                      "overflows int64"),
        ("with_columns", 'with_columns r=(col("v") % col("n")) raised: 1 % 0: modulo by zero'),
        ("key_by", "key_by (col(\"k\") + 1) raised: cannot compute str 'x' + int 1: "
                  "arithmetic takes numbers"),
        ("key_by", 'key_by (col("k") + 1) is NULL; a key must be a string or an int'),
    ]  # fmt: skip


def test_aggregate_inputs_refuse_null_and_non_numbers_and_count_skips_null() -> None:
    job = Job("j")
    _window(_source(job).key_by("id"), n=agg.count(), c=agg.count(col("u")),
            s=agg.sum(col("v") * 2))  # fmt: skip
    events = [
        {"id": "a", "ts": 1, "v": 1, "u": "x"},
        {"id": "a", "ts": 2, "v": 2},
        {"id": "a", "ts": 3},
        {"id": "a", "ts": 4, "v": "z"},
        {"id": "a", "ts": 5, "v": 2**62},
    ]
    ran = testing.run(job, events)
    assert [(r["n"], r["c"], r["s"]) for r in ran.results] == [(2, 1, 6)]
    assert [(d["stage"], d["reason"]) for d in ran.dead] == [
        ("aggregate:w", 'input (col("v") * 2) is NULL, and an aggregate that rejects NULLs '
                        "reads it (give it nulls='skip' to pass over NULLs, as SQL's aggregates "
                        "do)"),
        ("aggregate:w", "input (col(\"v\") * 2) raised: cannot compute str 'z' * int 2: "
                        "arithmetic takes numbers"),
        ("aggregate:w", 'input (col("v") * 2) raised: 4611686018427387904 * 2 '
                        "overflows int64"),
    ]  # fmt: skip


def test_an_expression_input_follows_nulls_as_a_field_does() -> None:
    # NULL (n is null or missing) is skipped under nulls="skip" and not counted by count(x); an
    # error (n == 0) is a dead letter under either rule; the same job over a with_columns field
    # gives the same windows
    events = [
        {"id": "a", "ts": 1, "v": 1, "n": 1},
        {"id": "a", "ts": 2, "v": 2, "n": None},
        {"id": "a", "ts": 3, "v": 3},
        {"id": "a", "ts": 4, "v": 4, "n": 2},
        {"id": "a", "ts": 5, "v": 5, "n": 0},
    ]
    ratio = col("v") / col("n")

    def job_of(x: Any, before: Any = lambda s: s) -> Job:
        job = Job("j")
        _window(before(_source(job)).key_by("id"), n=agg.count(), c=agg.count(x),
                s=agg.sum(x, nulls="skip"), m=agg.max(x, nulls="skip"), a=agg.avg(x),
                e=agg.mean(x, nulls="skip"))  # fmt: skip
        return job

    ran = testing.run(job_of(ratio), events)
    assert [(r["n"], r["c"], r["s"], r["m"], r["a"], r["e"]) for r in ran.results] == [
        (4, 2, 3.0, 2.0, 1.5, 1.5)
    ]
    assert [(d["stage"], d["reason"]) for d in ran.dead] == [
        ("aggregate:w", 'input (col("v") / col("n")) raised: 5 / 0: division by zero')
    ]
    twin = testing.run(job_of("r", lambda s: s.with_columns(r=ratio)), events[:4])
    assert twin.results == ran.results and twin.dead == []


@pytest.mark.parametrize("parallelism", [1, 2])
def test_a_session_folds_expression_inputs_beside_a_refused_record(parallelism: int) -> None:
    job = Job("j")
    _source(job).key_by("id").window(windows.session(gap_ms=100)).aggregate(
        "w", n=agg.count(), s=agg.sum(col("v") * 2), k=agg.sum(col("v") + 1, nulls="skip")
    )
    events = [{"id": "a", "ts": 1, "v": 1}, {"id": "a", "ts": 2}, {"id": "a", "ts": 3, "v": 3}]
    ran = testing.run(job, events, parallelism=parallelism)
    assert [(r["n"], r["s"], r["k"]) for r in ran.results] == [(2, 8, 6)]
    assert [d["stage"] for d in ran.dead] == ["aggregate:w"]


def test_when_then_evaluates_a_value_only_where_it_is_taken() -> None:
    job = Job("j")
    ratio = when(col("n") != 0).then(col("v") / col("n")).otherwise(0.0)
    _window(_source(job).with_columns(r=ratio).key_by("id"), m=agg.max("r"))
    ran = testing.run(
        job, [{"id": "a", "ts": 1, "v": 1, "n": 0}, {"id": "a", "ts": 2, "v": 3, "n": 2}]
    )
    assert ran.dead == [] and [r["m"] for r in ran.results] == [1.5]


def test_an_expression_on_a_record_that_is_not_an_object() -> None:
    job = Job("j")
    _window(_source(job).map(lambda e: e["v"]).filter(col("v") > 1).key_by("id"))
    assert _dead(job, [{"ts": 1, "v": 5}]) == [
        ("filter", 'filter (col("v") > 1) raised: the record is int, not an object with fields')
    ]


# -- batch functions ----------------------------------------------------------------------------


def test_map_batch_and_filter_batch_equal_their_per_record_forms() -> None:
    events = [{"id": "ab"[i % 2], "ts": i, "v": i, "s": "x" if i % 3 else None} for i in range(40)]

    def batch_job(batched: bool) -> Job:
        job = Job("b")
        stream = _source(job)
        if batched:
            stream = stream.filter_batch(lambda b: b["v"] % 4 != 1).map_batch(
                lambda b: {**b, "w": b["v"] * 2, "s": b["s"]}
            )
        else:
            stream = stream.filter(lambda e: e["v"] % 4 != 1).map(lambda e: {**e, "w": e["v"] * 2})
        _window(stream.key_by("id"), w=agg.sum("w"), n=agg.count(col("s")))
        return job

    for size in (1, 7, 64):
        got = testing.run(batch_job(True), events, batch_size=size)
        assert got.results == testing.run(batch_job(False), events, batch_size=size).results
        assert got.dead == []


def test_a_batch_sees_typed_columns() -> None:
    seen: list[dict[str, Any]] = []

    def look(b: dict[str, Any]) -> dict[str, Any]:
        seen.append({k: (v.dtype.name, v.tolist()) for k, v in b.items()})
        return b

    job = Job("b")
    _window(_source(job).map_batch(look).key_by("id"))
    testing.run(job, [{"id": "a", "ts": 1, "f": 1.5, "b": True}, {"id": "a", "ts": 2, "x": 2**64}])
    assert seen == [
        {
            "id": ("object", ["a", "a"]),
            "ts": ("int64", [1, 2]),
            "f": ("object", [1.5, None]),
            "b": ("object", [True, None]),
            "x": ("object", [None, 2**64]),
        }
    ]


def test_a_failing_batch_function_sends_only_its_bad_records_aside() -> None:
    def checked(b: dict[str, Any]) -> dict[str, Any]:
        if (b["v"] < 0).any():
            raise ValueError("negative value")
        return b

    job = Job("b")
    _window(_source(job).map_batch(checked).filter_batch(lambda b: b["v"] >= 1).key_by("id"))
    events = [
        {"id": "a", "ts": 1, "v": 2},
        {"id": "a", "ts": 2, "v": -1},
        {"id": "a", "ts": 3, "v": 0},
    ]
    ran = testing.run(job, events)
    assert [r["n"] for r in ran.results] == [1]
    assert [(d["stage"], d["reason"]) for d in ran.dead] == [
        ("map_batch", "map_batch raised ValueError: negative value")
    ]


@pytest.mark.parametrize(
    ("fn", "reason"),
    [
        (lambda b: [1], "TypeError: map_batch's function returned list; return a dict"),
        (lambda b: {"v": [1, 2]}, "ValueError: map_batch's column 'v' has 2 values for a batch "
                                  "of 1 records"),
    ],
)  # fmt: skip
def test_a_batch_function_that_returns_the_wrong_shape(fn: Any, reason: str) -> None:
    job = Job("b")
    _window(_source(job).map_batch(fn).key_by("id"))
    dead = _dead(job, [{"id": "a", "ts": 1}])
    assert len(dead) == 1 and dead[0][1].startswith(f"map_batch raised {reason}")


def test_filter_batch_needs_booleans() -> None:
    job = Job("b")
    _window(_source(job).filter_batch(lambda b: b["ts"]).key_by("id"))
    assert _dead(job, [{"id": "a", "ts": 1}]) == [
        ("filter_batch", "filter_batch raised TypeError: filter_batch's function returned int64 "
                         "values; return booleans, one per record (e.g. batch['value'] > 10)")
    ]  # fmt: skip


def test_each_builder_makes_its_node() -> None:
    v = col("v")
    assert v.is_null().ir == ir.IsNull(ir.Col("v"))
    assert v.is_not_null().ir == ir.Not(ir.IsNull(ir.Col("v")))
    assert v.is_in([1, "a", None]).ir == ir.IsIn(ir.Col("v"), (1, "a", None))
    assert v.fill_null(0).ir == ir.Coalesce((ir.Col("v"), ir.Lit(0)))
    assert v.str.starts_with("a").ir == ir.StartsWith(ir.Col("v"), "a")
    assert v.str.ends_with(".json").ir == ir.EndsWith(ir.Col("v"), ".json")
    assert v.str.contains("b").ir == ir.Contains(ir.Col("v"), "b")
    assert (v // 2).ir == ir.Arith("floordiv", ir.Col("v"), ir.Lit(2))
    assert (1 - v).ir == ir.Arith("sub", ir.Lit(1), ir.Col("v"))
    assert (True & v).ir == ir.And(ir.Lit(True), ir.Col("v"))
    assert (~v | False).ir == ir.Or(ir.Not(ir.Col("v")), ir.Lit(False))
    assert (1 < v).ir == ir.Cmp("gt", ir.Col("v"), ir.Lit(1))  # Python reflects it
    assert when(v > 1).then("big").ir == ir.Case(
        ((ir.Cmp("gt", ir.Col("v"), ir.Lit(1)), ir.Lit("big")),), ir.Lit(None)
    )
    assert (v * 2).alias("w").output_name == "w" and (v * 2).output_name == "v"
    assert repr((v * 2).alias("w")) == '(col("v") * 2).alias("w")'


def test_the_docstring_examples_run() -> None:
    import doctest
    import importlib

    names = ["expressions", "expressions.builder", "expressions.render", "kernels.rows",
             "batches", "agg", "streams"]  # fmt: skip
    for name in names:
        module = importlib.import_module(f"weir.engine.{name}")
        failed, tried = doctest.testmod(module)
        assert failed == 0 and tried > 0, name
    failed, tried = doctest.testmod(testing)
    assert failed == 0 and tried > 0


def test_generated_code_takes_only_known_words_from_the_ir() -> None:
    """Names and literals are constants of the generated function; the one word of a node
    that becomes source text, a cast's type, is checked."""
    from weir.engine.kernels.rows import compile_row

    tricky = 'x") or __import__("os").system("true") or ("'
    f = compile_row(ir.Cmp("eq", ir.Col(tricky), ir.Lit(tricky)))
    assert f({tricky: tricky}) is True
    with pytest.raises(TypeError, match=r"Cast to 'int\) or print\(1'"):
        compile_row(ir.Cast(ir.Col("a"), "int) or print(1"))  # type: ignore[arg-type]
