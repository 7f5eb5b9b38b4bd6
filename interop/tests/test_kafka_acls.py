"""`kafka-acls.sh` and ACL enforcement, against `mirrorlog serve --authorizer acl` and against Apache Kafka with
StandardAuthorizer, configured alike: a SASL_SSL listener with the SCRAM users `admin` (a super user) and `app`,
and the same operator session on each — ACLs added, listed and removed by the administrator, refused to `app`, and
what `app` sees of the topics (`kafka-topics --list`, `kafka-get-offsets`) as the ACLs change. Every step's exit
status and output are compared once the broker's identity is masked; a second test checks that the session did
what the operator meant (the comparison alone would pass if both refused everything alike).

After the session, `kafka-diff --authorization` runs as `app` (which then holds no ACL on what it names) against
both: every advertised API at every version, the authorization errors compared per API and version.

`serve` reads its TLS, SASL and authorizer settings from a properties file under Kafka's key names
(`--server-properties`), as Kafka reads them from `server.properties`.

Both brokers keep a PLAINTEXT listener for the harness, whose principal `User:ANONYMOUS` is a super user (Kafka's
brokers talk to their controller over it).
"""

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

import both_ways as bw
from certificates import make_pki
from conftest import STARTED, TIMINGS, require_jars_and_binary
from kafka_node import KafkaNode, run_kafka_tool
from test_kafka_tools import session_differences
from test_mirror_from_kafka import start_serve

ACLS = "org.apache.kafka.tools.AclCommand"
TOPICS = "org.apache.kafka.tools.TopicCommand"
OFFSETS = "org.apache.kafka.tools.GetOffsetShell"
TOPIC = "acl-orders"
HIDDEN = "acl-secret"
# The topic kafka-diff's authorization scenarios name (crate kafka-diff, `scenarios::authorization::TOPIC`).
DIFF_TOPIC = "authz-orders"
DIFF_ENV = "MIRRORLOG_KAFKA_DIFF"
USERS = {"admin": "admin-secret", "app": "app-secret"}
SUPER_USERS = ["User:admin", "User:ANONYMOUS"]


def client_properties(path: Path, user: str, ca: str) -> Path:
    path.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{user}" password="{USERS[user]}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={ca}\n"
    )
    return path


def session(bootstrap: str, admin: Path, app: Path) -> list[tuple[str, list[str]]]:
    """The operator's session: (tool, arguments), in order."""
    as_admin = ["--bootstrap-server", bootstrap, "--command-config", str(admin)]
    as_app = ["--bootstrap-server", bootstrap, "--command-config", str(app)]
    offsets_as_app = ["--bootstrap-server", bootstrap, "--command-config", str(app), "--topic", TOPIC]
    return [
        (ACLS, as_admin + ["--list"]),
        (TOPICS, as_app + ["--list"]),
        (ACLS, as_admin + ["--add", "--allow-principal", "User:app", "--operation", "Read", "--topic", TOPIC]),
        (ACLS, as_admin + ["--add", "--allow-principal", "User:app", "--operation", "Describe",
                           "--topic", "acl-", "--resource-pattern-type", "prefixed"]),
        (ACLS, as_admin + ["--add", "--deny-principal", "User:app", "--operation", "Describe", "--topic", HIDDEN]),
        (ACLS, as_admin + ["--list", "--topic", TOPIC]),
        (ACLS, as_admin + ["--list", "--principal", "User:app"]),
        (TOPICS, as_app + ["--list"]),
        (OFFSETS, offsets_as_app),
        (ACLS, as_app + ["--add", "--allow-principal", "User:app", "--operation", "All", "--cluster"]),
        (ACLS, as_admin + ["--add", "--allow-principal", "User:app", "--operation", "Bogus", "--topic", TOPIC]),
        # Without --operation, kafka-acls removes only the ALL entries: name the operation.
        (ACLS, as_admin + ["--remove", "--force", "--allow-principal", "User:app", "--operation", "Read",
                           "--topic", TOPIC]),
        (ACLS, as_admin + ["--remove", "--force", "--topic", "acl-", "--resource-pattern-type", "prefixed"]),
        (TOPICS, as_app + ["--list"]),
        (OFFSETS, offsets_as_app),
        (ACLS, as_admin + ["--list"]),
    ]


