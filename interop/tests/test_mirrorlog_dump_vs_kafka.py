"""Bytes both ways, reading: Kafka's DumpLogSegments and `mirrorlog dump`/`replay` over the same partition
directories agree field for field, whoever wrote them.

- serve-written: `mirrorlog serve` (storage-fs) stored what real clients sent — librdkafka and kafka-python, every
  codec, keys, null keys, null and empty values, headers, idempotent producers, transactions committed and
  aborted — plus a partition holding a MIRROR_PID_RESET barrier (both_ways.build_serve_dirs).
- kafka-written: Apache Kafka 4.1.2 stored the same workload, rolled into several segments, plus a LogAppendTime
  topic (both_ways.run_round_trip, first start).

Nothing is normalised: both tools read the same files. mirrorlog's JSON is only put in DumpLogSegments' terms
(both_ways.as_dump_batch): field names, `endTxnMarker` for control types 0/1 and `controlType: UNKNOWN(7)` for the
barrier, keys and payloads decoded from hex as UTF-8 (Kafka's StringDecoder), the record `sequence` and the batch
`deleteHorizonMs` derived as Kafka derives them (mirrorlog's JSON does not print them). Known differences of the
text mode were fixed; docs/kafka-differences.md lists the intended differences.
"""

import json
import re
from dataclasses import dataclass
from functools import lru_cache

import pytest

import both_ways as bw


@dataclass
class Written:
    """Partition directories one writer left, and what the clients sent to them (None: not recorded)."""

    writer: str
    partitions: dict  # name -> directory
    produced: dict  # name -> [Produced]
    kafka_watermarks: dict  # name -> {"high", "stable"} (Kafka-written only)


@pytest.fixture(params=["serve", "kafka"], ids=["serve-written", "kafka-written"])
def written(request):
    if request.param == "serve":
        serve = request.getfixturevalue("serve_written")
        return Written(
            "serve",
            {"mixed": serve.mixed, "barrier": serve.barrier},
            {"mixed": serve.produced, "barrier": serve.before_barrier + serve.after_barrier},
            {},
        )
    trip = request.getfixturevalue("round_trip")
    names = {"mixed": "kafka-mixed", "logappend": "kafka-logappend", "java-tv2": "kafka-java-tv2"}
    return Written(
        "kafka",
        {name: trip.kafka_written[topic] for name, topic in names.items()},
        {name: trip.kafka_produced[topic] for name, topic in names.items()},
        {name: trip.kafka_watermarks[topic] for name, topic in names.items()},
    )


def all_files(written, *suffixes):
    return [f for directory in written.partitions.values() for f in bw.kafka_files(directory, *suffixes)]


# One DumpLogSegments run per writer and kind of run: a JVM start costs about a second.
@lru_cache(maxsize=None)
def kafka_dump(files: tuple, flags: tuple) -> dict:
    return bw.dump_log_segments(files, *flags)


def full_dump(written) -> dict:
    files = tuple(all_files(written, *bw.KAFKA_FILE_SUFFIXES))
    return kafka_dump(files, ("--deep-iteration", "--print-data-log"))


def index_files(written):
    return tuple(all_files(written, ".index", ".timeindex"))


# -- the batches ------------------------------------------------------------------------------------------------


def test_json_dump_agrees_with_dump_log_segments_field_for_field(written):
    dump = full_dump(written)
    assert "Non-consecutive offsets" not in dump["stderr"], dump["stderr"]
    problems = []
    compared = 0
    for name, directory in written.partitions.items():
        whole = bw.mirrorlog_json("dump", directory)
        by_segment = []
        for segment in bw.kafka_files(directory, ".log"):
            section = dump[str(segment)]
            assert "invalid bytes at the end" not in section, section
            kafka = bw.kafka_batches(section)
            ours = bw.mirrorlog_json("dump", segment)
            by_segment += ours
            problems += bw.compare_batches(kafka, [bw.as_dump_batch(b) for b in ours], f"{name}/{segment.name}")
            compared += len(kafka)
        # The directory dump is its segments' dumps, in offset order.
        assert whole == by_segment, name
    assert compared > 0
    assert not problems, "\n".join(problems)


def test_the_logs_hold_what_the_clients_sent(written):
    for name, produced in written.produced.items():
        batches = bw.mirrorlog_json("dump", written.partitions[name])
        strip = [{k: v for k, v in r.items() if k != "offset"} for r in bw.all_data(batches)]
        assert strip == [p.as_hex() for p in produced], name
        committed = [{k: v for k, v in r.items() if k != "offset"} for r in bw.committed_data(batches)]
        assert committed == [p.as_hex() for p in produced if p.fate != "aborted"], name
    mixed = bw.mirrorlog_json("dump", written.partitions["mixed"])
    codecs = {b["attributes"]["compression"] for b in mixed if not b["attributes"]["is_control"]}
    assert codecs == set(bw.CODECS), codecs
    markers = [b["control"]["type_name"] for b in mixed if b["attributes"]["is_control"]]
    assert markers == ["COMMIT", "ABORT", "COMMIT", "ABORT"], markers


