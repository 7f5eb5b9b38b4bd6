"""A mirrorlog destination mirrors a partition of Apache Kafka over the Kafka protocol (mirror-link's KafkaFetcher,
driven by mirror-fsm's driver; `mirror-link/examples/mirror_once.rs`, named by MIRRORLOG_MIRROR_ONCE):

- while a transaction is open in Kafka, the mirror holds exactly Kafka's batches below Kafka's last stable offset,
  byte for byte at Kafka's offsets (every field `mirrorlog dump --json` prints, the CRC included, agrees with the
  same batches in Kafka's own segment);
- once it is committed, a second run catches up and fails over: every batch of Kafka's log, then one
  MIRROR_PID_RESET barrier naming Kafka's cluster id as the source;
- `mirrorlog serve` as the destination, administered with `mirrorlog mirror`: a Kafka topic of three partitions
  (committed and aborted transactions) mirrored through one connection, byte for byte, then failed over;
- partitions added to a Kafka topic (CreatePartitions, as `kafka-topics --alter --partitions`) are added to its
  mirror topic and mirrored byte for byte, within the metadata refresh interval;
- a mirror topic takes the Kafka topic's configs, follows a change made at Kafka, and refuses a local change to
  them while mirrored;
- a link created with `--include REGEX` mirrors the Kafka topics the pattern selects and, within the metadata refresh
  interval `mirror alter` set while it ran, each one created later;
- `serve --metrics-listen` (issue 53): a mirror of Kafka's lag, scraped and read with Prometheus's OpenMetrics
  parser, falls to 0, grows while the link is paused by exactly Kafka's last stable offset (an open transaction's
  records not counted), and falls to 0 again on resume.
"""

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

import both_ways as bw
from kafka_node import LIBS_ENV, KafkaNode, run_kafka_tool

TOPIC = "mirrored"
MIRROR_ONCE_ENV = "MIRRORLOG_MIRROR_ONCE"


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A Kafka node holding idempotent records, committed and aborted transactions, and one transaction left
    open; yields (node, the open transactional producer)."""
    if not os.environ.get(LIBS_ENV):
        pytest.skip(f"{LIBS_ENV} is not set: `cargo xtask kafka` fetches Apache Kafka's jars and runs this suite")
    if not os.environ.get(MIRROR_ONCE_ENV):
        pytest.skip(f"{MIRROR_ONCE_ENV} is not set: `cargo xtask kafka` builds mirror-link's mirror_once example")
    if not os.environ.get(bw.BIN_ENV):
        pytest.skip(f"{bw.BIN_ENV} is not set: `cargo xtask kafka` builds mirrorlog and names its binary")
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    node = KafkaNode(tmp_path_factory.mktemp("kafka-mirror-source"), transaction_version=2)
    node.start()
    try:
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
        idempotent = Producer({"bootstrap.servers": node.bootstrap, "enable.idempotence": True})
        for index in range(10):
            idempotent.produce(TOPIC, key=f"k{index}".encode(), value=f"idempotent {index}".encode())
        idempotent.flush(30)
        transactional = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": "mirrored-txn"})
        transactional.init_transactions(30)
        for outcome, count in (("commit", 3), ("abort", 2), ("commit", 2)):
            transactional.begin_transaction()
            for index in range(count):
                transactional.produce(TOPIC, value=f"{outcome} {index}".encode())
            transactional.flush(30)
            if outcome == "commit":
                transactional.commit_transaction(30)
            else:
                transactional.abort_transaction(30)
        transactional.begin_transaction()
        transactional.produce(TOPIC, value=b"open")
        transactional.flush(30)
        yield node, transactional
    finally:
        node.stop()


def mirror_once(node, data_dir: Path, *extra) -> dict:
    done = subprocess.run(
        [os.environ[MIRROR_ONCE_ENV], node.bootstrap, TOPIC, "0", node.cluster_id, str(data_dir), *extra],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def last_stable_offset(node) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": node.bootstrap, "group.id": "lso", "isolation.level": "read_committed"}
    )
    try:
        return consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=30)[1]
    finally:
        consumer.close()


def kafka_batches(node) -> list[dict]:
    return [b for segment in node.segments(TOPIC) for b in bw.mirrorlog_json("dump", segment)]


def test_a_mirror_of_kafka_holds_its_batches_byte_for_byte_up_to_its_last_stable_offset(source, tmp_path):
    node, _ = source
    mirrored = mirror_once(node, tmp_path)
    assert mirrored["state"] == "Mirroring", mirrored
    assert mirrored["source_cluster_id"] == node.cluster_id
    lso = last_stable_offset(node)
    assert mirrored["log_end_offset"] == lso, (mirrored, lso)
    ours = bw.mirrorlog_json("dump", tmp_path / f"{TOPIC}-0")
    theirs = [b for b in kafka_batches(node) if b["base_offset"] < lso]
    assert ours == theirs


def test_after_the_commit_a_failover_ends_the_mirror_with_one_barrier_naming_kafka(source, tmp_path):
    node, transactional = source
    mirror_once(node, tmp_path)
    transactional.commit_transaction(30)
    end = last_stable_offset(node)
    stopped = mirror_once(node, tmp_path, "--failover")
    assert stopped["state"] == "Stopped", stopped
    assert stopped["log_end_offset"] == end + 1, (stopped, end)
    ours = bw.mirrorlog_json("dump", tmp_path / f"{TOPIC}-0")
    assert ours[:-1] == kafka_batches(node)
    barrier = ours[-1]
    assert barrier["base_offset"] == end
    assert barrier["control"]["type"] == 7, barrier
    assert barrier["control"]["value_fields"]["source_cluster_id"] == node.cluster_id, barrier
    assert barrier["control"]["value_fields"]["writer_cluster_id"] == "mirror-once", barrier


# -- `mirrorlog serve` as the destination of Apache Kafka, administered with `mirrorlog mirror` -------------------

MANY = "mirrored-many"
MANY_PARTITIONS = 3


def start_serve(data_dir: Path, cluster_id: str, *extra):
    """A `mirrorlog serve` on an ephemeral loopback port; (process, bootstrap)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    # Its log (link and partition state changes, errors) beside its data, for a failing test to show.
    with open(data_dir.parent / f"{data_dir.name}.serve.log", "ab") as log:
        process = subprocess.Popen(
            [os.environ[bw.BIN_ENV], "serve", "--listen", "127.0.0.1:0", "--cluster-id", cluster_id,
             "--data-dir", str(data_dir), "--group-initial-rebalance-delay-ms", "0", *extra],
            stdout=subprocess.PIPE,
            stderr=log,
        )
    line = process.stdout.readline().decode()
    assert "listening on" in line, line
    return process, "127.0.0.1:" + line.rsplit(":", 1)[1].strip()


