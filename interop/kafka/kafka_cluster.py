"""A real Apache Kafka cluster for tests: several combined broker+controller KRaft nodes (`KafkaNode`s) on loopback
with a static voter set, so one node can be killed and restarted while the others keep a quorum and serve.

    from kafka_cluster import KafkaCluster

    with KafkaCluster(tmp_path / "cluster", size=3) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("orders", 6, 3)])
        cluster.node_of(leader_id).kill()
        ...

Every node is formatted with the same cluster id and `controller.quorum.voters` naming all of them; the internal
topics are replicated to three nodes with two in sync at least, like a small production cluster.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from kafka_node import KafkaNode, run_kafka_tool

__all__ = ["KafkaCluster"]

CLUSTER_PROPERTIES = {
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    # A killed broker's leaderships move once its session expires: short, so a test waits seconds, not minutes.
    "broker.session.timeout.ms": "4000",
    "broker.heartbeat.interval.ms": "500",
}


class KafkaCluster:
    """`size` KRaft nodes (node ids 1..size) under `directory`, each a broker and a voter."""

    def __init__(self, directory: str | os.PathLike, size: int = 3, properties: dict | None = None, **node_options):
        directory = Path(directory).resolve()
        settings = {**CLUSTER_PROPERTIES, **(properties or {})}
        self.nodes = [
            KafkaNode(directory / f"node-{node_id}", properties=settings, node_id=node_id, **node_options)
            for node_id in range(1, size + 1)
        ]
        voters = ",".join(f"{node.node_id}@127.0.0.1:{node.controller_port}" for node in self.nodes)
        for node in self.nodes:
            node.quorum = {"controller.quorum.voters": voters}
            node.standalone = False
        self.cluster_id = run_kafka_tool(
            "kafka.tools.StorageTool", ["random-uuid"], libs=self.nodes[0].libs
        ).stdout.strip()
        for node in self.nodes:
            node.cluster_id = self.cluster_id
        self.start_seconds: float | None = None

    @property
    def bootstrap(self) -> str:
        """Every node's address, comma-separated (`bootstrap.servers`)."""
        return ",".join(node.bootstrap for node in self.nodes)

    def node_of(self, node_id: int) -> KafkaNode:
        return next(node for node in self.nodes if node.node_id == node_id)

    def __enter__(self) -> KafkaCluster:
        self.start()
        return self

    def __exit__(self, *exc_info):
        self.stop()

    def start(self):
        """Launches every node, then waits until each serves (a node serves once a quorum of voters runs)."""
        begun = time.monotonic()
        try:
            for node in self.nodes:
                node.start(wait=False)
            for node in self.nodes:
                node.wait_started()
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - begun

    def stop(self):
        """Kills every running node: a controlled shutdown needs a quorum, which the last nodes to stop would not
        have, and a test's cluster has nothing to keep."""
        for node in self.nodes:
            node.kill()

    def describe(self) -> str:
        start = f"{self.start_seconds:.1f}s" if self.start_seconds is not None else "not started"
        return f"Kafka cluster of {len(self.nodes)} nodes on {self.bootstrap}: start {start}"
