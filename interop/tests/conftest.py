"""Fixtures of the reference-Kafka suite (`MIRRORLOG_KAFKA_LIBS` names Apache Kafka's jars; `cargo xtask kafka`
fetches them and sets it, with `MIRRORLOG_BIN` naming the mirrorlog binary):

- `kafka`: one Apache Kafka node per transaction protocol version, shared by the tests of a module;
- `serve_written`: partition directories `mirrorlog serve` wrote for real clients (session-wide);
- `round_trip`: one Kafka node that wrote partitions of its own and then serves serve's (session-wide, three
  starts in all; see both_ways.run_round_trip). Its users are the modules that sort after test_kafka_node.py, so
  that this node never runs beside that module's."""

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kafka"))

from kafka_node import LIBS_ENV, KafkaNode  # noqa: E402

import both_ways  # noqa: E402

STARTED = []
TIMINGS = {}


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


def require_jars_and_binary():
    """Skips (saying why) unless both Kafka's jars and the mirrorlog binary are named."""
    if not os.environ.get(LIBS_ENV):
        pytest.skip(f"{LIBS_ENV} is not set: `cargo xtask kafka` fetches Apache Kafka's jars and runs this suite")
    binary = os.environ.get(both_ways.BIN_ENV)
    if not binary:
        pytest.skip(f"{both_ways.BIN_ENV} is not set: `cargo xtask kafka` builds mirrorlog and names its binary")
    if not Path(binary).is_file():
        pytest.skip(f"{both_ways.BIN_ENV}={binary} is not a file (run `cargo build -p mirrorlog`)")


@pytest.fixture(scope="session")
def serve_written(tmp_path_factory):
    """Partition directories `mirrorlog serve` wrote (both_ways.build_serve_dirs)."""
    require_jars_and_binary()
    written = both_ways.build_serve_dirs(tmp_path_factory.mktemp("serve-written"))
    TIMINGS["mirrorlog serve: two runs, clients writing"] = written.seconds
    return written


@pytest.fixture(scope="session")
def round_trip(tmp_path_factory, serve_written):
    """Kafka wrote its own partitions, then was restarted on serve's (both_ways.run_round_trip); stopped with
    SIGTERM at the end of the session, cleanly."""
    require_jars_and_binary()
    trip = both_ways.run_round_trip(tmp_path_factory.mktemp("round-trip"), serve_written, KafkaNode)
    STARTED.append(trip.node)
    TIMINGS.update(trip.timings)
    yield trip
    code = trip.node.stop()
    assert code in (0, 143), f"Kafka exited with {code} on SIGTERM\n{trip.node.output()[-4000:]}"


def pytest_terminal_summary(terminalreporter):
    for node in STARTED:
        terminalreporter.write_line(node.describe())
    for what, seconds in TIMINGS.items():
        terminalreporter.write_line(f"{what}: {seconds:.1f}s")
