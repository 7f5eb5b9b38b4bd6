"""A mirrorlog `serve` mirrors a topic of a 3-broker Apache Kafka KRaft cluster (replication factor 3) while
producers write and brokers die (issue 50, item 6):

- the broker leading partition 0 is killed (SIGKILL): the link moves that partition to its new leader and it
  keeps mirroring within seconds, the other partitions never stop; the broker comes back;
- the first broker of the link's bootstrap list is killed: the link goes on through the others; it comes back;
- a topic another link mirrors from the same cluster is deleted: that link's partition fails, naming Kafka's
  error, and this link never stops;
- the whole cluster is killed and started again with its data: the link resumes where it was;
- once the producers stop, every partition catches up (lag 0) and holds exactly the batches of its leader's
  segments (`mirrorlog dump`: offsets, CRCs, producer fields) — nothing the source still has was truncated;
- a failover writes one barrier per partition.
"""

import os
import threading
import time

import pytest

import both_ways as bw
from kafka_node import LIBS_ENV
from kafka_cluster import KafkaCluster
from test_mirror_from_kafka import caught_up, mirror_json, start_serve

TOPIC = "replicated"
PARTITIONS = 6
DOOMED = "doomed"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if not os.environ.get(LIBS_ENV):
        pytest.skip(f"{LIBS_ENV} is not set: `cargo xtask kafka` fetches Apache Kafka's jars and runs this suite")
    if not os.environ.get(bw.BIN_ENV):
        pytest.skip(f"{bw.BIN_ENV} is not set: `cargo xtask kafka` builds mirrorlog and names its binary")
    with KafkaCluster(tmp_path_factory.mktemp("kafka-cluster"), size=3) as running:
        print(running.describe())
        yield running


class Writer:
    """An idempotent producer (acks=all) writing to every partition in turn on a thread of its own until stopped."""

    def __init__(self, bootstrap: str):
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                                  "linger.ms": 5})
        self.stopped = threading.Event()
        self.delivered = 0
        self.thread = threading.Thread(target=self.run, daemon=True)

    def on_delivery(self, error, _message):
        if error is None:
            self.delivered += 1

    def run(self):
        index = 0
        while not self.stopped.is_set():
            self.producer.produce(TOPIC, value=f"record {index}".encode(), partition=index % PARTITIONS,
                                  on_delivery=self.on_delivery)
            index += 1
            if index % 20 == 0:
                self.producer.poll(0.02)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc_info):
        self.stopped.set()
        self.thread.join(30)
        assert self.producer.flush(60) == 0, "every record the writer produced was delivered"


def leader_of(admin, partition: int) -> int:
    return admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[partition].leader


def mirrored_end(dest, partition: int) -> int:
    statuses = mirror_json("describe", dest, "--link", "cluster")["links"][0]["partitions"]
    return next(status["log_end_offset"] for status in statuses if status["partition"] == partition)


def kill_and_see_the_mirror_go_on(cluster, admin, dest, node_id: int, watched: int) -> float:
    """Kills `node_id`, waits until `watched`'s leader is another broker, then until the mirror of `watched` grows
    past where it was; restarts the broker. The seconds from the kill until the mirror grew."""
    killed_at = time.monotonic()
    cluster.node_of(node_id).kill()
    for _ in range(300):
        if leader_of(admin, watched) not in (node_id, -1):
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"partition {watched} got no new leader after broker {node_id} died")
    before = mirrored_end(dest, watched)
    for _ in range(300):
        if mirrored_end(dest, watched) > before:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"the mirror of partition {watched} stopped after broker {node_id} died")
    grew_after = time.monotonic() - killed_at
    cluster.node_of(node_id).start()
    return grew_after


