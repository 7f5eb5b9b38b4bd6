"""Apache Kafka 4.1's own command-line tools against `mirrorlog serve` and against Kafka: the same session of
`kafka-topics`, `kafka-configs`, `kafka-transactions`, `kafka-get-offsets`, `kafka-cluster`,
`kafka-consumer-groups`, `kafka-log-dirs` and `kafka-producer-perf-test` on each broker (SCRAM users through
`kafka-configs --entity-type users` too) — retention too: a topic
altered to `retention.ms=1000` loses its records on both — every command's exit status and output compared once the broker's
identity is masked (broker ids, cluster id, producer ids, broker-clock times, topic ids).

What the comparison masks besides identities, and why, is in docs/kafka-differences.md ("Kafka's tools"):
`kafka-topics --describe` prints ELR fields Kafka 4.1 answers through DescribeTopicPartitions, which serve does not
serve (the tool falls back to Metadata and prints N/A), and a topic id, which each broker draws for itself.
"""

import re
import time
from pathlib import Path

import pytest

from both_ways import Serve
from conftest import STARTED, TIMINGS, require_jars_and_binary
from kafka_node import KafkaNode, run_kafka_tool

TOPIC = "tools-orders"
SINGLE = "tools-single"
TXN = "tools-txn"
TOPICS = "org.apache.kafka.tools.TopicCommand"
CONFIGS = "kafka.admin.ConfigCommand"
TRANSACTIONS = "org.apache.kafka.tools.TransactionsCommand"
GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
GROUP = "tools-readers"
LOG_DIRS = "org.apache.kafka.tools.LogDirsCommand"
OFFSETS = "org.apache.kafka.tools.GetOffsetShell"
# A pseudo-tool: polls kafka-get-offsets for SINGLE's earliest offset until retention moved it (30 s at most).
RETENTION_DONE = "retention-done"
# How often both brokers run retention in this session (Kafka's log.retention.check.interval.ms).
RETENTION_CHECK_MS = 500


def session(bootstrap: str) -> list[tuple[str, list[str]]]:
    """The operator's session: (tool, arguments), in order."""
    server = ["--bootstrap-server", bootstrap]
    return [
        (TOPICS, server + ["--create", "--topic", TOPIC, "--partitions", "2", "--replication-factor", "1",
                          "--config", "retention.ms=3600000", "--config", "cleanup.policy=compact"]),
        (TOPICS, server + ["--create", "--topic", SINGLE, "--partitions", "1", "--replication-factor", "1"]),
        (TOPICS, server + ["--create", "--topic", "tools-refused", "--config", "cleanup.policy=bogus"]),
        (TOPICS, server + ["--create", "--topic", "tools-unknown-config", "--config", "retention.mss=1"]),
        (TOPICS, server + ["--describe", "--topic", TOPIC]),
        (CONFIGS, server + ["--describe", "--entity-type", "topics", "--entity-name", TOPIC]),
        (CONFIGS, server + ["--alter", "--entity-type", "topics", "--entity-name", TOPIC,
                           "--add-config", "retention.ms=7200000,max.message.bytes=2000000",
                           "--delete-config", "cleanup.policy"]),
        (CONFIGS, server + ["--describe", "--entity-type", "topics", "--entity-name", TOPIC]),
        (CONFIGS, server + ["--alter", "--entity-type", "topics", "--entity-name", TOPIC,
                           "--add-config", "segment.bytes=10"]),
        (TOPICS, server + ["--alter", "--topic", TOPIC, "--partitions", "4"]),
        (TOPICS, server + ["--alter", "--topic", TOPIC, "--partitions", "3"]),
        (TOPICS, server + ["--describe", "--topic", TOPIC]),
        ("org.apache.kafka.tools.ProducerPerformance",
         ["--topic", SINGLE, "--num-records", "50", "--record-size", "10", "--throughput", "-1",
          "--producer-props", f"bootstrap.servers={bootstrap}",
          "--transactional-id", TXN, "--transaction-duration-ms", "60000"]),
        (TRANSACTIONS, server + ["list"]),
        (TRANSACTIONS, server + ["describe", "--transactional-id", TXN]),
        (TRANSACTIONS, server + ["describe-producers", "--topic", SINGLE, "--partition", "0"]),
        (TRANSACTIONS, server + ["find-hanging", "--topic", SINGLE]),
        ("org.apache.kafka.tools.GetOffsetShell", server + ["--topic-partitions", f"{TOPIC}:0-3,{SINGLE}:0"]),
        ("org.apache.kafka.tools.ClusterTool", ["cluster-id"] + server),
        (GROUPS, server + ["--reset-offsets", "--to-earliest", "--execute", "--group", GROUP, "--topic", SINGLE]),
        (GROUPS, server + ["--describe", "--group", GROUP]),
        (GROUPS, server + ["--reset-offsets", "--to-latest", "--execute", "--group", GROUP, "--topic", SINGLE]),
        (GROUPS, server + ["--describe", "--group", GROUP, "--offsets"]),
        (GROUPS, server + ["--delete-offsets", "--group", GROUP, "--topic", SINGLE]),
        (GROUPS, server + ["--describe", "--group", GROUP, "--offsets"]),
        (GROUPS, server + ["--delete", "--group", GROUP]),
        (LOG_DIRS, server + ["--describe", "--topic-list", SINGLE]),
        (CONFIGS, server + ["--alter", "--entity-type", "topics", "--entity-name", SINGLE,
                           "--add-config", "retention.ms=1000"]),
        (RETENTION_DONE, server + ["--topic-partitions", f"{SINGLE}:0", "--time", "-2"]),
        (LOG_DIRS, server + ["--describe", "--topic-list", SINGLE]),
        (TOPICS, server + ["--delete", "--topic", TOPIC]),
        (TOPICS, server + ["--list"]),
        # SCRAM users, as an operator manages them (AlterUserScramCredentials): made, deleted, deleted again.
        (CONFIGS, server + ["--alter", "--entity-type", "users", "--entity-name", "tools-user",
                           "--add-config", "SCRAM-SHA-256=[iterations=8192,password=tools-secret]"]),
        (CONFIGS, server + ["--alter", "--entity-type", "users", "--entity-name", "tools-user",
                           "--add-config", "SCRAM-SHA-512=[password=tools-secret]"]),
        (CONFIGS, server + ["--alter", "--entity-type", "users", "--entity-name", "tools-user",
                           "--delete-config", "SCRAM-SHA-256"]),
        (CONFIGS, server + ["--alter", "--entity-type", "users", "--entity-name", "tools-user",
                           "--delete-config", "SCRAM-SHA-256"]),
    ]