def test_the_barrier_is_control_type_7_to_both(serve_written):
    """DumpLogSegments prints the barrier as an unknown control type; mirrorlog decodes it."""
    segment = bw.kafka_files(serve_written.barrier, ".log")[-1]
    kafka = bw.kafka_batches(bw.dump_log_segments([segment], "--deep-iteration")[str(segment)])
    barrier = next(b for b in kafka if b["baseOffset"] == str(serve_written.barrier_offset))
    assert barrier["isControl"] == "true" and barrier["producerId"] == "-1", barrier
    assert barrier["records"][0]["controlType"] == "UNKNOWN(7)", barrier
    ours = next(b for b in bw.mirrorlog_json("dump", segment) if b["base_offset"] == serve_written.barrier_offset)
    assert ours["control"]["type_name"] == "MIRROR_PID_RESET"
    assert ours["control"]["value_fields"]["source_cluster_id"] == "source-cluster-A"


def test_serves_transaction_state_log_is_its_own_record_format(serve_written):
    """An intended difference (ADR 0012): serve's `__transaction_state` partition holds valid Kafka batches whose
    records are the coordinator's own format, which Kafka's transaction-log decoder does not read. Moving a serve
    directory to Kafka moves the partitions' data, not the coordinator's state."""
    segments = bw.kafka_files(serve_written.mixed.parent / "__transaction_state-0", ".log")
    assert segments
    dump = bw.dump_log_segments(segments, "--deep-iteration", "--transaction-log-decoder")
    batches = [b for segment in segments for b in bw.kafka_batches(dump[str(segment)])]
    assert batches and all(b["isvalid"] == "true" for b in batches)
    records = [r for b in batches for r in b["records"]]
    assert all("skipping" in r.get("key", "") for r in records), records[:3]


# -- the text mode ------------------------------------------------------------------------------------------------


def text_lines(written):
    """(Kafka's lines, mirrorlog's lines) of every segment's text dump."""
    dump = full_dump(written)
    pairs = []
    for directory in written.partitions.values():
        for segment in bw.kafka_files(directory, ".log"):
            ours = bw.mirrorlog("dump", segment).stdout.splitlines()
            assert ours[0] == f"Dumping {segment}", ours[0]
            pairs.append((dump[str(segment)].splitlines(), ours[1:]))
    return pairs


def test_text_dump_batch_lines_match_dump_log_segments(written):
    for kafka, ours in text_lines(written):
        assert [line for line in ours if not line.startswith("|")] == [
            line for line in kafka if not line.startswith("|")
        ]


HEADER_KEYS = re.compile(r"headerKeys: \[([^\]]*)\]")


def known_text_differences_removed(line: str) -> str:
    """mirrorlog's text record line with the barrier line (an intended difference: mirrorlog decodes control type
    7) written as Kafka writes it."""
    return re.sub(r" MIRROR_PID_RESET source_cluster_id=\S* writer_cluster_id=\S*$", " controlType: UNKNOWN(7)", line)


def test_text_dump_record_lines_match_dump_log_segments_but_for_the_known_differences(written):
    for kafka, ours in text_lines(written):
        assert [known_text_differences_removed(line) for line in ours] == kafka


def test_text_dump_joins_header_keys_as_dump_log_segments_does(written):
    for kafka, ours in text_lines(written):
        assert [HEADER_KEYS.findall(line) for line in ours] == [HEADER_KEYS.findall(line) for line in kafka]


def test_text_dump_leaves_out_null_keys_and_values_as_dump_log_segments_does(written):
    for kafka, ours in text_lines(written):
        nulls = [line for line in ours if " keySize: -1 " in line or " valueSize: -1 " in line]
        assert nulls, "the workload has null keys and values"
        assert [line for line in ours if line in nulls] == [
            line for line in kafka if " keySize: -1 " in line or " valueSize: -1 " in line
        ]


# -- producer snapshots and transaction indexes ------------------------------------------------------------------


def test_snapshot_json_dump_agrees_with_dump_log_segments(written):
    dump = full_dump(written)
    snapshots = all_files(written, ".snapshot")
    assert snapshots
    for snapshot in snapshots:
        kafka = bw.dump_lines(dump[str(snapshot)])
        ours = [bw.as_dump_snapshot_entry(e) for e in bw.mirrorlog_json("dump", snapshot)]
        assert ours == kafka, snapshot.name
    assert "Corrupt" not in dump["stderr"], dump["stderr"]


def test_snapshot_text_dump_matches_dump_log_segments(written):
    dump = full_dump(written)
    for snapshot in all_files(written, ".snapshot"):
        ours = bw.mirrorlog("dump", snapshot).stdout.splitlines()[1:]
        assert ours == dump[str(snapshot)].splitlines(), snapshot.name


