"""The job manager <-> worker messages and their data-only codec: every message survives a real
pipe unchanged; bytes that are not a message this side reads (an unknown or reversed tag, a
missing, unknown or mistyped field, a pickle, no msgpack at all) raise ``MessageError`` naming
what is wrong; ints stay ints where a value may be either."""

from __future__ import annotations

import multiprocessing as mp
import pickle
from typing import Any

import msgpack
import pytest

from weir.base.errors import MessageError
from weir.engine.runtime import messages as m
from weir.engine.runtime.view import unreported
from weir.engine.runtime.wire import Codec, from_plain
from weir.state.checkpoints import FileRef
from weir.state.keygroups import KeyGroupRange


def _status() -> m.WorkerStatus:
    st = unreported(1, KeyGroupRange(64, 127))
    st["operators"] = {
        "clicks": {
            "watermark": 9_999,
            "state_watermark": 9_000,
            "data_watermark": 9_999,
            "records_in": 10,
            "results_out": 2,
            "late": 1,
            "open_windows": 3,
            "retention_dropped": 4,
            "metrics": {"partial_matches": 5},
            "top": {
                "latest": {"start": 0, "end": 10_000, "by": {"n": [("ad-1", 7), ("ad-2", 2.5)]}},
                "current": None,
            },
        }
    }
    st["source_lag"] = {"topic-0": 12}
    st["dead_letter_kinds"] = [
        {"stage": "map", "kind": "KeyError", "count": 2, "reason": "map raised KeyError", "at": ""}
    ]
    return st


def _snapshot() -> m.WorkerSnapshot:
    return m.WorkerSnapshot(
        index=0,
        key_groups=(0, 63),
        sources={"a.jsonl": m.SplitPosition(offset=120, max_ts=-(1 << 63), ended=True)},
        operators={"clicks": m.OperatorMarks(watermark=5, data_watermark=4)},
        records_in=100,
        flush_ms=0.5,
        rocksdb_ms=1.25,
        sync_ms=1.75,
        files=(FileRef("000012.sst", 10, 77, "run-w0-000012.sst"), FileRef("MANIFEST", 3, 5)),
        size=13,
        incremental_size=10,
        async_ms=4.0,
    )


TO_WORKER = [
    m.TriggerCheckpoint(7),
    m.TriggerCheckpoint(8, stop_sources=True),
    m.CheckpointCompleted(7),
    m.CheckpointAborted(8),
    m.BackfillStep(3, m.BackfillPhase.INGEST, m.BackfillRequest("clicks", "/bf", 0, 10, None)),
    m.Stop(),
]
FROM_WORKER = [
    m.StatusReport(_status()),
    m.Finished(1),
    m.Failed(1, "lost workers [0]"),
    m.CheckpointAck(7, _snapshot()),
    m.CheckpointDecline(7, "upload failed: OSError: disk full"),
    m.BackfillReply(3, m.BackfillPhase.CHECK, "the live job has open windows ending at 10", 0),
]


@pytest.mark.parametrize("msg", TO_WORKER, ids=lambda msg: type(msg).__name__)
def test_every_message_to_a_worker_crosses_a_pipe_unchanged(msg: m.ToWorker) -> None:
    manager_end, worker_end = mp.Pipe()
    m.WorkerLink(manager_end).send(msg)
    link = m.ManagerLink(worker_end)
    assert link.poll(5.0)
    assert link.receive() == msg


@pytest.mark.parametrize("msg", FROM_WORKER, ids=lambda msg: type(msg).__name__)
def test_every_message_from_a_worker_crosses_a_pipe_unchanged(msg: m.FromWorker) -> None:
    manager_end, worker_end = mp.Pipe()
    m.ManagerLink(worker_end).send(msg)
    link = m.WorkerLink(manager_end)
    assert link.poll(5.0)
    assert link.receive() == msg


