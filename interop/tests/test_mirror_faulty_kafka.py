"""A mirror link following Apache Kafka through a faulty network (issue 50, item 6): a `serve` destination mirrors
a 3-partition topic of a Kafka 4.1.2 node through a TCP proxy — Kafka advertises the proxy, so every connection
the link opens goes through it — that reads Kafka's answers frame by frame and, on a fixed plan, cuts one in the
middle and closes the connection, closes the connection instead of answering, holds an answer past the link's
request deadline, or delays one, on each of the first connections the link opens, while an idempotent producer
writes. (The Rust suite's `broker/tests/mirror_faulty_network.rs` runs the same plan against a `serve` source.)

Once the plan is spent the mirror catches up, holds Kafka's batches byte for byte (`mirrorlog dump` of both
logs), never cut a partition back after its first alignment (`describe`'s `truncations`: Kafka lost nothing,
so nothing justified a truncation), and fails over with one barrier per partition.
"""

import os
import socket
import struct
import subprocess
import threading
import time

import pytest

import both_ways as bw
from conftest import TIMINGS
from kafka_node import LIBS_ENV, KafkaNode
from test_mirror_from_kafka import caught_up, mirror_json, start_serve

TOPIC = "faulty"
PARTITIONS = 3
LINK = "through-faults"
# Connection n of the link meets PLAN[n] at its answer number n % 2 (some connections carry one question only).
PLAN = ["cut", "close", "delay", "cut", "stall", "close", "cut", "delay"]
# The link's client id starts so (`mirrorlog-mirror-<destination cluster id>`); other clients pass untouched.
LINK_CLIENT = b"mirrorlog-mirror"
MAX_FRAME_BYTES = 64 << 20


def read_exactly(sock: socket.socket, count: int) -> bytes | None:
    data = bytearray()
    while len(data) < count:
        chunk = sock.recv(min(count - len(data), 1 << 16))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def read_frame(sock: socket.socket) -> bytes | None:
    """One size-prefixed Kafka frame, or None when the connection ended or announced an absurd size."""
    head = read_exactly(sock, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">i", head)
    if not 0 <= size <= MAX_FRAME_BYTES:
        return None
    body = read_exactly(sock, size)
    return None if body is None else head + body


def client_id(request: bytes) -> bytes:
    """The client id of a request frame (header: api key, version, correlation id, then an int16 string)."""
    (length,) = struct.unpack(">h", request[12:14])
    return request[14:14 + max(length, 0)]


