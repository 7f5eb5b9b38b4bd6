"""Every client's producers and consumers against `mirrorlog serve` and against Apache Kafka (clients.py):

- an idempotent producer: each record acknowledged once, at the offset its order in the partition gives it, and
  read back by read_committed and read_uncommitted consumers exactly so;
- a transactional producer committing, aborting and committing again: every offset it is told accounts for one
  control marker per partition after each transaction; read_committed consumers see exactly the committed
  records, read_uncommitted ones all of them, aborted included, each at its offset; the end offsets count the
  markers too.

Clients without a group-less consumer (kafkajs) are read back with librdkafka's.
"""

import pytest
from confluent_kafka import Consumer, TopicPartition

from clients import Aiokafka, KafkaPython, Librdkafka, idempotent_values, transaction_values

PARTITIONS = 3
IDEMPOTENT_RECORDS = 60
# Each step is one transaction: (outcome, records), the records spread over the partitions.
PLAN = [("commit", 7), ("abort", 5), ("commit", 4)]

IN_PROCESS = {"librdkafka": Librdkafka, "kafka-python": KafkaPython, "aiokafka": Aiokafka}
PROGRAMS = {"kafkajs": "kafkajs", "java": "java_client", "franz-go": "franz_go"}


@pytest.fixture(params=[*IN_PROCESS, *PROGRAMS])
def client(request):
    if request.param in IN_PROCESS:
        return IN_PROCESS[request.param]()
    return request.getfixturevalue(PROGRAMS[request.param])


def consumer_of(client):
    return client if client.consume is not None else Librdkafka()


def end_offsets(bootstrap, topic, partitions):
    """The high watermark of each partition (ListOffsets latest, through librdkafka)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-watermarks"})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), 30)[1] for p in range(partitions)]
    finally:
        consumer.close()


def expected_transactions(plan, partitions):
    """The records each transaction of `plan` leaves, with their offsets: consecutive per partition, and one
    COMMIT or ABORT marker after each transaction in every partition it wrote to. Also the end offset of each
    partition."""
    next_offset = [0] * partitions
    transactions = []
    for n, (outcome, count) in enumerate(plan):
        records = []
        for partition, value in transaction_values(n, outcome, count, partitions):
            records.append((partition, next_offset[partition], value))
            next_offset[partition] += 1
        for partition in {partition for partition, _, _ in records}:
            next_offset[partition] += 1  # the marker
        transactions.append((outcome, records))
    return transactions, next_offset


def test_idempotent_producer(broker, client):
    topic = broker.create_topic(PARTITIONS, "idempotent")
    acknowledged = client.produce_idempotent(broker.bootstrap, topic, PARTITIONS, IDEMPOTENT_RECORDS)

    expected = []
    next_offset = [0] * PARTITIONS
    for partition, value in idempotent_values(IDEMPOTENT_RECORDS, PARTITIONS):
        expected.append((partition, next_offset[partition], value))
        next_offset[partition] += 1
    assert sorted(acknowledged) == sorted(expected), "acknowledged offsets"
    assert end_offsets(broker.bootstrap, topic, PARTITIONS) == next_offset

    reader = consumer_of(client)
    for isolation in ("read_committed", "read_uncommitted"):
        read = reader.consume(broker.bootstrap, topic, PARTITIONS, isolation, len(expected))
        assert sorted(read) == sorted(expected), f"{reader.name} {isolation}"
        for partition in range(PARTITIONS):
            in_partition = [offset for p, offset, _ in read if p == partition]
            assert in_partition == sorted(in_partition), f"{reader.name} {isolation}: partition {partition} reordered"


def test_transactional_producer_commit_and_abort(broker, client):
    topic = broker.create_topic(PARTITIONS, "transactions")
    done = client.produce_transactional(broker.bootstrap, topic, PARTITIONS, broker.unique("txn"), PLAN)

    expected, next_offset = expected_transactions(PLAN, PARTITIONS)
    assert [outcome for outcome, _ in done] == [outcome for outcome, _ in PLAN]
    for n, ((_, acknowledged), (_, wanted)) in enumerate(zip(done, expected)):
        assert sorted(acknowledged) == sorted(wanted), f"transaction {n}: acknowledged offsets"
    assert end_offsets(broker.bootstrap, topic, PARTITIONS) == next_offset, "end offsets (markers included)"

    committed = sorted(r for outcome, records in expected if outcome == "commit" for r in records)
    everything = sorted(r for _, records in expected for r in records)
    assert len(committed) < len(everything)
    reader = consumer_of(client)
    read_committed = reader.consume(broker.bootstrap, topic, PARTITIONS, "read_committed", len(committed))
    assert sorted(read_committed) == committed, f"{reader.name} read_committed: aborted records must be invisible"
    read_uncommitted = reader.consume(broker.bootstrap, topic, PARTITIONS, "read_uncommitted", len(everything))
    assert sorted(read_uncommitted) == everything, f"{reader.name} read_uncommitted: every record, aborted too"
