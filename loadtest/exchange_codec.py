"""Exchange frame codecs side by side: today's pickle, msgpack (``task.framing``), orjson and
Arrow IPC, encoding and decoding the same representative frames: one box of keyed ad records
(``{"id", "event", "ts", "value"}``, as the ``ads`` generator makes them) split over entries of
source batches, as ``routing.Router`` ships them. Prints microseconds per record.

    python -m loadtest.exchange_codec [--records 8192] [--entries 8] [--repeat 20]
"""

from __future__ import annotations

import argparse
import json
import pickle
import time
from collections.abc import Callable
from typing import Any

import orjson
import pyarrow as pa  # type: ignore[import-untyped]

from weir.engine.runtime.task.framing import Entry, decode_frame, encode_entries, pack_ints
from weir.engine.runtime.task.routing import rows_of
from weir.engine.sources import generator


def sample_entries(records: int, entries: int) -> list[Entry]:
    src = generator("ads", rate=0, ids=10_000, skew=0.0, seed=1, count=records, clock="synthetic")
    recs = src.open("0").read_batch(records).items
    per = max(1, len(recs) // entries)
    out: list[Entry] = []
    for i in range(0, len(recs), per):
        chunk = recs[i : i + per]
        keys = [r["id"] for r in chunk]
        ts = [r["ts"] for r in chunk]
        out.append(([(0, keys, chunk, ts, ts)], pack_ints(ts), ts[-1], 0, 0))
    return out


def _orjson_encode(entries: list[Entry]) -> bytes:
    return orjson.dumps([[p, t.hex(), d, s, i] for p, t, d, s, i in entries])


def _orjson_decode(raw: bytes) -> Any:
    return [[p, bytes.fromhex(t), d, s, i] for p, t, d, s, i in orjson.loads(raw)]


def _arrow_encode(entries: list[Entry]) -> bytes:
    sink = pa.BufferOutputStream()
    batches = []
    for parts, *_ in entries:
        for part in parts:
            assert isinstance(part, tuple)  # the records frames this bench compares
            node, keys, recs, ts, wms = part
            cols = {"node": [node] * len(keys), "key": keys, "rec": recs, "ts": ts, "wm": wms}
            batches.append(pa.RecordBatch.from_pydict(cols))
    with pa.ipc.new_stream(sink, batches[0].schema) as writer:
        for b in batches:
            writer.write_batch(b)
    return sink.getvalue().to_pybytes()  # type: ignore[no-any-return]


def _arrow_decode(raw: bytes) -> Any:
    return [b.to_pydict() for b in pa.ipc.open_stream(raw)]


CODECS: dict[str, tuple[Callable[[list[Entry]], bytes], Callable[[bytes], Any]]] = {
    "pickle": (lambda e: pickle.dumps(e, protocol=pickle.HIGHEST_PROTOCOL), pickle.loads),
    "msgpack": (encode_entries, lambda raw: decode_frame(raw, 1)),
    "orjson": (_orjson_encode, _orjson_decode),
    "arrow_ipc": (_arrow_encode, _arrow_decode),
}


def _best(fn: Callable[[], Any], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def measure(records: int, entries: int, repeat: int) -> dict[str, dict[str, float]]:
    frame = sample_entries(records, entries)
    n = sum(rows_of(parts) for parts, *_ in frame)
    out: dict[str, dict[str, float]] = {}
    for name, (encode, decode) in CODECS.items():
        raw = encode(frame)
        enc = _best(lambda e=encode: e(frame), repeat)  # type: ignore[misc]
        dec = _best(lambda d=decode, r=raw: d(r), repeat)  # type: ignore[misc]
        out[name] = {
            "encode_us_per_record": round(enc / n * 1e6, 3),
            "decode_us_per_record": round(dec / n * 1e6, 3),
            "bytes_per_record": round(len(raw) / n, 1),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=8192)
    parser.add_argument("--entries", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    print(json.dumps(measure(args.records, args.entries, args.repeat), indent=2))


if __name__ == "__main__":
    main()
