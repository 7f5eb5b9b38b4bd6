"""Secured listeners with real clients: librdkafka, kafka-python, the Java client and franz-go over SASL_SSL with
SCRAM (users made with `mirrorlog users add` and AlterUserScramCredentials) — against `serve` and against Apache
Kafka configured alike —, PLAIN over SASL_PLAINTEXT, and mutual TLS; wrong credentials are refused; ACLs
(`serve --authorizer acl` and Kafka's StandardAuthorizer) decide what librdkafka may produce, consume and manage,
alike on both. Certificates are generated here for each run.
"""

import os
import subprocess

from pathlib import Path

import kafka
import pytest
from certificates import make_pki
from kafka_node import LIBS_ENV, KafkaNode
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

ADMIN_PASSWORD = "admin-secret"
APP_PASSWORD = "app-secret"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A CA, a server certificate for localhost and 127.0.0.1, a client certificate (CN=client-1): PEM paths."""
    return make_pki(tmp_path_factory.mktemp("pki"))


def add_user(data_dir, user, password):
    """`mirrorlog users add`, the password on standard input."""
    done = subprocess.run(
        [os.environ["MIRRORLOG_BIN"], "users", "add", "--data-dir", str(data_dir), "--user", user],
        input=password + "\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert password not in done.stderr + done.stdout


def scram(bootstrap, pki, user, password, mechanism="SCRAM-SHA-512"):
    """librdkafka's settings for SASL_SSL."""
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
        "ssl.ca.location": pki["ca.pem"],
    }


@pytest.fixture
def secured(serve, tmp_path, pki):
    """`serve` with SASL_SSL and SASL_PLAINTEXT listeners; `admin` stored before it starts."""
    data_dir = tmp_path / "secured"
    add_user(data_dir, "admin", ADMIN_PASSWORD)
    return serve(
        "--listen", "SASL_SSL://127.0.0.1:0",
        "--listen", "SASL_PLAINTEXT://127.0.0.1:0",
        "--tls-cert", pki["server.pem"],
        "--tls-key", pki["server.key"],
        data_dir=data_dir,
    )


@pytest.fixture(scope="module")
def secured_kafka(tmp_path_factory, pki):
    """An Apache Kafka node configured alike: a SASL_SSL listener (SCRAM, the same certificate), `admin` formatted
    into its metadata log (`StorageTool format --add-scram`), as `mirrorlog users add` makes it for serve."""
    if not os.environ.get(LIBS_ENV):
        pytest.skip(f"{LIBS_ENV} is not set: Apache Kafka's jars are fetched by `cargo xtask test`")
    root = tmp_path_factory.mktemp("secured-kafka")
    keystore = root / "keystore.pem"
    keystore.write_text(Path(pki["server.key"]).read_text() + Path(pki["server.pem"]).read_text())
    node = KafkaNode(root / "kafka", sasl_ssl={"keystore": keystore, "users": {"admin": ADMIN_PASSWORD}})
    node.start()
    yield node
    node.stop()


@pytest.fixture(params=["serve", "kafka"])
def secured_listener(request, pki):
    """The SASL_SSL address of `serve` (the `secured` fixture), then of Kafka configured alike."""
    if request.param == "serve":
        return request.getfixturevalue("secured").listeners["SASL_SSL"]
    return request.getfixturevalue("secured_kafka").sasl_ssl_bootstrap


