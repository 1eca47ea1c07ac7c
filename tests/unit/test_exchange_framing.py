"""The exchange's frames (``task.framing``): every carried type round-trips (tuples stay tuples,
nested and as keys), malformed frames are refused with ``MessageError``, and a record the
exchange cannot carry is dead-lettered with its type named, by the chain at every parallelism
and by the router as a last resort; frames over the cap are split or refused."""

from __future__ import annotations

import datetime
import decimal
import pickle
import re
from collections.abc import Callable
from typing import Any

import msgpack
import pytest

from weir import Job, WatermarkStrategy, agg, sources, windows
from weir.base.errors import MessageError, WorkerFailed
from weir.engine.runtime.outputs import DeadLetters
from weir.engine.runtime.task import framing
from weir.engine.runtime.task.chain import Chain
from weir.engine.runtime.task.framing import (
    Entry,
    Unencodable,
    decode_frame,
    drop_unencodable,
    encode_barrier,
    encode_entries,
    pack_ints,
)
from weir.engine.runtime.task.routing import Barrier, Router
from weir.engine.sources import SourceBatch

CARRIED: list[Any] = [
    {"id": "ad-1", "event": "view", "ts": 5, "value": 1.5},
    {"nested": {"list": [1, [2, [3]]], "none": None, "yes": True, "no": False}},
    ("a", 1, ("b", (2.5, None))),
    {("tuple", "key"): [("x", 1)], 7: "int key"},
    b"\x00\xffbytes",
    "ünïcode ✓",
    2**63 - 1,
    -(2**63),
    2**64 - 1,
    [],
    {},
    (),
]


def _entry(recs: list[Any], node: int = 0) -> Entry:
    keys = [f"k{i}" for i in range(len(recs))]
    ts = list(range(len(recs)))
    return ([(node, keys, recs, ts, ts)], pack_ints([10]), 9, 0, 0)


def test_every_carried_type_round_trips_exactly() -> None:
    entries = [_entry(CARRIED), _entry([], node=1), ([], pack_ints([3, 4]), -5, 2, 0)]
    decoded = decode_frame(encode_entries(entries), nodes=2)
    assert decoded == entries
    assert isinstance(decoded, list)
    recs = decoded[0][0][0][2]
    assert type(recs[2]) is tuple and type(recs[2][2][1]) is tuple
    assert list(recs[3]) == [("tuple", "key"), 7] and type(recs[3][("tuple", "key")][0]) is tuple


def test_a_barrier_round_trips() -> None:
    assert decode_frame(encode_barrier(12, True), nodes=1) == (12, True)
    assert decode_frame(encode_barrier(0, False), nodes=1) == (0, False)


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        (b"\xc1", "is not msgpack"),
        (b"", "is not msgpack"),
        (pickle.dumps([0, []]), "is not msgpack|neither records nor a barrier"),
        (msgpack.packb([2, []]), "neither records nor a barrier"),
        (msgpack.packb([1, -1, True]), "neither records nor a barrier"),
        (msgpack.packb([1, 3, 1]), "neither records nor a barrier"),
        (msgpack.packb([0, [[[], b"", 0, 0, 0]]]), "malformed parts or trace"),
        (msgpack.packb([0, [[[], b"1234567", 0, 0, 0]]]), "malformed parts or trace"),
        (msgpack.packb([0, [[[], b"\0" * 8, 0, 7, 0]]]), "status 7"),
        (msgpack.packb([0, [[[], b"\0" * 8, 1.5, 0, 0]]]), "watermark 1.5"),
        (msgpack.packb([0, [[[[5, [], [], b"", b""]], b"\0" * 8, 0, 0, 0]]]), "keyed node 5"),
        (msgpack.packb([0, [[[[0, ["a"], [], b"", b""]], b"\0" * 8, 0, 0, 0]]]), "do not match"),
        (msgpack.packb([0, [[[[0, ["a"], [1], b"", b""]], b"\0" * 8, 0, 0, 0]]]), "timestamps"),
        (msgpack.packb([0, [[[[0, [1], [1], b"\0" * 8, b"\0" * 8]], b"\0" * 8, 0, 0, 0]]]), "keys"),
        (msgpack.packb([0, [[[], b"\0" * 8, 0, 0, 1]]]), "source 1; the job has 1"),
        (
            msgpack.packb([0, [[[], b"\0" * 8, 0, 0]]]),
            r"\[parts, trace, watermark, status, source\]",
        ),
        (msgpack.packb(msgpack.ExtType(9, b"x")), "unknown msgpack ext type 9"),
        (b"\x91" * 5000 + b"\xc0", "is not msgpack"),  # nested past msgpack's depth limit
        (msgpack.packb({"a": 1}) + b"extra", "is not msgpack"),
    ],
)
def test_malformed_frames_are_refused(payload: bytes, why: str) -> None:
    with pytest.raises(MessageError, match=why):
        decode_frame(payload, nodes=2)