def masked(tool: str, args: list[str], text: str) -> list[str]:
    """The lines a tool printed that say something about the topic, with identities masked."""
    lines = []
    for line in text.splitlines():
        if "SLF4J" in line or line.startswith("WARN") or not line.strip():
            continue
        if tool.endswith("ProducerPerformance"):
            # Throughput and latency: what the broker did is the exit status and what the other tools read.
            continue
        line = re.sub(r"^\[[^\]]*\] ", "", line)  # a log line's time
        line = re.sub(r"TopicId: \S+\t", "", line)
        # Kafka 4.1 holds min.insync.replicas=1 as a dynamic cluster default, which kafka-topics lists among a
        # topic's configs; serve has no dynamic broker configs (docs/kafka-differences.md).
        line = re.sub(r"(Configs: )min\.insync\.replicas=1,?", r"\1", line)
        line = re.sub(r"\tElr: [^\t]*\tLastKnownElr: [^\t]*", "", line)
        line = re.sub(r"(Leader|Replicas|Isr): \d+", r"\1: <broker>", line)
        line = re.sub(r"for broker \d+", "for broker <broker>", line)
        line = re.sub(r"Cluster ID: \S+", "Cluster ID: <cluster>", line)
        if tool == LOG_DIRS:
            # The directory is each broker's own; a partition's size depends on how the producer batched.
            line = re.sub(r'"logDir":"[^"]*"', '"logDir":"<dir>"', line)
            line = re.sub(r'"broker":\d+', '"broker":<broker>', line)
            line = re.sub(r"from brokers \d+", "from brokers <broker>", line)
            line = re.sub(r'"size":[1-9]\d*', '"size":<bytes>', line)
        # Tables of kafka-transactions: every number of 6 digits or more is a producer id or a time; the
        # coordinator column is a broker id.
        line = re.sub(r"\b\d{6,}\b", "<n>", line)
        if tool == TRANSACTIONS and args[2] in ("list", "describe") and "\t" in line and not line.startswith(("Tran", "Coor")):
            cells = line.split("\t")
            index = 1 if args[2] == "list" else 0
            cells[index] = "<broker>"
            if args[2] == "list":
                cells[2] = "<producer>"
            else:
                cells[2] = "<producer>"
                cells[7] = "<duration>"
            line = "\t".join(cell.strip() for cell in cells)
        elif tool == TRANSACTIONS and args[2] == "describe-producers" and "\t" in line and not line.startswith("Producer"):
            cells = line.split("\t")
            cells[0] = "<producer>"
            line = "\t".join(cell.strip() for cell in cells)
        elif "\t" in line:
            line = "\t".join(cell.strip() for cell in line.split("\t"))
        if tool == TOPICS and args[-1] == "--list" and not line.startswith("tools-"):
            continue
        lines.append(line)
    return lines


def earliest_moved(args: list[str]):
    """kafka-get-offsets' answer once the earliest offset is no longer 0 (or the last answer after 30 s)."""
    deadline = time.monotonic() + 30
    while True:
        done = run_kafka_tool(OFFSETS, args, check=False, timeout=120)
        if done.returncode != 0 or not done.stdout.strip().endswith(":0") or time.monotonic() > deadline:
            return done
        time.sleep(RETENTION_CHECK_MS / 1000)


