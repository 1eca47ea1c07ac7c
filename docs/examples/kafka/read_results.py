"""Read every result in the topic `click-stats`; keep the last value of each window."""

import json
import os

from kafka import KafkaConsumer

BOOTSTRAP = os.environ.get("KAFKA_BOOTSTRAP", "localhost:9092")

consumer = KafkaConsumer(
    "click-stats",
    bootstrap_servers=BOOTSTRAP,
    auto_offset_reset="earliest",
    consumer_timeout_ms=3_000,  # stop once the topic has nothing more
)
windows = {}
for message in consumer:
    result = json.loads(message.value)
    # a window sent again after a recovery has the same key, start, end and values
    windows[(result["key"], result["start"], result["end"])] = result
consumer.close()
for (page, start, end), result in sorted(windows.items()):
    print(f"{page:8} {start:>6}-{end:<6} views={result['views']} avg_ms={result['avg_ms']:.1f}")
