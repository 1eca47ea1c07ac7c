"""Expressions on random trees and records: the per-record closures (what the chain runs) equal
the IR's one-record reference and the columnar evaluator (both kernel implementations), value
for value and error for error; the rendered text builds the same tree back; an expression job
equals its lambda twin and gives the same results and dead letters at any batch size."""

from __future__ import annotations

import json
import struct
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.property.test_kernels_expr import FIELDS, exprs, records
from weir import Job, WatermarkStrategy, agg, coalesce, col, lit, sources, testing, when, windows
from weir.engine.expressions import render
from weir.engine.kernels import Kernels, ir
from weir.engine.kernels.expr import ERROR, Evaluator, evaluate
from weir.engine.kernels.rows import compile_row
from weir.engine.kernels.scan import scan_block

NAMESPACE = {"col": col, "lit": lit, "when": when, "coalesce": coalesce}


def _typed(x: Any) -> Any:
    """A value with its type (and a float's bits, so -0.0 is not 0.0)."""
    return (float, struct.pack("<d", x)) if type(x) is float else (type(x), x)


def _outcome(fn: Any, *args: Any) -> Any:
    try:
        return ("value", _typed(fn(*args)))
    except ir.ExprError as exc:
        return ("error", str(exc))


@settings(max_examples=500)
@given(records, exprs)
def test_the_per_record_closures_equal_the_reference_and_the_columns(
    kernels: Kernels, recs: list[dict[str, Any]], e: ir.Expr
) -> None:
    f = compile_row(e)
    block = b"".join(json.dumps(r).encode() + b"\n" for r in recs)
    scan = scan_block(kernels.scan_lines, block, FIELDS)
    vec, errors, data = evaluate(kernels, e, scan)
    ev = Evaluator(kernels, scan)
    ev.data = data
    for i, line in enumerate(block.splitlines()):
        rec = orjson.loads(line)  # what the chain decodes, and the scanner reads
        want = _outcome(ir.evaluate_row, e, rec)
        assert _outcome(f, rec) == want, (e, rec)
        if want[0] == "error":
            assert vec.tags[i] == ERROR and errors[i] == want[1], (e, rec)
        else:
            assert i not in errors and ("value", _typed(ev.value(vec, i))) == want, (e, rec)


@settings(max_examples=300)
@given(st.lists(st.one_of(records.map(lambda rs: rs[0]), st.integers())), exprs)
def test_the_step_forms_of_a_compiled_expression(recs: list[Any], e: ir.Expr) -> None:
    """A filter's, an aggregate's and a key's form: the reference's value shaped as each step
    takes it, and every error (a record that is not an object too) rewritten by ``wrap``."""
    wrap = "step: {}".format
    pred = compile_row(e, result="predicate", wrap=wrap)
    flag = compile_row(e, result="flag", wrap=wrap)
    req = compile_row(e, wrap=wrap, null="NULL where a value is needed")
    for rec in recs:
        if not isinstance(rec, dict):
            want: Any = ("error", wrap("the record is int, not an object with fields"))
            assert _outcome(pred, rec) == _outcome(flag, rec) == _outcome(req, rec) == want
            continue
        try:
            v = ir.evaluate_row(e, rec)
        except ir.ExprError as exc:
            want = ("error", wrap(str(exc)))
            assert _outcome(pred, rec) == _outcome(flag, rec) == _outcome(req, rec) == want
            continue
        assert _outcome(flag, rec) == ("value", _typed(0 if v is None else 1))
        if v is None:
            assert _outcome(req, rec) == ("error", "NULL where a value is needed")
        else:
            assert _outcome(req, rec) == ("value", _typed(v))
        if v is None or type(v) is bool:
            assert _outcome(pred, rec) == ("value", _typed(v is True))
        else:
            assert _outcome(pred, rec) == (
                "error",
                wrap(f"{type(v).__name__} {v!r} is not a boolean"),
            )


@settings(max_examples=500)
@given(exprs)
def test_the_rendered_text_builds_the_same_tree(e: ir.Expr) -> None:
    text = render(e)
    built = eval(text, dict(NAMESPACE))  # noqa: S307 - our own rendering of a generated tree
    assert repr(built.ir) == repr(e), text
    assert repr(built) == text


