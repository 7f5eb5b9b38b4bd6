"""The differential suite: the same client scenarios against Apache Kafka 4.1 and `mirrorlog serve`, and what a
client can observe compared.

`kafka-diff` (crate `kafka-diff`, built by `cargo xtask kafka`/`test`, named by `MIRRORLOG_KAFKA_DIFF`) runs each
scenario over the Kafka protocol and prints its observations, normalised (producer ids numbered in order of
appearance; nothing that names a broker; partitions in (topic, partition) order; a consumer's reads joined over
as many fetches as it takes; control batches' broker-clock timestamps). This module runs it once against `serve`
and once against a Kafka formatted with each `transaction.version`, both brokers configured alike
(`transactional.id.expiration.ms` 3 s, so that expiry is a scenario), and then:

- every scenario's observations are equal, but for the differences `docs/kafka-differences.md` lists, each of
  which is checked to be exactly what the document says (so a change on either side shows);
- no scenario stopped early on either broker;
- every (API, version) pair `serve` advertises was sent to both brokers.
"""

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from both_ways import Serve
from conftest import STARTED, TIMINGS, require_jars_and_binary
from kafka_node import KafkaNode, api_versions

DIFF_ENV = "MIRRORLOG_KAFKA_DIFF"
EXPIRATION_MS = 3000
KAFKA_PROPERTIES = {
    "transactional.id.expiration.ms": EXPIRATION_MS,
    # How often Kafka looks for expired ids and timed-out transactions (defaults: an hour and 10 s).
    "transaction.remove.expired.transaction.cleanup.interval.ms": 500,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500,
}
SERVE_ARGS = (
    "--transactional-id-expiration-ms",
    str(EXPIRATION_MS),
    "--housekeeping-interval-ms",
    "500",
)


def diff_binary() -> str | None:
    binary = os.environ.get(DIFF_ENV)
    return binary if binary and Path(binary).is_file() else None


def scenario_names() -> list[str]:
    """The scenarios, from `kafka-diff --list` (at collection; none without the binary)."""
    binary = diff_binary()
    if not binary:
        return []
    listed = subprocess.run([binary, "--list"], capture_output=True, text=True, check=True, timeout=30)
    return [line.split("\t", 1)[0] for line in listed.stdout.splitlines() if line.strip()]


SCENARIOS = scenario_names()


def run_diff(bootstrap: str) -> dict:
    """`kafka-diff --bootstrap`: {"scenarios": {name: line}, "calls": {(key, version)}}."""
    done = subprocess.run(
        [diff_binary(), "--bootstrap", bootstrap], capture_output=True, text=True, timeout=900, check=False
    )
    assert done.returncode == 0, f"kafka-diff exited with {done.returncode}\n{done.stderr[-4000:]}"
    scenarios, calls = {}, set()
    for line in done.stdout.splitlines():
        record = json.loads(line)
        if "scenario" in record:
            scenarios[record["scenario"]] = record
        else:
            calls = {tuple(pair) for pair in record["calls"]}
    return {"scenarios": scenarios, "calls": calls}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """kafka-diff's output against serve, and against Kafka under transaction.version 1 and 2."""
    require_jars_and_binary()
    if not diff_binary():
        pytest.skip(f"{DIFF_ENV} is not set: `cargo xtask kafka` builds kafka-diff and names it")
    root = tmp_path_factory.mktemp("differential")
    out = {}
    with Serve(root / "serve", 1 << 30, 4096, *SERVE_ARGS) as serve:
        started = time.monotonic()
        out["serve"] = run_diff(serve.bootstrap)
        TIMINGS["differential: the scenarios against serve"] = time.monotonic() - started
        out["serve"]["advertised"] = api_versions(int(serve.bootstrap.rsplit(":", 1)[1]))["apis"]
    for version in (1, 2):
        node = KafkaNode(root / f"kafka-tv{version}", transaction_version=version, properties=KAFKA_PROPERTIES)
        node.start()
        STARTED.append(node)
        try:
            started = time.monotonic()
            out[f"kafka-tv{version}"] = run_diff(node.bootstrap)
            TIMINGS[f"differential: the scenarios against Kafka (tv{version})"] = time.monotonic() - started
        finally:
            node.stop()
    return out


