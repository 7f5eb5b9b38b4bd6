"""The peer benchmark: the same librdkafka load against Apache Kafka 4.1 and `mirrorlog serve`, in one run, on
this machine (`cargo xtask bench` runs it as its `peer` section; `--peer-only` runs nothing else).

Brokers, each started fresh for every run on loopback with fresh data:

- `kafka`: one KRaft node from the pinned jars (interop/kafka/kafka_node.py, 512 MiB heap), its default
  durability: an acknowledged write is in the page cache, fsync left to the OS;
- `serve buffered`: a release `mirrorlog serve` on fs with `durability = "buffered"` — the same durability;
- `serve sync`: the same with `durability = "sync"` (an fsync before every acknowledgement), reported beside.

Loads (confluent-kafka / librdkafka, 1 KiB values, no compression):

- `idempotent 1p` / `idempotent 12p`: one idempotent producer (acks=all, linger 5 ms) sending MESSAGES to one
  partition / spread over 12, once it is connected and holds its producer id (one message acknowledged first);
  throughput (MiB/s, first produce to last acknowledgement) and delivery latency
  p50/p99 (from `produce()` to the delivery report: under saturation, mostly time in the client's queue);
- `transactional`: one transactional producer, transactions of 1,000 messages, one partition;
- `consume 12p`: read_committed consumers reading the 12-partition topic back, three times over;
- `round trip`: one message produced and flushed at a time (300 of them): latency without queueing.

Every broker gets a warm-up load first (the JVM compiles its hot paths). Figures are medians over RUNS runs; the
ratios divide serve's median by Kafka's, so both come from the same run on the same machine.

    python interop/bench/peer_bench.py --bin target/release/mirrorlog --libs <target>/kafka-4.1.2/libs --out DIR
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kafka"))

from kafka_node import KafkaNode  # noqa: E402

VALUE = os.urandom(1024)
TOPICS = {"p1": 1, "p12": 12, "txn": 1, "warm": 1}
BROKERS = ("kafka", "serve buffered", "serve sync")


class Serve:
    """A release `mirrorlog serve` on fs with the given durability and the benchmark's topics."""

    def __init__(self, binary: str, root: Path, durability: str):
        config = root / "storage.toml"
        config.write_text(f'backend = "fs"\ndata_dir = "{root / "data"}"\ndurability = "{durability}"\n')
        topics = [arg for name, count in TOPICS.items() for arg in ("--topic", f"{name}:{count}")]
        self.process = subprocess.Popen(
            [binary, "serve", "--listen", "127.0.0.1:0", "--config", str(config), *topics],
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
        )
        line = self.process.stdout.readline().decode()
        if "listening on" not in line:
            self.process.kill()
            raise RuntimeError(f"mirrorlog serve did not start: {line!r}")
        self.bootstrap = "127.0.0.1:" + line.rsplit(":", 1)[1].strip()
        self.pid = self.process.pid

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(60)


class Kafka:
    """A Kafka node with the benchmark's topics."""

    def __init__(self, libs: str, root: Path):
        self.node = KafkaNode(root / "kafka", libs=libs)
        self.node.start()
        self.bootstrap = self.node.bootstrap
        self.pid = self.node.process.pid
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        futures = admin.create_topics([NewTopic(name, count, 1) for name, count in TOPICS.items()])
        for future in futures.values():
            future.result(60)
        # Until every partition has a leader that takes writes.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            metadata = admin.list_topics(timeout=10)
            if all(
                name in metadata.topics
                and len(metadata.topics[name].partitions) == count
                and all(p.leader >= 0 for p in metadata.topics[name].partitions.values())
                for name, count in TOPICS.items()
            ):
                return
            time.sleep(0.2)
        raise RuntimeError("Kafka's benchmark topics have no leaders after 60 s")

    def stop(self):
        self.node.stop()


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