# -- jobs: expressions against lambdas, through weir.testing ------------------------------------

events = st.lists(
    st.fixed_dictionaries(
        {
            "id": st.sampled_from(["a", "b", "c"]),
            "event": st.sampled_from(["impression", "click"]),
            "t": st.integers(0, 60),
            "value": st.integers(-5, 100),
            "qty": st.integers(0, 3),
        }
    ),
    max_size=60,
)


def _job(expressions: bool) -> Job:
    job = Job("twin")
    stream = job.source(
        sources.jsonl("unused.jsonl"),
        timestamp=col("t") * 10 if expressions else (lambda e: e["t"] * 10),
        watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=50),
    )
    if expressions:
        keyed = (
            stream.filter((col("event") == "impression") & (col("value") > 0))
            .with_columns(total=col("value") * col("qty"), half=col("value") / 2)
            .key_by(col("value") % 3)
        )
        aggs = {
            "n": agg.count(),
            "total": agg.sum("total"),
            "half": agg.max(col("half")),
            "big": agg.count(when(col("value") > 50).then(1)),
            "mean": agg.mean(col("qty") - 1),
        }
    else:
        keyed = (
            stream.filter(lambda e: e["event"] == "impression" and e["value"] > 0)
            .map(lambda e: {**e, "total": e["value"] * e["qty"], "half": e["value"] / 2})
            .map(lambda e: {**e, "big": 1 if e["value"] > 50 else 0, "q1": e["qty"] - 1})
            .key_by(lambda e: e["value"] % 3)
        )
        aggs = {
            "n": agg.count(),
            "total": agg.sum("total"),
            "half": agg.max("half"),
            "big": agg.sum("big"),
            "mean": agg.mean("q1"),
        }
    keyed.window(windows.tumbling(ms=100), allowed_lateness_ms=20).aggregate("w", **aggs)
    return job


@settings(max_examples=30, deadline=None)
@given(events, st.sampled_from([1, 7, 1024]))
def test_an_expression_job_equals_its_lambda_twin(evs: list[dict[str, Any]], batch: int) -> None:
    got = testing.run(_job(True), evs, batch_size=batch)
    want = testing.run(_job(False), evs, batch_size=batch)
    assert got.results == want.results
    assert [(x["key"], x["ts"]) for x in got.late] == [(x["key"], x["ts"]) for x in want.late]
    assert got.dead == want.dead == []


dirty = st.lists(
    st.dictionaries(
        st.sampled_from(["ts", "v", "n", "k"]),
        st.one_of(st.none(), st.integers(-3, 3), st.sampled_from([1.5, "x", True, 1 << 63])),
        max_size=4,
    ),
    max_size=30,
)


def _dirty_job() -> Job:
    job = Job("dirty")
    stream = job.source(sources.jsonl("unused.jsonl"), timestamp=col("ts").fill_null(0) * 10)
    (
        stream.filter(col("v") / col("n") >= 0)
        .with_columns(r=col("v") // col("n"))
        .key_by(coalesce(col("k"), "none").cast(str))
        .window(windows.tumbling(ms=20))
        .aggregate("w", n=agg.count(col("r")), s=agg.sum(col("r") * 2))
    )
    return job


@settings(max_examples=50, deadline=None)
@given(dirty)
def test_results_and_dead_letters_do_not_depend_on_batching(evs: list[dict[str, Any]]) -> None:
    """Records an expression fails on go aside with the same reasons whether the batch they
    came in took the fast path or was redone record by record."""
    one = testing.run(_dirty_job(), evs, batch_size=1)
    many = testing.run(_dirty_job(), evs, batch_size=1024)
    assert one.results == many.results
    # the same letters; their order follows the steps' order within a batch
    assert sorted(map(repr, one.dead)) == sorted(map(repr, many.dead))
    stages = {"timestamp", "filter", "with_columns", "key_by", "aggregate:w"}
    assert {d["stage"] for d in one.dead} <= stages