def high_watermark_once_served(reader, partition, deadline_s=60.0):
    """The partition's high watermark as a Kafka client reads it, asked again while a restarted cluster's new leader
    answers OFFSET_NOT_AVAILABLE ("leader high watermark is not caught up") or another retriable error: that is
    Kafka's own transient state after a whole-cluster restart, not an answer."""
    from confluent_kafka import KafkaError, KafkaException

    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return reader.get_watermark_offsets(partition, timeout=30)[1]
        except KafkaException as failure:
            error = failure.args[0]
            transient = error.retriable() or error.code() == KafkaError.OFFSET_NOT_AVAILABLE
            if not transient or time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def test_a_mirror_of_a_three_broker_cluster_survives_leader_and_bootstrap_kills_byte_for_byte(cluster, tmp_path):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for name, partitions in ((TOPIC, PARTITIONS), (DOOMED, 1)):
        admin.create_topics([NewTopic(name, partitions, 3)])[name].result(30)
    process, dest = start_serve(tmp_path / "dest", "serve-of-a-cluster", "--mirror-metadata-refresh-ms", "1000")
    try:
        mirror_json("create", dest, "--link", "cluster", "--source", cluster.bootstrap, "--topic", TOPIC)
        mirror_json("create", dest, "--link", "doomed", "--source", cluster.bootstrap, "--topic", DOOMED)
        with Writer(cluster.bootstrap) as writer:
            while writer.delivered < 500:
                time.sleep(0.05)
            leader_kill = kill_and_see_the_mirror_go_on(cluster, admin, dest, leader_of(admin, 0), 0)
            bootstrap_first = cluster.nodes[0].node_id
            # The first bootstrap broker: a partition it leads now (else any) shows the link going on.
            led = [p for p in range(PARTITIONS) if leader_of(admin, p) == bootstrap_first]
            bootstrap_kill = kill_and_see_the_mirror_go_on(
                cluster, admin, dest, bootstrap_first, led[0] if led else 0
            )
            admin.delete_topics([DOOMED])[DOOMED].result(30)
            for _ in range(300):
                doomed = mirror_json("describe", dest, "--link", "doomed")["links"][0]["partitions"][0]
                if doomed["state"] == "FAILED":
                    break
                time.sleep(0.1)
            else:
                raise AssertionError(f"the mirror of a deleted topic did not fail: {doomed}")
            assert "UNKNOWN_TOPIC" in doomed["error"], doomed
            delivered = writer.delivered
            before = [mirrored_end(dest, p) for p in range(PARTITIONS)]
            while writer.delivered < delivered + 3000:
                time.sleep(0.05)
            for _ in range(300):
                if all(mirrored_end(dest, p) > before[p] for p in range(PARTITIONS)):
                    break
                time.sleep(0.1)
            else:
                raise AssertionError("a deleted topic of another link stopped this one")
        # The whole source goes down and comes back with its data; the writer meanwhile has stopped.
        cluster.stop()
        cluster.start()
        restarted = time.monotonic()
        print(f"the mirror grew again {leader_kill:.1f}s after its leader's broker was killed and "
              f"{bootstrap_kill:.1f}s after the first bootstrap broker was; {writer.delivered} records")
        # Caught up with the source's high watermarks as a Kafka client reads them now, not only with the last
        # answer the link had when it was asked.
        from confluent_kafka import Consumer, TopicPartition

        reader = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "watermarks"})
        ends = [high_watermark_once_served(reader, TopicPartition(TOPIC, p)) for p in range(PARTITIONS)]
        reader.close()
        for _ in range(600):
            statuses = caught_up(dest, "cluster", PARTITIONS)
            if [status["log_end_offset"] for status in statuses] == ends:
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"the mirror ends at {statuses}, the source at {ends}")
        print(f"caught up {time.monotonic() - restarted:.1f}s after the whole cluster served again")
        # Stopped cleanly, so every batch it wrote is in its files; then started again to fail over.
        process.terminate()
        assert process.wait(30) == 0
        for partition in range(PARTITIONS):
            leader = cluster.node_of(leader_of(admin, partition))
            ours = bw.mirrorlog_json("dump", tmp_path / "dest" / f"{TOPIC}-{partition}")
            theirs = [b for segment in leader.segments(TOPIC, partition) for b in bw.mirrorlog_json("dump", segment)]
            assert ours and ours == theirs, partition
        process, dest = start_serve(tmp_path / "dest", "serve-of-a-cluster")
        caught_up(dest, "cluster", PARTITIONS)
        stopped = mirror_json("failover", dest, "--link", "cluster")
        for status in stopped["links"][0]["partitions"]:
            assert status["state"] == "STOPPED" and status["barrier_offset"] == status["log_end_offset"] - 1, status
    finally:
        process.terminate()
        process.wait(30)