@pytest.mark.parametrize(
    ("record", "named"),
    [
        (datetime.date(2024, 1, 1), "date is not a type"),
        ({"when": {1, 2}}, "set is not a type"),
        ([object()], "object is not a type"),
        (decimal.Decimal("1.5"), "Decimal is not a type"),
        (2**64, "integer 18446744073709551616 does not fit in 64 bits"),
    ],
)
def test_an_unencodable_record_is_dead_lettered_with_its_type(record: Any, named: str) -> None:
    good = {"id": "ok"}
    with pytest.raises(Unencodable):
        encode_entries([_entry([good, record])])
    dead: list[tuple[str, Any]] = []
    kept = drop_unencodable([_entry([good, record])], lambda why, r: dead.append((why, r)))
    assert decode_frame(encode_entries(kept), nodes=1) == [
        ([(0, ["k0"], [good], [0], [0])], pack_ints([10]), 9, 0, 0)
    ]
    assert len(dead) == 1 and dead[0][1] is record
    assert dead[0][0].startswith("the record cannot cross to another worker")
    assert re.search(named, dead[0][0]), dead[0][0]


def _chain(mapper: Callable[[Any], Any] | None) -> tuple[Chain, DeadLetters]:
    job = Job("j")
    stream = job.source(
        sources.generator("ads", rate=0, ids=3, count=4, clock="synthetic"),
        timestamp="ts",
        watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=0),
    )
    if mapper is not None:
        stream = stream.map(mapper)
    stream.key_by("id").window(windows.tumbling(ms=10)).aggregate("n", n=agg.count())
    dead = DeadLetters(None)
    return Chain(job.sources[0], {}, dead), dead


def test_the_chain_dead_letters_records_the_exchange_cannot_carry_at_any_parallelism() -> None:
    chain, dead = _chain(lambda r: {**r, "at": {r["ts"]} if r["id"] == "ad-1" else r["ts"]})
    recs = [
        {"id": f"ad-{i % 3}", "event": "view", "ts": 1_700_000_000_000 + i, "value": 1}
        for i in range(6)
    ]
    chain.process(SourceBatch(recs, decoded=True, offsets={}))
    [(_, keys, kept, _, _)] = chain.keyed
    assert "ad-1" not in keys and len(kept) == 4
    assert dead.count == 2 and dead.by_reason == {"exchange": 2}
    assert "set is not a type the exchange carries" in dead._pending[0]["reason"]


def test_json_records_are_never_checked_again() -> None:
    chain, dead = _chain(None)
    lines = [b'{"id": "ad-1", "ts": 1700000000000, "big": 18446744073709551615}']
    chain.process(SourceBatch(lines, decoded=False, offsets={}))
    assert dead.count == 0 and len(chain.keyed[0][2]) == 1
    encode_entries([(chain.keyed, pack_ints([1]), 0, 0, 0)])  # and they do cross


class _Sent:
    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.pending_bytes = 0

    def send(self, j: int, payload: bytes) -> None:
        self.frames.append(payload)


def test_boxes_over_the_frame_cap_are_split_and_a_single_batch_over_it_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(framing, "MAX_FRAME", 400)
    sent = _Sent()
    router = Router(0, 2, 128, sent, 10_000, lambda *a: None)  # type: ignore[arg-type]
    entries = [_entry([{"v": "x" * 50}] * 3) for _ in range(4)]
    assert router._frames(entries) and len(router._frames(entries)) > 1
    assert all(len(f) <= 400 for f in router._frames(entries))
    frames = router._frames(entries)
    assert [e for f in frames for e in decode_frame(f, 1)] == entries  # type: ignore[union-attr]
    with pytest.raises(WorkerFailed, match="over the exchange's 400-byte frame limit"):
        router._frames([_entry([{"v": "x" * 500}])])
    assert Barrier(1, False) == Barrier(*decode_frame(encode_barrier(1, False), 1))  # type: ignore[misc]
