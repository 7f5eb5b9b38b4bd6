"""Produce and consume throughput of `mirrorlog serve` with librdkafka, and produce latency.

One idempotent producer (acks=all, linger 5 ms, 1 KiB values) sends MESSAGES to one partition of a release-built
`mirrorlog serve` on the fs backend with the given durability; the script prints MiB/s, p50/p99 delivery
latency, the producer's average batch size (librdkafka statistics) and then the consume rate of one consumer
reading everything back. Run it beside `cargo bench -p broker --bench in_process_append` with that batch size for
the server's overhead as a ratio (docs/benchmarks.md). The delivery latency of the saturated run is mostly time
in the client's queue; `single_message_p50_ms` is one message produced and flushed at a time.

    python broker/bench/serve_bench.py --bin target/release/mirrorlog --durability sync
"""

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition


def start(binary, data_dir, durability):
    config = Path(data_dir) / "storage.toml"
    config.write_text(f'backend = "fs"\ndata_dir = "{data_dir}/data"\ndurability = "{durability}"\n')
    (Path(data_dir) / "data").mkdir()
    process = subprocess.Popen(
        [binary, "serve", "--listen", "127.0.0.1:0", "--config", str(config), "--topic", "bench:1"],
        stdout=subprocess.PIPE,
    )
    line = process.stdout.readline().decode()
    return process, "127.0.0.1:" + line.rsplit(":", 1)[1].strip()


def produce(bootstrap, messages, value):
    stats = []
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "statistics.interval.ms": 500,
            "stats_cb": lambda text: stats.append(json.loads(text)),
        }
    )
    latencies = []

    def delivered(error, _message, sent):
        assert error is None, error
        latencies.append(time.perf_counter() - sent)

    started = time.perf_counter()
    for _ in range(messages):
        sent = time.perf_counter()
        while True:
            try:
                producer.produce("bench", value=value, partition=0,
                                 on_delivery=lambda e, m, sent=sent: delivered(e, m, sent))
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    enqueued = time.perf_counter() - started
    assert producer.flush(300) == 0
    elapsed = time.perf_counter() - started
    producer.poll(1.0)  # one more statistics callback
    batch = [s["topics"]["bench"]["batchcnt"]["avg"] for s in stats if "bench" in s.get("topics", {})]
    sizes = [s["topics"]["bench"]["batchsize"]["avg"] for s in stats if "bench" in s.get("topics", {})]
    latencies.sort()
    return {
        "produce_mib_s": messages * len(value) / elapsed / (1 << 20),
        "produce_seconds": elapsed,
        # The Python loop handing messages to librdkafka: when it is most of `produce_seconds`, the client, not the
        # broker, sets the pace.
        "enqueue_seconds": enqueued,
        "latency_p50_ms": 1000 * latencies[len(latencies) // 2],
        "latency_p99_ms": 1000 * latencies[int(len(latencies) * 0.99)],
        "avg_records_per_batch": statistics.median([b for b in batch if b > 0]) if any(batch) else None,
        "avg_batch_bytes": statistics.median([s for s in sizes if s > 0]) if any(sizes) else None,
    }


def round_trips(bootstrap, value, count=500):
    """Latency without queueing: one message at a time, each flushed before the next."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 0})
    producer.produce("bench", value=value, partition=0)
    assert producer.flush(30) == 0
    samples = []
    for _ in range(count):
        sent = time.perf_counter()
        producer.produce("bench", value=value, partition=0)
        assert producer.flush(30) == 0
        samples.append(time.perf_counter() - sent)
    samples.sort()
    return {
        "single_message_p50_ms": 1000 * samples[len(samples) // 2],
        "single_message_p99_ms": 1000 * samples[int(len(samples) * 0.99)],
    }


def consume(bootstrap, messages, value_len):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                         "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760})
    consumer.assign([TopicPartition("bench", 0, 0)])
    read = 0
    started = time.perf_counter()
    while read < messages:
        for message in consumer.consume(10_000, 5):
            assert not message.error(), message.error()
            read += 1
    elapsed = time.perf_counter() - started
    consumer.close()
    return {"consume_mib_s": messages * value_len / elapsed / (1 << 20)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--durability", choices=["sync", "buffered"], default="sync")
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    value = b"x" * 1024
    results = []
    for run in range(args.runs):
        with tempfile.TemporaryDirectory() as data_dir:
            process, bootstrap = start(args.bin, data_dir, args.durability)
            try:
                result = produce(bootstrap, args.messages, value)
                result.update(consume(bootstrap, args.messages, len(value)))
                result.update(round_trips(bootstrap, value))
            finally:
                process.terminate()
                process.wait(30)
            print(f"run {run}: {json.dumps(result)}", flush=True)
            results.append(result)
    keys = results[0].keys()
    print("median:", json.dumps({k: statistics.median(r[k] for r in results if r[k] is not None)
                                 for k in keys if any(r[k] is not None for r in results)}))


if __name__ == "__main__":
    main()
