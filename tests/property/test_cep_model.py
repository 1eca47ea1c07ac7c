"""The pattern operator against a brute-force matcher: every match a pattern of single steps
(``next``, ``followed_by``, ``followed_by_any``, optionally ``within`` and a window from the
previous step's event, ``within(ms, WithinType.PREVIOUS_AND_CURRENT)``) has in each key's
events, enumerated from the contiguity rules themselves, over random keys, timestamps and
arrival orders (some events late), at any batch size and parallelism 1 or 2. The matches, and
the late events, equal the model's."""

from __future__ import annotations

from collections import Counter
from itertools import combinations
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.property.test_batching import BATCHING
from weir import Job, WatermarkStrategy, sources, testing
from weir.engine.cep import LATE, Pattern, WithinType

STEPS = ["next", "followed_by", "followed_by_any"]
# (contiguity to the step before, the name an event must have, the most time after the step
# before's event, exclusive: None for no bound)
Step = tuple[str, str, int | None]


def build(steps: list[Step], within: int | None) -> Pattern:
    first = steps[0][1]
    p = Pattern.begin("s0").where(lambda e, n=first: e["name"] == n)
    for i, (how, name, gap) in enumerate(steps[1:], 1):
        p = getattr(p, how)(f"s{i}").where(lambda e, n=name: e["name"] == n)
        if gap is not None:
            p.within(gap, WithinType.PREVIOUS_AND_CURRENT)
    return p if within is None else p.within(within)


def model(steps: list[Step], within: int | None, events: list[dict[str, Any]]) -> Counter[Any]:
    """Every index tuple i0 < i1 < ... of one key's events (in event time, arrival order
    within a timestamp) whose events have their steps' names and whose gaps obey each step's
    contiguity: ``next`` none, ``followed_by`` none with the step's name, ``followed_by_any``
    any; with ``within``, the last event less than ``within`` after the first; with a step's
    window, its event less than that after the step before's."""
    found: Counter[Any] = Counter()
    for idx in combinations(range(len(events)), len(steps)):
        if any(events[i]["name"] != name for i, (_, name, _) in zip(idx, steps, strict=True)):
            continue
        if within is not None and events[idx[-1]]["ts"] - events[idx[0]]["ts"] >= within:
            continue
        ok = True
        for j in range(1, len(steps)):
            how, name, window = steps[j]
            gap = events[idx[j - 1] + 1 : idx[j]]
            if (
                how == "next"
                and gap
                or how == "followed_by"
                and any(e["name"] == name for e in gap)
                or window is not None
                and events[idx[j]]["ts"] - events[idx[j - 1]]["ts"] >= window
            ):
                ok = False
                break
        if ok:
            found[(events[idx[0]]["k"], tuple(events[i]["n"] for i in idx))] += 1
    return found


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[Step], int | None, int, list[dict[str, Any]]]:
    n_steps = draw(st.integers(2, 3))
    within = draw(st.sampled_from([None, 3, 8]))
    gaps = [None, 2, 5] if within is None else [g for g in (None, 2, 5) if g is None or g <= within]
    steps: list[Step] = [("begin", draw(st.sampled_from("abc")), None)]
    steps += [
        (draw(st.sampled_from(STEPS)), draw(st.sampled_from("abc")), draw(st.sampled_from(gaps)))
        for _ in range(1, n_steps)
    ]
    bound = draw(st.sampled_from([0, 2, 50]))
    rows = draw(st.lists(st.tuples(st.sampled_from("xy"), st.integers(0, 12),
                                   st.sampled_from("abcd")), max_size=14))  # fmt: skip
    events = [{"k": k, "ts": t, "name": name, "n": i} for i, (k, t, name) in enumerate(rows)]
    return steps, within, bound, events


@settings(BATCHING, max_examples=60, deadline=None)
@given(
    case=cases(), batch_size=st.sampled_from([1, 2, 5, 1024]), parallelism=st.sampled_from([1, 2])
)
def test_matches_equal_the_brute_force_model(
    case: tuple[list[Step], int | None, int, list[dict[str, Any]]],
    batch_size: int,
    parallelism: int,
) -> None:
    steps, within, bound, events = case
    job = Job("model")
    src = job.source(sources.jsonl("/unused.jsonl"),
                     watermarks=WatermarkStrategy.bounded_out_of_orderness(bound))  # fmt: skip
    src.key_by("k").pattern(build(steps, within)).select(name="m")
    out = testing.run(job, events, batch_size=batch_size, parallelism=parallelism)

    # late: at or before the watermark it arrives under (max ts so far - bound - 1)
    on_time, late, top = [], [], None
    for e in events:
        top = e["ts"] if top is None else max(top, e["ts"])
        (late if e["ts"] <= top - bound - 1 else on_time).append(e)
    expected: Counter[Any] = Counter()
    for key in "xy":
        mine = sorted((e for e in on_time if e["k"] == key), key=lambda e: e["ts"])
        expected += model(steps, within, mine)
    found = Counter(
        (r["key"], tuple(e["n"] for evs in r["match"].values() for e in evs)) for r in out.results
    )
    assert found == expected
    side = out.side.get("m", {}).get(LATE.name, [])
    assert sorted(r["record"]["n"] for r in side) == sorted(e["n"] for e in late)
