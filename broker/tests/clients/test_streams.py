"""Kafka Streams against `mirrorlog serve`, and against Apache Kafka as the control (issue 38).

The application (streams/, `dev.mirrorlog.streams.WordCount`) counts words with exactly_once_v2: a repartition
topic, a state store with its changelog, every new count written to a one-partition output topic. Read with
read_committed, each word's counts must be 1, 2, ..., n with none repeated or skipped; a record processed twice or
lost shows as a count out of sequence (`assert_exactly_once`).

- Two instances share the application; one is killed with SIGKILL mid-stream. The other takes its tasks over
  (restoring their state from the changelog) and the output still counts every input record exactly once.
- KAFKA-16699, both cases of the seed, with Streams 4.x (which has the fix) and Streams 3.7.x (the last release
  before it) running side by side on the same broker:
  1. the application idles past `transactional.id.expiration.ms`; its next transaction hears
     INVALID_PRODUCER_ID_MAPPING. 4.x closes its tasks dirty, rebalances, re-creates its producer and the output
     stays exactly once; 3.7 lets its stream thread die of the InvalidPidMappingException and the application
     stops (ERROR) with the second half of the input unprocessed. Nothing is duplicated in either.
  2. while the application idles past the expiration, another producer takes its transactional id (a new producer
     id); the application comes back with the old producer id. 4.x hears the mismatch (INVALID_PRODUCER_ID_MAPPING),
     re-creates its producer, which fences the other one, and the output stays exactly once; 3.7 stops as in 1.

The results are written in docs/broker.md ("Kafka Streams and KAFKA-16699").
"""

import json
import os
import signal
import subprocess
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

import programs
from conftest import KAFKA_NODES, KAFKA_TRANSACTION_VERSION, TestBroker, built, idempotent_producer
from kafka_node import LIBS_ENV, KafkaNode

WORDS = 7
INPUT_PARTITIONS = 4

# KAFKA-16699: how soon an idle transactional id expires, and how long the application idles. The expiration is
# long enough for the first transactions (started right after the application is running) to go through, the idle
# long enough for the broker's housekeeping to have removed the id.
EXPIRATION_MS = 6000
IDLE_S = 10.0
SERVE_EXPIRATION = ["--transactional-id-expiration-ms", str(EXPIRATION_MS), "--housekeeping-interval-ms", "100"]
KAFKA_EXPIRATION = {
    "transactional.id.expiration.ms": EXPIRATION_MS,
    "transaction.remove.expired.transaction.cleanup.interval.ms": 200,
}


@pytest.fixture(scope="session")
def streams_apps():
    """The WordCount application built against each Streams release of `programs.STREAMS_VERSIONS`."""
    return {
        release: built(lambda version=version: programs.build_streams_app(version))
        for release, version in programs.STREAMS_VERSIONS.items()
    }


