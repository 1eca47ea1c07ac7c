"""Fire detection (the classic keyed-process-function example): warn when a sensor stays above
a temperature for a whole time span.

Input: ``{"sensor", "ts", "temperature"}``. For each sensor, the first reading above
``THRESHOLD`` starts a watch and registers an event-time timer ``SPAN_MS`` later; a reading at or
below the threshold *within the span* cancels the watch. If the timer fires while the watch is
still on, the sensor stayed hot for the whole span: a warning is emitted. (A cool reading stamped
after the deadline may arrive before the watermark reaches it; it must not cancel the warning.)
State (``hot_since``, ``warnings``) is per sensor, in RocksDB, and queryable at
``/fire-detection/fires/state/<sensor>``.

    weir run app/examples/fire_detection.py --source file:///path/readings.jsonl
"""

from __future__ import annotations

from typing import Any

from weir import Job, WatermarkStrategy, sources

THRESHOLD = 60.0
SPAN_MS = 10_000


class FireDetector:
    def process(self, reading: dict[str, Any], ctx: Any) -> None:
        hot_since = ctx.value("hot_since")
        if reading["temperature"] > THRESHOLD:
            if hot_since.get() is None:
                hot_since.set(reading["ts"])
                ctx.register_event_time_timer(reading["ts"] + SPAN_MS)
        elif hot_since.get() is not None and reading["ts"] < hot_since.get() + SPAN_MS:
            ctx.delete_event_time_timer(hot_since.get() + SPAN_MS)
            hot_since.clear()

    def on_timer(self, timestamp: int, ctx: Any) -> None:
        hot_since = ctx.value("hot_since")
        started = hot_since.get()
        if started is None or started + SPAN_MS != timestamp:
            return
        warnings = ctx.value("warnings")
        warnings.set(warnings.get(0) + 1)
        ctx.emit({"sensor": ctx.key, "hot_since": started, "warned_at": timestamp})
        hot_since.clear()


job = Job("fire-detection")
(
    job.source(
        sources.jsonl("readings.jsonl"),
        timestamp="ts",
        watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=1_000),
    )
    .key_by("sensor")
    .process(FireDetector(), name="fires")
)
