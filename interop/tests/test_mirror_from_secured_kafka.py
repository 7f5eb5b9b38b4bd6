"""A `mirrorlog serve` destination mirrors a topic from Apache Kafka's SASL_SSL listener (SCRAM-SHA-512 credentials
formatted into Kafka's metadata log, a certificate of the test's own CA), with `mirrorlog mirror create
--source-config FILE` — a Kafka client properties file, as Kafka's tools take one:

- a wrong password is refused at `create` with Kafka's answer (SASL_AUTHENTICATION_FAILED), and the password is
  printed nowhere;
- with the right one the link catches up byte for byte (committed and aborted transactions), `--json` shows its
  settings with the JAAS line redacted, and a failover ends it with the barrier.

Kafka keeps its PLAINTEXT listener for the test's own producer; the link is given only the SASL_SSL address, and
Kafka's Metadata on that listener names only SASL_SSL addresses.

Kafka runs StandardAuthorizer: the link's user `mirror` holds only READ and DESCRIBE on the topic and DESCRIBE on
the cluster and on groups (what a read-only consumer of the topic holds), and a user without them (`stranger`) is
refused at `create` with Kafka's authorization error; so is one that may describe the topic but not read it
(`describer`), before anything is created. The harness's own PLAINTEXT principal, `User:ANONYMOUS`, is a
super user (Kafka's broker reaches its controller over it).
"""

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

import both_ways as bw
from certificates import make_pki
from conftest import STARTED, require_jars_and_binary
from kafka_node import KafkaNode, run_kafka_tool
from test_mirror_from_kafka import caught_up, mirror_json, read_committed, start_serve

TOPIC = "secured-orders"
PARTITIONS = 2
PASSWORD = "mirror-secret"
STRANGER_PASSWORD = "stranger-secret"
DESCRIBER_PASSWORD = "describer-secret"
ACLS = "org.apache.kafka.tools.AclCommand"


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """A Kafka node with a SASL_SSL listener and the user `mirror`, holding committed and aborted transactions."""
    require_jars_and_binary()
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    root = tmp_path_factory.mktemp("secured-kafka")
    pki = make_pki(root / "pki")
    keystore = root / "keystore.pem"
    keystore.write_text(Path(pki["server.key"]).read_text() + Path(pki["server.pem"]).read_text())
    node = KafkaNode(
        root / "kafka",
        sasl_ssl={
            "keystore": keystore,
            "users": {"mirror": PASSWORD, "stranger": STRANGER_PASSWORD, "describer": DESCRIBER_PASSWORD},
        },
        properties={
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS",
        },
    )
    node.start()
    STARTED.append(node)
    try:
        as_harness = ["--bootstrap-server", node.bootstrap, "--add", "--allow-principal", "User:mirror"]
        for grant in (["--operation", "Read", "--operation", "Describe", "--topic", TOPIC],
                      ["--operation", "Describe", "--cluster"],
                      ["--operation", "Describe", "--group", "*"]):
            run_kafka_tool(ACLS, as_harness + grant)
        # `describer` may see the topic (Metadata) but not read it (Fetch).
        run_kafka_tool(ACLS, ["--bootstrap-server", node.bootstrap, "--add", "--allow-principal", "User:describer",
                              "--operation", "Describe", "--topic", TOPIC, "--operation", "Describe", "--cluster"])
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        producer = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": "secured-txn"})
        producer.init_transactions(30)
        for outcome in ("commit", "abort", "commit"):
            producer.begin_transaction()
            for index in range(20):
                producer.produce(TOPIC, value=f"{outcome} {index}".encode(), partition=index % PARTITIONS)
            if outcome == "commit":
                producer.commit_transaction(30)
            else:
                producer.abort_transaction(30)
        yield node, pki
    finally:
        node.stop()


def properties(path: Path, pki: dict, password: str, user: str = "mirror") -> Path:
    path.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{user}" password="{password}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={pki['ca.pem']}\n"
    )
    return path


