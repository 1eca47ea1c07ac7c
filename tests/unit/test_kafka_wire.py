"""The raw Kafka source's own codec (``sources.kafka_wire``) against kafka-python's protocol
classes, which are generated from Kafka's message schemas: the requests it encodes decode to
what was asked there, and the responses encoded there decode to the same fields here."""

from __future__ import annotations

from kafka.protocol.consumer import FetchRequest, FetchResponse, ListOffsetsRequest
from kafka.protocol.consumer import ListOffsetsResponse as Lo
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.metadata import MetadataResponse as Md

from weir.engine.sources import kafka_wire as kw


def test_requests_decode_as_kafkas_schemas_read_them() -> None:
    fetch = FetchRequest.decode(kw.fetch_request("ads", 3, 42, 50, 1_000, 500), version=4)
    assert (fetch.replica_id, fetch.max_wait_ms, fetch.min_bytes, fetch.max_bytes) == (
        -1, 50, 1, 1_000,
    )  # fmt: skip
    part = fetch.topics[0].partitions[0]
    assert (fetch.topics[0].topic, part.partition, part.fetch_offset) == ("ads", 3, 42)
    assert part.partition_max_bytes == 500 and fetch.isolation_level == 0
    offsets = ListOffsetsRequest.decode(kw.list_offsets_request("ads", 2, -2), version=1)
    asked = offsets.topics[0].partitions[0]
    assert (offsets.topics[0].name, asked.partition_index, asked.timestamp) == ("ads", 2, -2)
    meta = MetadataRequest.decode(kw.metadata_request("ads"), version=4)
    assert [t.name for t in meta.topics] == ["ads"] and meta.allow_auto_topic_creation is False


def test_a_fetch_answer_is_its_partitions_fields_and_a_view_of_its_records() -> None:
    data = FetchResponse.FetchableTopicResponse.PartitionData(
        partition_index=3, error_code=0, high_watermark=99, last_stable_offset=99,
        aborted_transactions=[
            FetchResponse.FetchableTopicResponse.PartitionData.AbortedTransaction(
                producer_id=7, first_offset=5
            )
        ],
        records=b"batches",
    )  # fmt: skip
    topic = FetchResponse.FetchableTopicResponse(topic="ads", partitions=[data])
    body = FetchResponse(throttle_time_ms=0, responses=[topic]).encode(version=4)
    got = kw.fetch_answer(memoryview(bytes(body)))
    assert (got.error_code, got.high_watermark, bytes(got.records)) == (0, 99, b"batches")
    data.error_code, data.records = 6, None  # not the leader: no records
    body = FetchResponse(throttle_time_ms=0, responses=[topic]).encode(version=4)
    got = kw.fetch_answer(memoryview(bytes(body)))
    assert (got.error_code, bytes(got.records)) == (6, b"")


def test_list_offsets_and_metadata_answers() -> None:
    part = Lo.ListOffsetsTopicResponse.ListOffsetsPartitionResponse(
        partition_index=2, error_code=0, timestamp=-1, offset=1_234
    )
    body = Lo(topics=[Lo.ListOffsetsTopicResponse(name="ads", partitions=[part])]).encode(version=1)
    assert kw.list_offsets_answer(memoryview(bytes(body))) == (0, 1_234)
    P = Md.MetadataResponseTopic.MetadataResponsePartition  # noqa: N806
    topics = [
        Md.MetadataResponseTopic(error_code=0, name=name, is_internal=False, partitions=[
            P(error_code=0, partition_index=i, leader_id=lead, replica_nodes=[1, 2],
              isr_nodes=[lead])
            for i, lead in enumerate(leaders)
        ])
        for name, leaders in (("other", [2]), ("ads", [1, 2, -1]))
    ]  # fmt: skip
    brokers = [
        Md.MetadataResponseBroker(node_id=n, host="127.0.0.1", port=9090 + n, rack=None)
        for n in (1, 2)
    ]
    body = Md(throttle_time_ms=0, brokers=brokers, cluster_id="c", controller_id=1,
              topics=topics).encode(version=4)  # fmt: skip
    found, leaders = kw.metadata_answer(memoryview(bytes(body)), "ads")
    assert found == {1: "127.0.0.1:9091", 2: "127.0.0.1:9092"}
    assert leaders == {0: 1, 1: 2, 2: -1}


def test_a_broker_address_splits_as_librdkafka_reads_it() -> None:
    """One parser for the raw source's connections and the TLS diagnosis's first broker."""
    from weir.engine.kafka_security import split_host
    from weir.engine.sources.kafka_diagnose import first_broker

    assert kw.split_host is split_host
    assert split_host("h1:9093") == ("h1", 9093)
    assert split_host("[::1]:9093") == ("::1", 9093)
    assert split_host(" broker ") == ("broker", 9092)
    assert split_host("broker:x") == ("broker", 9092)
    assert first_broker("h1:9093, h2:9094") == ("h1", 9093)
