"""The reference-Kafka fixture works: a node comes up with the transaction protocol version it was formatted with,
serves idempotent and transactional librdkafka producers and read_committed consumers, and Kafka's own
DumpLogSegments reads the batches back from its segment file."""

import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_node import api_versions, parse_dump_log_segments, parse_feature_describe, read_properties


def test_node_reports_the_formatted_transaction_version_and_cluster_id(kafka):
    described = kafka.run_tool(
        "org.apache.kafka.tools.FeatureCommand", ["--bootstrap-server", kafka.bootstrap, "describe"]
    ).stdout
    assert parse_feature_describe(described)["transaction.version"] == kafka.transaction_version, described
    # The same level through the fixture's own ApiVersions probe.
    assert kafka.finalized_features()["transaction.version"] == kafka.transaction_version
    assert api_versions(kafka.port)["finalized_epoch"] >= 0

    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    assert admin.describe_cluster().result(30).cluster_id == kafka.cluster_id
    assert read_properties(kafka.log_dirs[0] / "meta.properties")["cluster.id"] == kafka.cluster_id
    assert kafka.start_seconds > 0 and kafka.rss_kib > 0


def consume_all(bootstrap, topic, isolation, expected_count, limit_s=60):
    """The values of partition 0 from offset 0: everything that arrives until at least `expected_count` have and
    then nothing more comes for a second (so extra records are seen too), or until `limit_s`."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4()}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    values = []
    deadline = time.monotonic() + limit_s
    try:
        while time.monotonic() < deadline:
            batch = consumer.consume(100, 1.0)
            if not batch and len(values) >= expected_count:
                break
            for message in batch:
                assert message.error() is None, message.error()
                values.append(message.value().decode())
    finally:
        consumer.close()
    return values


def test_idempotent_and_transactional_producers_and_the_segment_they_leave(kafka):
    topic = f"ledger-tv{kafka.transaction_version}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)

    idempotent = Producer({"bootstrap.servers": kafka.bootstrap, "enable.idempotence": True, "linger.ms": 5})
    plain = [f"idempotent-{i}" for i in range(5)]
    for value in plain:
        idempotent.produce(topic, value.encode(), partition=0)
    assert idempotent.flush(30) == 0

    transactional = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": f"{topic}-app"})
    transactional.init_transactions(30)
    committed = [f"committed-{i}" for i in range(4)]
    transactional.begin_transaction()
    for value in committed:
        transactional.produce(topic, value.encode(), partition=0)
    transactional.commit_transaction(30)
    aborted = [f"aborted-{i}" for i in range(3)]
    transactional.begin_transaction()
    for value in aborted:
        transactional.produce(topic, value.encode(), partition=0)
    # Delivered before the abort, so the log holds them (librdkafka purges what it has not sent).
    assert transactional.flush(30) == 0
    transactional.abort_transaction(30)

    everything = plain + committed + aborted
    assert consume_all(kafka.bootstrap, topic, "read_committed", len(plain + committed)) == plain + committed
    assert consume_all(kafka.bootstrap, topic, "read_uncommitted", len(everything)) == everything

    segments = kafka.segments(topic)
    assert segments, f"no segment in {kafka.partition_dir(topic)}"
    dump = kafka.run_tool(
        "kafka.tools.DumpLogSegments", ["--files", *segments, "--deep-iteration", "--print-data-log"]
    ).stdout
    batches = parse_dump_log_segments(dump)
    assert batches, dump
    assert all(batch["isvalid"] == "true" for batch in batches), dump

    data = [b for b in batches if b["isControl"] == "false"]
    assert [r["payload"] for b in data for r in b["records"]] == everything, dump
    idempotent_ids = {b["producerId"] for b in data if b["isTransactional"] == "false"}
    transactional_ids = {b["producerId"] for b in data if b["isTransactional"] == "true"}
    assert len(idempotent_ids) == 1 and len(transactional_ids) == 1, dump
    assert idempotent_ids != transactional_ids and "-1" not in idempotent_ids | transactional_ids, dump

    markers = [b for b in batches if b["isControl"] == "true"]
    assert [r["endTxnMarker"] for b in markers for r in b["records"]] == ["COMMIT", "ABORT"], dump
    assert {b["producerId"] for b in markers} == transactional_ids, dump
    # Offsets run without a gap: every record, data or marker, is in the file once.
    offsets = [int(r["offset"]) for b in batches for r in b["records"]]
    assert offsets == list(range(len(everything) + len(markers))), dump