def masked(text: str) -> list[str]:
    lines = []
    for line in text.splitlines():
        line = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:<port>", line)
        line = re.sub(r"\b\d{4}-\d\d-\d\d[ T][\d:,.]+", "<time>", line)
        # Kafka's controller words a refused ACL change after the request it forwarded ("Request … needs ALTER
        # permission."); the exception's class is what a client acts on.
        line = re.sub(r"(ClusterAuthorizationException):.*", r"\1", line)
        lines.append(line)
    # kafka-acls prints the entries of one resource in no fixed order.
    return sorted(line for line in lines if line.strip())


def run_session(bootstrap: str, admin: Path, app: Path) -> list[dict]:
    seen = []
    for tool, args in session(bootstrap, admin, app):
        done = run_kafka_tool(tool, args, check=False, timeout=120)
        seen.append(
            {
                "command": f"{tool.rsplit('.', 1)[-1]} {' '.join(a for a in args if a not in (bootstrap, str(admin), str(app)))}",
                "exit": done.returncode,
                "out": masked(done.stdout),
                "err": [line for line in masked(done.stderr) if "Exception" in line or "ERROR" in line][:2],
            }
        )
    return seen


def run_diff(bootstrap: str, app: Path) -> dict:
    """`kafka-diff --authorization` as `app`: {scenario: (observations, error)}."""
    done = subprocess.run(
        [os.environ[DIFF_ENV], "--authorization", "--bootstrap", bootstrap, "--command-config", str(app)],
        capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return {line["scenario"]: (line["observations"], line["error"]) for line in lines if "scenario" in line}


def add_users(data_dir: Path):
    for user, password in USERS.items():
        # Both SCRAM mechanisms by default, as `kafka-storage format --add-scram` gives Kafka's users here.
        subprocess.run(
            [os.environ[bw.BIN_ENV], "users", "add", "--data-dir", str(data_dir), "--user", user],
            input=password, text=True, check=True, capture_output=True, timeout=60,
        )


def listener_address(process, protocol: str) -> str:
    """Reads serve's `listener PROTOCOL://ADDRESS` lines until `protocol`'s."""
    for _ in range(4):
        line = process.stdout.readline().decode().strip()
        if f"listener {protocol}://" in line:
            return line.rsplit("//", 1)[1]
    raise AssertionError(f"serve printed no {protocol} listener")


def create_topics(bootstrap: str):
    for topic in (TOPIC, HIDDEN, DIFF_TOPIC):
        run_kafka_tool(TOPICS, ["--bootstrap-server", bootstrap, "--create", "--topic", topic,
                                "--partitions", "1", "--replication-factor", "1"])


@pytest.fixture(scope="module")
def sessions(tmp_path_factory):
    require_jars_and_binary()
    root = tmp_path_factory.mktemp("kafka-acls")
    pki = make_pki(root / "pki")
    admin = client_properties(root / "admin.properties", "admin", pki["ca.pem"])
    app = client_properties(root / "app.properties", "app", pki["ca.pem"])
    out = {}

    data_dir = root / "serve"
    data_dir.mkdir()
    add_users(data_dir)
    keystore = root / "keystore.pem"
    keystore.write_text(Path(pki["server.key"]).read_text() + Path(pki["server.pem"]).read_text())
    # serve reads the same keys Kafka's server.properties holds (the listeners stay flags: ephemeral ports).
    properties = root / "serve.properties"
    properties.write_text(
        "ssl.keystore.type=PEM\n"
        f"ssl.keystore.location={keystore}\n"
        "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512\n"
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
        f"super.users={';'.join(SUPER_USERS)}\n"
    )
    process, plaintext = start_serve(
        data_dir, "serve-acls", "--listen", "SASL_SSL://127.0.0.1:0", "--server-properties", str(properties),
    )
    try:
        secured = listener_address(process, "SASL_SSL")
        create_topics(plaintext)
        started = time.monotonic()
        out["serve"] = run_session(secured, admin, app)
        TIMINGS["kafka-acls: the session against serve"] = time.monotonic() - started
        out["diff serve"] = run_diff(secured, app)
    finally:
        process.terminate()
        process.wait(30)

    node = KafkaNode(
        root / "kafka",
        sasl_ssl={"keystore": keystore, "users": USERS},
        properties={
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": ";".join(SUPER_USERS),
        },
    )
    node.start()
    STARTED.append(node)
    try:
        create_topics(node.bootstrap)
        started = time.monotonic()
        out["kafka"] = run_session(node.sasl_ssl_bootstrap, admin, app)
        TIMINGS["kafka-acls: the session against Kafka"] = time.monotonic() - started
        out["diff kafka"] = run_diff(node.sasl_ssl_bootstrap, app)
    finally:
        node.stop()
    return out


def test_kafka_acls_and_enforcement_see_serve_as_they_see_kafka(sessions):
    differences = session_differences(sessions["kafka"], sessions["serve"])
    assert not differences, f"{len(differences)} differences:\n" + "\n".join(differences)


def test_the_acl_session_did_what_the_operator_meant(sessions):
    steps = sessions["serve"]
    assert steps[0]["exit"] == 0 and steps[0]["out"] == [], steps[0]
    assert steps[1]["out"] == [], "app sees no topic before any ACL"
    assert all(step["exit"] == 0 for step in steps[2:5]), steps[2:5]
    assert steps[7]["out"] == [TOPIC], "app sees what READ (and the prefixed DESCRIBE) allows, not the denied topic"
    assert steps[8]["exit"] == 0 and steps[8]["out"] == [f"{TOPIC}:0:0"], steps[8]
    assert steps[9]["exit"] != 0 or any("ClusterAuthorization" in line for line in steps[9]["out"] + steps[9]["err"]), steps[9]
    assert steps[13]["out"] == [], "app sees nothing once its ACLs are removed"
    assert steps[14]["exit"] != 0, steps[14]
    remaining = steps[15]["out"]
    assert any(HIDDEN in line for line in remaining) and not any("READ" in line for line in remaining), remaining


def test_every_api_answers_a_principal_without_acls_as_kafka_does_at_every_version(sessions):
    kafka, serve = sessions["diff kafka"], sessions["diff serve"]
    assert sorted(kafka) == sorted(serve) and len(serve) == 4, (sorted(kafka), sorted(serve))
    differences = []
    for scenario, (observed, error) in serve.items():
        assert error is None, f"{scenario} against serve: {error}"
        assert kafka[scenario][1] is None, f"{scenario} against Kafka: {kafka[scenario][1]}"
        for on_kafka, on_serve in zip(kafka[scenario][0], observed):
            if on_kafka != on_serve:
                differences.append(f"{on_serve['step']}\n  kafka: {on_kafka['seen']}\n  serve: {on_serve['seen']}")
        assert len(kafka[scenario][0]) == len(observed), scenario
    assert not differences, f"{len(differences)} differences:\n" + "\n".join(differences)
    produced = [step for step in serve["unauthorized_data_path_every_version"][0] if step["step"].startswith("Produce")]
    assert produced and all(step["seen"] == [29] for step in produced), produced
    seen = {step["step"]: step["seen"]
            for observations, _ in serve.values() for step in observations}
    # A few answers spelled out, so that a comparison of two wrong brokers cannot pass.
    assert seen["Fetch v11"]["partitions"] == [[29, 0]], seen["Fetch v11"]
    assert seen["OffsetCommit v8"] == [30] and seen["JoinGroup v8"]["error"] == 30
    assert seen["InitProducerId v4"]["error"] in (31, 53)
    assert seen["TxnOffsetCommit v3"] == [53] and seen["EndTxn v2"] == 53
    assert seen["CreateTopics v4"] == [29] and seen["CreateAcls v3"] == [31]
    assert seen["DescribeCluster v2"]["error"] == 0, "Kafka answers DescribeCluster to everyone"