def run_session(bootstrap: str) -> list[dict]:
    seen = []
    for tool, args in session(bootstrap):
        if tool == RETENTION_DONE:
            done = earliest_moved(args)
        else:
            done = run_kafka_tool(tool, args, check=False, timeout=120)
        seen.append(
            {
                "command": f"{tool.rsplit('.', 1)[-1]} {' '.join(a for a in args if a != bootstrap and 'bootstrap.servers' not in a)}",
                "exit": done.returncode,
                "out": masked(tool, args, done.stdout),
                # What the tool reports: its error lines, without their stack traces.
                "err": [line for line in masked(tool, args, done.stderr) if "ERROR" in line or "Exception:" in line][:2],
            }
        )
    return seen


@pytest.fixture(scope="module")
def sessions(tmp_path_factory):
    require_jars_and_binary()
    root = tmp_path_factory.mktemp("kafka-tools")
    out = {}
    with Serve(root / "serve", 1 << 30, 4096, "--log-retention-check-interval-ms", str(RETENTION_CHECK_MS)) as serve:
        started = time.monotonic()
        out["serve"] = run_session(serve.bootstrap)
        TIMINGS["kafka tools: the session against serve"] = time.monotonic() - started
    # serve speaks transaction version 1 (no epoch bump per transaction): so does this Kafka.
    node = KafkaNode(root / "kafka", transaction_version=1,
                     properties={"log.retention.check.interval.ms": RETENTION_CHECK_MS})
    node.start()
    STARTED.append(node)
    try:
        started = time.monotonic()
        out["kafka"] = run_session(node.bootstrap)
        TIMINGS["kafka tools: the session against Kafka"] = time.monotonic() - started
    finally:
        node.stop()
    return out


def session_differences(kafka: list[dict], serve: list[dict]) -> list[str]:
    """Where two sessions' steps (exit status, output, error lines) differ, step by step."""
    differences = []
    for on_kafka, on_serve in zip(kafka, serve, strict=True):
        for field in ("exit", "out", "err"):
            if on_kafka[field] != on_serve[field]:
                differences.append(
                    f"{on_kafka['command']}: {field}\n  kafka: {on_kafka[field]}\n  serve: {on_serve[field]}"
                )
    return differences


def test_kafkas_tools_see_serve_as_they_see_kafka(sessions):
    differences = session_differences(sessions["kafka"], sessions["serve"])
    assert not differences, f"{len(differences)} differences:\n" + "\n".join(differences)


def test_the_session_did_what_an_operator_meant(sessions):
    """The comparison alone would pass if both brokers failed alike: the session's key steps succeed on serve."""
    by_command = {step["command"]: step for step in sessions["serve"]}
    created = next(step for command, step in by_command.items() if "--create --topic tools-orders" in command)
    assert created["exit"] == 0 and created["out"] == ["Created topic tools-orders."], created
    refused = next(step for command, step in by_command.items() if "tools-refused" in command)
    assert refused["exit"] != 0 and any("cleanup.policy" in line for line in refused["err"]), refused
    described = [step for command, step in by_command.items()
                 if command.startswith("TopicCommand") and "--describe --topic" in command]
    assert any("PartitionCount: 4" in line for line in described[-1]["out"]), described
    listing = next(step for command, step in by_command.items() if command.endswith(" list"))
    assert any(TXN in line and "CompleteCommit" in line for line in listing["out"]), listing
    offsets = next(step for command, step in by_command.items() if command.startswith("GetOffsetShell"))
    assert offsets["out"][-1] == f"{SINGLE}:0:51", "50 records and the commit marker"
    described = [step for step in sessions["serve"] if step["command"].startswith("ConsumerGroupCommand") and "--describe" in step["command"]]
    assert any(line.split()[:4] == [GROUP, SINGLE, "0", "51"] for line in described[1]["out"]), described[1]
    deleted = next(step for step in sessions["serve"] if "--delete-offsets" in step["command"])
    assert any("Successful" in line for line in deleted["out"]), deleted
    dirs = [step for step in sessions["serve"] if step["command"].startswith("LogDirsCommand")]
    assert '"size":<bytes>' in dirs[0]["out"][-1], dirs[0]
    retained = next(step for step in sessions["serve"] if step["command"].startswith(RETENTION_DONE))
    assert retained["out"] == [f"{SINGLE}:0:51"], "retention.ms=1000 deleted every record, the marker too"
    assert '"size":0' in dirs[1]["out"][-1], dirs[1]
    users = [step for step in sessions["serve"] if "--entity-type users" in step["command"]]
    assert [step["exit"] for step in users] == [0, 0, 0, 1], users
    assert any("does not exist" in line for line in users[3]["err"]), users[3]
