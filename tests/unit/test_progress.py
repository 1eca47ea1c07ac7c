"""Progress lines (app/progress.py): plain lines off a terminal, one redrawn line on it."""

from __future__ import annotations

import io

import pytest

from weir.app.progress import (
    SparkProgress,
    StageProgress,
    StatusLine,
    elapsed,
    rate_text,
    stages_text,
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_off_a_terminal_lines_are_plain_and_at_most_one_an_interval() -> None:
    out, clock = io.StringIO(), Clock()
    line = StatusLine(out, every_s=5.0, clock=clock)
    line.show("a")  # the first at once
    clock.now += 4.9
    line.show("b")  # too soon: dropped
    clock.now += 0.1
    line.show("c")
    clock.now += 1.0
    line.close("done")  # the final state whatever the time
    assert out.getvalue() == "a\nc\ndone\n"
    assert not line.tty


def test_on_a_terminal_one_line_is_redrawn_and_ended_at_close() -> None:
    out, clock = Terminal(), Clock()
    line = StatusLine(out, redraw_s=0.2, every_s=5.0, clock=clock)
    line.show("long text")
    clock.now += 0.125
    line.show("skipped")
    clock.now += 0.125
    line.show("short")  # padded over what was there
    line.close("end")
    assert out.getvalue() == "\rlong text\rshort    \rend  \n"


def test_a_terminal_line_is_cut_to_the_width_so_it_never_wraps() -> None:
    out = Terminal()  # no file descriptor: 80 columns are assumed
    line = StatusLine(out)
    line.show("x" * 200)
    assert out.getvalue() == "\r" + "x" * 79


def test_close_without_anything_shown_writes_nothing() -> None:
    out = Terminal()
    StatusLine(out).close()
    assert out.getvalue() == ""


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.04, "0.0 s"),
        (4.25, "4.2 s"),
        (59.9, "59.9 s"),
        (60.0, "1 min 00 s"),
        (725.5, "12 min 05 s"),
    ],
)
def test_elapsed(seconds: float, text: str) -> None:
    assert elapsed(seconds) == text


def test_rate_text() -> None:
    assert rate_text(1_234_567, 2.5, "events") == (
        "weir produce: 1,234,567 events to events, 493,827 events/s (2.5 s)"
    )
    assert rate_text(0, 0.0, "t") == "weir produce: 0 events to t, 0 events/s (0.0 s)"


def test_stages_text_before_any_stage() -> None:
    assert stages_text([], 0, 3.0) == "weir backfill: no stage running yet (3.0 s)"


def test_stages_text_between_stages() -> None:
    assert stages_text([], 1, 9.0) == "weir backfill: 1 stage done, 9.0 s"
    assert stages_text([], 3, 75.0) == "weir backfill: 3 stages done, 1 min 15 s"


def test_stages_text_of_one_running_stage_without_records() -> None:
    stage = StageProgress(stage=2, tasks=8, done=3, running=2, records=None)
    assert stages_text([stage], 1, 12.0) == (
        "weir backfill: stage 2: 3/8 tasks done, 2 running (1 stage done, 12.0 s)"
    )


def test_stages_text_sums_the_running_stages_and_their_records() -> None:
    stages = [
        StageProgress(stage=4, tasks=2, done=1, running=1, records=1_500),
        StageProgress(stage=5, tasks=8, done=0, running=1, records=None),
    ]
    assert stages_text(stages, 4, 20.0) == (
        "weir backfill: stages 4, 5: 1/10 tasks done, 2 running, 1,500 records read "
        "(4 stages done, 20.0 s)"
    )


class _Stage:
    def __init__(self, tasks: int, completed: int, active: int) -> None:
        self.numTasks, self.numCompletedTasks, self.numActiveTasks = tasks, completed, active


class _Job:
    def __init__(self, stage_ids: list[int]) -> None:
        self.stageIds = stage_ids


class _Tracker:
    """A SparkContext's status tracker whose listener has not yet heard that stage 2 ended: it
    is still active though its 8 tasks are done."""

    def __init__(self) -> None:
        self.stages: dict[int, _Stage] = {}
        self.active: list[int] = []

    def getActiveStageIds(self) -> list[int]:  # noqa: N802 - pyspark's names
        return self.active

    def getJobIdsForGroup(self) -> list[int]:  # noqa: N802
        return [0] if self.stages else []

    def getJobInfo(self, job: int) -> _Job:  # noqa: N802
        return _Job(list(self.stages))

    def getStageInfo(self, sid: int) -> _Stage | None:  # noqa: N802
        return self.stages.get(sid)


class _Context:
    def __init__(self, tracker: _Tracker) -> None:
        self.tracker = tracker

    def statusTracker(self) -> _Tracker:  # noqa: N802
        return self.tracker


def test_a_stage_whose_tasks_are_all_done_is_done_before_the_tracker_says_so() -> None:
    tracker = _Tracker()
    progress = SparkProgress(_Context(tracker), StatusLine(io.StringIO(), every_s=0.0))
    tracker.stages = {1: _Stage(4, 4, 0), 2: _Stage(8, 8, 0), 3: _Stage(8, 5, 2)}
    tracker.active = [2, 3]
    running, done = progress.snapshot()
    assert done == 2  # stage 1, which ended, and stage 2, whose last task has
    assert [s.stage for s in running] == [3] and running[0].done == 5
