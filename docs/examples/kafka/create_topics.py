"""Create the topics of the tutorial: `clicks` (the input) and `click-stats` (the results)."""

import os

from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError

BOOTSTRAP = os.environ.get("KAFKA_BOOTSTRAP", "localhost:9092")

admin = KafkaAdminClient(bootstrap_servers=BOOTSTRAP)
for name in ("clicks", "click-stats"):
    try:
        admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])
        print(f"created {name}")
    except TopicAlreadyExistsError:
        print(f"{name} exists already")
admin.close()