def mirror_json(action, bootstrap, *args) -> dict:
    done = subprocess.run(
        [os.environ[bw.BIN_ENV], "mirror", action, "--bootstrap", bootstrap, *args, "--json"],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    return json.loads(done.stdout)


def read_committed(bootstrap, topic, partitions):
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "isolation.level": "read_committed",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out, idle = [], 0
    while idle < 3:
        batch = consumer.consume(1000, 1.0)
        idle = idle + 1 if not batch else 0
        out.extend((m.partition(), m.offset(), m.value()) for m in batch if not m.error())
    consumer.close()
    return sorted(out)


def describe_producers(bootstrap, topic, partition) -> list[list[str]]:
    """`kafka-transactions describe-producers`: the table's rows (header first), cells stripped."""
    done = run_kafka_tool(
        "org.apache.kafka.tools.TransactionsCommand",
        ["--bootstrap-server", bootstrap, "describe-producers", "--topic", topic, "--partition", str(partition)],
    )
    return [[cell.strip() for cell in line.split("\t")] for line in done.stdout.splitlines() if "\t" in line]


def test_serve_mirrors_a_kafka_topic_of_several_partitions_and_fails_it_over_with_mirror_commands(source, tmp_path):
    node, _ = source
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(MANY, MANY_PARTITIONS, 1)])[MANY].result(30)
    producer = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": "many-txn"})
    producer.init_transactions(30)
    for outcome in ("commit", "abort", "commit"):
        producer.begin_transaction()
        for index in range(30):
            producer.produce(MANY, value=f"{outcome} {index}".encode(), partition=index % MANY_PARTITIONS)
        if outcome == "commit":
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    process, dest = start_serve(tmp_path / "dest", "serve-destination")
    try:
        created = mirror_json("create", dest, "--link", "from-kafka", "--source", node.bootstrap, "--topic", MANY)
        assert created["links"][0]["source_cluster_id"] == node.cluster_id
        for _ in range(300):
            described = mirror_json("describe", dest, "--link", "from-kafka")
            partitions = described["links"][0]["partitions"]
            if all(p["state"] == "MIRRORING" and p["lag_offsets"] == 0 for p in partitions):
                break
            time.sleep(0.2)
        else:
            raise AssertionError(f"not caught up: {partitions}")
        assert read_committed(dest, MANY, MANY_PARTITIONS) == read_committed(node.bootstrap, MANY, MANY_PARTITIONS)
        for partition in range(MANY_PARTITIONS):
            ours = bw.mirrorlog_json("dump", tmp_path / "dest" / f"{MANY}-{partition}")
            theirs = [b for segment in node.segments(MANY, partition) for b in bw.mirrorlog_json("dump", segment)]
            assert ours == theirs
        # The operator's view of the barrier (issue 51): while mirroring, `kafka-transactions describe-producers`
        # shows on the mirror exactly the producer state Kafka shows for its partition (the same producer id,
        # epoch, coordinator epoch, last sequence and time); after the failover, the barrier has cleared it.
        before = describe_producers(dest, MANY, 0)
        assert before == describe_producers(node.bootstrap, MANY, 0)
        assert len(before) == 2 and before[0][0] == "ProducerId", before
        stopped = mirror_json("failover", dest, "--link", "from-kafka")
        for status in stopped["links"][0]["partitions"]:
            assert status["state"] == "STOPPED" and status["barrier_offset"] == status["log_end_offset"] - 1, status
        after = describe_producers(dest, MANY, 0)
        assert after == [before[0]], after
        assert describe_producers(node.bootstrap, MANY, 0) == before, "the source keeps its producer"
    finally:
        process.terminate()
        assert process.wait(30) == 0


