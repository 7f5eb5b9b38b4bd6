"""Bytes both ways, serving: Apache Kafka 4.1.2 serves partition directories that mirrorlog's storage-fs wrote.

The topics are created in Kafka (so KRaft knows them and their topic ids), Kafka is stopped, serve's files go
into the partition directories beside Kafka's `partition.metadata` (which carries the topic id), and Kafka is
started again (both_ways.run_round_trip):

- `from-serve`: only serve's `.log` segments. Without `.kafka_cleanshutdown` Kafka recovers every segment from
  offset 0 (its recovery point): CRCs checked, offset and time indexes, transaction index, leader-epoch cache and
  producer state rebuilt from the batches.
- `from-serve-trusted`: every Kafka-format file serve wrote (`.log`, `.index`, `.timeindex`, `.txnindex`,
  `.snapshot`) and the recovery point moved to the log end: Kafka sanity-checks serve's indexes, recovers nothing
  and loads producer state from serve's snapshot — what it does with its own files after a clean shutdown.
- `barrier`: the `.log` segments of a partition holding a MIRROR_PID_RESET barrier (control type 7, producer id -1)
  between two workloads.
- `forged`: the same log with the type-7 batch given a producer id (never written by mirrorlog): Kafka's start
  before the one that serves fails on it.
"""

import json
from functools import lru_cache
from pathlib import Path

import pytest

import both_ways as bw

PLACED = ["from-serve", "from-serve-trusted", "barrier"]


def serve_batches(round_trip, topic):
    return bw.mirrorlog_json("dump", round_trip.placed[topic])


def end_of(round_trip, topic):
    return serve_batches(round_trip, topic)[-1]["last_offset"] + 1


@pytest.mark.parametrize("topic", PLACED)
def test_kafka_loads_serves_segments_without_changing_a_byte(round_trip, topic):
    node = round_trip.node
    end = end_of(round_trip, topic)
    serve_segments = bw.kafka_files(round_trip.placed[topic], ".log")
    kafka_segments = bw.kafka_files(node.partition_dir(topic), ".log")
    assert [s.name for s in kafka_segments[: len(serve_segments)]] == [s.name for s in serve_segments]
    for ours, theirs in zip(serve_segments, kafka_segments):
        data = ours.read_bytes()
        # The last segment is Kafka's active one: the continuation test below may have appended to it.
        assert theirs.read_bytes()[: len(data)] == data, ours.name
    assert round_trip.served_watermarks[topic] == {"high": end, "stable": end}
    output = node.output()
    for complaint in ("Corruption found", "Found invalid offset", "Found a corrupted index file"):
        assert not [line for line in output.splitlines() if complaint in line and f"{topic}-0" in line], output


def expected_committed(round_trip, topic):
    return bw.committed_data(serve_batches(round_trip, topic))


@pytest.mark.parametrize("client", ["librdkafka", "kafka-python"])
@pytest.mark.parametrize("topic", PLACED)
def test_read_committed_consumers_read_every_committed_record(round_trip, topic, client):
    """Offsets, keys, values and headers (values included: DumpLogSegments prints only header keys) of every
    record a read_committed consumer gets from Kafka are those of mirrorlog dump's committed records."""
    expected = expected_committed(round_trip, topic)
    consume = bw.consume_librdkafka if client == "librdkafka" else bw.consume_kafka_python
    got = consume(round_trip.node.bootstrap, topic, "read_committed", len(expected))
    end = end_of(round_trip, topic)
    assert [r for r in got if r["offset"] < end] == expected


@pytest.mark.parametrize("topic", PLACED)
def test_read_uncommitted_consumers_read_aborted_records_too(round_trip, topic):
    expected = bw.all_data(serve_batches(round_trip, topic))
    assert len(expected) > len(expected_committed(round_trip, topic))
    got = bw.consume_librdkafka(round_trip.node.bootstrap, topic, "read_uncommitted", len(expected))
    end = end_of(round_trip, topic)
    assert [r for r in got if r["offset"] < end] == expected


def test_kafkas_java_consumer_reads_across_the_barrier(round_trip, serve_written):
    expected = expected_committed(round_trip, "barrier")
    assert expected[0]["offset"] < serve_written.barrier_offset < expected[-1]["offset"]
    got = bw.consume_java(round_trip.node.libs, round_trip.node.bootstrap, "barrier", "read_committed", len(expected))
    assert got == [(r["offset"], bw.text(r["value"])) for r in expected]


