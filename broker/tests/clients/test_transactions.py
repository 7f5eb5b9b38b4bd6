"""Transactions from librdkafka: commit across partitions, abort, offsets in a transaction; read_committed
consumers of librdkafka and kafka-python see exactly the committed records, read_uncommitted ones see all. Against
both brokers."""

from confluent_kafka import Consumer, Producer, TopicPartition

from clients import KafkaPython, Librdkafka


def values_by_isolation(bootstrap, topic, partitions, expected):
    """{(client, isolation): sorted values}; `expected[isolation]` is how many records that level should see."""
    seen = {}
    for isolation in ("read_committed", "read_uncommitted"):
        for client in (Librdkafka(), KafkaPython()):
            records = client.consume(bootstrap, topic, partitions, isolation, expected[isolation])
            seen[(client.name, isolation)] = sorted(value.encode() for _, _, value in records)
    return seen


def test_read_committed_sees_committed_records_only(broker):
    orders = broker.create_topic(3, "orders")
    source = broker.create_topic(1, "input")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": broker.unique("orders-app")})
    producer.init_transactions(30)

    producer.begin_transaction()
    for i in range(30):
        producer.produce(orders, value=b"committed-%02d" % i, partition=i % 3)
    producer.commit_transaction(30)

    producer.begin_transaction()
    for i in range(9):
        producer.produce(orders, value=b"aborted-%02d" % i, partition=i % 3)
    # Deliver the records before aborting, so the log really holds an aborted transaction (librdkafka purges
    # records it has not sent yet when a transaction aborts).
    assert producer.flush(30) == 0
    producer.abort_transaction(30)

    # Offsets in a transaction: committed with the transaction.
    group = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": broker.unique("orders-group"), "enable.auto.commit": False}
    )
    producer.begin_transaction()
    producer.produce(orders, value=b"with-offsets", partition=0)
    producer.send_offsets_to_transaction([TopicPartition(source, 0, 42)], group.consumer_group_metadata(), 30)
    producer.commit_transaction(30)
    committed = group.committed([TopicPartition(source, 0)], 10)
    assert committed[0].offset == 42
    group.close()

    committed_values = sorted([b"committed-%02d" % i for i in range(30)] + [b"with-offsets"])
    everything = sorted(committed_values + [b"aborted-%02d" % i for i in range(9)])
    seen = values_by_isolation(
        broker.bootstrap, orders, 3, {"read_committed": len(committed_values), "read_uncommitted": len(everything)}
    )
    for client in ("librdkafka", "kafka-python"):
        assert seen[(client, "read_committed")] == committed_values, client
        assert seen[(client, "read_uncommitted")] == everything, client


def test_aborted_offsets_are_not_committed(broker):
    out = broker.create_topic(1, "out")
    source = broker.create_topic(1, "input")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": broker.unique("aborting-app")})
    producer.init_transactions(30)
    group = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": broker.unique("g"), "enable.auto.commit": False}
    )
    producer.begin_transaction()
    producer.produce(out, value=b"x")
    producer.send_offsets_to_transaction([TopicPartition(source, 0, 7)], group.consumer_group_metadata(), 30)
    producer.abort_transaction(30)
    assert group.committed([TopicPartition(source, 0)], 10)[0].offset < 0
    group.close()