GROWN = "mirrored-grown"


def caught_up(dest, link, partitions) -> list:
    """Waits until `link` on `dest` has `partitions` partitions, all MIRRORING with no lag, twice in a row at the
    same log ends (lag is measured against the last answer that landed, which can predate the source's last
    writes by a round); their statuses."""
    previous = None
    for _ in range(300):
        statuses = mirror_json("describe", dest, "--link", link)["links"][0]["partitions"]
        done = len(statuses) == partitions and all(
            p["state"] == "MIRRORING" and p["lag_offsets"] == 0 for p in statuses
        )
        ends = [p["log_end_offset"] for p in statuses] if done else None
        if done and ends == previous:
            return statuses
        previous = ends
        time.sleep(0.2)
    raise AssertionError(f"not caught up with {partitions} partitions: {statuses}")


def test_partitions_added_to_a_kafka_topic_are_added_to_its_mirror_and_mirrored_byte_for_byte(source, tmp_path):
    node, _ = source
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(GROWN, 2, 1)])[GROWN].result(30)
    producer = Producer({"bootstrap.servers": node.bootstrap, "enable.idempotence": True})
    for index in range(20):
        producer.produce(GROWN, value=f"before {index}".encode(), partition=index % 2)
    producer.flush(30)
    process, dest = start_serve(tmp_path / "dest", "serve-grown", "--mirror-metadata-refresh-ms", "300")
    try:
        mirror_json("create", dest, "--link", "grown", "--source", node.bootstrap, "--topic", GROWN)
        caught_up(dest, "grown", 2)
        admin.create_partitions([NewPartitions(GROWN, 4)])[GROWN].result(30)
        producer = Producer({"bootstrap.servers": node.bootstrap, "enable.idempotence": True})
        for _ in range(150):
            if len(producer.list_topics(GROWN, timeout=10).topics[GROWN].partitions) == 4:
                break
            time.sleep(0.2)
        for index in range(40):
            producer.produce(GROWN, value=f"after {index}".encode(), partition=index % 4)
        producer.flush(30)
        statuses = caught_up(dest, "grown", 4)
        assert [p["partition"] for p in statuses] == [0, 1, 2, 3]
        assert mirror_json("describe", dest, "--link", "grown")["links"][0].get("warnings") is None
        for partition in range(4):
            ours = bw.mirrorlog_json("dump", tmp_path / "dest" / f"{GROWN}-{partition}")
            theirs = [b for segment in node.segments(GROWN, partition) for b in bw.mirrorlog_json("dump", segment)]
            assert ours and ours == theirs, partition
        assert read_committed(dest, GROWN, 4) == read_committed(node.bootstrap, GROWN, 4)
    finally:
        process.terminate()
        assert process.wait(30) == 0


