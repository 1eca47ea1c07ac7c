"""Send a JSONL file's events to the topic `clicks`, each keyed by its page."""

import json
import os
import sys

from kafka import KafkaProducer

BOOTSTRAP = os.environ.get("KAFKA_BOOTSTRAP", "localhost:9092")

producer = KafkaProducer(bootstrap_servers=BOOTSTRAP)
with open(sys.argv[1]) as events:
    lines = [line for line in events if line.strip()]
for line in lines:
    event = json.loads(line)
    producer.send("clicks", key=event["page"].encode(), value=line.strip().encode())
producer.flush()
producer.close()
print(f"sent {len(lines)} events to clicks")
