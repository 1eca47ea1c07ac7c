"""The peer's side of ``benchmarks/peer_bench.py``: the same job in Quix Streams, run by the Quix
venv's Python (``.bench-venvs/quix``; it does not import weir).

Tumbling 10 s windows of count+sum of ``value`` per message key (the event's ``id``), event time
from the ``ts`` field, 1 s grace (weir's bounded out-of-orderness), ``closing_strategy=
"partition"`` (Quix's fastest). Quix's defaults otherwise: RocksDB state, changelog topics, a
commit every 5 s. Timed from the first message processed to the last of ``--events``; prints a
JSON line with the process's peak RSS.

    .bench-venvs/quix/bin/python benchmarks/quix_job.py BOOTSTRAP TOPIC --events N
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
import uuid
from typing import Any

from quixstreams import Application  # type: ignore[import-not-found,unused-ignore]
from quixstreams.dataframe.windows import Count, Sum  # type: ignore[import-not-found,unused-ignore]
from quixstreams.models.topics.manager import (  # type: ignore[import-not-found,unused-ignore]
    TopicManager,
)


def _tansu_topic_configs() -> None:
    """Tansu (the test broker) answers DescribeConfigs with no entries; Quix needs the source
    topic's ``retention.ms`` to configure its changelog topics. Fill in Kafka's meaning of an
    absent value (unlimited) where the broker gave none; nothing else in Quix is changed."""
    fetch = TopicManager._fetch_topic

    def fetch_with_defaults(self: Any, topic: Any) -> Any:
        found = fetch(self, topic)
        found.broker_config.extra_config.setdefault("retention.ms", "-1")
        return found

    TopicManager._fetch_topic = fetch_with_defaults


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("bootstrap")
    parser.add_argument("topic")
    parser.add_argument("--events", type=int, required=True)
    parser.add_argument("--closing-strategy", default="partition", choices=["partition", "key"])
    parser.add_argument("--timeout-s", type=float, default=600)
    args = parser.parse_args()
    _tansu_topic_configs()

    seen = 0
    first = last = 0.0

    def processed(topic: str, partition: int, offset: int) -> None:
        nonlocal seen, first, last
        if seen == 0:
            first = time.perf_counter()
        seen += 1
        if seen >= args.events:
            last = time.perf_counter()
            app.stop()

    app = Application(
        broker_address=args.bootstrap,
        consumer_group=f"quix-bench-{uuid.uuid4().hex[:8]}",
        auto_offset_reset="earliest",
        state_dir=tempfile.mkdtemp(prefix="quix-state-"),
        on_message_processed=processed,
        # Tansu (the test broker) needs a short session timeout or a group join takes ~23 s
        consumer_extra_config={"session.timeout.ms": 6000},
        loglevel="WARNING",
    )

    def event_time(value: Any, headers: Any, timestamp: float, kind: Any) -> int:
        return int(value["ts"])

    topic = app.topic(args.topic, value_deserializer="json", timestamp_extractor=event_time)
    sdf = app.dataframe(topic)
    sdf = (
        sdf.tumbling_window(duration_ms=10_000, grace_ms=1_000)
        .agg(count=Count(), total=Sum("value"))
        .final(closing_strategy=args.closing_strategy)
    )
    started = time.perf_counter()
    app.run(timeout=args.timeout_s)
    if seen < args.events:
        raise SystemExit(f"Quix Streams processed {seen} of {args.events} events")
    seconds = last - first
    print(
        json.dumps(
            {
                "events": seen,
                "seconds": round(seconds, 3),
                "events_per_s": round(seen / seconds),
                "startup_s": round(first - started, 3),
                "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                "closing_strategy": args.closing_strategy,
            }
        )
    )


if __name__ == "__main__":
    main()