class FaultyProxy:
    def __init__(self):
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.target: int | None = None
        self.lock = threading.Lock()
        self.link_connections = 0
        self.faults = 0
        self.planned_ended = 0
        self.closed = False
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(client,), daemon=True).start()

    def serve(self, client: socket.socket):
        planned = None
        try:
            first = read_frame(client)
            if first is None or self.target is None:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target), timeout=30)
        except OSError:
            client.close()
            return
        if client_id(first).startswith(LINK_CLIENT):
            with self.lock:
                number = self.link_connections
                self.link_connections += 1
            if number < len(PLAN):
                planned = (PLAN[number], number % 2)
        try:
            upstream.sendall(first)
            threading.Thread(target=self.pipe, args=(client, upstream), daemon=True).start()
            answered = 0
            while True:
                frame = read_frame(upstream)
                if frame is None:
                    break
                fault = planned[0] if planned and planned[1] == answered else None
                answered += 1
                if fault:
                    with self.lock:
                        self.faults += 1
                    if fault == "cut":
                        client.sendall(frame[: len(frame) // 2])
                        break
                    if fault == "close":
                        break
                    if fault == "stall":
                        time.sleep(12)
                        break
                    time.sleep(0.7)  # "delay"
                client.sendall(frame)
        except OSError:
            pass
        finally:
            for sock in (client, upstream):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()
            if planned:
                with self.lock:
                    self.planned_ended += 1

    @staticmethod
    def pipe(source: socket.socket, target: socket.socket):
        try:
            while True:
                data = source.recv(1 << 16)
                if not data:
                    break
                target.sendall(data)
        except OSError:
            pass

    def close(self):
        self.closed = True
        self.listener.close()


@pytest.fixture(scope="module")
def kafka_behind_proxy(tmp_path_factory):
    if not os.environ.get(LIBS_ENV):
        pytest.skip(f"{LIBS_ENV} is not set: `cargo xtask kafka` fetches Apache Kafka's jars and runs this suite")
    if not os.environ.get(bw.BIN_ENV):
        pytest.skip(f"{bw.BIN_ENV} is not set: `cargo xtask kafka` builds mirrorlog and names its binary")
    proxy = FaultyProxy()
    node = KafkaNode(tmp_path_factory.mktemp("kafka-faulty"), transaction_version=2,
                     properties={"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"})
    proxy.target = node.port
    node.start()
    try:
        yield node, proxy
    finally:
        node.stop()
        proxy.close()


def test_a_mirror_of_kafka_over_a_faulty_network_catches_up_byte_for_byte_without_truncating(
    kafka_behind_proxy, tmp_path
):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    node, proxy = kafka_behind_proxy
    bootstrap = f"127.0.0.1:{proxy.port}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    producer.produce(TOPIC, value=b"before the link", partition=0)
    producer.flush(30)
    process, dest = start_serve(tmp_path / "dest", "faulty-destination")
    started = time.monotonic()
    try:
        # The faults may meet the create itself: the operator runs it again (as the Rust test does).
        for attempt in range(10):
            done = subprocess.run(
                [os.environ[bw.BIN_ENV], "mirror", "create", "--bootstrap", dest, "--link", LINK,
                 "--source", bootstrap, "--topic", TOPIC, "--json"],
                capture_output=True, text=True, timeout=120,
            )
            if done.returncode == 0 or "already_exists" in done.stdout + done.stderr:
                break
        else:
            raise AssertionError(f"the link was never created: {done.stdout} {done.stderr}")

        aligned: dict[int, int] = {}
        batches = 0
        while proxy.planned_ended < len(PLAN) or batches < 300:
            assert time.monotonic() - started < 150, (
                f"the plan is not spent: {proxy.faults} of {len(PLAN)} faults, {proxy.link_connections} connections"
            )
            producer.produce(TOPIC, value=f"record {batches}".encode(), partition=batches % PARTITIONS)
            producer.flush(30)
            batches += 1
            if batches % 20 == 0:
                for status in mirror_json("describe", dest, "--link", LINK)["links"][0]["partitions"]:
                    if status["log_end_offset"] > 0:
                        aligned.setdefault(status["partition"], status["truncations"])
            time.sleep(0.01)
        spent = time.monotonic()
        statuses = caught_up(dest, LINK, PARTITIONS)
        TIMINGS["mirror of Kafka through faults: caught up after the plan"] = time.monotonic() - spent
        assert proxy.faults >= len(PLAN) // 2, f"only {proxy.faults} of the {len(PLAN)} planned faults were met"
        assert sorted(aligned) == list(range(PARTITIONS)), f"not every partition was seen holding data: {aligned}"
        for status in statuses:
            partition = status["partition"]
            ours = bw.mirrorlog_json("dump", tmp_path / "dest" / f"{TOPIC}-{partition}")
            theirs = [b for segment in node.segments(TOPIC, partition) for b in bw.mirrorlog_json("dump", segment)]
            assert ours == theirs, f"partition {partition}"
            assert status["truncations"] == aligned[partition], (
                f"partition {partition}: a retry cut back what Kafka still has: {status}"
            )
            assert status["truncations"] <= 1, status
        stopped = mirror_json("failover", dest, "--link", LINK)
        for status in stopped["links"][0]["partitions"]:
            assert status["state"] == "STOPPED" and status["barrier_offset"] == status["log_end_offset"] - 1, status
    finally:
        process.terminate()
        assert process.wait(30) == 0
    TIMINGS["mirror of Kafka through faults: the whole test"] = time.monotonic() - started