def test_scram_users_made_over_the_wire_produce_and_consume_with_every_client(
    secured_listener, pki, java_client, franz_go, tmp_path
):
    bootstrap = secured_listener
    admin = AdminClient(scram(bootstrap, pki, "admin", ADMIN_PASSWORD))
    # A second user, made the way kafka-configs makes it: AlterUserScramCredentials, salted by the client.
    # One credential per user per request (a second is DUPLICATE_RESOURCE, in Kafka as here).
    for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
        upsertion = UserScramCredentialUpsertion("app", ScramCredentialInfo(mechanism, 8192), APP_PASSWORD.encode())
        for future in admin.alter_user_scram_credentials([upsertion]).values():
            future.result(30)
    described = admin.describe_user_scram_credentials(["app"])["app"].result(30)
    assert sorted(info.mechanism for info in described.scram_credential_infos) == [
        ScramMechanism.SCRAM_SHA_256,
        ScramMechanism.SCRAM_SHA_512,
    ]
    topic = "secured-orders"
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(30)

    # librdkafka, SCRAM-SHA-512.
    producer = Producer({**scram(bootstrap, pki, "app", APP_PASSWORD), "enable.idempotence": True, "acks": "all"})
    for i in range(10):
        producer.produce(topic, value=f"librdkafka-{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0

    # kafka-python, SCRAM-SHA-256 over the same listener.
    python_producer = kafka.KafkaProducer(
        bootstrap_servers=bootstrap,
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username="app",
        sasl_plain_password=APP_PASSWORD,
        ssl_cafile=pki["ca.pem"],
        ssl_check_hostname=True,
    )
    for i in range(10):
        python_producer.send(topic, value=f"kafka-python-{i}".encode(), partition=i % 2).get(30)
    python_producer.close()

    # The Java client and franz-go, SCRAM-SHA-512.
    properties = tmp_path / "client.properties"
    properties.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required '
        f'username="app" password="{APP_PASSWORD}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={pki['ca.pem']}\n"
    )
    java_client.program.env["MIRRORLOG_CLIENT_PROPERTIES"] = str(properties)
    franz_go.program.env.update(
        {
            "MIRRORLOG_SASL_MECHANISM": "SCRAM-SHA-512",
            "MIRRORLOG_SASL_USER": "app",
            "MIRRORLOG_SASL_PASSWORD": APP_PASSWORD,
            "MIRRORLOG_TLS_CA": pki["ca.pem"],
        }
    )
    try:
        java_records = java_client.produce_idempotent(bootstrap, topic, 2, 10)
        go_records = franz_go.produce_idempotent(bootstrap, topic, 2, 10)
        assert len(java_records) == len(go_records) == 10
        consumed = java_client.consume(bootstrap, topic, 2, "read_committed", 40)
    finally:
        del java_client.program.env["MIRRORLOG_CLIENT_PROPERTIES"]
        for key in ("MIRRORLOG_SASL_MECHANISM", "MIRRORLOG_SASL_USER", "MIRRORLOG_SASL_PASSWORD", "MIRRORLOG_TLS_CA"):
            del franz_go.program.env[key]
    values = sorted(value for _, _, value in consumed)
    assert len(values) == 40
    assert {value.rsplit("-", 1)[0] for value in values} == {"librdkafka", "kafka-python", "idempotent"}

    # librdkafka consumes too, in a group (the group APIs behind authentication).
    consumer = Consumer(
        {**scram(bootstrap, pki, "app", APP_PASSWORD), "group.id": "secured-group", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    seen = 0
    while seen < 40:
        message = consumer.poll(30)
        assert message is not None and not message.error(), message and message.error()
        seen += 1
    consumer.close()


def test_wrong_credentials_are_refused_and_the_broker_logs_no_secret(secured, pki):
    bootstrap = secured.listeners["SASL_SSL"]
    errors = []
    producer = Producer(
        {**scram(bootstrap, pki, "admin", "not-the-password"), "error_cb": errors.append, "message.timeout.ms": 5000}
    )
    producer.produce("anything", value=b"x")
    producer.flush(10)
    assert any("Authentication failed" in error.str() for error in errors), [e.str() for e in errors]
    with pytest.raises(Exception):
        kafka.KafkaProducer(
            bootstrap_servers=bootstrap,
            security_protocol="SASL_SSL",
            sasl_mechanism="SCRAM-SHA-512",
            sasl_plain_username="nobody",
            sasl_plain_password="guess",
            ssl_cafile=pki["ca.pem"],
            api_version_auto_timeout_ms=10_000,
        )
    secured.stop()
    log = secured.stderr_text()
    assert "authentication failed" in log
    assert "not-the-password" not in log and "guess" not in log and ADMIN_PASSWORD not in log


def test_plain_over_sasl_plaintext_checks_the_stored_credential(secured):
    bootstrap = secured.listeners["SASL_PLAINTEXT"]
    config = {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "admin",
        "sasl.password": ADMIN_PASSWORD,
    }
    metadata = AdminClient(config).list_topics(timeout=30)
    assert metadata.brokers[0].port == int(bootstrap.rsplit(":", 1)[1]), "Metadata answers the listener's port"


def test_mutual_tls_serves_clients_with_a_certificate_and_refuses_the_others(serve, pki):
    broker = serve(
        "--listen", "SSL://127.0.0.1:0",
        "--tls-cert", pki["server.pem"],
        "--tls-key", pki["server.key"],
        "--tls-client-ca", pki["ca.pem"],
    )
    bootstrap = broker.listeners["SSL"]
    tls = {"bootstrap.servers": bootstrap, "security.protocol": "SSL", "ssl.ca.location": pki["ca.pem"]}
    with_certificate = {
        **tls,
        "ssl.certificate.location": pki["client.pem"],
        "ssl.key.location": pki["client.key"],
    }
    producer = Producer({**with_certificate, "enable.idempotence": True})
    producer.produce("mtls", value=b"hello")
    assert producer.flush(30) == 0
    python_consumer = kafka.KafkaConsumer(
        "mtls",
        bootstrap_servers=bootstrap,
        security_protocol="SSL",
        ssl_cafile=pki["ca.pem"],
        ssl_certfile=pki["client.pem"],
        ssl_keyfile=pki["client.key"],
        auto_offset_reset="earliest",
        consumer_timeout_ms=10_000,
    )
    assert [message.value for message in python_consumer] == [b"hello"]
    python_consumer.close()
    with pytest.raises(KafkaException):
        AdminClient(tls).list_topics(timeout=5)


@pytest.fixture
def authorizing(serve, tmp_path, pki):
    """`serve` with a SASL_SSL listener and ACLs (`--authorizer acl`), `admin` a super user."""
    data_dir = tmp_path / "authorizing"
    add_user(data_dir, "admin", ADMIN_PASSWORD)
    return serve(
        "--listen", "SASL_SSL://127.0.0.1:0",
        "--tls-cert", pki["server.pem"],
        "--tls-key", pki["server.key"],
        "--authorizer", "acl",
        "--super-user", "User:admin",
        data_dir=data_dir,
    )


@pytest.fixture(scope="module")
def authorizing_kafka(tmp_path_factory, pki):
    """Apache Kafka configured alike: StandardAuthorizer, `admin` a super user (and `User:ANONYMOUS`, the
    principal of its PLAINTEXT listener, over which the broker reaches its controller)."""
    if not os.environ.get(LIBS_ENV):
        pytest.skip(f"{LIBS_ENV} is not set: Apache Kafka's jars are fetched by `cargo xtask test`")
    root = tmp_path_factory.mktemp("authorizing-kafka")
    keystore = root / "keystore.pem"
    keystore.write_text(Path(pki["server.key"]).read_text() + Path(pki["server.pem"]).read_text())
    node = KafkaNode(
        root / "kafka",
        sasl_ssl={"keystore": keystore, "users": {"admin": ADMIN_PASSWORD}},
        properties={
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin;User:ANONYMOUS",
        },
    )
    node.start()
    yield node
    node.stop()


@pytest.fixture(params=["serve", "kafka"])
def authorizing_listener(request):
    """The SASL_SSL address of `serve --authorizer acl`, then of Kafka with StandardAuthorizer."""
    if request.param == "serve":
        return request.getfixturevalue("authorizing").listeners["SASL_SSL"]
    return request.getfixturevalue("authorizing_kafka").sasl_ssl_bootstrap


def produce_outcome(bootstrap, pki, topic):
    """librdkafka produces one record as `app`: the delivery's error code (0 when written)."""
    from confluent_kafka import KafkaError

    outcome = []
    producer = Producer({**scram(bootstrap, pki, "app", APP_PASSWORD), "message.timeout.ms": 15000})
    producer.produce(topic, value=b"v", partition=0,
                     on_delivery=lambda error, _: outcome.append(error.code() if error else KafkaError.NO_ERROR))
    producer.flush(30)
    assert len(outcome) == 1, "the delivery was reported"
    return outcome[0]


def group_outcome(bootstrap, pki, topic, group):
    """librdkafka consumes `topic` in `group` as `app`: the first error code it reports, or 0 with a record."""
    consumer = Consumer({**scram(bootstrap, pki, "app", APP_PASSWORD), "group.id": group,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        for _ in range(30):
            message = consumer.poll(1)
            if message is None:
                continue
            return message.error().code() if message.error() else 0
        raise AssertionError("neither a record nor an error within 30 polls")
    finally:
        consumer.close()


def test_acls_decide_what_a_client_may_do_on_serve_as_on_kafka(authorizing_listener, pki):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import (
        AclBinding, AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType, ResourceType,
    )

    bootstrap = authorizing_listener
    admin = AdminClient(scram(bootstrap, pki, "admin", ADMIN_PASSWORD))
    for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
        upsertion = UserScramCredentialUpsertion("app", ScramCredentialInfo(mechanism, 8192), APP_PASSWORD.encode())
        for future in admin.alter_user_scram_credentials([upsertion]).values():
            future.result(30)
    topic = "acl-orders"
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)

    assert produce_outcome(bootstrap, pki, topic) == KafkaError.TOPIC_AUTHORIZATION_FAILED

    def binding(kind, name, operation, pattern=ResourcePatternType.LITERAL):
        return AclBinding(kind, name, pattern, "User:app", "*", operation, AclPermissionType.ALLOW)

    grants = [
        binding(ResourceType.TOPIC, topic, AclOperation.WRITE),
        binding(ResourceType.TOPIC, topic, AclOperation.READ),
        binding(ResourceType.GROUP, "app-", AclOperation.READ, ResourcePatternType.PREFIXED),
    ]
    for future in admin.create_acls(grants).values():
        future.result(30)
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    # The ACLs are in force once the broker describes them (Kafka applies them from its metadata log).
    for _ in range(100):
        if len(admin.describe_acls(everything).result(30)) == len(grants):
            break
    assert sorted(str(b) for b in admin.describe_acls(everything).result(30)) == sorted(str(b) for b in grants)

    assert produce_outcome(bootstrap, pki, topic) == KafkaError.NO_ERROR
    assert group_outcome(bootstrap, pki, topic, "app-readers") == 0
    assert group_outcome(bootstrap, pki, topic, "other-readers") == KafkaError.GROUP_AUTHORIZATION_FAILED

    # app may not manage ACLs.
    as_app = AdminClient(scram(bootstrap, pki, "app", APP_PASSWORD))
    with pytest.raises(KafkaException) as refused:
        for future in as_app.create_acls([binding(ResourceType.TOPIC, "*", AclOperation.ALL)]).values():
            future.result(30)
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED

    deleted = admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL,
                                                  "User:app", None, AclOperation.WRITE, AclPermissionType.ANY)])
    assert [len(future.result(30)) for future in deleted.values()] == [1]
    for _ in range(100):
        if len(admin.describe_acls(everything).result(30)) == len(grants) - 1:
            break
    assert produce_outcome(bootstrap, pki, topic) == KafkaError.TOPIC_AUTHORIZATION_FAILED