def kafka_rebuilt(round_trip, topic, suffix):
    """{file name: entries} of the files Kafka had in the partition right after its restart."""
    return {
        path.rsplit("/", 1)[1]: bw.dump_lines(section)
        for path, section in round_trip.rebuilt[topic].items()
        if path.endswith(suffix)
    }


@lru_cache(maxsize=None)
def dump_directory(directory: Path) -> dict:
    """DumpLogSegments over every Kafka-format file of a serve directory (once: a JVM start costs a second)."""
    return bw.dump_log_segments(bw.kafka_files(directory, *bw.KAFKA_FILE_SUFFIXES), "--deep-iteration")


def entries(directory: Path, suffix: str) -> dict:
    """{file name: entries} of a serve directory's files with this suffix, as DumpLogSegments reads them."""
    dump = dump_directory(directory)
    return {path.name: bw.dump_lines(dump[str(path)]) for path in bw.kafka_files(directory, suffix)}


def serve_side(round_trip, topic, suffix):
    return entries(round_trip.placed[topic], suffix)


RECOVERED = ["from-serve", "barrier"]


@pytest.mark.parametrize("suffix", [".index", ".txnindex"])
def test_kafka_rebuilds_the_offset_and_transaction_indexes_serve_wrote(round_trip, suffix):
    """From serve's segments alone Kafka builds the offset and transaction indexes serve wrote, entry for entry
    (index.interval.bytes is 512 on both sides); the trusted copy keeps serve's own."""
    for topic in RECOVERED:
        ours = serve_side(round_trip, topic, suffix)
        assert any(ours.values()), f"serve wrote no {suffix} entry in {topic}"
        assert kafka_rebuilt(round_trip, topic, suffix) == ours, topic
    assert kafka_rebuilt(round_trip, "from-serve-trusted", suffix) == serve_side(round_trip, "from-serve", suffix)


# Partitions serve wrote in more than one run (closed, then opened again): each close ends the active segment's time
# index with its largest timestamp, an entry that stays in the middle of the index once the segment grows again —
# as Kafka's own close and recovery leave it (LogSegment.close, LogSegment.recover). Kafka rebuilding the segment
# from scratch has no reason for it.
RESTARTS = {"from-serve": 0, "barrier": 1}


def test_kafka_rebuilds_the_time_indexes_serve_wrote(round_trip):
    """Every time-index entry Kafka rebuilds from serve's segments is in serve's own index, ending with the same
    entry (each segment's largest timestamp); serve's only extra entries are the ones its closes left, one per
    restart of a partition written in more than one run."""
    differences = {}
    for topic in RECOVERED:
        ours, kafka = serve_side(round_trip, topic, ".timeindex"), kafka_rebuilt(round_trip, topic, ".timeindex")
        for name in sorted(set(ours) | set(kafka)):
            serve_entries, kafka_entries = ours.get(name) or [], kafka.get(name) or []
            extra = [entry for entry in serve_entries if entry not in kafka_entries]
            if (
                any(entry not in serve_entries for entry in kafka_entries)
                or serve_entries[-1:] != kafka_entries[-1:]
                or len(extra) > RESTARTS[topic]
            ):
                differences[f"{topic}/{name}"] = {"serve": serve_entries, "kafka": kafka_entries}
    assert differences == {}


def first_offset_at_or_after(batches, timestamp):
    """ListOffsets' answer for a timestamp: the first record (control records too) whose timestamp is at least it."""
    return min(r["offset"] for b in batches for r in b["records"] if r["timestamp"] >= timestamp)


def test_kafka_finds_offsets_by_timestamp_with_serves_time_index(round_trip, serve_written):
    from confluent_kafka import Consumer, TopicPartition

    segments = bw.kafka_files(serve_written.mixed, ".log")
    first = bw.mirrorlog_json("dump", segments[0])
    largest = max(b["max_timestamp"] for b in first)
    indexed = entries(serve_written.mixed, ".timeindex")[segments[0].with_suffix(".timeindex").name]
    # As Kafka's: a rolled segment's time index ends with the segment's largest timestamp.
    assert indexed and int(indexed[-1]["timestamp"]) == largest, indexed
    expected = first_offset_at_or_after(bw.mirrorlog_json("dump", serve_written.mixed), largest)
    answers = {}
    consumer = Consumer({"bootstrap.servers": round_trip.node.bootstrap, "group.id": "times"})
    try:
        for topic in ("from-serve", "from-serve-trusted"):
            answers[topic] = consumer.offsets_for_times([TopicPartition(topic, 0, largest)], 30)[0].offset
    finally:
        consumer.close()
    assert answers == {"from-serve": expected, "from-serve-trusted": expected}, answers


