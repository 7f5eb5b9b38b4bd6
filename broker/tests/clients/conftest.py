"""Fixtures of the real-client suite: a `mirrorlog serve` process per test, on an ephemeral loopback port with a
fresh data directory (`MIRRORLOG_BIN` names the binary; `cargo xtask test` sets it)."""

import os
import signal
import subprocess
import time

import pytest
from confluent_kafka import Producer


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
        command = [binary, "serve", "--listen", listen, "--data-dir", self.data_dir, *self.args]
        self.stderr_path = self.data_dir + ".stderr"
        self.stderr = open(self.stderr_path, "ab")
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=self.stderr)
        line = self.process.stdout.readline().decode()
        if "listening on" not in line:
            self.process.kill()
            pytest.fail(f"mirrorlog serve did not start: {line!r}")
        self.port = int(line.rsplit(":", 1)[1])

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
