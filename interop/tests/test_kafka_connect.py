"""A Kafka Connect 4.1 distributed worker against `mirrorlog serve` (issue 51, item 6).

Connect keeps its connectors' configs, source offsets and statuses in three topics it creates with
`cleanup.policy=compact`, and refuses to start unless DescribeConfigs says they are compacted; its workers form a
group of protocol type `connect`. A FileStream source connector copies a file's lines into a topic and a
FileStream sink connector copies the topic into another file. The worker is stopped (SIGTERM, so it commits its
offsets) and started again: it finds its connectors in its config topic and resumes each from its offsets, so the
lines appended meanwhile arrive once, and no line twice.
"""

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from both_ways import Serve
from conftest import TIMINGS, require_jars_and_binary
from kafka_node import BROKER_JVM_OPTIONS, free_loopback_ports, java_command, kafka_libs

TOPIC = "connect-lines"
# How long a step may take before the test gives up (a worker's start is 5-15 s on a 2-core machine).
DEADLINE_S = 120


class Worker:
    """One `ConnectDistributed` process with its REST listener on a loopback port."""

    def __init__(self, directory: Path, bootstrap: str, config_topic: str = "connect-configs",
                 group: str = "mirrorlog-connect"):
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.port = free_loopback_ports(1)[0]
        properties = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "listeners": f"http://127.0.0.1:{self.port}",
            "rest.advertised.host.name": "127.0.0.1",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "config.storage.topic": config_topic,
            "offset.storage.topic": "connect-offsets",
            "status.storage.topic": "connect-status",
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "offset.storage.partitions": "2",
            "status.storage.partitions": "2",
            "offset.flush.interval.ms": "500",
            "plugin.discovery": "only_scan",
        }
        self.config = directory / "worker.properties"
        self.config.write_text("".join(f"{key}={value}\n" for key, value in properties.items()), encoding="utf-8")
        self.log = directory / "worker.log"
        self.process: subprocess.Popen | None = None

    def start(self, wait: bool = True):
        command = java_command(kafka_libs(None), "org.apache.kafka.connect.cli.ConnectDistributed",
                               BROKER_JVM_OPTIONS, log_level="INFO")
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(command + [str(self.config)], stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL)
        if wait:
            wait_for(lambda: self.rest("GET", "/connectors") is not None, "the worker's REST API")

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(60)

    def kill(self):
        """SIGKILL: a worker that refused to start takes most of a minute to shut its executors down."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(60)

    def rest(self, method: str, path: str, body: dict | None = None):
        """The REST answer as JSON; None while the worker cannot answer (starting, or joining its group)."""
        if self.process is not None and self.process.poll() is not None:
            raise AssertionError(f"the worker exited with {self.process.returncode}:\n{tail(self.log)}")
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                text = answer.read().decode()
                return json.loads(text) if text else {}
        except (OSError, urllib.error.HTTPError):
            return None


def tail(path: Path, lines: int = 60) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""


def wait_for(done, what: str):
    """Polls `done` until it holds, for at most DEADLINE_S."""
    deadline = time.monotonic() + DEADLINE_S
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {DEADLINE_S} s")
        time.sleep(0.2)


def running(worker: Worker, name: str) -> bool:
    status = worker.rest("GET", f"/connectors/{name}/status")
    return bool(status) and status["connector"]["state"] == "RUNNING" and bool(status["tasks"]) and all(
        task["state"] == "RUNNING" for task in status["tasks"]
    )


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


@pytest.fixture(scope="module")
def serve(tmp_path_factory):
    require_jars_and_binary()
    with Serve(tmp_path_factory.mktemp("connect") / "serve", 1 << 30, 4096) as serve:
        yield serve


def test_a_connect_worker_runs_file_connectors_on_serve_and_resumes_them_after_a_restart(serve, tmp_path):
    started = time.monotonic()
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    first = [f"line {index}" for index in range(200)]
    source_file.write_text("".join(f"{line}\n" for line in first), encoding="utf-8")
    worker = Worker(tmp_path, serve.bootstrap)
    worker.start()
    try:
        for name, config in (
            ("lines-in", {"connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
                          "file": str(source_file), "topic": TOPIC, "tasks.max": "1"}),
            ("lines-out", {"connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                           "file": str(sink_file), "topics": TOPIC, "tasks.max": "1"}),
        ):
            wait_for(lambda: worker.rest("PUT", f"/connectors/{name}/config", config) is not None, f"creating {name}")
        for name in ("lines-in", "lines-out"):
            wait_for(lambda: running(worker, name), f"{name} RUNNING")
        wait_for(lambda: lines_of(sink_file) == first, "every line through serve into the sink file")
        # Connect created its topics compacted, and checked they are (it stops otherwise).
        assert running(worker, "lines-in") and running(worker, "lines-out")
        worker.stop()

        second = [f"after the restart {index}" for index in range(100)]
        with open(source_file, "a", encoding="utf-8") as appended:
            appended.write("".join(f"{line}\n" for line in second))
        worker.start()
        wait_for(lambda: sorted(worker.rest("GET", "/connectors") or []) == ["lines-in", "lines-out"],
                 "the connectors read back from the config topic")
        wait_for(lambda: len(lines_of(sink_file)) >= len(first) + len(second), "the appended lines")
        # Both resumed from their offsets: the source from its position in the file (connect-offsets), the sink
        # from its group's committed offset: nothing again, nothing lost.
        assert lines_of(sink_file) == first + second
    finally:
        worker.stop()
    TIMINGS["kafka connect: two worker starts, 300 lines through serve"] = time.monotonic() - started


def test_connect_refuses_a_config_topic_that_serve_describes_as_not_compacted(serve, tmp_path):
    """The check Connect makes through DescribeConfigs sees serve's answer: a config topic created with
    `cleanup.policy=delete` stops the worker, naming the policy."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": serve.bootstrap})
    admin.create_topics([NewTopic("connect-configs-deleted", 1, 1, config={"cleanup.policy": "delete"})])[
        "connect-configs-deleted"
    ].result(30)
    worker = Worker(tmp_path / "refused", serve.bootstrap, config_topic="connect-configs-deleted",
                    group="mirrorlog-connect-refused")
    worker.start(wait=False)
    try:
        # The refusal names the topic and the policy it requires, on one line (Connect's own topics are created
        # with `cleanup.policy=compact` on lines of their own: those are not the refusal).
        def refusal():
            return [
                line
                for line in worker.log.read_text(errors="replace").splitlines()
                if "connect-configs-deleted" in line and "cleanup.policy=compact" in line
            ]

        wait_for(lambda: refusal(), "Connect's refusal naming the topic")
        assert "cleanup.policy=delete" in refusal()[0], refusal()[0]
    finally:
        worker.kill()