def test_kafka_rebuilds_the_producer_state_serves_snapshot_holds(round_trip):
    end = end_of(round_trip, "from-serve")
    name = f"{end:020d}.snapshot"
    ours = serve_side(round_trip, "from-serve", ".snapshot")
    assert ours[name], "serve's snapshot at the log end holds the producers"
    assert kafka_rebuilt(round_trip, "from-serve", ".snapshot")[name] == ours[name]
    assert kafka_rebuilt(round_trip, "from-serve-trusted", ".snapshot")[name] == ours[name]


def test_kafka_keeps_the_producers_from_before_the_barrier(round_trip, serve_written):
    """The one thing Kafka does not do with a barrier: reset producer state. Its state after loading the barrier
    log is serve's state before the barrier (first serve run's snapshot) plus serve's after it; `mirrorlog
    replay` (like serve) drops the producers from before."""
    end = end_of(round_trip, "barrier")
    before_snapshot = f"{serve_written.barrier_offset:020d}.snapshot"
    before = {e["producerId"]: e for e in entries(serve_written.barrier_before, ".snapshot")[before_snapshot]}
    after = {e["producerId"]: e for e in serve_side(round_trip, "barrier", ".snapshot")[f"{end:020d}.snapshot"]}
    assert before and after and not set(before) & set(after)
    kafka = {e["producerId"]: e for e in kafka_rebuilt(round_trip, "barrier", ".snapshot")[f"{end:020d}.snapshot"]}
    assert kafka == {**before, **after}
    replay = bw.mirrorlog("replay", "--json", serve_written.barrier).stdout
    assert sorted(json.loads(replay)["producers"]) == sorted(after)


def test_a_type_7_control_batch_with_a_producer_id_stops_kafka(round_trip):
    """Kafka rebuilds producer state from every batch that has a producer id, and decodes a control batch's record
    as an end-transaction marker; a type-7 record there is fatal to the whole broker at start-up. mirrorlog's
    barrier has producer id -1, so Kafka never decodes it."""
    error = round_trip.forged_start_error
    assert "Kafka exited with 1 while starting" in error, error[-3000:]
    assert "Invalid control record type for end transaction marker UNKNOWN" in error, error[-3000:]
    assert "Error starting LogManager" in error, error[-3000:]


@pytest.mark.parametrize("topic", ["from-serve-trusted", "barrier"])
def test_kafka_continues_the_logs_it_was_given(round_trip, topic):
    """New producers write after serve's batches (at the leader epoch Kafka is at, serve's batches keeping 0), a
    read_committed consumer gets them, and DumpLogSegments and mirrorlog dump still agree on the whole segment.
    Runs last: it writes to the partitions the tests above read."""
    node = round_trip.node
    end = end_of(round_trip, topic)
    added = bw.small_workload(node.bootstrap, topic, f"kafka-after-{topic}")
    expected = [p.as_hex() for p in added if p.fate != "aborted"]
    got = bw.consume_librdkafka(node.bootstrap, topic, "read_committed", len(expected_committed(round_trip, topic))
                                + len(expected))
    assert [{k: v for k, v in r.items() if k != "offset"} for r in got if r["offset"] >= end] == expected
    segment = bw.kafka_files(node.partition_dir(topic), ".log")[-1]
    kafka = bw.kafka_batches(bw.dump_log_segments([segment], "--deep-iteration", "--print-data-log")[str(segment)])
    ours = [bw.as_dump_batch(b) for b in bw.mirrorlog_json("dump", segment)]
    assert bw.compare_batches(kafka, ours, segment.name) == []
    epochs = {(int(b["baseOffset"]) >= end, b["partitionLeaderEpoch"]) for b in kafka}
    assert {epoch for new, epoch in epochs if not new} == {"0"}, epochs
    assert all(int(epoch) >= 0 for new, epoch in epochs if new), epochs
