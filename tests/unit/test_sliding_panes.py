"""Sliding windows on panes, mid-stream: what the state backend holds (materialised fired
windows plus open panes), composed the way the query API composes it, equals brute force over
the records: every window, fired or open, holds exactly the records whose time falls in it."""

from __future__ import annotations

from weir import Job, WatermarkStrategy, agg, sources, windows
from weir.engine.runtime.operators.sliding import SlidingRuntime
from weir.engine.runtime.outputs import DeadLetters, LateRecords
from weir.engine.runtime.stored.codec import compose_stored
from weir.state import cells
from weir.state.keygroups import key_group, range_for_operator
from weir.state.memory import MemoryState

SIZE, SLIDE = 100, 30  # panes of gcd = 10 ms


def test_open_and_fired_windows_compose_from_what_is_stored() -> None:
    job = Job("j")
    (
        job.source(sources.jsonl("/unused"), watermarks=WatermarkStrategy())
        .key_by("id")
        .window(windows.sliding(size_ms=SIZE, slide_ms=SLIDE))
        .aggregate("op", n=agg.count(), total=agg.sum("v"))
    )
    op = job.operators["op"]
    state = MemoryState()
    rt = SlidingRuntime(
        op, state, range_for_operator(128, 1, 0), 128, LateRecords(None), DeadLetters(None), 10**9
    )
    times = [3, 17, 45, 46, 90, 133, 170, 201, 260, 262]
    recs = [{"id": "k", "ts": t, "v": t} for t in times]
    rt.process(["k"] * len(times), recs, times, [-1] * len(times))  # all on time
    rt.advance(180, 180)  # windows ending at or before 181 fire; later ones stay open
    rt.flush()
    kg = key_group("k", 128)
    stored = cells.key_windows(cells.key_entries(state.scan, kg, op.state_id, b"k"), b"k")
    panes = cells.key_windows(cells.key_entries(state.scan, kg, op.pane_state_id, b"k"), b"k")
    state.close()
    assert stored and panes, "both fired windows and open panes are expected"
    assert max(stored) <= 181  # fired windows end where the watermark is
    assert isinstance(op.assigner, windows.SlidingWindows)
    got = compose_stored(op.assigner, rt.plan.merge, stored, panes)
    assert any(end > 181 for end in got)  # and open windows come from the panes
    expected: dict[int, list[int]] = {}
    for t in times:
        for w in windows.sliding(SIZE, SLIDE).assign(t):
            n, total = expected.get(w.end, [0, 0])
            expected[w.end] = [n + 1, total + t]
    assert got == expected