# -- the known differences ----------------------------------------------------------------------------------


def auto_created_topic_first_answer(kafka: dict, serve: dict) -> None:
    """docs/kafka-differences.md, "serve creates a topic before it answers": in the Metadata request that
    auto-creates a topic, Kafka answers UNKNOWN_TOPIC_OR_PARTITION (3) with no partitions (its controller creates
    the topic afterwards); serve creates it first and answers it with its partition. Checked, then set aside."""
    for kafka_step, serve_step in zip(kafka["observations"], serve["observations"]):
        if not kafka_step["step"].endswith(" named"):
            continue
        pairs = zip(kafka_step["seen"]["topics"], serve_step["seen"]["topics"])
        for kafka_topic, serve_topic in pairs:
            if "-auto-v" not in (kafka_topic["name"] or ""):
                continue
            assert (kafka_topic["error"], kafka_topic["partitions"]) == (3, []), kafka_topic
            assert serve_topic["error"] == 0 and len(serve_topic["partitions"]) == 1, serve_topic
            # From v10 an answered topic carries its id; Kafka's not-yet-created one has none.
            assert not kafka_topic["has_topic_id"], kafka_topic
            version = int(kafka_step["step"].split(" ")[0][1:])
            assert serve_topic["has_topic_id"] == (version >= 10), serve_topic
            for topic in (kafka_topic, serve_topic):
                topic.update(error="auto-created", partitions="auto-created", has_topic_id="auto-created")


def min_insync_replicas_cluster_default(kafka: dict, serve: dict) -> None:
    """docs/kafka-differences.md, "min.insync.replicas is a cluster default on Kafka": a KRaft cluster formatted by
    Kafka 4.1 records `min.insync.replicas=1` as a dynamic cluster-wide default, so DescribeConfigs gives the topic
    config source DYNAMIC_DEFAULT_BROKER_CONFIG (3) and two synonyms; serve has no dynamic broker configs and
    answers Kafka's default (5) with one. Same value. Checked, then set aside."""
    for kafka_step, serve_step in zip(kafka["observations"], serve["observations"]):
        for kafka_result, serve_result in zip(kafka_step["seen"], serve_step["seen"]):
            for kafka_entry, serve_entry in zip(kafka_result["entries"], serve_result["entries"]):
                if kafka_entry["name"] != "min.insync.replicas":
                    continue
                assert kafka_entry["value"] == serve_entry["value"] == "1", (kafka_entry, serve_entry)
                assert kafka_entry["source"] == 3 and kafka_entry["synonyms"] == [
                    ["min.insync.replicas", "1", 3],
                    ["min.insync.replicas", "1", 5],
                ], kafka_entry
                assert serve_entry["source"] == 5 and serve_entry["synonyms"] == [
                    ["min.insync.replicas", "1", 5]
                ], serve_entry
                for entry in (kafka_entry, serve_entry):
                    entry.update(source="cluster default", synonyms="cluster default")


