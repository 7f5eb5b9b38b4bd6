"""KAFKA-16699 with real clients: an idle transactional producer whose transactional id expired hears
INVALID_PRODUCER_ID_MAPPING on its next transaction.

What the clients do with it (recorded in docs/broker.md, asserted here):
- librdkafka: the commit fails with an *abortable* error (code 49); `abort_transaction` succeeds (its KIP-360
  InitProducerId gets a fresh producer id) and the next transaction commits.
- kafka-python: the error (49) puts the producer in a fatal error state; even `abort_transaction` fails, so the
  application must create a new producer.

An application loop that treats 49 like PRODUCER_FENCED (a new producer, resume from the committed offsets)
finishes with every input record in the output exactly once, with either client."""

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.structs import OffsetAndMetadata

from conftest import drain_confluent

EXPIRATION = ["--transactional-id-expiration-ms", "1500", "--housekeeping-interval-ms", "100"]
IDLE_S = 3.0
INPUT = 200
CHUNK = 20


def test_librdkafka_hears_an_abortable_invalid_producer_id_mapping_and_recovers_by_aborting(serve):
    broker = serve("--topic", "t:1", *EXPIRATION)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "idle-app"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("t", value=b"before-idle")
    producer.commit_transaction(30)
    time.sleep(IDLE_S)
    producer.begin_transaction()
    producer.produce("t", value=b"after-idle")
    with pytest.raises(KafkaException) as raised:
        producer.commit_transaction(30)
    error = raised.value.args[0]
    assert error.code() == KafkaError.INVALID_PRODUCER_ID_MAPPING
    assert error.txn_requires_abort() and not error.fatal()
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce("t", value=b"next")
    producer.commit_transaction(30)


def test_kafka_python_hears_invalid_producer_id_mapping_as_a_fatal_state(serve):
    broker = serve("--topic", "t:1", *EXPIRATION)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="idle-kp")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("t", b"before-idle")
    producer.commit_transaction()
    time.sleep(IDLE_S)
    producer.begin_transaction()
    producer.send("t", b"after-idle")
    with pytest.raises(Exception) as raised:
        producer.commit_transaction()
    assert "InvalidProducerIdMapping" in repr(raised.value)
    with pytest.raises(Exception):
        producer.abort_transaction()
    producer.close(timeout=5)


def fill_input(bootstrap):
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(INPUT):
        producer.produce("in", value=b"%03d" % i)
    assert producer.flush(30) == 0


def committed_output(bootstrap):
    reader = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "verifier",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    reader.assign([TopicPartition("out", 0, 0)])
    values = [value for _, _, value in drain_confluent(reader)]
    reader.close()
    return values


def test_librdkafka_application_treating_it_as_fenced_loses_and_duplicates_nothing(serve):
    broker = serve("--topic", "in:1", "--topic", "out:1", *EXPIRATION)
    fill_input(broker.bootstrap)

    def new_producer():
        producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "ctp-app"})
        producer.init_transactions(30)
        return producer

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "ctp",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition("in", 0)])
    producer = new_producer()
    recreated, chunks = 0, 0
    while True:
        messages = [m for m in consumer.consume(CHUNK, 3) if not m.error()]
        if not messages:
            break
        chunks += 1
        if chunks == 4:
            time.sleep(IDLE_S)  # the transactional id expires
        try:
            producer.begin_transaction()
            for message in messages:
                producer.produce("out", value=b"out-" + message.value())
            positions = consumer.position(consumer.assignment())
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(30)
        except KafkaException as raised:
            error = raised.args[0]
            if error.code() not in (KafkaError.INVALID_PRODUCER_ID_MAPPING, KafkaError._FENCED):
                raise
            # Treat it like PRODUCER_FENCED: a new producer, and resume from the committed offsets.
            recreated += 1
            producer = new_producer()
            committed = consumer.committed([TopicPartition("in", 0)], 10)[0].offset
            consumer.assign([TopicPartition("in", 0, max(committed, 0))])
    consumer.close()
    assert recreated == 1
    assert committed_output(broker.bootstrap) == [b"out-%03d" % i for i in range(INPUT)]


def test_kafka_python_application_treating_it_as_fenced_loses_and_duplicates_nothing(serve):
    broker = serve("--topic", "in:1", "--topic", "out:1", *EXPIRATION)
    fill_input(broker.bootstrap)
    partition = KafkaTopicPartition("in", 0)

    def new_producer():
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="ctp-kp")
        producer.init_transactions()
        return producer

    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id="ctp-kp",
        isolation_level="read_committed",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    consumer.assign([partition])
    producer = new_producer()
    recreated, chunks = 0, 0
    while True:
        batch = consumer.poll(timeout_ms=3000, max_records=CHUNK).get(partition, [])
        if not batch:
            break
        chunks += 1
        if chunks == 4:
            time.sleep(IDLE_S)
        try:
            producer.begin_transaction()
            for message in batch:
                producer.send("out", b"out-" + message.value)
            offsets = {partition: OffsetAndMetadata(consumer.position(partition), "", -1)}
            producer.send_offsets_to_transaction(offsets, "ctp-kp")
            producer.commit_transaction()
        except Exception as raised:  # kafka-python raises KafkaError subclasses
            if "InvalidProducerIdMapping" not in repr(raised) and "Fenced" not in repr(raised):
                raise
            recreated += 1
            producer.close(timeout=5)
            producer = new_producer()
            committed = consumer.committed(partition)
            consumer.seek(partition, committed if committed is not None else 0)
    consumer.close()
    producer.close(timeout=5)
    assert recreated == 1
    assert committed_output(broker.bootstrap) == [b"out-%03d" % i for i in range(INPUT)]
