"""Consumer groups (issue 38, first step): consumers that `subscribe()` share a topic's partitions through the classic
group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), against `mirrorlog serve` and against Apache Kafka.

- librdkafka, kafka-python, kafkajs and the Java consumer, each: three members of one group, each in a process of
  its own committing after every record (synchronously); the first to process 20 records is killed with SIGKILL
  mid-stream (not a chosen one: a member that joins late may find every record read already). After its session
  times out the others take its partitions over from its last commit: every record is processed, and a record is
  processed twice only if the killed member processed it after its last commit (with a commit per record, at most
  one record per partition it held) or a rebalance refused its commit.
- kafka-python: two members split a topic's partitions between them, each record read by exactly one of them.
- kafkajs (whose consumer always joins a group) and the Java consumer: a member reads a topic, leaves; a second
  member of the group reads only what was produced after the first one's commits.
- Java, exactly once: a consume-transform-produce member commits its input offsets inside its transactions with
  `sendOffsetsToTransaction(offsets, groupMetadata)` (TxnOffsetCommit v3, KIP-447); the output holds each input
  record once, and the group's committed offsets are the input's end.
- `serve` only, `group.initial.rebalance.delay.ms` at Kafka's default (3 s; the suite's brokers run with 0, as
  Kafka's shipped server.properties): two librdkafka members subscribed a moment apart form one generation — each
  is assigned once, half the partitions, no earlier than the delay.
- `serve` only: a librdkafka member keeps its assignment across a restart of `serve` (membership is stored when a
  rebalance completes) and reads on without being assigned again.
"""

import json
import signal
import threading
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka import KafkaConsumer

from conftest import idempotent_producer

RECORDS = 600
PARTITIONS = 6

# One group member: consumes, commits after every record (synchronously), prints each record it processed.
MEMBER = r"""
import json, sys
from confluent_kafka import Consumer, KafkaException
bootstrap, topic, group = sys.argv[1:4]
consumer = Consumer({
    "bootstrap.servers": bootstrap,
    "group.id": group,
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 500,
})
consumer.subscribe([topic])
while True:
    message = consumer.poll(0.2)
    if message is None:
        continue
    if message.error():
        print(json.dumps({"error": str(message.error())}), flush=True)
        continue
    # Slow enough that the kill lands mid-stream.
    import time; time.sleep(0.01)
    print(json.dumps({"partition": message.partition(), "offset": message.offset()}), flush=True)
    try:
        consumer.commit(message, asynchronous=False)
    except KafkaException as error:
        # A commit refused by a rebalance: the record is processed again by whoever gets the partition.
        print(json.dumps({"commit_refused": str(error)}), flush=True)
"""


# The same member with kafka-python.
KAFKA_PYTHON_MEMBER = r"""
import json, logging, sys, time
from kafka import KafkaConsumer, TopicPartition
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata
bootstrap, topic, group = sys.argv[1:4]
# The group's steps (joins, assignments, fetch errors) go to stderr, which the test quotes if this member fails.
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")
consumer = KafkaConsumer(
    topic,
    bootstrap_servers=bootstrap,
    group_id=group,
    auto_offset_reset="earliest",
    enable_auto_commit=False,
    session_timeout_ms=6000,
    heartbeat_interval_ms=500,
)
for message in consumer:
    time.sleep(0.01)
    print(json.dumps({"partition": message.partition, "offset": message.offset}), flush=True)
    try:
        consumer.commit({TopicPartition(topic, message.partition): OffsetAndMetadata(message.offset + 1, None, -1)})
    except KafkaError as error:
        print(json.dumps({"commit_refused": type(error).__name__}), flush=True)
"""


def member_command(request, client, bootstrap, topic, group):
    """The command that runs one group member of `client` (see the module docs)."""
    if client == "librdkafka":
        return [sys.executable, "-c", MEMBER, bootstrap, topic, group], None
    if client == "kafka-python":
        return [sys.executable, "-c", KAFKA_PYTHON_MEMBER, bootstrap, topic, group], None
    program = request.getfixturevalue({"kafkajs": "kafkajs", "java": "java_client"}[client]).program
    return [*program.command, "group-member", bootstrap, topic, str(PARTITIONS), group], program.env


def produce(bootstrap, topic, partitions, records):
    producer = idempotent_producer(bootstrap)
    for index in range(records):
        producer.produce(topic, value=f"record-{index}".encode(), partition=index % partitions)
    assert producer.flush(60) == 0