FILTERED_EU, FILTERED_US, FILTERED_ASIA = "filtered.orders.eu", "filtered.orders.us", "filtered.orders.asia"
FILTERED_OTHER = "filtered.payments"


def test_a_link_with_an_include_pattern_mirrors_the_kafka_topics_it_selects_and_those_created_later(
    source, tmp_path
):
    """Issue 53, items 1 and 5: `--include REGEX` mirrors every Kafka topic whose whole name matches, and each one
    created later within the link's metadata refresh interval — here set live with `mirror alter` (serve's own is
    ten minutes, so only the altered interval can find the new topic in time); a topic it does not select is left
    alone."""
    node, _ = source
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    counts = {FILTERED_EU: 2, FILTERED_US: 1, FILTERED_OTHER: 1}
    for name, future in admin.create_topics([NewTopic(n, c, 1) for n, c in counts.items()]).items():
        future.result(30)
    producer = Producer({"bootstrap.servers": node.bootstrap, "enable.idempotence": True})
    for name, partitions in counts.items():
        for index in range(10):
            producer.produce(name, value=f"{name} {index}".encode(), partition=index % partitions)
    producer.flush(30)
    process, dest = start_serve(tmp_path / "dest", "serve-filtered", "--mirror-metadata-refresh-ms", "600000")
    try:
        pattern = r"filtered\.orders\..*"
        created = mirror_json("create", dest, "--link", "filtered", "--source", node.bootstrap, "--include", pattern)
        link = created["links"][0]
        assert link["include"] == [pattern] and link["exclude"] == ["__.*"], link
        assert sorted({p["topic"] for p in link["partitions"]}) == [FILTERED_EU, FILTERED_US], link
        caught_up(dest, "filtered", 3)
        refresh = "mirror.metadata.refresh.interval.ms"
        config = {e["name"]: e for e in mirror_json("describe", dest, "--link", "filtered", "--config")["links"][0]["config"]}
        assert config[refresh] == {"name": refresh, "value": "600000", "default": True}, config
        altered = mirror_json("alter", dest, "--link", "filtered", "--config", f"{refresh}=300")
        config = {e["name"]: e for e in altered["links"][0]["config"]}
        assert config[refresh] == {"name": refresh, "value": "300", "default": False}, config
        refused = subprocess.run(
            [os.environ[bw.BIN_ENV], "mirror", "alter", "--bootstrap", dest, "--link", "filtered",
             "--config", f"{refresh}=soon"],
            capture_output=True, text=True, timeout=60,
        )
        assert refused.returncode != 0 and refresh in refused.stderr, refused

        admin.create_topics([NewTopic(FILTERED_ASIA, 2, 1)])[FILTERED_ASIA].result(30)
        for _ in range(150):
            if FILTERED_ASIA in producer.list_topics(timeout=10).topics:
                break
            time.sleep(0.2)
        for index in range(20):
            producer.produce(FILTERED_ASIA, value=f"asia {index}".encode(), partition=index % 2)
        producer.flush(30)
        statuses = caught_up(dest, "filtered", 5)
        assert sorted({p["topic"] for p in statuses}) == [FILTERED_ASIA, FILTERED_EU, FILTERED_US]
        for name, partitions in ((FILTERED_EU, 2), (FILTERED_US, 1), (FILTERED_ASIA, 2)):
            for partition in range(partitions):
                ours = bw.mirrorlog_json("dump", tmp_path / "dest" / f"{name}-{partition}")
                theirs = [b for seg in node.segments(name, partition) for b in bw.mirrorlog_json("dump", seg)]
                assert ours and ours == theirs, (name, partition)
        assert not (tmp_path / "dest" / f"{FILTERED_OTHER}-0").exists(), "a topic the pattern does not select"
        described = mirror_json("describe", dest, "--link", "filtered")["links"][0]
        assert described.get("warnings") is None, described
    finally:
        process.terminate()
        assert process.wait(30) == 0


CONFIGURED = "mirrored-configured"