def min_insync_replicas_cluster_default_in_created_topics(kafka: dict, serve: dict) -> None:
    """The same difference in CreateTopics v5+ answers, which list each new topic's configs as
    `[name, value, read_only, source, sensitive]`: where `min.insync.replicas` is the cluster's 1 on both, Kafka's
    source is 3 and serve's 5. Set aside there only."""

    def walk(kafka_seen, serve_seen) -> None:
        if not (isinstance(kafka_seen, list) and isinstance(serve_seen, list)):
            if isinstance(kafka_seen, dict) and isinstance(serve_seen, dict):
                for key in set(kafka_seen) & set(serve_seen):
                    walk(kafka_seen[key], serve_seen[key])
            return
        if (
            len(kafka_seen) == len(serve_seen) == 5
            and kafka_seen[:2] == serve_seen[:2] == ["min.insync.replicas", "1"]
            and (kafka_seen[3], serve_seen[3]) == (3, 5)
        ):
            # The value Kafka formats the cluster with; any other (a topic's own) is left to the comparison.
            kafka_seen[3] = serve_seen[3] = "cluster default"
            return
        for kafka_item, serve_item in zip(kafka_seen, serve_seen):
            walk(kafka_item, serve_item)

    for kafka_step, serve_step in zip(kafka["observations"], serve["observations"]):
        walk(kafka_step["seen"], serve_step["seen"])


KNOWN_DIFFERENCES = {
    "metadata_every_version": auto_created_topic_first_answer,
    "describe_configs_every_version": min_insync_replicas_cluster_default,
    "create_topics_every_version": min_insync_replicas_cluster_default_in_created_topics,
    "create_topics_with_configs": min_insync_replicas_cluster_default_in_created_topics,
}


# -- the comparison -------------------------------------------------------------------------------------------


def differences(kafka, serve, path="", found=None) -> list[str]:
    """Every place two observations differ, as `path: kafka=… serve=…`."""
    found = [] if found is None else found
    if type(kafka) is not type(serve):
        found.append(f"{path}: kafka={json.dumps(kafka)[:200]} serve={json.dumps(serve)[:200]}")
    elif isinstance(kafka, dict):
        for key in sorted(set(kafka) | set(serve)):
            differences(kafka.get(key, "<absent>"), serve.get(key, "<absent>"), f"{path}.{key}", found)
    elif isinstance(kafka, list):
        if len(kafka) != len(serve):
            found.append(f"{path}: kafka has {len(kafka)} entries, serve {len(serve)}")
        for index, (a, b) in enumerate(zip(kafka, serve)):
            differences(a, b, f"{path}[{index}]", found)
    elif kafka != serve:
        found.append(f"{path}: kafka={json.dumps(kafka)[:200]} serve={json.dumps(serve)[:200]}")
    return found


@pytest.mark.parametrize("kafka_run", ["kafka-tv1", "kafka-tv2"])
@pytest.mark.parametrize("scenario", SCENARIOS or ["(kafka-diff not built)"])
def test_serve_answers_as_kafka_does(runs, scenario, kafka_run):
    kafka = json.loads(json.dumps(runs[kafka_run]["scenarios"][scenario]))
    serve = json.loads(json.dumps(runs["serve"]["scenarios"][scenario]))
    assert kafka["error"] is None, f"the scenario stopped on Kafka: {kafka['error']}"
    assert serve["error"] is None, f"the scenario stopped on serve: {serve['error']}"
    if scenario in KNOWN_DIFFERENCES:
        KNOWN_DIFFERENCES[scenario](kafka, serve)
    steps = [step["step"] for step in kafka["observations"]]
    assert steps == [step["step"] for step in serve["observations"]], "the scenarios took different steps"
    found = []
    for kafka_step, serve_step in zip(kafka["observations"], serve["observations"]):
        differences(kafka_step["seen"], serve_step["seen"], kafka_step["step"], found)
    assert not found, f"{len(found)} differences from Apache Kafka:\n" + "\n".join(found[:40])


def test_every_advertised_version_was_sent_to_both_brokers(runs):
    advertised = {
        (key, version) for key, (low, high) in runs["serve"]["advertised"].items() for version in range(low, high + 1)
    }
    assert len(advertised) >= 60, advertised
    for name, run in runs.items():
        missing = sorted(advertised - run["calls"])
        assert not missing, f"{name}: (API key, version) pairs no scenario sent: {missing}"


def test_there_are_at_least_forty_scenarios():
    if not SCENARIOS:
        pytest.skip(f"{DIFF_ENV} is not set")
    assert len(SCENARIOS) >= 40, SCENARIOS
