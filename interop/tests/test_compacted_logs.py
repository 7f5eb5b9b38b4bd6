"""Compacted logs both ways (issue 51, item 4): a compacted topic's partition that `mirrorlog serve`'s cleaner
rewrote, and one Apache Kafka 4.1.2's cleaner rewrote, each read by Kafka's DumpLogSegments and by `mirrorlog
dump`, which agree field for field, batch for batch (offsets with gaps, kept records at their offsets, the batch
headers a cleaner keeps).

Each broker gets the same workload: an idempotent producer writes keys k0..k49 over and over, then deletes
k0..k4 (tombstones) and writes filler keys past them (so that their segment stops being the active one); the cleaner
runs (every 200 ms) until the log holds fewer records than were written and the tombstones' batch carries the
delete horizon the cleaner sets when it first keeps a tombstone (KIP-534: attribute bit 6, the base timestamp
holding it); the broker stops; the tools read its files.
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
DELETED = 5
# About 1.2 MB of filler after the tombstones: past serve's 64 KiB segments and Kafka's 1 MiB one.
FILLER = 1_300
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
    for key in range(DELETED):
        producer.produce(TOPIC, key=f"k{key}".encode(), value=None)
    for index in range(FILLER):
        producer.produce(TOPIC, key=f"f{index % 100}".encode(), value=b"." * VALUE_BYTES)
    producer.flush(30)
    return KEYS * ROUNDS + DELETED + FILLER


def create_topic(bootstrap: str, configs: dict):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1, config={"cleanup.policy": "compact", **configs})])[TOPIC].result(30)


def records_in(directory: Path) -> int:
    return sum(len(batch["records"]) for batch in bw.mirrorlog_json("dump", directory))


def tombstone_batches(directory: Path) -> list:
    """The batches holding a tombstone (a record without a value)."""
    return [
        batch
        for batch in bw.mirrorlog_json("dump", directory)
        if any(record["value"] is None for record in batch["records"])
    ]


def compacted_with_horizons(directory: Path, written: int) -> bool:
    """Fewer records than were written, and a cleaner kept the tombstones and set their batches' horizon."""
    if records_in(directory) >= written:
        return False
    batches = tombstone_batches(directory)
    return bool(batches) and all(batch["attributes"]["raw"] & 0x40 for batch in batches)


def wait_until_compacted(directory: Path, written: int):
    """Until the partition is compacted, its tombstones' horizon set (read-only inspection of a running broker's
    files: a dump that meets a segment the cleaner is replacing fails, and is tried again)."""
    deadline = time.monotonic() + DEADLINE_S
    last_failure = None
    while True:
        try:
            if compacted_with_horizons(directory, written):
                return
        except AssertionError as failure:
            last_failure = failure
        assert time.monotonic() < deadline, (
            f"{directory}: not compacted within {DEADLINE_S} s; last dump failure: {last_failure}"
        )
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
    assert len(last_round) == KEYS - DELETED, f"{writer}: {len(last_round)} of the last round's records"
    # The deleted keys' tombstones stay (delete.retention.ms is a day), each batch with the horizon the first
    # cleaning set — about a day after that cleaning — and its records' own timestamps.
    holders = tombstone_batches(directory)
    deleted = sorted(bw.text(r["key"]) for b in holders for r in b["records"] if r["value"] is None)
    assert deleted == [f"k{key}" for key in range(DELETED)], deleted
    for batch in holders:
        horizon = batch["base_timestamp"]
        assert batch["attributes"]["raw"] & 0x40, batch
        assert 86_000_000 < horizon - time.time() * 1000 < 86_400_000, batch
        assert all(r["timestamp"] < horizon - 86_000_000 for r in batch["records"]), batch