def topic_configs(bootstrap, topic) -> dict:
    """The topic's configs set on it (DYNAMIC_TOPIC_CONFIG), as a Kafka admin client describes them."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource

    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    described = admin.describe_configs([resource])[resource].result(30)
    return {
        name: entry.value
        for name, entry in described.items()
        if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    }


def test_a_mirror_of_a_kafka_topic_takes_and_follows_its_configs_and_refuses_local_changes_to_them(
    source, tmp_path
):
    """Issue 53, item 2: the mirror topic takes the Kafka topic's configs (KIP-1279's exclusions left out), follows
    a change made at Kafka within the refresh interval, and refuses a local change to a synced config while it is
    mirrored (POLICY_VIOLATION), as a Kafka admin client sees it."""
    node, _ = source
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    new = NewTopic(CONFIGURED, 1, 1, config={"retention.ms": "86400000", "min.insync.replicas": "1"})
    admin.create_topics([new])[CONFIGURED].result(30)
    process, dest = start_serve(tmp_path / "dest", "serve-configured", "--mirror-metadata-refresh-ms", "300")
    try:
        mirror_json("create", dest, "--link", "configured", "--source", node.bootstrap, "--topic", CONFIGURED)
        assert topic_configs(dest, CONFIGURED) == {"retention.ms": "86400000"}

        resource = ConfigResource(
            ConfigResource.Type.TOPIC,
            CONFIGURED,
            incremental_configs=[ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)],
        )
        admin.incremental_alter_configs([resource])[resource].result(30)
        for _ in range(150):
            if topic_configs(dest, CONFIGURED).get("retention.ms") == "3600000":
                break
            time.sleep(0.2)
        assert topic_configs(dest, CONFIGURED) == {"retention.ms": "3600000"}

        local = AdminClient({"bootstrap.servers": dest})
        change = ConfigResource(
            ConfigResource.Type.TOPIC,
            CONFIGURED,
            incremental_configs=[ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)],
        )
        with pytest.raises(KafkaException) as refused:
            local.incremental_alter_configs([change])[change].result(30)
        assert refused.value.args[0].name() == "POLICY_VIOLATION", refused.value
        assert "mirror.topic.properties.exclude" in refused.value.args[0].str()
        described = mirror_json("describe", dest, "--link", "configured")["links"][0]
        assert described.get("warnings") is None, described
    finally:
        process.terminate()
        assert process.wait(30) == 0


RECREATED = "mirrored-recreated"


def test_a_kafka_topic_deleted_and_created_again_fails_its_mirror_by_topic_id_and_nothing_is_truncated_or_appended(
    source, tmp_path
):
    node, _ = source
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(RECREATED, 1, 1)])[RECREATED].result(30)
    producer = Producer({"bootstrap.servers": node.bootstrap, "enable.idempotence": True})
    for index in range(10):
        producer.produce(RECREATED, value=f"first topic {index}".encode(), partition=0)
    producer.flush(30)
    process, dest = start_serve(tmp_path / "dest", "serve-recreated", "--mirror-metadata-refresh-ms", "300")
    try:
        mirror_json("create", dest, "--link", "recreated", "--source", node.bootstrap, "--topic", RECREATED)
        caught_up(dest, "recreated", 1)
        mirrored = bw.mirrorlog_json("dump", tmp_path / "dest" / f"{RECREATED}-0")
        assert mirrored

        admin.delete_topics([RECREATED])[RECREATED].result(30)
        for _ in range(150):
            if RECREATED not in admin.list_topics(timeout=10).topics:
                break
            time.sleep(0.2)
        admin.create_topics([NewTopic(RECREATED, 1, 1)])[RECREATED].result(30)
        # The new topic's log passes the mirror's log end, one batch per record: fetched by name at offset 10, a
        # batch starting there would be appended.
        other = Producer({"bootstrap.servers": node.bootstrap, "enable.idempotence": True})
        for index in range(30):
            other.produce(RECREATED, value=f"second topic {index}".encode(), partition=0)
            other.flush(30)

        for _ in range(300):
            described = mirror_json("describe", dest, "--link", "recreated")["links"][0]
            status = described["partitions"][0]
            if status["state"] == "FAILED" and "deleted and created again" in (status["error"] or ""):
                break
            time.sleep(0.2)
        else:
            raise AssertionError(f"the mirror did not fail on the new topic id: {described}")
        assert "topic id" in status["error"], status
        assert bw.mirrorlog_json("dump", tmp_path / "dest" / f"{RECREATED}-0") == mirrored
    finally:
        process.terminate()
        assert process.wait(30) == 0


METRICS_TOPIC = "mirrored-metrics"
# Mirrored by the same link and asked in the same periodic question, before METRICS_TOPIC (names in order): a record
# written to it after the open transaction shows, once its lag counts it, that the question came after that write.
WITNESS_TOPIC = "mirrored-a-witness"


def start_serve_with_metrics(data_dir: Path, cluster_id: str):
    """A `serve` with its metrics endpoint on an ephemeral port; (process, bootstrap, metrics URL)."""
    process, bootstrap = start_serve(data_dir, cluster_id, "--metrics-listen", "127.0.0.1:0")
    for _ in range(8):
        line = process.stdout.readline().decode()
        if "metrics on" in line:
            return process, bootstrap, line.rsplit(" ", 1)[1].strip()
    process.terminate()
    raise AssertionError("serve did not say where its metrics are")


def scrape(url: str) -> dict:
    """One scrape, parsed by Prometheus's OpenMetrics parser: {(name, sorted labels): value}."""
    import urllib.request

    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    with urllib.request.urlopen(url, timeout=10) as answer:
        assert answer.status == 200
        assert answer.headers["Content-Type"].startswith("application/openmetrics-text")
        text = answer.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def lag(scraped: dict, link: str, topic: str, partition: int):
    labels = tuple(sorted({"link": link, "topic": topic, "partition": str(partition)}.items()))
    return scraped.get(("mirrorlog_mirror_partition_lag_records", labels))


