"""MirrorMaker 2 beside `mirrorlog mirror`: the same topic mirrored by each, on this machine, and what each keeps.

- **MirrorMaker 2** (Kafka Connect's mirror connectors 4.1.2, dedicated mode, from interop/mm2/pom.xml) mirrors a
  topic from one Apache Kafka 4.1.2 node to another (`A->B`, remote topic `A.<topic>`).
- **mirrorlog**: a release `mirrorlog serve` mirrors the same load from another `serve` (`mirror create`).

The load: an idempotent producer (1 KiB values) writes MESSAGES records to a topic of PARTITIONS partitions,
then a transactional producer commits one transaction and aborts one. Each mirror starts once the source holds
everything; it is timed from its start (MM2: the process; mirrorlog: `mirror create`) until the destination holds
as many records as the source's read_committed view (polled every 50 ms), and from the first record it shows to
the last (the copying itself, without MM2's start). Then each destination is read back and compared with its
source: offsets, producer ids, transactional batches and markers, aborted records.

    mvn -q -f interop/mm2/pom.xml dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=DIR
    python interop/bench/mm2_bench.py --bin target/release/mirrorlog --libs <target>/kafka-4.1.2/libs \
        --mm2-libs DIR [--messages N]

(`cargo xtask kafka` fetches the Kafka jars into `<target>/kafka-4.1.2/libs`; the client suite's virtual
environment has confluent-kafka.)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kafka"))

from kafka_node import KafkaNode, java_binary  # noqa: E402

TOPIC = "orders"
PARTITIONS = 3
VALUE = os.urandom(1024)


def load(bootstrap: str, messages: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(messages):
        while True:
            try:
                producer.produce(TOPIC, VALUE, key=b"%d" % i, partition=i % PARTITIONS)
                break
            except BufferError:  # the client's queue is full: let deliveries drain
                producer.poll(0.05)
    assert producer.flush(120) == 0
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "bench-txn"})
    txn.init_transactions(30)
    for outcome in ("commit", "abort"):
        txn.begin_transaction()
        for i in range(30):
            txn.produce(TOPIC, b"%s-%d" % (outcome.encode(), i), partition=i % PARTITIONS)
        txn.flush(30)
        txn.commit_transaction(30) if outcome == "commit" else txn.abort_transaction(30)


def read_all(bootstrap: str, topic: str, isolation: str = "read_committed") -> list[tuple]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-read", "isolation.level": isolation,
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    out, idle = [], 0
    while idle < 3:
        batch = consumer.consume(10_000, 1.0)
        idle = idle + 1 if not batch else 0
        out.extend((m.partition(), m.offset(), m.value()) for m in batch if not m.error())
    consumer.close()
    return sorted(out)


def count(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-count", "isolation.level": "read_committed"})
    try:
        total = 0
        for p in range(PARTITIONS):
            try:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5)
            except Exception:  # noqa: BLE001 - the topic does not exist yet
                return 0
            total += max(0, high - low)
        return total
    finally:
        consumer.close()


def dump(binary: str, directory: Path) -> list[dict]:
    done = subprocess.run([binary, "dump", "--json", str(directory)], capture_output=True, text=True, check=True)
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def kept(binary: str, source_dirs: list[Path], dest_dirs: list[Path], source_view, dest_view) -> dict:
    """What the destination kept of the source: offsets, producer ids, transactions."""
    source = [b for d in source_dirs for b in dump(binary, d)]
    dest = [b for d in dest_dirs for b in dump(binary, d)]
    values = lambda view: [(p, v) for p, _, v in view]  # noqa: E731
    return {
        "records (read_committed) equal": values(source_view) == values(dest_view),
        "offsets equal": source_view == dest_view,
        "producer ids kept": {b["producer_id"] for b in source} <= {b["producer_id"] for b in dest},
        "transactional batches": sum(b["attributes"]["is_transactional"] for b in dest),
        "control batches (markers)": sum(b["attributes"]["is_control"] for b in dest),
        "aborted records visible to read_committed": sum(v.startswith(b"abort") for _, _, v in dest_view),
        "batches": f"{len(dest)} (source {len(source)})",
    }


def wait_for(bootstrap: str, topic: str, expected: int, deadline_s: float = 600) -> float:
    """Waits until the topic holds `expected` records; returns when the first record was seen."""
    deadline = time.monotonic() + deadline_s
    first = None
    while True:
        seen = count(bootstrap, topic)
        if seen > 0 and first is None:
            first = time.monotonic()
        if seen >= expected:
            return first
        assert time.monotonic() < deadline, f"{topic} at {bootstrap} never reached {expected} records"
        time.sleep(0.05)


def mm2(args, root: Path) -> dict:
    a = KafkaNode(root / "kafka-a", libs=args.libs)
    b = KafkaNode(root / "kafka-b", libs=args.libs)
    a.start()
    b.start()
    try:
        admin = AdminClient({"bootstrap.servers": a.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        load(a.bootstrap, args.messages)
        source_view = read_all(a.bootstrap, TOPIC)
        config = root / "mm2.properties"
        config.write_text("\n".join([
            "clusters = A, B",
            f"A.bootstrap.servers = {a.bootstrap}",
            f"B.bootstrap.servers = {b.bootstrap}",
            "A->B.enabled = true",
            f"A->B.topics = {TOPIC}",
            "B->A.enabled = false",
            "replication.factor = 1",
            "checkpoints.topic.replication.factor = 1",
            "heartbeats.topic.replication.factor = 1",
            "offset-syncs.topic.replication.factor = 1",
            "offset.storage.replication.factor = 1",
            "status.storage.replication.factor = 1",
            "config.storage.replication.factor = 1",
            "refresh.topics.interval.seconds = 1",
            "sync.topic.configs.enabled = false",
            "sync.topic.acls.enabled = false",
            "emit.heartbeats.enabled = false",
            "tasks.max = 3",
            "",
        ]))
        classpath = f"{args.mm2_libs}/*:{args.libs}/*"
        started = time.monotonic()
        process = subprocess.Popen(
            [java_binary(), "-Xmx512m", "-cp", classpath, "org.apache.kafka.connect.mirror.MirrorMaker", str(config)],
            stdout=subprocess.DEVNULL, stderr=open(root / "mm2.log", "wb"),
        )
        try:
            first = wait_for(b.bootstrap, f"A.{TOPIC}", len(source_view))
            seconds, copying = time.monotonic() - started, time.monotonic() - first
        finally:
            process.terminate()
            process.wait(60)
        dest_view = read_all(b.bootstrap, f"A.{TOPIC}")
        kept_ = kept(args.bin, [a.partition_dir(TOPIC, p) for p in range(PARTITIONS)],
                     [b.partition_dir(f"A.{TOPIC}", p) for p in range(PARTITIONS)], source_view, dest_view)
        return {"seconds": seconds, "copying": copying, "kept": kept_}
    finally:
        a.stop()
        b.stop()


class Serve:
    def __init__(self, binary: str, root: Path, cluster_id: str, *extra):
        self.data = root / cluster_id
        self.process = subprocess.Popen(
            [binary, "serve", "--listen", "127.0.0.1:0", "--cluster-id", cluster_id, "--data-dir", str(self.data),
             *extra], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        line = self.process.stdout.readline().decode()
        self.bootstrap = "127.0.0.1:" + line.rsplit(":", 1)[1].strip()

    def stop(self):
        self.process.terminate()
        self.process.wait(60)


def mirrorlog(args, root: Path) -> dict:
    a = Serve(args.bin, root, "serve-a", "--topic", f"{TOPIC}:{PARTITIONS}")
    b = Serve(args.bin, root, "serve-b")
    try:
        load(a.bootstrap, args.messages)
        source_view = read_all(a.bootstrap, TOPIC)
        started = time.monotonic()
        subprocess.run([args.bin, "mirror", "create", "--bootstrap", b.bootstrap, "--link", "bench", "--source",
                        a.bootstrap, "--topic", TOPIC], check=True, capture_output=True)
        first = wait_for(b.bootstrap, TOPIC, len(source_view))
        seconds, copying = time.monotonic() - started, time.monotonic() - first
        dest_view = read_all(b.bootstrap, TOPIC)
        kept_ = kept(args.bin, [a.data / f"{TOPIC}-{p}" for p in range(PARTITIONS)],
                     [b.data / f"{TOPIC}-{p}" for p in range(PARTITIONS)], source_view, dest_view)
        return {"seconds": seconds, "copying": copying, "kept": kept_}
    finally:
        a.stop()
        b.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", required=True)
    parser.add_argument("--libs", required=True)
    parser.add_argument("--mm2-libs", required=True)
    parser.add_argument("--messages", type=int, default=100_000)
    args = parser.parse_args()
    mib = args.messages * len(VALUE) / (1 << 20)
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        results["mirrorlog mirror"] = mirrorlog(args, Path(scratch) / "mirrorlog")
        results["MirrorMaker 2"] = mm2(args, Path(scratch) / "mm2")
    print(f"| mirror | {mib:.0f} MiB from its start | first record to last | MiB/s copying | "
          + " | ".join(results["mirrorlog mirror"]["kept"]) + " |")
    print("|---" * (4 + len(results["mirrorlog mirror"]["kept"])) + "|")
    for name, result in results.items():
        cells = " | ".join(str(v) for v in result["kept"].values())
        print(f"| {name} | {result['seconds']:.1f} s | {result['copying']:.2f} s | "
              f"{mib / max(result['copying'], 0.05):.0f} | {cells} |")


if __name__ == "__main__":
    main()
