"""An idempotent librdkafka producer while the broker loses produce acknowledgements: every message is stored
exactly once, in order per partition."""

from confluent_kafka import Consumer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition

from conftest import drain_confluent, drain_kafka_python, idempotent_producer

MESSAGES = 100_000
PARTITIONS = 3


def test_idempotent_producer_stores_each_message_once_while_acks_are_lost(serve):
    broker = serve("--topic", f"events:{PARTITIONS}", "--fault-drop-produce-responses", "0.05")
    producer = idempotent_producer(broker.bootstrap)
    failed = []
    for i in range(MESSAGES):
        partition = i % PARTITIONS
        producer.produce(
            "events",
            value=b"%d:%d" % (partition, i // PARTITIONS),
            partition=partition,
            on_delivery=lambda error, _message: failed.append(error) if error else None,
        )
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(180) == 0
    assert failed == []
    assert broker.stderr_text().count("dropped a produce response") > 0, "the fault never fired"

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "check", "enable.auto.commit": False})
    consumer.assign([TopicPartition("events", p, 0) for p in range(PARTITIONS)])
    messages = drain_confluent(consumer)
    consumer.close()
    assert len(messages) == MESSAGES
    for partition in range(PARTITIONS):
        values = [value for p, _, value in messages if p == partition]
        expected = [b"%d:%d" % (partition, n) for n in range(len(values))]
        assert values == expected, f"partition {partition}: duplicates, gaps or reordering"
        offsets = [offset for p, offset, _ in messages if p == partition]
        assert offsets == list(range(len(offsets)))

    # kafka-python reads the same log.
    reader = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000
    )
    reader.assign([KafkaTopicPartition("events", p) for p in range(PARTITIONS)])
    reader.seek_to_beginning()
    assert len(drain_kafka_python(reader)) == MESSAGES
    reader.close()