def test_serve_mirrors_kafkas_sasl_ssl_listener_as_a_read_only_user_and_refuses_wrong_credentials_or_acls_at_create(secured, tmp_path):
    node, pki = secured
    process, dest = start_serve(tmp_path / "dest", "serve-destination")
    try:
        wrong = properties(tmp_path / "wrong.properties", pki, "not-the-password")
        refused = subprocess.run(
            [os.environ[bw.BIN_ENV], "mirror", "create", "--bootstrap", dest, "--link", "wrong",
             "--source", node.sasl_ssl_bootstrap, "--topic", TOPIC, "--source-config", str(wrong)],
            capture_output=True, text=True, timeout=120,
        )
        assert refused.returncode != 0, refused.stdout
        assert "SASL_AUTHENTICATION_FAILED" in refused.stderr, refused.stderr
        assert "not-the-password" not in refused.stderr + refused.stdout

        stranger = properties(tmp_path / "stranger.properties", pki, STRANGER_PASSWORD, user="stranger")
        refused = subprocess.run(
            [os.environ[bw.BIN_ENV], "mirror", "create", "--bootstrap", dest, "--link", "no-acls",
             "--source", node.sasl_ssl_bootstrap, "--topic", TOPIC, "--source-config", str(stranger)],
            capture_output=True, text=True, timeout=120,
        )
        assert refused.returncode != 0, refused.stdout
        assert "AUTHORIZATION_FAILED" in refused.stderr, refused.stderr

        # Fail fast (issue 53, item 6): allowed to describe the topic but not to read it, refused at create.
        describer = properties(tmp_path / "describer.properties", pki, DESCRIBER_PASSWORD, user="describer")
        refused = subprocess.run(
            [os.environ[bw.BIN_ENV], "mirror", "create", "--bootstrap", dest, "--link", "no-read",
             "--source", node.sasl_ssl_bootstrap, "--topic", TOPIC, "--source-config", str(describer)],
            capture_output=True, text=True, timeout=120,
        )
        assert refused.returncode != 0, refused.stdout
        assert f"may not read topic {TOPIC}" in refused.stderr, refused.stderr
        assert "TOPIC_AUTHORIZATION_FAILED" in refused.stderr, refused.stderr
        assert mirror_json("list", dest)["links"] == [], "nothing created"

        right = properties(tmp_path / "source.properties", pki, PASSWORD)
        created = mirror_json("create", dest, "--link", "from-secured-kafka", "--source", node.sasl_ssl_bootstrap,
                              "--topic", TOPIC, "--source-config", str(right))
        link = created["links"][0]
        assert link["source_cluster_id"] == node.cluster_id
        assert "sasl.jaas.config=[redacted]" in link["source_config"], link["source_config"]
        assert PASSWORD not in json.dumps(created)
        caught_up(dest, "from-secured-kafka", PARTITIONS)
        assert read_committed(dest, TOPIC, PARTITIONS) == read_committed(node.bootstrap, TOPIC, PARTITIONS)
        for partition in range(PARTITIONS):
            ours = bw.mirrorlog_json("dump", tmp_path / "dest" / f"{TOPIC}-{partition}")
            theirs = [b for segment in node.segments(TOPIC, partition) for b in bw.mirrorlog_json("dump", segment)]
            assert ours == theirs, f"partition {partition}"
        stopped = mirror_json("failover", dest, "--link", "from-secured-kafka")
        for status in stopped["links"][0]["partitions"]:
            assert status["state"] == "STOPPED" and status["barrier_offset"] == status["log_end_offset"] - 1, status
    finally:
        process.terminate()
        assert process.wait(30) == 0
    log = (tmp_path / "dest.serve.log").read_text(errors="replace")
    assert PASSWORD not in log and "not-the-password" not in log


def acls_at(bootstrap) -> set:
    """Every ACL at `bootstrap`, as (resource type, name, principal, operation, permission)."""
    from confluent_kafka.admin import (
        AclBindingFilter, AclOperation, AclPermissionType, AdminClient, ResourcePatternType, ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    everything = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    return {
        (b.restype.name, b.name, b.principal, b.operation.name, b.permission_type.name)
        for b in admin.describe_acls(everything).result(30)
    }


def test_a_link_with_acl_rules_creates_the_kafka_acls_they_select_and_deletes_those_deleted_at_kafka(secured, tmp_path):
    """Issue 53, item 3: `mirror.acl.include` rules copy the Kafka ACLs they select into `serve --authorizer acl`
    (read back with a Kafka admin client), and an ACL removed at Kafka with kafka-acls is removed here; the link's
    user needs only DESCRIBE on Kafka's cluster."""
    node, pki = secured
    app = ["--bootstrap-server", node.bootstrap, "--allow-principal", "User:app", "--operation", "Read",
           "--topic", TOPIC]
    run_kafka_tool(ACLS, ["--add"] + app)
    process, dest = start_serve(tmp_path / "dest", "serve-acl-destination", "--authorizer", "acl",
                                "--super-user", "User:ANONYMOUS", "--mirror-metadata-refresh-ms", "300")
    try:
        right = properties(tmp_path / "source.properties", pki, PASSWORD)
        mirror_json("create", dest, "--link", "acls", "--source", node.sasl_ssl_bootstrap, "--topic", TOPIC,
                    "--source-config", str(right))
        rule = f"topic;{TOPIC};*;*;User:app"
        altered = mirror_json("alter", dest, "--link", "acls", "--config", f"mirror.acl.include={rule}")
        assert {e["name"]: e["value"] for e in altered["links"][0]["config"]}["mirror.acl.include"] == rule
        wanted = ("TOPIC", TOPIC, "User:app", "READ", "ALLOW")
        for _ in range(150):
            if wanted in acls_at(dest):
                break
            time.sleep(0.2)
        assert acls_at(dest) == {wanted}, "only the ACL the rule selects: not the link user's own"

        run_kafka_tool(ACLS, ["--remove", "--force"] + app)
        for _ in range(150):
            if not acls_at(dest):
                break
            time.sleep(0.2)
        assert acls_at(dest) == set()
        # The link's user lacks DESCRIBE_CONFIGS on the topic: its configs are not synced, and the link says why.
        warnings = mirror_json("describe", dest, "--link", "acls")["links"][0]["warnings"]
        assert len(warnings) == 1 and "TOPIC_AUTHORIZATION_FAILED" in warnings[0], warnings
        assert "its configs could not be read at the source" in warnings[0], warnings
    finally:
        process.terminate()
        assert process.wait(30) == 0