def test_ints_stay_ints_and_floats_stay_floats_in_a_ranking() -> None:
    got = m.FROM_WORKER.decode(m.FROM_WORKER.encode(m.StatusReport(_status())))
    assert isinstance(got, m.StatusReport)
    top = got.status["operators"]["clicks"]["top"]
    assert top is not None and top["latest"] is not None
    (_, seven), (_, half) = top["latest"]["by"]["n"]
    assert type(seven) is int and type(half) is float


def test_a_ranking_of_sums_past_64_bits_crosses_exactly() -> None:
    """A window's exact sum past msgpack's ints (a top-N entry) crosses as an int; before,
    the worker's status report failed the job."""
    status = _status()
    status["operators"]["clicks"]["top"]["latest"]["by"]["n"] = [
        ("ad-1", 1 << 70),
        ("ad-2", -(1 << 64)),
    ]
    got = m.FROM_WORKER.decode(m.FROM_WORKER.encode(m.StatusReport(status)))
    assert isinstance(got, m.StatusReport)
    assert got.status["operators"]["clicks"]["top"]["latest"]["by"]["n"] == [
        ("ad-1", 1 << 70),
        ("ad-2", -(1 << 64)),
    ]


def test_a_long_ranking_crosses_as_the_pairs_it_holds() -> None:
    """Hundreds of pairs (a status's top-N lists), checked in bulk: each comes back a tuple
    of the same values and types, in order; an empty ranking stays empty."""
    status = _status()
    pairs = [(f"ad-{i}", i if i % 3 else i / 4) for i in range(500)]
    by = status["operators"]["clicks"]["top"]["latest"]["by"]
    by["n"] = pairs
    got = m.FROM_WORKER.decode(m.FROM_WORKER.encode(m.StatusReport(status)))
    assert isinstance(got, m.StatusReport)
    back = got.status["operators"]["clicks"]["top"]["latest"]["by"]["n"]
    assert back == pairs and all(type(p) is tuple for p in back)
    assert [type(v) for _, v in back] == [type(v) for _, v in pairs]
    by["n"] = []
    got = m.FROM_WORKER.decode(m.FROM_WORKER.encode(m.StatusReport(status)))
    assert isinstance(got, m.StatusReport)
    assert got.status["operators"]["clicks"]["top"]["latest"]["by"]["n"] == []


@pytest.mark.parametrize(
    ("entry", "named"),
    [
        (["ad-2", True], r"\['n'\]\[1\]\[1\]: expected int \| float, got bool"),
        ([7, 1], r"\['n'\]\[1\]\[0\]: expected str, got int"),
        (["ad-2", 1, 2], r"\['n'\]\[1\]: expected a list of 2"),
        ("ab", r"\['n'\]\[1\]: expected a list of 2, got str"),  # a string of two is no pair
        ({"ad-2": 1}, r"\['n'\]\[1\]: expected a list of 2, got dict"),
    ],
)
def test_a_wrong_ranking_entry_is_refused_by_its_path(entry: list[Any], named: str) -> None:
    """A ranking's pairs are checked in one pass when they are right, and by the slow path,
    which names the place, when one is not."""
    status = _status()
    status["operators"]["clicks"]["top"]["latest"]["by"]["n"] = [("ad-1", 1), entry]
    raw = m.FROM_WORKER.encode(m.StatusReport(status))
    with pytest.raises(MessageError, match=named):
        m.FROM_WORKER.decode(raw)