def test_txn_index_dumps_agree_with_dump_log_segments(written):
    dump = full_dump(written)
    indexes = all_files(written, ".txnindex")
    assert indexes, "the workload aborts transactions"
    for index in indexes:
        kafka = dump[str(index)].splitlines()
        assert [bw.as_dump_txn_entry(e) for e in bw.mirrorlog_json("dump", index)] == bw.dump_lines(dump[str(index)])
        assert bw.mirrorlog("dump", index).stdout.splitlines()[1:] == kafka, index.name


# -- offset and time indexes ----------------------------------------------------------------------------------------


def test_indexes_pass_kafkas_sanity_check_and_verification(written):
    files = index_files(written)
    sanity = kafka_dump(files, ("--index-sanity-check",))
    for path in files:
        assert sanity[str(path)].endswith("passed sanity check.") or sanity[str(path)].endswith("is empty."), (
            path, sanity[str(path)])
    assert sanity["stderr"] == "", sanity["stderr"]
    verified = kafka_dump(files, ("--verify-index-only",))
    # Mismatched offsets, timestamps or positions would be listed on stderr.
    assert verified["stderr"] == "", verified["stderr"]
    assert any(bw.dump_lines(full_dump(written)[str(path)]) for path in files), "no index has an entry"


def test_index_entries_point_at_batches_mirrorlog_lists(written):
    dump = full_dump(written)
    for path in index_files(written):
        batches = bw.mirrorlog_json("dump", path.with_suffix(".log"))
        by_position = {b["file_offset"]: b for b in batches}
        by_last_offset = {b["last_offset"]: b for b in batches}
        for entry in bw.dump_lines(dump[str(path)]):
            if path.suffix == ".index":
                batch = by_position[int(entry["position"])]
                assert batch["last_offset"] == int(entry["offset"]), (path.name, entry)
            else:
                # Kafka's time index: (the largest timestamp so far, the last offset of the batch holding it).
                batch = by_last_offset[int(entry["offset"])]
                assert batch["max_timestamp"] == int(entry["timestamp"]), (path.name, entry)
                earlier = [b["max_timestamp"] for b in batches if b["last_offset"] < batch["last_offset"]]
                assert all(t <= batch["max_timestamp"] for t in earlier), (path.name, entry)


def test_mirrorlog_dump_prints_offset_and_time_indexes(written):
    dump = full_dump(written)
    for path in index_files(written):
        done = bw.mirrorlog("dump", path, check=False)
        assert done.returncode == 0, (path.name, done.stderr)
        assert done.stdout.splitlines()[1:] == dump[str(path)].splitlines(), path.name


# -- producer state ------------------------------------------------------------------------------------------------


# What `mirrorlog replay --json` reports of a producer, in the snapshot's terms.
SNAPSHOT_FIELDS = ("producerEpoch", "lastSequence", "lastOffset", "coordinatorEpoch", "currentTxnFirstOffset")


def test_replay_agrees_with_the_producer_snapshot_at_the_log_end(written):
    """`mirrorlog replay` rebuilds producer state from the segments; the writer's own snapshot at the log end (taken
    at its clean shutdown), as DumpLogSegments reads it, and its transaction indexes must say the same."""
    dump = full_dump(written)
    for name, directory in written.partitions.items():
        replay = bw.mirrorlog("replay", "--json", directory)
        state = json.loads(replay.stdout)
        snapshots = bw.kafka_files(directory, ".snapshot")
        at_end = [s for s in snapshots if int(s.stem) == state["log_end_offset"]]
        assert at_end, (name, state["log_end_offset"], [s.name for s in snapshots])
        # A producer without batch metadata (its epoch bumped by a transaction version 2 marker) has no last
        # sequence or offset: Kafka prints neither, and means -1 by it.
        kafka = {
            int(e["producerId"]): {field: e.get(field, "-1") for field in SNAPSHOT_FIELDS}
            for e in bw.dump_lines(dump[str(at_end[0])])
        }
        ours = {
            int(pid): {
                "producerEpoch": str(p["producer_epoch"]),
                "lastSequence": str(p["last_sequence"]),
                "lastOffset": str(p["last_data_offset"]),
                "coordinatorEpoch": str(p["coordinator_epoch"]),
                "currentTxnFirstOffset": "OptionalLong.empty" if p["ongoing_txn_first_offset"] is None
                else f"OptionalLong[{p['ongoing_txn_first_offset']}]",
            }
            for pid, p in state["producers"].items()
        }
        assert ours == kafka, name
        aborted = [
            {"producer_id": int(e["producerId"]), "first_offset": int(e["firstOffset"]),
             "last_offset": int(e["lastOffset"])}
            for index in bw.kafka_files(directory, ".txnindex")
            for e in bw.dump_lines(dump[str(index)])
        ]
        assert state["aborted_transactions"] == aborted, name
        assert state["ongoing_transactions"] == [] and state["last_stable_offset"] == state["log_end_offset"]
        if name in written.kafka_watermarks:
            marks = written.kafka_watermarks[name]
            assert (state["log_end_offset"], state["last_stable_offset"]) == (marks["high"], marks["stable"]), name
