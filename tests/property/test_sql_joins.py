"""SQL's outer interval joins and temporal joins against brute-force models written from their
rules, on two inputs interleaved at random (some records late), at any batching, with
restores from the state written in between (``tests/support/join_support.py``): the rows and
the late records equal the model's whatever the batching."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.property.test_batching import BATCHING
from tests.property.test_joins import INPUTS, cuts, late_of, late_ref
from tests.support.join_reference import Arrival, freeze, interval_join
from tests.support.join_support import drive
from weir.engine.sql.outerjoin import OuterIntervalJoin
from weir.engine.sql.sqljoin import JoinPlan
from weir.engine.sql.temporal import TemporalJoin, TemporalPlan

COLUMNS = (("l", 0, "id"), ("r", 1, "id"))


def outer_plan(kind: str, lower: int, upper: int, lo_incl: bool, hi_incl: bool) -> JoinPlan:
    return JoinPlan(
        name="j", tables=("a", "b"), keys=(("k",), ("k",)), filters=(None, None),
        lower=lower, upper=upper, lower_inclusive=lo_incl, upper_inclusive=hi_incl,
        columns=COLUMNS, kind=kind,
    )  # fmt: skip


def outer_model(
    arrivals: list[Arrival], kind: str, lower: int, upper: int, lo_incl: bool, hi_incl: bool
) -> Counter[Any]:
    """The inner join's pairs (the reference), plus each on-time record of an outer side
    that is in none of them."""
    pairs, late = interval_join(
        arrivals, lower, upper, lower_inclusive=lo_incl, upper_inclusive=hi_incl
    )
    out: Counter[Any] = Counter()
    joined: set[Any] = set()
    for (key, left, right, _), n in pairs.items():
        lid, rid = dict(left)["id"], dict(right)["id"]
        out[(key, lid, rid)] += n
        joined |= {("left", lid), ("right", rid)}
    late_ids = {(a.side, a.rec["id"]) for a in late}
    for a in arrivals:
        mine = (a.side, a.rec["id"])
        if mine in joined or mine in late_ids:
            continue
        if a.side == "left" and kind in ("LEFT", "FULL"):
            out[(a.key, a.rec["id"], None)] += 1
        if a.side == "right" and kind in ("RIGHT", "FULL"):
            out[(a.key, None, a.rec["id"])] += 1
    return out


BOUNDS = st.tuples(
    st.integers(-8, 8), st.sampled_from([0, 1, 3, 10, 40]), st.booleans(), st.booleans()
)


@settings(BATCHING, max_examples=120)
@given(data=st.data(), bounds=BOUNDS, kind=st.sampled_from(["LEFT", "RIGHT", "FULL"]))
def test_outer_interval_join_matches_the_model_at_any_batching(
    data: st.DataObject, bounds: tuple[int, int, bool, bool], kind: str
) -> None:
    arrivals = data.draw(INPUTS)
    sizes, restarts = data.draw(cuts(len(arrivals)))
    lower, width, lo_incl, hi_incl = bounds
    shape = (lower, lower + width, lo_incl, hi_incl)
    one = drive(OuterIntervalJoin(outer_plan(kind, *shape)), arrivals, [1] * len(arrivals))
    cut = drive(OuterIntervalJoin(outer_plan(kind, *shape)), arrivals, sizes, restarts)
    assert Counter(map(freeze, cut.results)) == Counter(map(freeze, one.results))
    assert late_of(cut.late) == late_of(one.late)
    got = Counter((r["key"], r["l"], r["r"]) for r in one.results)
    assert got == outer_model(arrivals, kind, *shape)
    assert late_of(one.late) == late_ref([a for a in arrivals if a.ts < a.wm])
    assert not one.dead


def temporal_model(arrivals: list[Arrival], left_join: bool) -> tuple[Counter[Any], list[Any]]:
    """Left records are probe rows, right ones versions. A probe row at ``t`` above the
    watermark it arrives under joins, once a later arrival's watermark reaches ``t`` (or at
    the end), the version of its key with the largest ``(ts, arrival)`` at or before ``t`` among
    those that arrived before then; a version is never late."""
    out: Counter[Any] = Counter()
    late = []
    for i, a in enumerate(arrivals):
        if a.side != "left":
            continue
        if a.ts <= a.wm:
            late.append(a)
            continue
        fire = next((j for j in range(i + 1, len(arrivals)) if arrivals[j].wm >= a.ts), None)
        seen = arrivals if fire is None else arrivals[:fire]
        valid = [
            (v.ts, j, v.rec["id"]) for j, v in enumerate(seen)
            if v.side == "right" and v.key == a.key and v.ts <= a.ts
        ]  # fmt: skip
        if valid:
            out[(a.key, a.rec["id"], max(valid)[2])] += 1
        elif left_join:
            out[(a.key, a.rec["id"], None)] += 1
    return out, late


@settings(BATCHING, max_examples=120)
@given(data=st.data(), kind=st.sampled_from(["INNER", "LEFT"]))
def test_temporal_join_matches_the_model_at_any_batching(data: st.DataObject, kind: str) -> None:
    arrivals = data.draw(INPUTS)
    sizes, restarts = data.draw(cuts(len(arrivals)))
    plan = TemporalPlan(  # the records carry no key columns: the driver keys them
        name="j", tables=("a", "b"), keys=((), ()), probe_filter=None,
        columns=COLUMNS, kind=kind,
    )  # fmt: skip
    one = drive(TemporalJoin(plan), arrivals, [1] * len(arrivals))
    cut = drive(TemporalJoin(plan), arrivals, sizes, restarts)
    assert Counter(map(freeze, cut.results)) == Counter(map(freeze, one.results))
    assert late_of(cut.late) == late_of(one.late)
    want, late = temporal_model(arrivals, kind == "LEFT")
    assert Counter((r["key"], r["l"], r["r"]) for r in one.results) == want
    assert late_of(one.late) == late_ref(late)
    assert not one.dead
