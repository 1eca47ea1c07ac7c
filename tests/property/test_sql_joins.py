"""SQL's outer interval joins and temporal joins against the brute-force models of
``tests/support/sql_join_reference.py``, on two inputs interleaved at random (some records
late), at any batching, with restores from the state written in between
(``tests/support/join_support.py``): the rows and late records equal the model's."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.property.test_batching import BATCHING
from tests.property.test_joins import INPUTS, cuts, late_of, late_ref
from tests.support.join_reference import freeze
from tests.support.join_support import drive
from tests.support.sql_join_reference import outer_interval_join, temporal_join
from weir.engine.sql.outerjoin import OuterIntervalJoin
from weir.engine.sql.sqljoin import JoinPlan
from weir.engine.sql.temporal import TemporalJoin, TemporalPlan

COLUMNS = (("l", 0, "id"), ("r", 1, "id"))


def _id(frozen: Any) -> Any:
    """A frozen record's id (None: padded)."""
    return None if frozen is None else dict(frozen)["id"]


def outer_plan(kind: str, lower: int, upper: int, lo_incl: bool, hi_incl: bool) -> JoinPlan:
    return JoinPlan(  # the records carry no key columns: the driver keys them
        name="j", tables=("a", "b"), keys=((), ()), filters=(None, None),
        lower=lower, upper=upper, lower_inclusive=lo_incl, upper_inclusive=hi_incl,
        columns=COLUMNS, kind=kind,
    )  # fmt: skip


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
    want = outer_interval_join(
        arrivals, kind, lower, lower + width, lower_inclusive=lo_incl, upper_inclusive=hi_incl
    )
    assert got == Counter({(k, _id(a), _id(b)): n for (k, a, b), n in want.items()})
    assert late_of(one.late) == late_ref([a for a in arrivals if a.ts < a.wm])
    assert not one.dead


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
    want, late = temporal_join(arrivals, kind == "LEFT")
    got = Counter((r["key"], r["l"], r["r"]) for r in one.results)
    assert got == Counter({(k, _id(a), _id(b)): n for (k, a, b), n in want.items()})
    assert late_of(one.late) == late_ref(late)
    assert not one.dead
