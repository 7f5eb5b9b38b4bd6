"""Transactions from librdkafka: commit across partitions, abort, offsets in a transaction; read_committed
consumers of both clients see exactly the committed records, read_uncommitted ones see all."""

from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition

from conftest import drain_confluent, drain_kafka_python


def values_by_isolation(bootstrap, topic, partitions):
    seen = {}
    for isolation in ("read_committed", "read_uncommitted"):
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"reader-{isolation}",
                "isolation.level": isolation,
                "enable.auto.commit": False,
            }
        )
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        seen[("librdkafka", isolation)] = sorted(v for _, _, v in drain_confluent(consumer))
        consumer.close()
        reader = KafkaConsumer(
            bootstrap_servers=bootstrap,
            isolation_level=isolation,
            enable_auto_commit=False,
            consumer_timeout_ms=3000,
        )
        reader.assign([KafkaTopicPartition(topic, p) for p in range(partitions)])
        reader.seek_to_beginning()
        seen[("kafka-python", isolation)] = sorted(v for _, _, v in drain_kafka_python(reader))
        reader.close()
    return seen


def test_read_committed_sees_committed_records_only(serve):
    broker = serve("--topic", "orders:3", "--topic", "input:1")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "orders-app"})
    producer.init_transactions(30)

    producer.begin_transaction()
    for i in range(30):
        producer.produce("orders", value=b"committed-%02d" % i, partition=i % 3)
    producer.commit_transaction(30)

    producer.begin_transaction()
    for i in range(9):
        producer.produce("orders", value=b"aborted-%02d" % i, partition=i % 3)
    # Deliver the records before aborting, so the log really holds an aborted transaction (librdkafka purges
    # records it has not sent yet when a transaction aborts).
    assert producer.flush(30) == 0
    producer.abort_transaction(30)

    # Offsets in a transaction: committed with the transaction.
    group = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "orders-group", "enable.auto.commit": False})
    producer.begin_transaction()
    producer.produce("orders", value=b"with-offsets", partition=0)
    producer.send_offsets_to_transaction(
        [TopicPartition("input", 0, 42)], group.consumer_group_metadata(), 30
    )
    producer.commit_transaction(30)
    committed = group.committed([TopicPartition("input", 0)], 10)
    assert committed[0].offset == 42
    group.close()

    seen = values_by_isolation(broker.bootstrap, "orders", 3)
    committed_values = sorted([b"committed-%02d" % i for i in range(30)] + [b"with-offsets"])
    everything = sorted(committed_values + [b"aborted-%02d" % i for i in range(9)])
    for client in ("librdkafka", "kafka-python"):
        assert seen[(client, "read_committed")] == committed_values, client
        assert seen[(client, "read_uncommitted")] == everything, client


def test_aborted_offsets_are_not_committed(serve):
    broker = serve("--topic", "out:1", "--topic", "input:1")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "aborting-app"})
    producer.init_transactions(30)
    group = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g", "enable.auto.commit": False})
    producer.begin_transaction()
    producer.produce("out", value=b"x")
    producer.send_offsets_to_transaction([TopicPartition("input", 0, 7)], group.consumer_group_metadata(), 30)
    producer.abort_transaction(30)
    assert group.committed([TopicPartition("input", 0)], 10)[0].offset < 0
    group.close()
