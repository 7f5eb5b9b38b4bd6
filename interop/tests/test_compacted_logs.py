"""Compacted logs both ways (issue 51, item 4): a compacted topic's partition that `mirrorlog serve`'s cleaner
rewrote, and one Apache Kafka 4.1.2's cleaner rewrote, each read by Kafka's DumpLogSegments and by `mirrorlog
dump`, which agree field for field, batch for batch (offsets with gaps, kept records at their offsets, the batch
headers a cleaner keeps).

Each broker gets the same workload: an idempotent producer writes keys k0..k49 over and over; the cleaner runs
(every 200 ms) until the log holds fewer records than were written; the broker stops; the tools read its files.
"""

import os
import time
from pathlib import Path

import pytest

import both_ways as bw
from both_ways import Serve
from conftest import STARTED, TIMINGS, require_jars_and_binary
from kafka_node import KafkaNode

TOPIC = "compacted"
KEYS = 50
ROUNDS = 40
VALUE_BYTES = 900
DEADLINE_S = 90


def produce(bootstrap: str) -> int:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20})
    for round_number in range(ROUNDS):
        for key in range(KEYS):
            value = f"round {round_number} ".encode() + b"." * VALUE_BYTES
            producer.produce(TOPIC, key=f"k{key}".encode(), value=value)
        producer.flush(30)
    return KEYS * ROUNDS


def create_topic(bootstrap: str, configs: dict):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1, config={"cleanup.policy": "compact", **configs})])[TOPIC].result(30)


def records_in(directory: Path) -> int:
    return sum(len(batch["records"]) for batch in bw.mirrorlog_json("dump", directory))


def wait_until_compacted(directory: Path, written: int):
    """Until the partition's files hold fewer records than were written (read-only inspection)."""
    deadline = time.monotonic() + DEADLINE_S
    while records_in(directory) >= written:
        assert time.monotonic() < deadline, f"{directory}: not compacted within {DEADLINE_S} s"
        time.sleep(0.5)


@pytest.fixture(scope="module")
def compacted(tmp_path_factory):
    """{writer: partition directory} once each broker compacted and stopped."""
    require_jars_and_binary()
    root = tmp_path_factory.mktemp("compacted")
    out = {}
    started = time.monotonic()
    with Serve(root / "serve", 64 * 1024, 4096, "--log-cleaner-backoff-ms", "200") as serve:
        create_topic(serve.bootstrap, {})
        written = produce(serve.bootstrap)
        out["serve"] = root / "serve" / f"{TOPIC}-0"
        wait_until_compacted(out["serve"], written)
    TIMINGS["compacted logs: serve wrote and compacted"] = time.monotonic() - started
    started = time.monotonic()
    node = KafkaNode(root / "kafka", properties={"log.cleaner.backoff.ms": 200})
    node.start()
    STARTED.append(node)
    try:
        # Kafka's smallest segment.bytes is 1 MiB: 2,000 records of about 1 KiB fill two segments and start a third.
        create_topic(node.bootstrap, {"segment.bytes": str(1 << 20)})
        written = produce(node.bootstrap)
        out["kafka"] = node.partition_dir(TOPIC)
        wait_until_compacted(out["kafka"], written)
    finally:
        node.stop()
    TIMINGS["compacted logs: Kafka wrote and compacted"] = time.monotonic() - started
    return out


@pytest.mark.parametrize("writer", ["serve", "kafka"])
def test_a_compacted_partition_reads_the_same_in_dump_log_segments_and_mirrorlog_dump(compacted, writer):
    directory = compacted[writer]
    segments = bw.kafka_files(directory, ".log")
    dump = bw.dump_log_segments(segments, "--deep-iteration", "--print-data-log")
    problems, compared = [], 0
    for segment in segments:
        section = dump[str(segment)]
        assert "invalid bytes at the end" not in section, section
        kafka = bw.kafka_batches(section)
        ours = bw.mirrorlog_json("dump", segment)
        problems += bw.compare_batches(kafka, [bw.as_dump_batch(b) for b in ours], f"{writer}/{segment.name}")
        compared += len(kafka)
    assert compared > 0
    assert not problems, "\n".join(problems[:20])
    # Compacted: offsets have gaps, and each key's last record (round 39) is there.
    batches = bw.mirrorlog_json("dump", directory)
    offsets = [record["offset"] for batch in batches for record in batch["records"]]
    assert len(offsets) < KEYS * ROUNDS and offsets == sorted(offsets)
    last_round = [
        r for b in batches for r in b["records"] if (bw.text(r["value"]) or "").startswith(f"round {ROUNDS - 1} ")
    ]
    assert len(last_round) == KEYS, f"{writer}: {len(last_round)} of the last round's records"