def collect_lines(process, into):
    """A thread appending every JSON line the member prints to `into` (a reader of its own: a line left in a pipe
    reader's buffer would otherwise wait there unseen)."""

    def read():
        for line in process.stdout:
            if line.startswith("{"):
                into.append(json.loads(line))

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("client", ["librdkafka", "kafka-python", "kafkajs", "java"])
def test_subscribed_members_share_partitions_and_take_over_a_killed_member(request, tmp_path, broker, client):
    topic = broker.create_topic(PARTITIONS, prefix="grouped")
    group = broker.unique("group")
    produce(broker.bootstrap, topic, PARTITIONS, RECORDS)
    command, env = member_command(request, client, broker.bootstrap, topic, group)
    # Each member's stderr goes to a file of its own, so that a member that fails says why in the assertion.
    stderr_paths = [tmp_path / f"member-{index}.stderr" for index in range(3)]
    stderr_files = [open(path, "w") for path in stderr_paths]
    members = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env)
        for stderr in stderr_files
    ]
    seen = [[] for _ in members]
    readers = [collect_lines(member, lines) for member, lines in zip(members, seen)]
    try:
        # Wait until a member has processed some records, then kill it without a LeaveGroup. The victim is whichever
        # member got there first, not a chosen one: a member whose join came late is assigned partitions the first
        # generation already read to the end, and would never get a record to be killed over.
        deadline = time.monotonic() + 60
        victim = None
        while time.monotonic() < deadline and victim is None:
            counts = [sum(1 for r in list(lines) if "offset" in r) for lines in seen]
            if max(counts) >= 20:
                victim = counts.index(max(counts))
            time.sleep(0.05)
        assert victim is not None, (
            f"no member got records (they printed {[len(lines) for lines in seen]} lines, exit codes "
            f"{[member.poll() for member in members]}); the first one's stderr ends: "
            f"{stderr_paths[0].read_text()[-6000:]}"
        )
        members[victim].send_signal(signal.SIGKILL)
        members[victim].wait(10)
        # The others go on until every record has been processed (the victim's partitions after its session ends).
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            done = {(r["partition"], r["offset"]) for lines in seen for r in list(lines) if "offset" in r}
            if len(done) >= RECORDS:
                break
            time.sleep(0.1)
    finally:
        for member in members:
            if member.poll() is None:
                member.send_signal(signal.SIGTERM)
                member.wait(10)
        for reader in readers:
            reader.join(10)
        for stderr in stderr_files:
            stderr.close()
    errors = [r for lines in seen for r in lines if "error" in r]
    assert not errors, errors
    refused = sum(1 for lines in seen for r in lines if "commit_refused" in r)
    seen = [[r for r in lines if "offset" in r] for lines in seen]
    processed = [(r["partition"], r["offset"]) for lines in seen for r in lines]
    shares = [
        {p: (min(r["offset"] for r in lines if r["partition"] == p), max(r["offset"] for r in lines if r["partition"] == p))
         for p in {r["partition"] for r in lines}}
        for lines in seen
    ]
    assert set(processed) == {(p, o) for p in range(PARTITIONS) for o in range(RECORDS // PARTITIONS)}, shares
    victims = {r["partition"] for r in seen[victim]}
    twice = len(processed) - len(set(processed))
    assert twice <= len(victims) + refused, (
        f"{twice} records processed twice; the killed member held {len(victims)} partitions, {refused} commits refused"
    )
    # The survivors share nothing but records whose commit a rebalance refused.
    survivors = [{(r["partition"], r["offset"]) for r in lines} for index, lines in enumerate(seen) if index != victim]
    assert len(survivors[0] & survivors[1]) <= refused


def test_kafka_python_members_split_the_partitions(broker):
    topic = broker.create_topic(4, prefix="split")
    group = broker.unique("group")
    produce(broker.bootstrap, topic, 4, 200)
    consumers = [
        KafkaConsumer(
            topic,
            bootstrap_servers=broker.bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
        )
        for _ in range(2)
    ]
    got = [[] for _ in consumers]
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for index, consumer in enumerate(consumers):
                for records in consumer.poll(timeout_ms=200).values():
                    got[index].extend((r.partition, r.offset) for r in records)
                    consumer.commit()
            assigned = [consumer.assignment() for consumer in consumers]
            if sum(len(lines) for lines in got) >= 200 and all(assigned):
                break
        assigned = [consumer.assignment() for consumer in consumers]
    finally:
        for consumer in consumers:
            consumer.close()
    assert all(len(a) == 2 for a in assigned), assigned
    assert not set(assigned[0]) & set(assigned[1])
    everything = got[0] + got[1]
    assert len(everything) == len(set(everything)), "a record read twice"
    assert sorted(everything) == sorted({(p, o) for p in range(4) for o in range(50)})


def resumes_from_the_groups_committed_offsets(broker, client, prefix):
    topic = broker.create_topic(3, prefix=prefix)
    group = broker.unique("group")
    produce(broker.bootstrap, topic, 3, 30)
    first = client.consume_group(broker.bootstrap, topic, 3, group, 30)
    assert sorted((p, o) for p, o, _ in first) == sorted((p, o) for p in range(3) for o in range(10))
    produce(broker.bootstrap, topic, 3, 9)
    second = client.consume_group(broker.bootstrap, topic, 3, group, 9)
    assert sorted((p, o) for p, o, _ in second) == sorted((p, o) for p in range(3) for o in range(10, 13))


def test_a_kafkajs_member_resumes_from_the_groups_committed_offsets(broker, kafkajs):
    resumes_from_the_groups_committed_offsets(broker, kafkajs, "kafkajs-group")


def test_a_java_member_resumes_from_the_groups_committed_offsets(broker, java_client):
    resumes_from_the_groups_committed_offsets(broker, java_client, "java-group")


def test_a_java_transform_commits_its_group_offsets_in_its_transactions(broker, java_client):
    source = broker.create_topic(3, prefix="transform-in")
    output = broker.create_topic(3, prefix="transform-out")
    group = broker.unique("group")
    produce(broker.bootstrap, source, 3, 30)
    read = java_client.transform(broker.bootstrap, source, 3, group, output, broker.unique("txn"), 30)
    assert sorted((p, o) for p, o, _ in read) == sorted((p, o) for p in range(3) for o in range(10))
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": broker.unique("reader"),
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([output])
        copies = []
        deadline = time.monotonic() + 60
        while len(copies) < 30 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                copies.append(message.value().decode())
    finally:
        consumer.close()
    assert sorted(copies) == sorted(f"copy-record-{i}" for i in range(30))
    committed = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        offsets = committed.committed([TopicPartition(source, p) for p in range(3)], timeout=30)
    finally:
        committed.close()
    assert [tp.offset for tp in offsets] == [10, 10, 10]


def test_a_member_carries_on_at_its_generation_after_serve_restarts(serve):
    """Membership is durable: after `serve` restarts (SIGTERM, same data directory and port), a librdkafka member
    keeps its assignment and reads on without a second rebalance."""
    broker = serve("--topic", "restarted:2")
    assignments = []
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "survives-restart",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 500,
        }
    )
    consumer.subscribe(["restarted"], on_assign=lambda _, partitions: assignments.append(len(partitions)))

    def read(count):
        got = 0
        deadline = time.monotonic() + 60
        while got < count and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                got += 1
        return got

    try:
        producer = idempotent_producer(broker.bootstrap)
        for i in range(20):
            producer.produce("restarted", value=b"%d" % i, partition=i % 2)
        assert producer.flush(30) == 0
        assert read(20) == 20
        assert assignments == [2]
        assert broker.stop() == 0
        broker.restart()
        producer = idempotent_producer(broker.bootstrap)
        for i in range(20):
            producer.produce("restarted", value=b"after %d" % i, partition=i % 2)
        assert producer.flush(30) == 0
        assert read(20) == 20
        # Heartbeats went on for a while at the restored generation, with no new assignment.
        time.sleep(3)
        consumer.poll(0.5)
        assert assignments == [2], f"the member was assigned again: {assignments}"
    finally:
        consumer.close()