def until_lag(url: str, wanted, what: str, topic: str = METRICS_TOPIC) -> dict:
    for _ in range(200):
        scraped = scrape(url)
        if lag(scraped, "metered", topic, 0) == wanted:
            return scraped
        time.sleep(0.1)
    raise AssertionError(f"{what}: lag of {topic} {lag(scraped, 'metered', topic, 0)}, wanted {wanted}")


def test_the_metrics_of_a_mirror_of_kafka_follow_its_last_stable_offset_through_a_pause(source, tmp_path):
    node, _ = source
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    for future in admin.create_topics([NewTopic(METRICS_TOPIC, 1, 1), NewTopic(WITNESS_TOPIC, 1, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": node.bootstrap, "enable.idempotence": True})
    for index in range(5):
        producer.produce(METRICS_TOPIC, value=f"before {index}".encode())
    producer.flush(30)
    process, dest, url = start_serve_with_metrics(tmp_path / "dest", "serve-metered")
    try:
        mirror_json(
            "create", dest, "--link", "metered", "--source", node.bootstrap,
            "--topic", METRICS_TOPIC, "--topic", WITNESS_TOPIC,
        )
        until_lag(url, 0, "caught up")
        until_lag(url, 0, "caught up", WITNESS_TOPIC)
        mirror_json("pause", dest, "--link", "metered")
        for index in range(7):
            producer.produce(METRICS_TOPIC, value=f"paused {index}".encode())
        producer.flush(30)
        # A transaction left open: its records are past Kafka's last stable offset, so not behind yet.
        transactional = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": "metered-txn"})
        transactional.init_transactions(30)
        transactional.begin_transaction()
        for index in range(3):
            transactional.produce(METRICS_TOPIC, value=f"open {index}".encode())
        transactional.flush(30)
        producer.produce(WITNESS_TOPIC, value=b"after the open transaction")
        producer.flush(30)
        # The scrape in which the witness's lag counts its record holds an answer for METRICS_TOPIC asked after the
        # open transaction was written: 7 (its last stable offset), not 10 (its high watermark).
        paused = until_lag(url, 1, "the witness, asked after the open transaction", WITNESS_TOPIC)
        assert lag(paused, "metered", METRICS_TOPIC, 0) == 7, "paused, 7 records written and 3 in an open transaction"
        state = tuple(sorted({"link": "metered", "topic": METRICS_TOPIC, "partition": "0", "state": "PAUSED"}.items()))
        assert paused[("mirrorlog_mirror_partition_state", state)] == 1
        # Committed: the 3 records and the COMMIT marker are below the last stable offset now.
        transactional.commit_transaction(30)
        until_lag(url, 11, "after the commit")
        mirror_json("resume", dest, "--link", "metered")
        until_lag(url, 0, "resumed")
        ours = bw.mirrorlog_json("dump", tmp_path / "dest" / f"{METRICS_TOPIC}-0")
        theirs = [b for segment in node.segments(METRICS_TOPIC, 0) for b in bw.mirrorlog_json("dump", segment)]
        assert ours and ours == theirs
    finally:
        process.terminate()
        assert process.wait(30) == 0