class StreamsInstance:
    """One running WordCount process; its JSON lines are collected as they come (`events`)."""

    def __init__(self, command, bootstrap, application, input_topic, output_topic, state_dir, release):
        self.release = release
        self.stderr_path = f"{state_dir}.stderr"
        self.stderr = open(self.stderr_path, "wb")
        self.events = []
        self.changed = threading.Condition()
        self.process = subprocess.Popen(
            [*command, bootstrap, application, input_topic, output_topic, str(state_dir)],
            stdout=subprocess.PIPE,
            stderr=self.stderr,
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.process.stdout:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            with self.changed:
                self.events.append(event)
                self.changed.notify_all()

    def stderr_text(self):
        with open(self.stderr_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def wait_for_state(self, state, after=0, timeout=90.0):
        """Waits until the application reports `state` in an event numbered `after` or later; returns its index."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                for index in range(after, len(self.events)):
                    if self.events[index].get("state") == state:
                        return index
                left = deadline - time.monotonic()
                if left <= 0 or self.process.poll() is not None and not self.reader.is_alive():
                    pytest.fail(
                        f"Streams {self.release} did not reach {state} (events {self.events});\n"
                        f"{self.stderr_text()[-4000:]}"
                    )
                self.changed.wait(min(left, 0.5))

    def states(self, after=0):
        with self.changed:
            return [event["state"] for event in self.events[after:] if "state" in event]

    def uncaught(self):
        with self.changed:
            return [event["uncaught"] for event in self.events if "uncaught" in event]

    def transactional_id(self):
        """exactly_once_v2's transactional id of the (only) stream thread: `<client id>-<thread index>`, where the
        thread is named `<client id>-StreamThread-<thread index>`."""
        with self.changed:
            names = [event["thread"] for event in self.events if "thread" in event]
        client, index = names[-1].rsplit("-StreamThread-", 1)
        return f"{client}-{index}"

    def alive(self):
        return self.process.poll() is None

    def kill(self):
        self.process.kill()
        self.process.wait(10)

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.stderr.close()


@pytest.fixture
def outputs():
    """A factory of `Output` readers, every one closed after the test (before its broker stops)."""
    opened = []

    def open_output(bootstrap, topic):
        output = Output(bootstrap, topic)
        opened.append(output)
        return output

    yield open_output
    for output in opened:
        output.close()


@pytest.fixture
def launch(tmp_path):
    """A factory of Streams instances, every one stopped after the test."""
    started = []

    def start(command, bootstrap, application, input_topic, output_topic, release="4"):
        instance = StreamsInstance(
            command, bootstrap, application, input_topic, output_topic, tmp_path / f"state{len(started)}", release
        )
        started.append(instance)
        return instance

    yield start
    for instance in started:
        instance.stop()


def produce_words(bootstrap, topic, start, count, pace_s=0.0):
    """Input records `start..start+count`: key `k<i>`, value the word `w<i mod WORDS>`."""
    producer = idempotent_producer(bootstrap)
    for i in range(start, start + count):
        producer.produce(topic, key=b"k%d" % i, value=b"w%d" % (i % WORDS))
        if pace_s and i % 50 == 49:
            producer.flush(30)
            time.sleep(pace_s)
    assert producer.flush(60) == 0


def expected_counts(total):
    return {f"w{word}": len(range(word, total, WORDS)) for word in range(WORDS)}


class Output:
    """The application's output topic read with read_committed: each word's counts in the order written."""

    def __init__(self, bootstrap, topic):
        self.counts = {}
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"verifier-{topic}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
            }
        )
        self.consumer.assign([TopicPartition(topic, 0, 0)])

    def total(self):
        return sum(len(counts) for counts in self.counts.values())

    def read_until(self, total, timeout=90.0, settle_s=0.0):
        """Reads until `total` counts arrived (then `settle_s` longer, to see any extra) or the timeout passed."""
        deadline = time.monotonic() + timeout
        settled = None
        while time.monotonic() < deadline:
            if self.total() >= total:
                settled = settled or time.monotonic() + settle_s
                if time.monotonic() >= settled:
                    break
            message = self.consumer.poll(0.2)
            if message is None or message.error():
                continue
            self.counts.setdefault(message.key().decode(), []).append(int(message.value()))
        return self.total()

    def close(self):
        self.consumer.close()


def assert_exactly_once(output, total):
    """Every word's counts are 1..n for the n the first `total` input records give it: nothing twice, nothing
    lost."""
    out_of_sequence = {w: c for w, c in output.counts.items() if c != list(range(1, len(c) + 1))}
    assert not out_of_sequence, f"counts out of sequence (a record processed twice or lost): {out_of_sequence}"
    assert {w: len(c) for w, c in output.counts.items()} == expected_counts(total)


def test_two_instances_count_every_record_exactly_once_when_one_is_killed(broker, streams_apps, launch, outputs):
    records = 3000
    input_topic = broker.create_topic(INPUT_PARTITIONS, "streams-in")
    output_topic = broker.create_topic(1, "streams-out")
    application = broker.unique("wordcount")
    command = streams_apps["4"]
    first = launch(command, broker.bootstrap, application, input_topic, output_topic)
    first.wait_for_state("RUNNING")
    second = launch(command, broker.bootstrap, application, input_topic, output_topic)
    second.wait_for_state("RUNNING")
    # The first instance rebalanced when the second joined, and both run their share of the tasks.
    first.wait_for_state("RUNNING", after=first.wait_for_state("REBALANCING", after=2))

    producing = threading.Thread(
        target=produce_words, args=(broker.bootstrap, input_topic, 0, records), kwargs={"pace_s": 0.02}
    )
    producing.start()
    output = outputs(broker.bootstrap, output_topic)
    output.read_until(records // 5)
    before_kill = output.total()
    first.kill()
    killed_at = len(second.events)
    producing.join(120)
    assert before_kill < records, "the kill did not land mid-stream"
    output.read_until(records, timeout=120, settle_s=2.0)
    assert_exactly_once(output, records)
    assert "REBALANCING" in second.states(after=killed_at), "the survivor never took the killed instance's tasks"
    assert second.alive() and not second.uncaught()


@pytest.fixture(scope="module")
def kafka_expiring(tmp_path_factory):
    """An Apache Kafka node of its own whose transactional ids expire after `EXPIRATION_MS`."""
    if not os.environ.get(LIBS_ENV):
        pytest.skip(f"{LIBS_ENV} is not set: the Kafka half needs Apache Kafka's jars")
    node = KafkaNode(
        tmp_path_factory.mktemp("kafka-expiring"),
        transaction_version=KAFKA_TRANSACTION_VERSION,
        properties=KAFKA_EXPIRATION,
    )
    node.start()
    KAFKA_NODES.append(node)
    yield node
    node.stop()


@pytest.fixture(params=["serve", "kafka"])
def expiring_broker(request, serve):
    """A broker whose idle transactional ids expire after `EXPIRATION_MS`: `mirrorlog serve` or Apache Kafka."""
    if request.param == "serve":
        return TestBroker("serve", serve(*SERVE_EXPIRATION).bootstrap)
    return TestBroker("kafka", request.getfixturevalue("kafka_expiring").bootstrap)


def start_both_releases(broker, streams_apps, launch, outputs):
    """Each Streams release runs an application of its own on the same broker; returns
    `{release: (instance, input topic, output)}` once each is running and has counted a first batch."""
    apps = {}
    for release, command in streams_apps.items():
        input_topic = broker.create_topic(INPUT_PARTITIONS, f"streams{release}-in")
        output_topic = broker.create_topic(1, f"streams{release}-out")
        instance = launch(command, broker.bootstrap, broker.unique("wordcount"), input_topic, output_topic, release)
        apps[release] = (instance, input_topic, outputs(broker.bootstrap, output_topic))
    for instance, input_topic, output in apps.values():
        instance.wait_for_state("RUNNING")
        produce_words(broker.bootstrap, input_topic, 0, 70)
    for instance, _, output in apps.values():
        assert output.read_until(70) == 70, f"Streams {instance.release} did not count the first batch"
    return apps


def assert_fixed_release_recovers_and_old_release_stops(broker, apps):
    """After the idle: 4.x hears INVALID_PRODUCER_ID_MAPPING, rebalances and counts the second batch exactly once;
    3.7 dies of it, stops in ERROR and counts nothing more. Neither duplicates anything."""
    for instance, input_topic, _ in apps.values():
        produce_words(broker.bootstrap, input_topic, 70, 70)

    fixed, _, fixed_output = apps["4"]
    fixed_output.read_until(140, settle_s=2.0)
    assert_exactly_once(fixed_output, 140)
    assert "InvalidPidMappingException" in fixed.stderr_text(), "Streams 4 never heard INVALID_PRODUCER_ID_MAPPING"
    assert fixed.alive() and not fixed.uncaught(), fixed.uncaught()

    old, _, old_output = apps["3.7"]
    old.wait_for_state("ERROR", timeout=60)
    assert any("InvalidPidMappingException" in error for error in old.uncaught()), old.uncaught()
    old_output.read_until(140, timeout=5)
    assert_exactly_once(old_output, 70)


def test_kafka16699_streams_4_recovers_from_an_expired_transactional_id_and_streams_3_7_stops(
    expiring_broker, streams_apps, launch, outputs
):
    apps = start_both_releases(expiring_broker, streams_apps, launch, outputs)
    time.sleep(IDLE_S)
    assert_fixed_release_recovers_and_old_release_stops(expiring_broker, apps)


def test_kafka16699_a_new_producer_on_the_expired_id_is_fenced_by_streams_4_and_stops_streams_3_7(
    expiring_broker, streams_apps, launch, outputs
):
    apps = start_both_releases(expiring_broker, streams_apps, launch, outputs)
    time.sleep(IDLE_S)
    # A new producer takes each application's expired transactional id: a new producer id for the same id.
    usurpers = {}
    for release, (instance, _, _) in apps.items():
        usurper = Producer({"bootstrap.servers": expiring_broker.bootstrap, "transactional.id": instance.transactional_id()})
        usurper.init_transactions(30)
        usurpers[release] = usurper
    assert_fixed_release_recovers_and_old_release_stops(expiring_broker, apps)
    # Streams 4 re-created its producer on the same transactional id (InitProducerId bumps the id's epoch), so the
    # new producer cannot commit any more: fenced, or - when it idled past the expiration itself while Streams
    # recovered - INVALID_PRODUCER_ID_MAPPING. Apache Kafka answers the same.
    usurper = usurpers["4"]
    with pytest.raises(KafkaException) as raised:
        usurper.begin_transaction()
        usurper.produce(apps["4"][1], value=b"from the usurping producer")
        usurper.commit_transaction(30)
    assert raised.value.args[0].code() in (
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_ID_MAPPING,
    ), raised.value
