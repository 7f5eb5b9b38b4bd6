"""Fixtures of the real-client suite.

- `serve`: a `mirrorlog serve` process per test, on an ephemeral loopback port with a fresh data directory
  (`MIRRORLOG_BIN` names the binary; `cargo xtask test` sets it).
- `broker`: the same test once against `mirrorlog serve` and once against Apache Kafka, so that a failure says
  whether it is ours. Kafka is one KRaft node for the whole session (interop/kafka/kafka_node.py, from the jars
  `MIRRORLOG_KAFKA_LIBS` names; without it the Kafka half skips); tests name their topics and transactional ids
  uniquely (`broker.create_topic`, `broker.unique`).
- `kafkajs`, `java_client`, `franz_go`: the client programs of programs.py, built once per session.
"""

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import programs
from clients import ProgramClient

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "interop" / "kafka"))

from kafka_node import LIBS_ENV, KafkaNode  # noqa: E402


INITIAL_DELAY_FLAG = "--group-initial-rebalance-delay-ms"


class Broker:
    """One `mirrorlog serve` process; `restart` keeps the data directory."""

    def __init__(self, data_dir, args):
        self.data_dir = str(data_dir)
        self.args = list(args)
        self.process = None
        self.port = None
        self.start()

    def start(self):
        binary = os.environ.get("MIRRORLOG_BIN")
        if not binary:
            pytest.fail("MIRRORLOG_BIN is not set (run the suite through `cargo xtask test`)")
        # The first start takes an ephemeral port; a restart takes the same one again.
        listen = f"127.0.0.1:{self.port or 0}"
        # As Kafka's own server.properties and the Kafka node of this suite: groups form at once (a test that
        # checks the initial rebalance delay names the flag itself).
        delay = [] if INITIAL_DELAY_FLAG in self.args else [INITIAL_DELAY_FLAG, "0"]
        command = [binary, "serve", "--listen", listen, "--data-dir", self.data_dir, *delay, *self.args]
        self.stderr_path = self.data_dir + ".stderr"
        self.stderr = open(self.stderr_path, "ab")
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=self.stderr)
        line = self.process.stdout.readline().decode()
        if "listening on" not in line:
            self.process.kill()
            pytest.fail(f"mirrorlog serve did not start: {line!r}")
        self.port = int(line.rsplit(":", 1)[1])
        # Then one line per listener: "mirrorlog serve: listener SASL_SSL://127.0.0.1:PORT".
        self.listeners = {}
        for _ in range(1 + self.args.count("--listen")):
            listener = self.process.stdout.readline().decode().strip().rsplit(" ", 1)[-1]
            protocol, address = listener.split("://", 1)
            self.listeners[protocol] = f"127.0.0.1:{address.rsplit(':', 1)[1]}"

    def stderr_text(self):
        with open(self.stderr_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def stop(self, timeout=30):
        """SIGTERM, and the exit code of a graceful shutdown."""
        if self.process is None:
            return None
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout)
        self.process = None
        return code

    def kill(self):
        """SIGKILL: no shutdown at all."""
        self.process.kill()
        self.process.wait(10)
        self.process = None

    def restart(self):
        """Starts again on the same data directory and port."""
        self.start()


@pytest.fixture
def serve(tmp_path):
    """A factory: `serve("--topic", "t:3", ...)` starts a broker; every broker is stopped after the test."""
    started = []

    def start(*args, data_dir=None):
        broker = Broker(data_dir or tmp_path / f"data{len(started)}", args)
        started.append(broker)
        return broker

    yield start
    for broker in started:
        if broker.process is not None:
            code = broker.stop()
            assert code == 0, f"mirrorlog serve exited with {code} on SIGTERM"


def drain_confluent(consumer, idle_s=3.0, limit_s=120.0):
    """Every message until none arrives for `idle_s`: [(partition, offset, value)]."""
    out = []
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        batch = consumer.consume(1000, idle_s)
        if not batch:
            break
        for message in batch:
            if message.error():
                raise AssertionError(f"consumer error: {message.error()}")
            out.append((message.partition(), message.offset(), message.value()))
    return out


def drain_kafka_python(consumer, limit_s=120.0):
    out = []
    deadline = time.monotonic() + limit_s
    for message in consumer:
        out.append((message.partition, message.offset, message.value))
        if time.monotonic() > deadline:
            break
    return out


def idempotent_producer(bootstrap, **overrides):
    """A librdkafka producer that relies on idempotence: acks=all, a short linger, a long delivery timeout (the
    broker may be dropping acknowledgements or restarting)."""
    config = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "message.timeout.ms": 120_000,
    }
    config.update({key.replace("_", "."): value for key, value in overrides.items()})
    return Producer(config)


# -- the same test against both brokers ------------------------------------------------------------------------

# Kafka formatted with transaction version 1, the transaction protocol `mirrorlog serve` speaks: the clients then
# take the same request paths with both brokers (under version 2 the Java client would switch to KIP-890's).
KAFKA_TRANSACTION_VERSION = 1

KAFKA_NODES = []


class TestBroker:
    """What a test needs of either broker: where it listens, and topics and names of its own."""

    __test__ = False  # not a test class, despite the name

    def __init__(self, kind, bootstrap):
        self.kind = kind
        self.bootstrap = bootstrap

    def unique(self, prefix):
        """A name no other test uses (the Kafka node is shared by the whole session)."""
        return f"{prefix}-{uuid.uuid4().hex[:12]}"

    def create_topic(self, partitions, prefix="topic"):
        """Creates a topic through CreateTopics (both brokers serve it) and returns its name."""
        name = self.unique(prefix)
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(30)
        return name


@pytest.fixture(scope="session")
def kafka_node(tmp_path_factory):
    """One Apache Kafka node for the session; stopped with SIGTERM at its end."""
    if not os.environ.get(LIBS_ENV):
        pytest.skip(
            f"{LIBS_ENV} is not set: the Kafka half needs Apache Kafka's jars (`cargo xtask clients` fetches them)"
        )
    node = KafkaNode(tmp_path_factory.mktemp("kafka"), transaction_version=KAFKA_TRANSACTION_VERSION)
    node.start()
    KAFKA_NODES.append(node)
    yield node
    code = node.stop()
    # The JVM exits with 128 + SIGTERM once Kafka's shutdown hook has run.
    assert code in (0, 143), f"Kafka exited with {code} on SIGTERM\n{node.output()[-4000:]}"


@pytest.fixture(params=["serve", "kafka"])
def broker(request, serve):
    """A running broker, `mirrorlog serve` (a fresh one per test) or Apache Kafka (shared by the session)."""
    if request.param == "serve":
        return TestBroker("serve", serve().bootstrap)
    node = request.getfixturevalue("kafka_node")
    return TestBroker("kafka", node.bootstrap)


def pytest_terminal_summary(terminalreporter):
    for node in KAFKA_NODES:
        terminalreporter.write_line(node.describe())


# -- the client programs ---------------------------------------------------------------------------------------


def built(build):
    try:
        return build()
    except programs.ProgramError as error:
        pytest.fail(str(error), pytrace=False)


@pytest.fixture(scope="session")
def kafkajs():
    return ProgramClient(built(programs.build_kafkajs), has_consumer=False)


@pytest.fixture(scope="session")
def java_client():
    return ProgramClient(built(programs.build_java_client))


@pytest.fixture(scope="session")
def franz_go():
    return ProgramClient(built(programs.build_franz_go))