def test_members_subscribed_together_form_one_generation_after_the_initial_rebalance_delay(serve):
    """The group's first rebalance waits `group.initial.rebalance.delay.ms` for more members: two members that
    subscribe half a second apart are each assigned once, half of the partitions. Without the delay the first one
    would be assigned all four before the second joined."""
    delay_ms = 3000
    broker = serve("--topic", "together:4", "--group-initial-rebalance-delay-ms", str(delay_ms))
    started = time.monotonic()
    assigned = {"first": [], "second": []}
    consumers = {}

    def member(name):
        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": "together",
                "session.timeout.ms": 10000,
                "heartbeat.interval.ms": 500,
                "partition.assignment.strategy": "range",
            }
        )
        consumer.subscribe(
            ["together"],
            on_assign=lambda _, parts: assigned[name].append((time.monotonic() - started, len(parts))),
        )
        consumers[name] = consumer

    try:
        member("first")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (assigned["first"] and assigned["second"]):
            # The second member subscribes once the first has been polling (and so joining) for half a second.
            if "second" not in consumers and time.monotonic() - started > 0.5:
                member("second")
            for consumer in consumers.values():
                consumer.poll(0.1)
        first, second = assigned["first"], assigned["second"]
        assert first and second, f"not both assigned within 60 s: {assigned}"
        assert (first[0][1], second[0][1]) == (2, 2), f"not one generation for both: {assigned}"
        assert first[0][0] >= delay_ms / 1000, f"assigned before the initial delay passed: {assigned}"
    finally:
        for consumer in consumers.values():
            consumer.close()