def produce(
    bootstrap: str, topic: str, partitions: int, messages: int, transactional: bool, client: dict | None = None
) -> dict:
    """`client`: librdkafka settings added to the producer's (security.protocol, sasl.*, ssl.*)."""
    config = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        **(client or {}),
    }
    if transactional:
        config["transactional.id"] = f"peer-bench-{os.getpid()}-{time.monotonic_ns()}"
    producer = Producer(config)
    # Connecting, the producer id and the metadata are not the load: one message, acknowledged, before the clock
    # starts (inside a transaction for the transactional producer).
    if transactional:
        producer.init_transactions(60)
        producer.begin_transaction()
    producer.produce(topic, value=VALUE, partition=0)
    if transactional:
        producer.commit_transaction(60)
    if producer.flush(60):
        raise RuntimeError("the first message was not acknowledged")
    latencies: list[float] = []

    def delivered(error, _message, sent):
        if error is not None:
            raise KafkaException(error)
        latencies.append(time.perf_counter() - sent)

    started = time.perf_counter()
    per_transaction = 1000
    for index in range(messages):
        if transactional and index % per_transaction == 0:
            producer.begin_transaction()
        sent = time.perf_counter()
        while True:
            try:
                producer.produce(
                    topic,
                    value=VALUE,
                    partition=index % partitions,
                    on_delivery=lambda e, m, sent=sent: delivered(e, m, sent),
                )
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
        if transactional and (index % per_transaction == per_transaction - 1 or index == messages - 1):
            producer.commit_transaction(60)
    remaining = producer.flush(300)
    elapsed = time.perf_counter() - started
    if remaining:
        raise RuntimeError(f"{remaining} messages not delivered")
    return {
        "mib_s": messages * len(VALUE) / elapsed / (1 << 20),
        "p50_ms": 1000 * percentile(latencies, 0.50),
        "p99_ms": 1000 * percentile(latencies, 0.99),
    }


def consume(
    bootstrap: str, topic: str, partitions: int, messages: int, passes: int, client: dict | None = None
) -> dict:
    """`passes` consumers, one after the other, each reading the topic from its start (one pass takes a fraction
    of a second: a single one is mostly noise)."""
    read = 0
    started = time.perf_counter()
    for _ in range(passes):
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "peer-bench",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "fetch.max.bytes": 52428800,
                "max.partition.fetch.bytes": 10485760,
                **(client or {}),
            }
        )
        consumer.assign([TopicPartition(topic, partition, 0) for partition in range(partitions)])
        this_pass = 0
        deadline = time.perf_counter() + 300
        while this_pass < messages and time.perf_counter() < deadline:
            for message in consumer.consume(10_000, 5):
                if message.error():
                    raise KafkaException(message.error())
                this_pass += 1
        consumer.close()
        if this_pass < messages:
            raise RuntimeError(f"read {this_pass} of {messages} messages")
        read += this_pass
    elapsed = time.perf_counter() - started
    return {"mib_s": read * len(VALUE) / elapsed / (1 << 20)}


