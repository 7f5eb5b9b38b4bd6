"""Fixtures of the reference-Kafka suite: one Apache Kafka node per transaction protocol version, shared by the
tests of a module (`MIRRORLOG_KAFKA_LIBS` names the jars; `cargo xtask kafka` fetches them and sets it)."""

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kafka"))

from kafka_node import LIBS_ENV, KafkaNode  # noqa: E402

STARTED = []


@pytest.fixture(scope="module", params=[1, 2], ids=["tv1", "tv2"])
def kafka(request, tmp_path_factory):
    """A running Kafka formatted with `transaction.version` 1, then 2; stopped with SIGTERM after the module's
    tests, and the stop must be a controlled shutdown."""
    if not os.environ.get(LIBS_ENV):
        pytest.skip(f"{LIBS_ENV} is not set: `cargo xtask kafka` fetches Apache Kafka's jars and runs this suite")
    version = request.param
    node = KafkaNode(tmp_path_factory.mktemp(f"kafka-tv{version}"), transaction_version=version)
    node.start()
    STARTED.append(node)
    yield node
    code = node.stop()
    # The JVM exits with 128 + SIGTERM once Kafka's shutdown hook has run.
    assert code in (0, 143), f"Kafka exited with {code} on SIGTERM\n{node.output()[-4000:]}"
    assert node.clean_shutdown_marked(), f"no .kafka_cleanshutdown after SIGTERM\n{node.output()[-4000:]}"


def pytest_terminal_summary(terminalreporter):
    for node in STARTED:
        terminalreporter.write_line(node.describe())
