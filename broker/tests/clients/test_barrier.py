"""A partition holding a MIRROR_PID_RESET barrier (control type 7) and COMMIT/ABORT markers: both clients'
consumers read across it as if it were not there, and a new idempotent producer after it starts cleanly.

The partition is the shared mixed segment (samples/00000000000000000000.log, offsets 0–47): idempotent and plain
data, a committed (5002) and an aborted (5003) transaction, the barrier at offset 24, another committed
transaction, and a transaction of producer 6002 left open at offset 38 — so the last stable offset stays at 38
(a hanging transaction, as in Kafka) and read_committed consumers stop there."""

import shutil
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition

from conftest import drain_confluent, drain_kafka_python

SEGMENT = Path(__file__).resolve().parents[3] / "samples" / "00000000000000000000.log"

# Data records of the segment: (first offset, count, visible to read_committed).
DATA = [(0, 5, True), (5, 3, True), (8, 3, True), (11, 5, True), (16, 2, True), (19, 4, False), (25, 10, True),
        (35, 2, True), (38, 3, False), (41, 5, False), (46, 2, False)]
LAST_STABLE_OFFSET = 38


def offsets(visible_only):
    return [first + i for first, count, visible in DATA if visible or not visible_only for i in range(count)]


def read_offsets(bootstrap, isolation):
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{isolation}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition("mixed", 0, 0)])
    librdkafka = [offset for _, offset, _ in drain_confluent(consumer)]
    consumer.close()
    reader = KafkaConsumer(
        bootstrap_servers=broker_address(bootstrap), isolation_level=isolation, enable_auto_commit=False,
        consumer_timeout_ms=3000,
    )
    reader.assign([KafkaTopicPartition("mixed", 0)])
    reader.seek_to_beginning()
    kafka_python = [offset for _, offset, _ in drain_kafka_python(reader)]
    reader.close()
    return librdkafka, kafka_python


def broker_address(bootstrap):
    return bootstrap


def test_consumers_read_across_a_barrier_and_a_new_producer_starts_cleanly(serve, tmp_path):
    data_dir = tmp_path / "mirrored"
    (data_dir / "mixed-0").mkdir(parents=True)
    shutil.copy(SEGMENT, data_dir / "mixed-0" / SEGMENT.name)
    broker = serve(data_dir=data_dir)

    for client_offsets in read_offsets(broker.bootstrap, "read_uncommitted"):
        assert client_offsets == offsets(visible_only=False)
    for client_offsets in read_offsets(broker.bootstrap, "read_committed"):
        assert client_offsets == [o for o in offsets(visible_only=True) if o < LAST_STABLE_OFFSET]

    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "acks": "all"})
    failed = []
    for i in range(10):
        producer.produce("mixed", value=b"after-barrier-%d" % i, partition=0,
                         on_delivery=lambda error, _m: failed.append(error) if error else None)
    assert producer.flush(30) == 0
    assert failed == []

    librdkafka, kafka_python = read_offsets(broker.bootstrap, "read_uncommitted")
    new_offsets = list(range(48, 58))
    assert librdkafka == offsets(visible_only=False) + new_offsets
    assert kafka_python == librdkafka