def _frame(tag: str, fields: Any) -> bytes:
    packed: bytes = msgpack.packb([tag, fields], use_bin_type=True)
    return packed


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        (_frame("Nope", {}), "unknown message type 'Nope'; this side reads BackfillStep, "),
        (m.FROM_WORKER.encode(m.Finished(0)), "unknown message type 'Finished'"),
        (
            _frame("TriggerCheckpoint", {"checkpoint": "7", "stop_sources": False}),
            r"checkpoint: expected int, got str",
        ),
        (
            _frame("TriggerCheckpoint", {"checkpoint": 7, "stop_sources": 1}),
            "stop_sources: expected bool, got int 1",
        ),
        (_frame("CheckpointAborted", {"checkpoint": True}), "expected int, got bool True"),
        (
            _frame("TriggerCheckpoint", {"checkpoint": 7}),
            r"missing \['stop_sources'\], unknown none \(a weir of another version\?\)",
        ),
        (_frame("Stop", {"now": 1}), r"missing none, unknown \['now'\]"),
        (
            _frame("BackfillStep", {"request_id": 1, "phase": "load", "request": {}}),
            "BackfillStep.phase: expected one of 'check', 'ingest', got str 'load'",
        ),
        (pickle.dumps(("checkpoint", 7)), "are not a msgpack message frame"),
        (b"\xc1", "1 bytes are not a msgpack message frame"),
        (msgpack.packb({"tag": "Stop"}), "a message frame is \\[tag, fields\\], not dict"),
    ],
)
def test_what_is_not_a_message_is_refused_by_name(raw: bytes, named: str) -> None:
    with pytest.raises(MessageError, match=named):
        m.TO_WORKER.decode(raw)


def test_a_wrong_value_deep_in_a_status_names_its_path() -> None:
    plain = {"status": {**_status(), "operators": {"clicks": {**_status()["operators"]["clicks"]}}}}
    plain["status"]["operators"]["clicks"]["late"] = 1.5
    with pytest.raises(
        MessageError, match=r"StatusReport\.status\.operators\['clicks'\]\.late: expected int"
    ):
        m.FROM_WORKER.decode(_frame("StatusReport", plain))


def test_a_float_field_takes_an_int_as_json_writes_it() -> None:
    snapshot = from_plain(m.OperatorMarks, {"watermark": 1, "data_watermark": 2})
    assert snapshot == m.OperatorMarks(1, 2)
    status = from_plain(m.WorkerStatus, {**_status(), "backpressure": 0})
    assert type(status["backpressure"]) is float


def test_only_registered_messages_are_encoded() -> None:
    with pytest.raises(MessageError, match="Finished is not one of this codec's messages"):
        m.TO_WORKER.encode(m.Finished(0))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="only dataclasses are messages"):
        Codec(dict)


def test_a_snapshot_is_written_to_metadata_in_its_documented_layout() -> None:
    body = _snapshot().to_json()
    assert list(body) == [
        "index", "key_groups", "sources", "operators", "records_in", "flush_ms", "rocksdb_ms",
        "sync_ms", "files", "size", "incremental_size", "async_ms",
    ]  # fmt: skip
    assert body["key_groups"] == [0, 63]
    assert body["sources"] == {"a.jsonl": {"offset": 120, "max_ts": -(1 << 63), "ended": True}}
    assert body["files"][1] == {"name": "MANIFEST", "size": 3, "crc32": 5}  # not shared


def test_a_backfill_request_names_a_wrong_field() -> None:
    good = {"op": "clicks", "path": "/bf", "min_end": 0, "max_end": 10, "windows": 4}
    assert m.BackfillRequest.from_request(good).windows == 4
    with pytest.raises(MessageError, match="backfill request.min_end: expected int, got str"):
        m.BackfillRequest.from_request({**good, "min_end": "0"})


def test_a_link_whose_other_end_closed_is_not_waited_on_again() -> None:
    """A pipe whose worker end is closed reads as ready for ever: once a receive has found it
    ended, the job manager's monitor must not wait on it (it would wake at once, every time)."""
    ours, theirs = mp.Pipe()
    link = m.WorkerLink(ours)
    assert link.waitable() is ours
    m.ManagerLink(theirs).send(m.Finished(0))
    assert isinstance(link.receive(), m.Finished)
    assert link.waitable() is ours  # a message read: the link goes on
    theirs.close()
    with pytest.raises(EOFError):
        link.receive()
    assert link.waitable() is None
