"""A worker's part of a stop-with-savepoint: its source side reads nothing after the barrier
stopped it (its positions stay those the barrier recorded) until that checkpoint is aborted;
the barrier frame between workers carries the stop, over a real exchange."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from weir import Job, agg, sources, windows
from weir.engine.runtime.outputs import DeadLetters
from weir.engine.runtime.peerauth import PeerAuth
from weir.engine.runtime.task.chain import Chain
from weir.engine.runtime.task.exchange import Exchange
from weir.engine.runtime.task.routing import Barrier, Router, decode_frame
from weir.engine.runtime.task.sources import SourceSide, SplitStart


def _source_side(tmp_path: Path) -> SourceSide:
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps({"id": "a", "ts": t}) + "\n" for t in range(5_000)))
    job = Job("j")
    (
        job.source(sources.jsonl(path), timestamp="ts")
        .key_by("id")
        .window(windows.tumbling(ms=5))
        .aggregate("op", n=agg.count())
    )
    node = job.sources[0]
    side = SourceSide(node, Chain(node, {}, DeadLetters(None)), node.source.splits(1), None)
    side.open(SplitStart())
    return side


def test_stopped_sources_read_nothing_until_their_checkpoint_is_aborted(tmp_path: Path) -> None:
    side = _source_side(tmp_path)
    assert side.reading
    assert side.read_next(10).had_records
    at_barrier = side.positions()
    side.stop_at(7)
    assert not side.reading and side.positions() == at_barrier
    side.resume(6)  # another checkpoint's abort: still stopped
    assert not side.reading and side.stopped_at == 7
    side.resume(7)
    assert side.reading
    batch = side.read_next(100)
    assert batch.had_records and side.positions() != at_barrier
    side.close()


def test_a_barrier_frame_carries_the_stop_to_the_other_workers() -> None:
    auth = PeerAuth.new(0)
    ends = [Exchange(i, 2, auth) for i in range(2)]
    addresses = [end.listen() for end in ends]
    joining = threading.Thread(target=ends[1].connect, args=(addresses, lambda: False, 10.0))
    joining.start()
    ends[0].connect(addresses, lambda: False, 10.0)
    joining.join(10.0)
    try:
        router = Router(0, 2, 128, ends[0], 100, lambda *a: None)
        router.send_barrier(Barrier(3, stop_sources=True))
        router.send_barrier(Barrier(4, stop_sources=False))
        frames: list[bytes] = []
        for _ in range(100):
            frames += [payload for _, payload in ends[1].poll(0.05)]
            if len(frames) == 2:
                break
        assert [decode_frame(f, 1) for f in frames] == [Barrier(3, True), Barrier(4, False)]
    finally:
        for end in ends:
            end.close()
