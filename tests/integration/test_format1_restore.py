"""A savepoint written by weir before state format 2 (every window a row) restores into cells.

``format1/savepoint.tar.gz`` was made by ``format1/make_fixture.py`` running main's code as of
commit 035493b (the release before cells): a job at parallelism 2 stopped with a savepoint in
the middle of its input, with what it emitted until then. This weir restores it at the same
and at another parallelism and reads the rest of the input: every window's emissions, from
both runs, equal the model's (so every window row of format 1 was moved into its cell, none
lost, none counted twice), and late records go to the side output as the model says.
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support import WeirServer, job_text, read_jsonl
from tests.support.reference import Spec, canonical, group_emissions, simulate

FIXTURE = Path(__file__).parent / "format1" / "savepoint.tar.gz"
SPEC = Spec(bound=200, size=1_000, lateness=1_500)
# the fixture's job, as make_fixture.py wrote it (the same text gives the same operators)
SLOW = (
    (
        "filter",
        "lambda e: __import__('time').sleep(0.001) is None and e['event'] == 'impression'",
    ),
)


@pytest.mark.parametrize("parallelism", [2, 3])
def test_a_format_1_savepoint_of_main_restores_into_cells_exactly_once(
    tmp_path: Path, weir_server: Callable[..., WeirServer], parallelism: int
) -> None:
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(tmp_path, filter="data")
    made = json.loads((tmp_path / "made.json").read_text())
    savepoint = tmp_path / "t1" / made["savepoint"]
    meta = json.loads((savepoint / "_metadata").read_text())
    assert "state_format" not in meta and meta["parallelism"] == 2  # format 1, as main wrote it
    lines = (tmp_path / "in.jsonl").read_text().splitlines()
    ref = simulate(lines, SPEC)
    job = tmp_path / "job.py"
    job.write_text(
        job_text(Path("in.jsonl"), bound=SPEC.bound, size=SPEC.size, lateness=SPEC.lateness,
                 steps=SLOW)
    )  # fmt: skip
    out, state = tmp_path / "out.jsonl", tmp_path / "state"
    before = read_jsonl(out)
    assert 0 < sum(r["final"] for r in before) < sum(1 for _ in ref.emissions)
    late_before = read_jsonl(tmp_path / "late.jsonl")
    (state / "t1").mkdir(parents=True)
    (state / "t1" / "late.jsonl").write_text((tmp_path / "late.jsonl").read_text())

    server = weir_server(
        job, "--sink", f"file://{out}", "--parallelism", str(parallelism), "--batch-size", "256",
        "--restore", str(savepoint), "--exit-at-end", state_dir=state,
    )  # fmt: skip
    assert server.proc.wait(90) == 0, server.stderr()
    assert f"restored from {savepoint.resolve()}" in server.stderr()
    records = read_jsonl(out)
    # the previous release's records lack "op", which this one's name (decision 0012)
    assert all(r["op"] == "imps" for r in records[len(before) :])
    got = group_emissions([_without_op(r) for r in records])
    want = {k: [_without_op(e) for e in es] for k, es in ref.emissions.items()}
    assert set(got) == set(want)
    differ = [k for k in want if got[k] != want[k]]
    assert not differ, f"{len(differ)} windows differ, e.g. {differ[:3]}"
    assert all(sum(e["final"] for e in emitted) == 1 for emitted in got.values())
    late = read_jsonl(state / "t1" / "late.jsonl")
    assert len(late) > len(late_before)
    assert canonical(late) == canonical(ref.late)


def _without_op(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k != "op"}
