"""Write generated workloads to JSONL files (the input of file-source benchmarks and tests)."""

from __future__ import annotations

from pathlib import Path

import orjson

from weir.engine.sources import generator


def write_ads(
    path: Path, events: int, keys: int, step_ms: float, disorder_ms: int = 500, seed: int = 42
) -> Path:
    """``events`` ad events over ``keys`` ids, event ``i`` at ``start + i*step_ms`` less up to
    ``disorder_ms`` of disorder."""
    src = generator(
        "ads",
        rate=0,
        ids=keys,
        skew=0.0,
        disorder=disorder_ms,
        seed=seed,
        count=events,
        clock="synthetic",
        step=step_ms,
    )
    reader = src.open("0")
    dumps = orjson.dumps
    with open(path, "wb") as fh:
        while True:
            batch = reader.read_batch(100_000)
            if batch.end:
                break
            fh.write(b"".join([dumps(r) + b"\n" for r in batch.items]))
    return path
