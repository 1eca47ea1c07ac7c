"""Live backfill of forged SST files (issue 17, item 4), against a real ``weir run`` at
parallelism 2: the overlap range comes from the files, not the request, and a worker loads only
keys of its own key groups and of the operator's state ids. A forged file cannot overwrite a
fired window, and a refused backfill changes nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import msgpack
import numpy as np
import pytest
from rocksdict import Options, SstFileWriter

from tests.support import WeirServer, job_text, wait_until, write_events
from weir.engine.job import operator_state_id
from weir.state import cells, layout
from weir.state.keygroups import key_group

MAX_PAR = 128
SID = operator_state_id("imps")
TIMERS = SID | 0x8000
EVENTS = [
    {"id": f"ad-{i % 4}", "event": "impression", "ts": t, "value": 1}
    for i, t in enumerate(range(0, 200, 5))
]
FORGED = msgpack.packb([999, 999, 1, 1, 999, 999])  # count, total, min, max, mean's sum and n


def _cell(kg: int, key: str, end: int, slots: list[int], sid: int = SID) -> dict[bytes, bytes]:
    """A window as the operator stores it: a cell (``state/cells.py``) holding one row."""
    rows = cells.CellRows([key.encode()], np.full(1, kg, np.uint16), [np.array([v]) for v in slots])
    return dict(cells.encode_cells(rows, sid, end, 0))


FAR_AWAY = {"min_end": -(10**12), "max_end": -(10**12) + 1}  # what a forger would claim


@pytest.fixture(scope="module")
def live(
    tmp_path_factory: pytest.TempPathFactory,
    module_weir_server: Callable[..., WeirServer],
) -> Iterator[tuple[WeirServer, Path]]:
    root = tmp_path_factory.mktemp("live")
    src = write_events(root / "in.jsonl", EVENTS)
    job = root / "job.py"
    job.write_text(job_text(src, bound=0, size=10, lateness=0, max_parallelism=MAX_PAR))
    bf = root / "bf"
    bf.mkdir()
    server = module_weir_server(job, "--parallelism", "2", "--backfill-dir", str(bf),
                                "--state-retention-ms", str(10**12))  # fmt: skip
    server.wait_finished()
    yield server, bf


def _sst(directory: Path, kg: int, entries: dict[bytes, bytes]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    writer = SstFileWriter(Options(raw_mode=True))
    writer.open(str(directory / f"kg-{kg:05d}.sst"))
    for k in sorted(entries):
        writer[k] = entries[k]
    writer.finish()
    return directory


def _post(client: httpx.Client, path: Path, **claimed: int) -> httpx.Response:
    body: dict[str, Any] = {"op": "imps", "path": str(path), **(claimed or FAR_AWAY)}
    return client.post("/jobs/t1/backfills", json=body)


def _windows(client: httpx.Client, key: str) -> list[dict[str, Any]]:
    r = client.get(f"/t1/imps/state/{key}", params={"limit": 10_000})
    return r.json()["windows"] if r.status_code == 200 else []


def _refused(live: tuple[WeirServer, Path], path: Path, *why: str) -> None:
    server, _ = live
    client = server.client()
    before = {k: _windows(client, k) for k in ("ad-0", "ad-1", "ad-2", "ad-3", "zz")}
    r = _post(client, path)
    assert r.status_code == 409, r.text
    message = r.json()["error"]["message"]
    for part in why:
        assert part in message, message
    assert {k: _windows(client, k) for k in before} == before  # nothing changed
    assert client.get("/jobs/t1").json()["backfills"] == []


def test_a_forged_file_cannot_overwrite_a_fired_window(live: tuple[WeirServer, Path]) -> None:
    server, bf = live
    fired = _windows(server.client(), "ad-0")[0]
    assert fired["final"] and fired["count"] == 1
    kg = key_group("ad-0", MAX_PAR)
    forged = _sst(bf / "fired", kg, _cell(kg, "ad-0", fired["end"], [999, 999, 1, 1, 999, 999]))
    _refused(live, forged, "already has the window ending at", str(fired["end"]))


def test_a_file_holding_another_key_group_is_refused(live: tuple[WeirServer, Path]) -> None:
    _, bf = live
    kg = key_group("ad-1", MAX_PAR)
    other = (kg + 1) % MAX_PAR
    # named for another key group, holding ad-1's fired window far in the past of its claim
    forged = _sst(bf / "kg", other, _cell(kg, "ad-1", -5_000, [999, 999, 1, 1, 999, 999]))
    _refused(live, forged, f"key group {kg}", f"only key group {other}", "kg-")


def test_a_file_holding_another_state_is_refused(live: tuple[WeirServer, Path]) -> None:
    _, bf = live
    kg = key_group("zz", MAX_PAR)
    foreign = operator_state_id("other-op")
    forged = _sst(bf / "sid", kg, {layout.state_key(kg, foreign, b"zz", -5_000): FORGED})
    _refused(live, forged, f"state id {foreign}", f"{SID} (windows)")


def test_malformed_entries_are_refused(live: tuple[WeirServer, Path]) -> None:
    _, bf = live
    kg = key_group("zz", MAX_PAR)
    ((cell_key, good_cell),) = _cell(kg, "zz", -5_000, [1, 1, 1, 1, 1, 1]).items()
    bad_value = _sst(bf / "value", kg, {cell_key: good_cell[:-3]})
    _refused(live, bad_value, "malformed window cell", "cut short")
    row = _sst(bf / "row", kg, {layout.state_key(kg, SID, b"zz", -5_000): FORGED})  # format 1
    _refused(live, row, "malformed window cell", "expected 22 bytes")
    short = _sst(bf / "short", kg, {layout.state_prefix(kg, SID) + b"\x00": FORGED})
    _refused(live, short, "malformed window cell")
    (bf / "junk").mkdir()
    (bf / "junk" / f"kg-{kg:05d}.sst").write_bytes(b"not an sst file at all")
    _refused(live, bf / "junk", "is not an SST file")
    (bf / "beyond").mkdir()
    (bf / "beyond" / f"kg-{MAX_PAR + 3:05d}.sst").write_bytes(b"no worker would read it")
    r = _post(live[0].client(), bf / "beyond")
    assert r.status_code == 409 and "does not name a key group" in r.text, r.text


def test_a_checked_backfill_loads_with_the_range_its_files_hold(
    live: tuple[WeirServer, Path],
) -> None:
    """Last: the one that changes state. The entry records the files' range, not the claim."""
    server, bf = live
    client = server.client()
    good = bf / "good"
    for key in ("hist-a", "hist-b", "hist-c"):
        kg = key_group(key, MAX_PAR)
        _sst(good, kg, {
            **_cell(kg, key, -4_990, [2, 2, 1, 1, 2, 2]),
            layout.timer_key(kg, TIMERS, -4_990, 1): msgpack.packb([key]),
        })  # fmt: skip
    r = _post(client, good)
    assert r.status_code == 200, r.text
    # a live read answers from the API's catch-up with the workers' RocksDB, at most 40 ms old
    # (README): the loaded files show within that, not necessarily at the very next read
    for key in ("hist-a", "hist-b", "hist-c"):
        got = wait_until(
            lambda key=key: [(w["start"], w["end"], w["count"]) for w in _windows(client, key)],
            10,
            what=f"{key}'s backfilled window",
        )
        assert got == [(-5_000, -4_990, 2)]
    entry = client.get("/jobs/t1").json()["backfills"]
    assert [(e["min_end"], e["max_end"]) for e in entry] == [(-4_990, -4_990)]
