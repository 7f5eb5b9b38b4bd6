"""Helpers of the "bytes both ways" tests: partition directories written by `mirrorlog serve` and by Apache Kafka,
read by Kafka's `DumpLogSegments` and by `mirrorlog dump`/`replay`, and one workload of real clients for both.

Kafka's tool is the reference, so a mirrorlog answer is turned into the fields DumpLogSegments prints, named as it
names them (`baseOffset`, `producerEpoch`, `compresscodec`, ...), and the two are compared as dicts: a difference
shows the field by its Kafka name.

`build_serve_dirs` and `run_round_trip` make the directories (conftest.py turns them into session fixtures);
`produce_workload` and `small_workload` are what the clients send; `consume_*` read partition 0 back with
librdkafka, kafka-python and Kafka's own Java consumer.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import struct
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from kafka_node import parse_dump_fields, parse_dump_log_segments, run_kafka_tool

BIN_ENV = "MIRRORLOG_BIN"
REPOSITORY = Path(__file__).resolve().parents[2]
# A MIRROR_PID_RESET barrier (control type 7, producer id -1, source cluster "source-cluster-A", no writer tag),
# one batch of the shared test vectors (its manifest entry `control_mirror_pid_reset` lists every field).
BARRIER_BATCH = REPOSITORY / "record-format/tests/data/kafka-batches/control/control_mirror_pid_reset.bin"

# Kafka's control record types (ControlRecordType in 4.1): 0-6. DumpLogSegments names ABORT and COMMIT
# `endTxnMarker`, decodes 2-6 as KRaft records and prints any other type as `controlType: UNKNOWN(<id>)`.
END_TXN_MARKERS = {0: "ABORT", 1: "COMMIT"}


# -- the mirrorlog binary -------------------------------------------------------------------------------------


def mirrorlog(*args, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
    """Runs `$MIRRORLOG_BIN args...` and returns the finished process (text output)."""
    binary = os.environ[BIN_ENV]
    done = subprocess.run(
        [binary, *map(str, args)], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )
    if check and done.returncode != 0:
        raise AssertionError(
            f"mirrorlog {' '.join(map(str, args))} exited with {done.returncode}\n"
            f"--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-4000:]}"
        )
    return done


def mirrorlog_json(*args) -> list[dict]:
    """`mirrorlog <args> --json`: one JSON object per line."""
    return [json.loads(line) for line in mirrorlog(*args, "--json").stdout.splitlines() if line.strip()]


# -- Kafka's DumpLogSegments ----------------------------------------------------------------------------------


def dump_log_segments(files, *flags, libs=None) -> dict[str, str]:
    """One DumpLogSegments run over `files` (any mix of .log, .index, .timeindex, .snapshot, .txnindex): its
    output split by the `Dumping <file>` line that starts each file's part, keyed by the path as given. What the
    tool writes to stderr (index mismatches, non-consecutive offsets, corrupt snapshots) comes under "stderr"."""
    files = [str(f) for f in files]
    assert files, "no file to dump"
    done = run_kafka_tool("kafka.tools.DumpLogSegments", [*flags, "--files", ",".join(files)], libs=libs)
    parts: dict[str, list[str]] = {}
    current = None
    for line in done.stdout.splitlines():
        if line.startswith("Dumping "):
            current = line[len("Dumping ") :]
            parts[current] = []
        elif current is not None:
            parts[current].append(line)
    result = {name: "\n".join(lines) for name, lines in parts.items()}
    result["stderr"] = done.stderr
    return result


def kafka_batches(section: str) -> list[dict]:
    """The batches of one `.log` part of a `--deep-iteration --print-data-log` dump (see parse_dump_log_segments)."""
    return parse_dump_log_segments(section)


# -- mirrorlog's JSON in DumpLogSegments' terms ----------------------------------------------------------------


def text(hex_bytes: str | None) -> str | None:
    """A key or value of mirrorlog's JSON (hex, or null) as DumpLogSegments' StringDecoder prints it (UTF-8)."""
    return None if hex_bytes is None else bytes.fromhex(hex_bytes).decode("utf-8", errors="replace")


def record_sequence(base_sequence: int, offset_delta: int) -> int:
    """Kafka's DefaultRecord.sequence(): the batch's base sequence plus the offset delta, wrapping past
    Integer.MAX_VALUE to 0; -1 when the batch has no sequence."""
    if base_sequence < 0:
        return -1
    return (base_sequence + offset_delta) % 2**31


def as_dump_batch(batch: dict) -> dict:
    """A batch of `mirrorlog dump --json`, as the dict parse_dump_log_segments makes of DumpLogSegments' line for
    it (every value a string, as printed), records included. Nothing is dropped: every field DumpLogSegments
    prints has its counterpart here."""
    attributes = batch["attributes"]
    timestamp_type = attributes["timestamp_type"]
    # Attribute bit 6: the batch carries a delete horizon (its base timestamp), set by the log cleaner only.
    has_delete_horizon = bool(attributes["raw"] & 0x40)
    out = {
        "baseOffset": str(batch["base_offset"]),
        "lastOffset": str(batch["last_offset"]),
        "count": str(batch["record_count"]),
        "baseSequence": str(batch["base_sequence"]),
        "lastSequence": str(batch["last_sequence"]),
        "producerId": str(batch["producer_id"]),
        "producerEpoch": str(batch["producer_epoch"]),
        "partitionLeaderEpoch": str(batch["partition_leader_epoch"]),
        "isTransactional": json.dumps(attributes["is_transactional"]),
        "isControl": json.dumps(attributes["is_control"]),
        "deleteHorizonMs": f"OptionalLong[{batch['base_timestamp']}]" if has_delete_horizon else "OptionalLong.empty",
        "position": str(batch["file_offset"]),
        timestamp_type: str(batch["max_timestamp"]),
        "size": str(batch["size"]),
        "magic": str(batch["magic"]),
        "compresscodec": attributes["compression"],
        "crc": str(batch["crc"]),
        "isvalid": "true",
        "records": [],
    }
    for record in batch["records"]:
        line = {
            "offset": str(record["offset"]),
            timestamp_type: str(record["timestamp"]),
            "keySize": str(record["key_len"]),
            "valueSize": str(record["value_len"]),
            "sequence": str(record_sequence(batch["base_sequence"], record["offset_delta"])),
            "headerKeys": "[" + ",".join(header["key"] for header in record["headers"]) + "]",
        }
        if attributes["is_control"]:
            control_type = batch["control"]["type"]
            if control_type in END_TXN_MARKERS:
                line["endTxnMarker"] = END_TXN_MARKERS[control_type]
                line["coordinatorEpoch"] = str(batch["control"]["value_fields"]["coordinator_epoch"])
            else:
                line["controlType"] = f"UNKNOWN({control_type})"
        else:
            if record["key"] is not None:
                line["key"] = text(record["key"])
            if record["value"] is not None:
                line["payload"] = text(record["value"])
        out["records"].append(line)
    return out


def compare_batches(kafka: list[dict], ours: list[dict], where: str) -> list[str]:
    """Every field on which DumpLogSegments' batches and mirrorlog's (as_dump_batch) differ, one line each."""
    problems = []
    if len(kafka) != len(ours):
        problems.append(f"{where}: DumpLogSegments lists {len(kafka)} batches, mirrorlog {len(ours)}")
    for theirs, mine in zip(kafka, ours):
        at = f"{where} batch {theirs.get('baseOffset')}"
        for name in sorted(set(theirs) | set(mine)):
            if name == "records":
                continue
            if theirs.get(name) != mine.get(name):
                problems.append(f"{at}: {name}: Kafka {theirs.get(name)!r}, mirrorlog {mine.get(name)!r}")
        if len(theirs["records"]) != len(mine["records"]):
            problems.append(f"{at}: Kafka {len(theirs['records'])} records, mirrorlog {len(mine['records'])}")
        for kafka_record, our_record in zip(theirs["records"], mine["records"]):
            for name in sorted(set(kafka_record) | set(our_record)):
                if kafka_record.get(name) != our_record.get(name):
                    problems.append(
                        f"{at} offset {kafka_record.get('offset')}: {name}: Kafka {kafka_record.get(name)!r}, "
                        f"mirrorlog {our_record.get(name)!r}"
                    )
    return problems


def committed_data(batches: list[dict]) -> list[dict]:
    """The data records of mirrorlog JSON batches that a read_committed consumer returns (all of an idempotent
    or plain producer; a transaction's once its COMMIT marker follows, none of an aborted one), in offset order,
    each as {offset, key, value, headers} with hex bytes. A transaction still open at the end is left out."""
    pending: dict[int, list[dict]] = {}
    committed: list[dict] = []
    for batch in batches:
        pid = batch["producer_id"]
        if batch["attributes"]["is_control"]:
            control_type = batch["control"]["type"]
            if control_type == 1:
                committed.extend(pending.pop(pid, []))
            elif control_type == 0:
                pending.pop(pid, None)
            continue
        records = [
            {"offset": r["offset"], "key": r["key"], "value": r["value"],
             "headers": [(h["key"], h["value"]) for h in r["headers"]]}
            for r in batch["records"]
        ]
        if batch["attributes"]["is_transactional"]:
            pending.setdefault(pid, []).extend(records)
        else:
            committed.extend(records)
    return sorted(committed, key=lambda r: r["offset"])


def all_data(batches: list[dict]) -> list[dict]:
    """Every data record (what read_uncommitted returns), in offset order, in committed_data's form."""
    return [
        {"offset": r["offset"], "key": r["key"], "value": r["value"],
         "headers": [(h["key"], h["value"]) for h in r["headers"]]}
        for batch in batches
        if not batch["attributes"]["is_control"]
        for r in batch["records"]
    ]


def dump_lines(section: str) -> list[dict]:
    """The `name: value` lines of a snapshot, txn-index, offset-index or time-index part of a DumpLogSegments
    run, each as a dict of strings (lines without a field, like "... passed sanity check.", are left out)."""
    return [parse_dump_fields(line) for line in section.splitlines() if ": " in line]


def decrement_sequence(sequence: int, decrement: int) -> int:
    """Kafka's DefaultRecordBatch.decrementSequence (how a snapshot entry's first sequence is derived)."""
    if sequence < decrement:
        return 2**31 - 1 - (decrement - sequence) + 1
    return sequence - decrement


def as_dump_snapshot_entry(entry: dict) -> dict:
    """An entry of `mirrorlog dump --json` of a producer snapshot as DumpLogSegments prints it. A version-1
    snapshot stores one timestamp and one (last sequence, last offset, offset delta) per producer: Kafka prints
    the timestamp twice (`lastTimestamp`, and `timestamp` of the batch metadata) and derives `firstSequence`."""
    first = entry["current_txn_first_offset"]
    out = {
        "producerId": str(entry["producer_id"]),
        "producerEpoch": str(entry["producer_epoch"]),
        "coordinatorEpoch": str(entry["coordinator_epoch"]),
        "currentTxnFirstOffset": "OptionalLong.empty" if first is None else f"OptionalLong[{first}]",
        "lastTimestamp": str(entry["timestamp"]),
    }
    # Kafka reads batch metadata back only when the last offset is set (a producer whose epoch a transaction
    # marker bumped has none), and prints the sequence fields only then.
    if entry["last_offset"] >= 0:
        out.update({
            "firstSequence": str(decrement_sequence(entry["last_sequence"], entry["offset_delta"])),
            "lastSequence": str(entry["last_sequence"]),
            "lastOffset": str(entry["last_offset"]),
            "offsetDelta": str(entry["offset_delta"]),
            "timestamp": str(entry["timestamp"]),
        })
    return out


def as_dump_txn_entry(entry: dict) -> dict:
    """An entry of `mirrorlog dump --json` of a `.txnindex` as DumpLogSegments prints it."""
    return {
        "version": "0",
        "producerId": str(entry["producer_id"]),
        "firstOffset": str(entry["first_offset"]),
        "lastOffset": str(entry["last_offset"]),
        "lastStableOffset": str(entry["last_stable_offset"]),
    }


def kafka_files(partition_dir: Path, *suffixes: str) -> list[Path]:
    """A partition directory's files with these suffixes (".log", ".index", ...), in name (offset) order."""
    return sorted(p for p in Path(partition_dir).iterdir() if p.suffix in suffixes)


# -- the workload: real clients, every codec, transactions ------------------------------------------------------

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


@dataclass
class Produced:
    """One record a client sent: bytes or None, headers as (key, bytes-or-None), and its fate."""

    key: bytes | None
    value: bytes | None
    headers: list = field(default_factory=list)
    fate: str = "plain"  # "plain" (idempotent), "committed" or "aborted"

    def as_hex(self) -> dict:
        return {
            "key": None if self.key is None else self.key.hex(),
            "value": None if self.value is None else self.value.hex(),
            "headers": [(k, None if v is None else v.hex()) for k, v in self.headers],
        }


def text_value(label: str, size: int = 200) -> bytes:
    """A compressible UTF-8 value (non-ASCII included) of about `size` bytes: kafka-python sends a batch
    uncompressed when compressing does not make it smaller."""
    words = f"{label} wörd über naïve "
    return (words * (size // len(words) + 1))[:size].encode()


def produce_workload(bootstrap: str, topic: str, tag: str) -> list[Produced]:
    """The records both brokers get, in log order, on partition 0 of `topic`: librdkafka (confluent-kafka)
    idempotent producers, one batch per codec (keys, null keys, null and empty values, headers with null and
    empty values); a librdkafka transaction committed and one aborted after delivery; kafka-python idempotent
    producers per codec; a kafka-python transaction committed and one aborted. `tag` goes into the values and the
    transactional ids."""
    from confluent_kafka import Producer
    from kafka import KafkaProducer

    produced: list[Produced] = []

    def sent(error, _message):
        if error is not None:
            raise AssertionError(f"delivery failed: {error}")

    for codec in CODECS:
        producer = Producer(
            {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 100,
             "compression.type": codec, "message.timeout.ms": 60_000}
        )
        records = [
            Produced(f"key-{codec}-0".encode(), text_value(f"{tag}-{codec}-0"),
                     [("codec", codec.encode()), ("null-header", None), ("empty-header", b"")]),
            Produced(f"key-{codec}-1".encode(), text_value(f"{tag}-{codec}-1", 300)),
            Produced(f"key-{codec}-2".encode(), None, [("tombstone", b"yes")]),
            Produced(None, text_value(f"{tag}-{codec}-3", 150)),
            Produced(b"", b"", [("ünïcode-key", "välue".encode())]),
            Produced(f"key-{codec}-5".encode(), text_value(f"{tag}-{codec}-5", 1000)),
        ]
        for record in records:
            producer.produce(topic, value=record.value, key=record.key, partition=0,
                             headers=record.headers or None, on_delivery=sent)
        assert producer.flush(60) == 0
        produced += records
        del producer

    transactional = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"{tag}-librdkafka-txn", "compression.type": "lz4",
         "linger.ms": 20}
    )
    transactional.init_transactions(60)
    transactional.begin_transaction()
    committed = [Produced(b"txn", text_value(f"{tag}-committed-{i}"), [("txn", b"commit")], "committed")
                 for i in range(4)]
    for record in committed:
        transactional.produce(topic, value=record.value, key=record.key, partition=0, headers=record.headers)
    transactional.commit_transaction(60)
    transactional.begin_transaction()
    aborted = [Produced(b"txn", text_value(f"{tag}-aborted-{i}"), [("txn", b"abort")], "aborted")
               for i in range(3)]
    for record in aborted:
        transactional.produce(topic, value=record.value, key=record.key, partition=0, headers=record.headers)
    # Delivered before the abort, so the log holds them (librdkafka purges what it has not sent).
    assert transactional.flush(60) == 0
    transactional.abort_transaction(60)
    produced += committed + aborted
    del transactional

    for codec in CODECS:
        producer = KafkaProducer(
            bootstrap_servers=bootstrap, enable_idempotence=True, acks="all", linger_ms=100,
            compression_type=None if codec == "none" else codec,
        )
        records = [
            Produced(f"kp-{codec}-{i}".encode(), None if i == 1 else text_value(f"{tag}-kp-{codec}-{i}", 400),
                     [("kp", str(i).encode())])
            for i in range(3)
        ]
        for record in records:
            producer.send(topic, value=record.value, key=record.key, partition=0, headers=record.headers)
        producer.flush(60)
        producer.close(10)
        produced += records

    producer = KafkaProducer(
        bootstrap_servers=bootstrap, transactional_id=f"{tag}-kafka-python-txn", compression_type="zstd"
    )
    producer.init_transactions()
    producer.begin_transaction()
    committed = [Produced(None, text_value(f"{tag}-kp-committed-{i}", 300), [], "committed") for i in range(2)]
    for record in committed:
        producer.send(topic, value=record.value, partition=0)
    producer.commit_transaction()
    producer.begin_transaction()
    aborted = [Produced(None, text_value(f"{tag}-kp-aborted", 300), [], "aborted")]
    producer.send(topic, value=aborted[0].value, partition=0)
    producer.flush()
    producer.abort_transaction()
    producer.close(10)
    produced += committed + aborted
    return produced


def small_workload(bootstrap: str, topic: str, tag: str) -> list[Produced]:
    """A short workload (for each side of a barrier): an idempotent librdkafka producer (zstd), then a committed
    and an aborted transaction."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                         "compression.type": "zstd", "linger.ms": 50})
    plain = [Produced(f"after-{i}".encode(), text_value(f"{tag}-after-{i}")) for i in range(3)]
    for record in plain:
        producer.produce(topic, value=record.value, key=record.key, partition=0)
    assert producer.flush(60) == 0
    del producer
    transactional = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{tag}-after-txn"})
    transactional.init_transactions(60)
    transactional.begin_transaction()
    committed = [Produced(None, text_value(f"{tag}-after-committed-{i}"), [], "committed") for i in range(2)]
    for record in committed:
        transactional.produce(topic, value=record.value, partition=0)
    transactional.commit_transaction(60)
    transactional.begin_transaction()
    aborted = [Produced(None, text_value(f"{tag}-after-aborted"), [], "aborted")]
    transactional.produce(topic, value=aborted[0].value, partition=0)
    assert transactional.flush(60) == 0
    transactional.abort_transaction(60)
    del transactional
    return plain + committed + aborted


# -- mirrorlog serve --------------------------------------------------------------------------------------------


class Serve:
    """One `mirrorlog serve --config FILE` process on an ephemeral loopback port (the storage-fs backend with the
    segment size and index interval asked for)."""

    def __init__(self, data_dir: Path, segment_bytes: int, index_interval_bytes: int, *args):
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config = self.data_dir.parent / f"{self.data_dir.name}.toml"
        self.config.write_text(
            f'backend = "fs"\ndata_dir = "{self.data_dir}"\nsegment_bytes = {segment_bytes}\n'
            f"index_interval_bytes = {index_interval_bytes}\n",
            encoding="utf-8",
        )
        self.stderr_path = self.data_dir.parent / f"{self.data_dir.name}.stderr"
        with open(self.stderr_path, "ab") as stderr:
            self.process = subprocess.Popen(
                # Groups form at once, as on the reference Kafka (interop/kafka/kafka_node.py).
                [os.environ[BIN_ENV], "serve", "--listen", "127.0.0.1:0", "--config", str(self.config),
                 "--group-initial-rebalance-delay-ms", "0", *args],
                stdout=subprocess.PIPE,
                stderr=stderr,
                stdin=subprocess.DEVNULL,
            )
        line = self.process.stdout.readline().decode()
        if "listening on" not in line:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"mirrorlog serve did not start: {line!r}\n{self.stderr_path.read_text()}")
        self.bootstrap = line.strip().rsplit(" ", 1)[1]

    def stop(self, timeout: float = 30):
        """SIGTERM; the exit must be a clean one."""
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout)
        self.process.stdout.close()
        assert code == 0, f"mirrorlog serve exited with {code}\n{self.stderr_path.read_text()}"

    def __enter__(self) -> Serve:
        return self

    def __exit__(self, *exc_info):
        if self.process.poll() is None:
            self.stop()


def rebased_barrier(base_offset: int, leader_epoch: int) -> bytes:
    """The barrier batch with another base offset and partition leader epoch: both lie before the part the CRC
    covers (which starts at the attributes), so the batch stays valid."""
    batch = bytearray(BARRIER_BATCH.read_bytes())
    struct.pack_into(">q", batch, 0, base_offset)
    struct.pack_into(">i", batch, 12, leader_epoch)
    return bytes(batch)


def log_end_offset(partition_dir: Path) -> int:
    """The next offset of a partition directory, from `mirrorlog dump --json`."""
    batches = mirrorlog_json("dump", partition_dir)
    return batches[-1]["last_offset"] + 1 if batches else 0


def copy_tree_files(source: Path, target: Path, suffixes=None) -> list[Path]:
    """Copies the files of `source` (only those ending in one of `suffixes`, when given) into `target`."""
    target.mkdir(parents=True, exist_ok=True)
    copied = []
    for path in sorted(source.iterdir()):
        if path.is_file() and (suffixes is None or path.name.endswith(tuple(suffixes))):
            shutil.copy2(path, target / path.name)
            copied.append(target / path.name)
    return copied



def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), the checksum of a v2 record batch (bitwise; only used on a batch or two)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def with_producer_id(batch: bytes, producer_id: int, producer_epoch: int) -> bytes:
    """A batch with another producer id and epoch, its CRC computed again (the CRC covers attributes onwards)."""
    out = bytearray(batch)
    struct.pack_into(">qh", out, 43, producer_id, producer_epoch)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


# -- the partition directories serve writes ---------------------------------------------------------------------

# storage-fs settings of the serve runs: small segments (so a partition has several) and Kafka's sparse-index
# interval at 512 bytes (Kafka's topics here get index.interval.bytes=512 too).
SEGMENT_BYTES = 4096
INDEX_INTERVAL_BYTES = 512


@dataclass
class ServeWritten:
    """What `build_serve_dirs` leaves: two storage-fs partition directories and what was sent to them."""

    mixed: Path  # every codec, both clients, transactions committed and aborted
    barrier: Path  # a short workload, a MIRROR_PID_RESET barrier, a short workload
    barrier_before: Path  # the first serve run's directory of that partition (its snapshot: the state before)
    produced: list[Produced]
    before_barrier: list[Produced]
    after_barrier: list[Produced]
    barrier_offset: int
    seconds: float


def build_serve_dirs(root: Path) -> ServeWritten:
    """Real clients write through `mirrorlog serve` (storage-fs backend), stopped cleanly afterwards.

    1. `serve` on `root/serve`: topic `mixed` gets produce_workload, topic `barrier` a small_workload.
    2. `root/serve-barrier/barrier-0` gets only the `.log` segments of that `barrier` partition, with the shared
       MIRROR_PID_RESET batch appended at the log end (rebased; leader epoch 0 like serve's batches).
    3. `serve` on `root/serve-barrier` recovers that directory (no metadata, no snapshot, no index) and the
       partition gets another small_workload after the barrier.
    """
    begun = time.monotonic()
    with Serve(root / "serve", SEGMENT_BYTES, INDEX_INTERVAL_BYTES, "--topic", "mixed:1", "--topic", "barrier:1") as s:
        produced = produce_workload(s.bootstrap, "mixed", "serve")
        before = small_workload(s.bootstrap, "barrier", "before")
    barrier_dir = root / "serve-barrier" / "barrier-0"
    segments = copy_tree_files(root / "serve" / "barrier-0", barrier_dir, [".log"])
    barrier_offset = log_end_offset(barrier_dir)
    with open(segments[-1], "ab") as segment:
        segment.write(rebased_barrier(barrier_offset, leader_epoch=0))
    with Serve(root / "serve-barrier", SEGMENT_BYTES, INDEX_INTERVAL_BYTES) as s:
        after = small_workload(s.bootstrap, "barrier", "after")
    return ServeWritten(
        mixed=root / "serve" / "mixed-0",
        barrier=barrier_dir,
        barrier_before=root / "serve" / "barrier-0",
        produced=produced,
        before_barrier=before,
        after_barrier=after,
        barrier_offset=barrier_offset,
        seconds=time.monotonic() - begun,
    )


# -- Apache Kafka: writing, then serving what serve wrote -------------------------------------------------------

# The Kafka-format files of a partition directory (serve also writes `mirrorlog.metadata`, which Kafka would
# ignore and which is not copied).
KAFKA_FILE_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")

TOPICS = {
    # (b) Kafka writes these: rolled every 1.5 s (several segments, snapshots at each roll).
    "kafka-mixed": {"segment.ms": "1500"},
    "kafka-logappend": {"message.timestamp.type": "LogAppendTime"},
    # Kafka's Java producer, which uses transaction protocol version 2 (an epoch bump at every commit marker;
    # librdkafka 2.16 and kafka-python 3.0 still use version 1).
    "kafka-java-tv2": {},
    # (c) serve's partitions go here.
    "from-serve": {},  # only the .log segments: Kafka recovers them and rebuilds everything else
    "from-serve-trusted": {},  # every file serve wrote, recovery point at the log end: Kafka trusts them
    "barrier": {},  # the partition holding the barrier, .log only
    "forged": {},  # the same, its type-7 batch given a producer id: Kafka's start fails on it
}
COMMON_TOPIC_CONFIG = {"retention.ms": "-1", "index.interval.bytes": str(INDEX_INTERVAL_BYTES)}
FORGED_PRODUCER_ID = 4242


@dataclass
class RoundTrip:
    """The state `run_round_trip` leaves: a running Kafka serving serve's partitions, and what came before."""

    node: object
    kafka_written: dict  # topic -> frozen copy of Kafka's partition directory after its clean shutdown
    kafka_produced: dict  # topic -> [Produced]
    kafka_watermarks: dict  # topic -> {"high": HW, "stable": LSO} while Kafka ran
    placed: dict  # topic -> the serve directory its segments came from
    forged_start_error: str
    rebuilt: dict  # topic -> DumpLogSegments of every file of the partition right after the restart
    served_watermarks: dict  # topic -> {"high", "stable"} right after the restart
    timings: dict = field(default_factory=dict)


JAVA_RECORDS = 40


def java_transactions(node, topic: str) -> list[Produced]:
    """Kafka's Java producer (ProducerPerformance: values "0", "1", ... without keys) commits a transaction every
    100 ms. Under transaction version 2 each commit marker bumps the producer epoch."""
    run_kafka_tool(
        "org.apache.kafka.tools.ProducerPerformance",
        ["--topic", topic, "--num-records", JAVA_RECORDS, "--throughput", "100", "--payload-monotonic",
         "--transactional-id", f"{topic}-java", "--transaction-duration-ms", "100",
         "--producer-props", f"bootstrap.servers={node.bootstrap}", "compression.type=zstd", "linger.ms=5"],
        libs=node.libs,
    )
    return [Produced(None, str(i).encode(), [], "committed") for i in range(JAVA_RECORDS)]


def watermarks(bootstrap: str, topic: str) -> dict:
    """The high watermark (read_uncommitted) and last stable offset (read_committed) of partition 0."""
    from confluent_kafka import Consumer, TopicPartition

    result = {}
    for name, isolation in (("high", "read_uncommitted"), ("stable", "read_committed")):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks", "isolation.level": isolation})
        try:
            result[name] = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30, cached=False)[1]
        finally:
            consumer.close()
    return result


def place(node, serve: ServeWritten, recovery_points: str, forged: bool) -> None:
    """Puts serve's partitions into the stopped Kafka's log directory (keeping Kafka's `partition.metadata`, so
    its topic id), removes `.kafka_cleanshutdown` and writes `recovery_points` (the checkpoint with
    from-serve-trusted's recovery point moved to its log end). `forged`: the `forged` partition gets the barrier
    log with the type-7 batch carrying a producer id; otherwise it is left empty."""
    log_dir = node.log_dirs[0]
    sources = {"from-serve": (serve.mixed, (".log",)), "from-serve-trusted": (serve.mixed, KAFKA_FILE_SUFFIXES),
               "barrier": (serve.barrier, (".log",)), "forged": (serve.barrier, (".log",) if forged else ())}
    for topic, (source, suffixes) in sources.items():
        partition = node.partition_dir(topic)
        for path in partition.iterdir():
            if path.name != "partition.metadata":
                path.unlink()
        if suffixes:
            copy_tree_files(source, partition, suffixes)
    if forged:
        barrier = next(b for b in mirrorlog_json("dump", serve.barrier) if b["base_offset"] == serve.barrier_offset)
        segment = node.partition_dir("forged") / f"{0:020d}.log"
        data = bytearray(segment.read_bytes())
        start, end = barrier["file_offset"], barrier["file_offset"] + barrier["size"]
        data[start:end] = with_producer_id(bytes(data[start:end]), FORGED_PRODUCER_ID, 0)
        segment.write_bytes(bytes(data))
    (log_dir / ".kafka_cleanshutdown").unlink(missing_ok=True)
    (log_dir / "recovery-point-offset-checkpoint").write_text(recovery_points, encoding="utf-8")


def run_round_trip(root: Path, serve: ServeWritten, node_factory) -> RoundTrip:
    """Three Kafka starts on one node directory:

    1. Kafka creates every topic of TOPICS; real clients write `kafka-mixed` (produce_workload) and
       `kafka-logappend` (small_workload); SIGTERM. Its two partition directories are copied aside.
    2. serve's partitions are put in place (see `place`), the `forged` one included; Kafka's start must fail.
    3. The same again without the forged log; Kafka starts and serves them. Everything in the partitions is
       dumped with DumpLogSegments before any test writes to them.
    """
    timings = {}
    node = node_factory(root / "kafka")
    begun = time.monotonic()
    node.start()
    timings["kafka start 1"] = node.start_seconds
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    futures = admin.create_topics(
        [NewTopic(topic, 1, 1, config={**COMMON_TOPIC_CONFIG, **config}) for topic, config in TOPICS.items()]
    )
    for future in futures.values():
        future.result(60)
    step = time.monotonic()
    produced = {
        "kafka-mixed": produce_workload(node.bootstrap, "kafka-mixed", "kafka"),
        "kafka-logappend": small_workload(node.bootstrap, "kafka-logappend", "logappend"),
        "kafka-java-tv2": java_transactions(node, "kafka-java-tv2"),
    }
    kafka_watermarks = {topic: watermarks(node.bootstrap, topic) for topic in produced}
    timings["clients writing to Kafka"] = time.monotonic() - step
    code = node.stop()
    assert code in (0, 143) and node.clean_shutdown_marked(), f"Kafka's stop was not clean ({code})"

    kafka_written = {}
    for topic in produced:
        kafka_written[topic] = root / "kafka-written" / f"{topic}-0"
        shutil.copytree(node.partition_dir(topic), kafka_written[topic])

    checkpoint = node.log_dirs[0] / "recovery-point-offset-checkpoint"
    trusted_end = log_end_offset(serve.mixed)
    recovery_points = "".join(
        f"from-serve-trusted 0 {trusted_end}\n" if line.startswith("from-serve-trusted ") else line + "\n"
        for line in checkpoint.read_text(encoding="utf-8").splitlines()
    )
    assert f"from-serve-trusted 0 {trusted_end}\n" in recovery_points, recovery_points

    place(node, serve, recovery_points, forged=True)
    step = time.monotonic()
    try:
        node.start()
        forged_start_error = ""
    except Exception as error:  # noqa: BLE001 - the failure is what is recorded
        forged_start_error = f"{error}\n{node.output()}"
    timings["kafka start 2 (forged type-7 batch: fails)"] = time.monotonic() - step
    if not forged_start_error:
        node.stop()

    place(node, serve, recovery_points, forged=False)
    node.start()
    timings["kafka start 3"] = node.start_seconds
    step = time.monotonic()
    placed = {"from-serve": serve.mixed, "from-serve-trusted": serve.mixed, "barrier": serve.barrier}
    served_watermarks = {topic: watermarks(node.bootstrap, topic) for topic in placed}
    rebuilt = {}
    for topic in placed:
        files = kafka_files(node.partition_dir(topic), *KAFKA_FILE_SUFFIXES)
        rebuilt[topic] = dump_log_segments(files, "--deep-iteration", "--print-data-log", libs=node.libs)
    timings["dumping what Kafka rebuilt"] = time.monotonic() - step
    timings["round trip set-up, total"] = time.monotonic() - begun
    return RoundTrip(
        node=node,
        kafka_written=kafka_written,
        kafka_produced=produced,
        kafka_watermarks=kafka_watermarks,
        placed=placed,
        forged_start_error=forged_start_error,
        rebuilt=rebuilt,
        served_watermarks=served_watermarks,
        timings=timings,
    )


# -- consumers --------------------------------------------------------------------------------------------------


def consume_librdkafka(bootstrap: str, topic: str, isolation: str, expected: int, limit_s: float = 60) -> list:
    """Partition 0 from offset 0 with a confluent-kafka consumer: every record until at least `expected` came and
    then nothing for half a second. Records as {offset, key, value, headers} (hex bytes)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{topic}-{isolation}",
                         "isolation.level": isolation, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.monotonic() + limit_s
    try:
        while time.monotonic() < deadline:
            batch = consumer.consume(1000, 0.5)
            if not batch and len(out) >= expected:
                break
            for message in batch:
                assert message.error() is None, message.error()
                out.append(hex_record(message.offset(), message.key(), message.value(), message.headers() or []))
    finally:
        consumer.close()
    return out


def consume_kafka_python(bootstrap: str, topic: str, isolation: str, expected: int, limit_s: float = 60) -> list:
    """The same with a kafka-python consumer."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False)
    partition = KafkaTopicPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    out = []
    deadline = time.monotonic() + limit_s
    try:
        while time.monotonic() < deadline:
            polled = consumer.poll(timeout_ms=500)
            if not polled and len(out) >= expected:
                break
            for message in polled.get(partition, []):
                out.append(hex_record(message.offset, message.key, message.value, message.headers or []))
    finally:
        consumer.close()
    return out


def consume_java(libs, bootstrap: str, topic: str, isolation: str, count: int) -> list[tuple[int, str]]:
    """Kafka's own Java consumer (`ConsoleConsumer`, partition 0 from the earliest offset): (offset, value as
    printed) for `count` records."""
    done = run_kafka_tool(
        "org.apache.kafka.tools.consumer.ConsoleConsumer",
        ["--bootstrap-server", bootstrap, "--topic", topic, "--partition", "0", "--offset", "earliest",
         "--isolation-level", isolation, "--max-messages", count, "--timeout-ms", "30000",
         "--property", "print.offset=true", "--property", "print.value=true"],
        libs=libs,
    )
    out = []
    for line in done.stdout.splitlines():
        if line.startswith("Offset:"):
            offset, _, value = line[len("Offset:"):].partition("\t")
            out.append((int(offset), value))
    return out


def hex_record(offset, key, value, headers) -> dict:
    return {
        "offset": offset,
        "key": None if key is None else bytes(key).hex(),
        "value": None if value is None else bytes(value).hex(),
        "headers": [(k, None if v is None else bytes(v).hex()) for k, v in headers],
    }