def round_trips(bootstrap: str, count: int = 300) -> dict:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 0})
    producer.produce("warm", value=VALUE, partition=0)
    producer.flush(30)
    samples = []
    for _ in range(count):
        sent = time.perf_counter()
        producer.produce("warm", value=VALUE, partition=0)
        if producer.flush(30):
            raise RuntimeError("a round trip was not acknowledged")
        samples.append(time.perf_counter() - sent)
    return {"p50_ms": 1000 * percentile(samples, 0.50), "p99_ms": 1000 * percentile(samples, 0.99)}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` (all its threads) from /proc, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def profiled(pid: int, load) -> dict:
    """Runs `load` and adds the CPU seconds the broker and this client process (librdkafka's threads included)
    spent on it: on two shared cores, which side sets the pace."""
    broker_before, client_before = cpu_seconds(pid), time.process_time()
    figures = load()
    figures["broker_cpu_s"] = cpu_seconds(pid) - broker_before
    figures["client_cpu_s"] = time.process_time() - client_before
    return figures


def measure(bootstrap: str, pid: int, messages: int) -> dict:
    produce(bootstrap, "warm", 1, messages // 4, False)
    return {
        "idempotent 1p": profiled(pid, lambda: produce(bootstrap, "p1", 1, messages, False)),
        "idempotent 12p": profiled(pid, lambda: produce(bootstrap, "p12", 12, messages, False)),
        "transactional": profiled(pid, lambda: produce(bootstrap, "txn", 1, messages, True)),
        "consume 12p": profiled(pid, lambda: consume(bootstrap, "p12", 12, messages, passes=3)),
        "round trip": round_trips(bootstrap),
    }


def start(broker: str, args, root: Path):
    if broker == "kafka":
        return Kafka(args.libs, root)
    return Serve(args.bin, root, broker.split()[1])


def medians(runs: list[dict]) -> dict:
    out = {}
    for load in runs[0]:
        out[load] = {metric: statistics.median(run[load][metric] for run in runs) for metric in runs[0][load]}
    return out


NAMES = {"mib_s": "throughput", "p50_ms": "latency p50", "p99_ms": "latency p99", "broker_cpu_s": "broker CPU"}
UNITS = {"mib_s": "MiB/s", "p50_ms": "ms", "p99_ms": "ms", "broker_cpu_s": "s"}


def run_ratio(runs: dict, broker: str, load: str, metric: str):
    """The median over the runs of `broker`'s figure ÷ Kafka's in the same run (None when Kafka's were all 0)."""
    ratios = [
        run[load][metric] / base[load][metric]
        for run, base in zip(runs[broker], runs["kafka"])
        if base[load][metric]
    ]
    return statistics.median(ratios) if ratios else None


def entries(result: dict, runs: dict) -> list[dict]:
    """One entry per load, metric and serve durability, for programs (`docs/peer.json`, merged into
    `docs/bench-report.json` by `cargo xtask bench --publish`)."""
    out = []
    for load, metrics in result["kafka"].items():
        for metric in metrics:
            if metric not in NAMES:
                continue
            for broker in BROKERS[1:]:
                out.append(
                    {
                        "load": load,
                        "generator": "librdkafka",
                        "metric": NAMES[metric],
                        "unit": UNITS[metric],
                        "higher_is_better": metric == "mib_s",
                        "serve_durability": broker.split()[1],
                        "kafka": result["kafka"][load][metric],
                        "serve": result[broker][load][metric],
                        "ratio": run_ratio(runs, broker, load, metric),
                    }
                )
    return out


def table(result: dict, runs: dict, messages: int, run_count: int) -> str:
    """The medians, each serve figure with the median of its per-run ratios to Kafka's (the run's own Kafka
    figure), then the CPU each side spent."""
    kafka = result["kafka"]
    lines = [
        f"{messages:,} messages of 1 KiB per load, median of {run_count} runs; a ratio is the median over the runs "
        "of serve ÷ Kafka in the same run (throughput: serve ahead above 1.0×; latency: serve ahead below 1.0×).",
        "",
        "| load | metric | Kafka 4.1.2 | serve buffered | ratio | serve sync | ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for load, metrics in kafka.items():
        for metric, value in metrics.items():
            if metric not in NAMES or metric == "broker_cpu_s":
                continue
            unit = "MiB/s" if metric == "mib_s" else "ms"
            cells = [f"{value:.1f} {unit}" if unit == "MiB/s" else f"{value:.2f} {unit}"]
            for broker in ("serve buffered", "serve sync"):
                mine = result[broker][load][metric]
                ratio = run_ratio(runs, broker, load, metric)
                cells.append(f"{mine:.1f} {unit}" if unit == "MiB/s" else f"{mine:.2f} {unit}")
                cells.append(f"{ratio:.2f}×" if ratio is not None else "n/a")
            lines.append(f"| {load} | {NAMES[metric]} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "CPU seconds per load, broker / client (this Python process with librdkafka's threads), medians:",
        "",
        "| load | Kafka 4.1.2 | serve buffered | serve sync |",
        "|---|---|---|---|",
    ]
    for load, metrics in kafka.items():
        if "broker_cpu_s" not in metrics:
            continue
        cells = [
            f"{result[broker][load]['broker_cpu_s']:.2f} / {result[broker][load]['client_cpu_s']:.2f}"
            for broker in BROKERS
        ]
        lines.append(f"| {load} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", required=True, help="a release mirrorlog binary")
    parser.add_argument("--libs", required=True, help="the directory of Apache Kafka's jars")
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", help="a directory for peer.json and peer.md")
    args = parser.parse_args()
    runs = {broker: [] for broker in BROKERS}
    for run in range(args.runs):
        for broker in BROKERS:
            with tempfile.TemporaryDirectory(prefix="peer-bench-") as root:
                started = start(broker, args, Path(root))
                try:
                    figures = measure(started.bootstrap, started.pid, args.messages)
                finally:
                    started.stop()
            runs[broker].append(figures)
            print(f"run {run + 1}, {broker}: {json.dumps(figures)}", flush=True)
    result = {broker: medians(figures) for broker, figures in runs.items()}
    text = table(result, runs, args.messages, args.runs)
    print(text)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "peer.json").write_text(json.dumps({"entries": entries(result, runs), "medians": result, "runs": runs}, indent=1))
        (out / "peer.md").write_text(text)


if __name__ == "__main__":
    main()
