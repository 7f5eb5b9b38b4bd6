"""A real Apache Kafka broker for tests: one combined broker+controller KRaft node on loopback, run from the jars
that `cargo xtask kafka` fetches (no tarball, no Docker, no ZooKeeper).

    from kafka_node import KafkaNode

    with KafkaNode(tmp_path / "kafka", transaction_version=2) as node:
        producer = Producer({"bootstrap.servers": node.bootstrap, ...})
        ...
        dump = node.run_tool("kafka.tools.DumpLogSegments", ["--files", segment, "--deep-iteration"])

The jars are found through the environment variable `MIRRORLOG_KAFKA_LIBS` (a directory of jars; `cargo xtask
kafka` and `cargo xtask test` set it) unless `libs=` names them. Java comes from `$JAVA_HOME/bin/java`, else
`java` on the PATH (17 or newer). Standard library only, so that any pytest suite of the project can import it.

A node lives in its own directory (`KafkaNode.directory`):

    server.properties   the broker's configuration, written by `start()`
    data/               the log directory (`log.dirs`, and the KRaft metadata log)
    kafka.out           the broker's standard output and error (log4j at WARN, see log4j2.xml)

`start()` formats the log directory on first use (`kafka.tools.StorageTool format --standalone` with the
`transaction.version` feature asked for), launches `kafka.Kafka` and waits until the broker answers ApiVersions
with finalized features and lists itself in Metadata (so it is unfenced and takes produce requests). `stop()`
shuts it down with SIGTERM (SIGKILL after a timeout); `kill()` sends SIGKILL at once; `start()` again reuses the
directory and the ports. The time a start took and the JVM's resident memory after it are kept in
`start_seconds` and `rss_kib`.
"""

from __future__ import annotations

import atexit
import os
import re
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path

__all__ = [
    "KafkaNode",
    "KafkaNodeError",
    "api_versions",
    "kafka_libs",
    "parse_dump_log_segments",
    "parse_feature_describe",
    "run_kafka_tool",
]

HERE = Path(__file__).resolve().parent
LOG4J_CONFIG = HERE / "log4j2.xml"
LIBS_ENV = "MIRRORLOG_KAFKA_LIBS"

# The properties every node gets; `properties=` in the constructor overrides or adds to them.
DEFAULT_PROPERTIES = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    # One partition each for the internal topics instead of 50: one node needs no more, and each partition is a
    # log the broker creates, loads and recovers.
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.num.partitions": "1",
    "num.partitions": "1",
}

BROKER_JVM_OPTIONS = ("-Xms128m", "-Xmx512m", "-XX:+UseG1GC", "-Djava.awt.headless=true")
# Tools run for a second or two, and start faster with the client compiler alone (StorageTool random-uuid: 1.0 s
# instead of 1.8 s on a 2-core machine).
TOOL_JVM_OPTIONS = ("-Xmx256m", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")

# Kafka protocol: the two requests the readiness probe sends.
API_METADATA = 3
API_API_VERSIONS = 18


class KafkaNodeError(RuntimeError):
    """Kafka could not be formatted, started or stopped; the message carries the end of its output."""


def kafka_libs(libs: str | os.PathLike | None = None) -> Path:
    """The directory of Kafka's jars: `libs`, else `$MIRRORLOG_KAFKA_LIBS`; raises when it holds no jar."""
    value = libs if libs is not None else os.environ.get(LIBS_ENV)
    if not value:
        raise KafkaNodeError(f"{LIBS_ENV} is not set (`cargo xtask kafka` fetches the jars and sets it)")
    path = Path(value)
    if not any(path.glob("kafka_2.13-*.jar")):
        raise KafkaNodeError(f"{path} holds no kafka_2.13 jar (is {LIBS_ENV} the libs directory?)")
    return path


def java_binary() -> str:
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else "java"


def java_command(libs: Path, main_class: str, jvm_options, log_level: str = "WARN") -> list[str]:
    return [
        java_binary(),
        *jvm_options,
        f"-Dlog4j2.configurationFile={LOG4J_CONFIG}",
        f"-Dmirrorlog.kafka.log.level={log_level}",
        "-cp",
        str(libs / "*"),
        main_class,
    ]


def run_kafka_tool(
    main_class: str,
    args,
    libs: str | os.PathLike | None = None,
    timeout: float = 120,
    check: bool = True,
    jvm_options=TOOL_JVM_OPTIONS,
) -> subprocess.CompletedProcess:
    """Runs a Kafka tool (`kafka.tools.DumpLogSegments`, `org.apache.kafka.tools.FeatureCommand`, ...) with the
    broker's classpath; returns the finished process with text `stdout` and `stderr`. With `check`, a non-zero exit
    raises KafkaNodeError quoting both streams."""
    command = java_command(kafka_libs(libs), main_class, jvm_options) + [str(arg) for arg in args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if check and done.returncode != 0:
        raise KafkaNodeError(
            f"{main_class} {' '.join(map(str, args))} exited with {done.returncode}\n"
            f"--- stdout\n{tail(done.stdout)}\n--- stderr\n{tail(done.stderr)}"
        )
    return done


def tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])


def free_loopback_ports(count: int) -> list[int]:
    """`count` distinct ports the kernel had free on 127.0.0.1 (all held open together, then released)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def rss_kib(pid: int) -> int | None:
    """The resident set size of a process, from /proc/PID/status (Linux), in KiB."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


# Nodes still running when the interpreter exits (a test run interrupted before its teardown) are killed.
_live_nodes: set[KafkaNode] = set()


@atexit.register
def _kill_leftovers():
    for node in list(_live_nodes):
        node.kill()


class KafkaNode:
    """One Apache Kafka KRaft node (`process.roles=broker,controller`) on two free loopback ports."""

    def __init__(
        self,
        directory: str | os.PathLike,
        transaction_version: int = 2,
        properties: dict | None = None,
        libs: str | os.PathLike | None = None,
        jvm_options=BROKER_JVM_OPTIONS,
        log_level: str = "WARN",
        start_timeout: float = 120,
        node_id: int = 1,
        sasl_ssl: dict | None = None,
    ):
        """`sasl_ssl`: a SASL_SSL listener beside PLAINTEXT, `{"keystore": PEM file holding the key and the
        certificate chain, "users": {name: password}}` — SCRAM-SHA-256 and SCRAM-SHA-512 credentials formatted into
        the metadata log (`StorageTool format --add-scram`), as a secured production cluster has them."""
        if transaction_version not in (0, 1, 2):
            raise ValueError(f"transaction_version must be 0, 1 or 2, not {transaction_version}")
        self.directory = Path(directory).resolve()
        self.transaction_version = transaction_version
        self.libs = kafka_libs(libs)
        self.jvm_options = tuple(jvm_options)
        self.log_level = log_level
        self.start_timeout = start_timeout
        self.properties = {**DEFAULT_PROPERTIES, **{k: str(v) for k, v in (properties or {}).items()}}
        self.port, self.controller_port, self.sasl_ssl_port = free_loopback_ports(3)
        self.sasl_ssl = sasl_ssl
        self.node_id = node_id
        # How the node finds its controller quorum: alone by default (`--standalone`); a KafkaCluster sets the
        # static voter set of all its nodes instead (and the cluster id they share).
        self.quorum: dict[str, str] = {"controller.quorum.bootstrap.servers": f"127.0.0.1:{self.controller_port}"}
        self.standalone = True
        self.cluster_id: str | None = None
        self.process: subprocess.Popen | None = None
        self.format_seconds: float | None = None
        self.start_seconds: float | None = None
        self.rss_kib: int | None = None

    # -- where things are

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_ssl_bootstrap(self) -> str:
        """The SASL_SSL listener's address (only with `sasl_ssl=`)."""
        if self.sasl_ssl is None:
            raise KafkaNodeError("this node has no SASL_SSL listener")
        return f"127.0.0.1:{self.sasl_ssl_port}"

    @property
    def log_dirs(self) -> list[Path]:
        return [self.directory / "data"]

    @property
    def config_path(self) -> Path:
        return self.directory / "server.properties"

    @property
    def output_path(self) -> Path:
        return self.directory / "kafka.out"

    def partition_dir(self, topic: str, partition: int = 0) -> Path:
        return self.log_dirs[0] / f"{topic}-{partition}"

    def segments(self, topic: str, partition: int = 0) -> list[Path]:
        """The partition's `.log` segment files, oldest first."""
        return sorted(self.partition_dir(topic, partition).glob("*.log"))

    def output(self) -> str:
        """What the broker printed so far (its log4j output at the configured level, and the JVM's)."""
        try:
            return self.output_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    # -- life cycle

    def __enter__(self) -> KafkaNode:
        self.start()
        return self

    def __exit__(self, *exc_info):
        self.stop()

    def start(self, wait: bool = True):
        """Formats the log directory when it has no meta.properties yet, launches the broker and waits until it
        serves; raises KafkaNodeError (with the end of its output) when it exits or the timeout passes first.
        `wait=False` only launches it (a cluster's nodes serve once a quorum of them runs: see `KafkaCluster`)."""
        if self.process is not None:
            raise KafkaNodeError("already running")
        self.directory.mkdir(parents=True, exist_ok=True)
        self.write_config()
        if not (self.log_dirs[0] / "meta.properties").exists():
            self.format()
        elif self.cluster_id is None:
            self.cluster_id = read_properties(self.log_dirs[0] / "meta.properties")["cluster.id"]
        begun = time.monotonic()
        with open(self.output_path, "ab") as out:
            self.process = subprocess.Popen(
                java_command(self.libs, "kafka.Kafka", self.jvm_options, self.log_level) + [str(self.config_path)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        _live_nodes.add(self)
        self.launched_at = begun
        if wait:
            self.wait_started()

    def wait_started(self):
        """Waits until the launched broker serves (see `start`), then records what starting it cost."""
        try:
            self.wait_until_serving(self.launched_at + self.start_timeout)
        except BaseException:
            self.kill()
            raise
        self.start_seconds = time.monotonic() - self.launched_at
        self.rss_kib = rss_kib(self.process.pid)

    def write_config(self):
        settings = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            **self.quorum,
            "log.dirs": ",".join(str(d) for d in self.log_dirs),
            **self.secured_settings(),
            **self.properties,
        }
        self.config_path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()), encoding="utf-8")

    def secured_settings(self) -> dict[str, str]:
        """The SASL_SSL listener's settings (none without `sasl_ssl=`)."""
        if self.sasl_ssl is None:
            return {}
        listener = f"SASL_SSL://127.0.0.1:{self.sasl_ssl_port}"
        scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        return {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},{listener},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port},{listener}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": scram,
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": scram,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.sasl_ssl["keystore"]),
        }

    def format(self):
        """`StorageTool random-uuid` (unless the cluster id is set), then `StorageTool format --standalone --feature
        transaction.version=N` (without `--standalone` for a member of a static voter set)."""
        begun = time.monotonic()
        if self.cluster_id is None:
            self.cluster_id = self.run_tool("kafka.tools.StorageTool", ["random-uuid"]).stdout.strip()
        self.run_tool(
            "kafka.tools.StorageTool",
            [
                "format",
                "--cluster-id",
                self.cluster_id,
                "--config",
                self.config_path,
                *(["--standalone"] if self.standalone else []),
                "--feature",
                f"transaction.version={self.transaction_version}",
                *[
                    argument
                    for name, password in ((self.sasl_ssl or {}).get("users") or {}).items()
                    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512")
                    for argument in ("--add-scram", f"{mechanism}=[name={name},password={password}]")
                ],
            ],
        )
        self.format_seconds = time.monotonic() - begun

    def wait_until_serving(self, deadline: float):
        last_problem = "no answer yet"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise KafkaNodeError(
                    f"Kafka exited with {self.process.returncode} while starting\n--- {self.output_path}\n"
                    f"{tail(self.output())}"
                )
            try:
                features = api_versions(self.port)
                if "metadata.version" not in features["finalized"]:
                    last_problem = "ApiVersions lists no finalized metadata.version yet"
                elif self.node_id not in metadata_brokers(self.port):
                    last_problem = "Metadata does not list the broker yet (fenced)"
                else:
                    return
            except OSError as error:
                last_problem = f"{type(error).__name__}: {error}"
            time.sleep(0.25)
        raise KafkaNodeError(
            f"Kafka did not serve on {self.bootstrap} within {self.start_timeout:.0f}s ({last_problem})\n"
            f"--- {self.output_path}\n{tail(self.output())}"
        )

    def stop(self, timeout: float = 60) -> int | None:
        """SIGTERM and a wait for the controlled shutdown; SIGKILL when it takes longer than `timeout`. Returns the
        exit code (None when the node was not running)."""
        if self.process is None:
            return None
        process = self.process
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                self.process = None
                _live_nodes.discard(self)
                raise KafkaNodeError(
                    f"Kafka did not stop within {timeout:.0f}s of SIGTERM (killed)\n--- {self.output_path}\n"
                    f"{tail(self.output())}"
                )
        self.process = None
        _live_nodes.discard(self)
        return process.returncode

    def kill(self):
        """SIGKILL: no shutdown at all (the next start recovers the logs)."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.process = None
        _live_nodes.discard(self)

    def clean_shutdown_marked(self) -> bool:
        """Whether every log directory holds `.kafka_cleanshutdown` (written by a controlled shutdown)."""
        return all((d / ".kafka_cleanshutdown").exists() for d in self.log_dirs)

    # -- asking the broker

    def run_tool(self, main_class: str, args, **kwargs) -> subprocess.CompletedProcess:
        """`run_kafka_tool` with this node's jars."""
        return run_kafka_tool(main_class, args, libs=self.libs, **kwargs)

    def finalized_features(self) -> dict[str, int]:
        """The finalized feature levels the broker advertises in ApiVersions (`transaction.version`, ...)."""
        return {name: levels[1] for name, levels in api_versions(self.port)["finalized"].items()}

    def describe(self) -> str:
        """One line for test reports: where it runs and what starting it cost."""
        rss = f"{self.rss_kib / 1024:.0f} MiB" if self.rss_kib else "unknown"
        start = f"{self.start_seconds:.1f}s" if self.start_seconds is not None else "not started"
        return f"Kafka on {self.bootstrap} (transaction.version={self.transaction_version}): start {start}, RSS {rss}"


def read_properties(path: Path) -> dict[str, str]:
    entries = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            entries[key.strip()] = value.strip()
    return entries


# -- a minimal Kafka protocol client: just what the readiness probe needs -------------------------------------


class Reader:
    """Reads the Kafka protocol's primitive types from a response body."""

    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ProtocolError("response ends early")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def int16(self) -> int:
        return struct.unpack(">h", self.take(2))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def int64(self) -> int:
        return struct.unpack(">q", self.take(8))[0]

    def uvarint(self) -> int:
        value, shift = 0, 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    def string(self) -> str | None:
        length = self.int16()
        return None if length < 0 else self.take(length).decode()

    def compact_string(self) -> str | None:
        length = self.uvarint() - 1
        return None if length < 0 else self.take(length).decode()

    def tagged_fields(self) -> dict[int, bytes]:
        fields = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            fields[tag] = self.take(self.uvarint())
        return fields


class ProtocolError(OSError):
    """The broker's answer could not be read (an OSError, so the readiness probe retries)."""


def uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def compact_string(text: str) -> bytes:
    data = text.encode()
    return uvarint(len(data) + 1) + data


def exchange(port: int, api_key: int, api_version: int, flexible_header: bool, body: bytes, timeout=5.0) -> Reader:
    """Sends one request on a new connection and returns a reader over the response body (after the correlation
    id; ApiVersions answers with header v0 whatever the request's header was)."""
    client_id = b"kafka_node"
    header = struct.pack(">hhih", api_key, api_version, 1, len(client_id)) + client_id
    if flexible_header:
        header += uvarint(0)
    request = header + body
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
        conn.sendall(struct.pack(">i", len(request)) + request)
        size = struct.unpack(">i", receive(conn, 4))[0]
        response = Reader(receive(conn, size))
    if response.int32() != 1:
        raise ProtocolError("correlation id mismatch")
    return response


def receive(conn: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = conn.recv(left)
        if not chunk:
            raise ProtocolError("connection closed mid-response")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def api_versions(port: int) -> dict:
    """ApiVersions v3: {"apis": {key: (min, max)}, "supported": {feature: (min, max)}, "finalized": {feature:
    (min_level, max_level)}, "finalized_epoch": int}. (At v3, Kafka 4.1 lists only metadata.version among the
    supported features; the finalized ones are all there.)"""
    # The software name and version must match [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])? or the broker answers
    # INVALID_REQUEST (42).
    body = compact_string("mirrorlog-kafka-node") + compact_string("1") + uvarint(0)
    r = exchange(port, API_API_VERSIONS, 3, True, body)
    error = r.int16()
    if error:
        raise ProtocolError(f"ApiVersions error code {error}")
    apis = {}
    for _ in range(r.uvarint() - 1):
        key, low, high = r.int16(), r.int16(), r.int16()
        r.tagged_fields()
        apis[key] = (low, high)
    r.int32()  # throttle time
    result = {"apis": apis, "supported": {}, "finalized": {}, "finalized_epoch": -1}
    tags = r.tagged_fields()
    if 0 in tags:  # SupportedFeatures: name, min version, max version
        t = Reader(tags[0])
        for _ in range(t.uvarint() - 1):
            name, low, high = t.compact_string(), t.int16(), t.int16()
            t.tagged_fields()
            result["supported"][name] = (low, high)
    if 1 in tags:
        result["finalized_epoch"] = Reader(tags[1]).int64()
    if 2 in tags:  # FinalizedFeatures: name, max version level, min version level
        t = Reader(tags[2])
        for _ in range(t.uvarint() - 1):
            name, high, low = t.compact_string(), t.int16(), t.int16()
            t.tagged_fields()
            result["finalized"][name] = (low, high)
    return result


def metadata_brokers(port: int) -> set[int]:
    """Metadata v1 for no topic: the ids of the brokers the node lists (a fenced broker lists none)."""
    r = exchange(port, API_METADATA, 1, False, struct.pack(">i", 0))
    brokers = set()
    for _ in range(r.int32()):
        node_id = r.int32()
        r.string()  # host
        r.int32()  # port
        r.string()  # rack
        brokers.add(node_id)
    return brokers


FEATURE_LINE = re.compile(r"Feature:\s*(\S+)\s+SupportedMinVersion:\s*(\S+)\s+SupportedMaxVersion:\s*(\S+)\s+"
                          r"FinalizedVersionLevel:\s*(\S+)")


def parse_feature_describe(text: str) -> dict[str, int]:
    """`FeatureCommand describe` output as {feature: finalized level} (numeric levels only: metadata.version is
    printed as a release name)."""
    return {m.group(1): int(m.group(4)) for m in FEATURE_LINE.finditer(text) if m.group(4).lstrip("-").isdigit()}


# One `name: value` pair of a DumpLogSegments line; a value runs to the next pair (or the end of the line).
DUMP_FIELD = re.compile(r"(?:^|\s)([A-Za-z]+): ")


def parse_dump_fields(line: str) -> dict[str, str]:
    # A record's payload comes last and may hold anything, `name: ` included: it is cut off first.
    line, found, payload = line.partition(" payload: ")
    matches = list(DUMP_FIELD.finditer(line))
    fields = {
        match.group(1): line[match.end() : matches[i + 1].start() if i + 1 < len(matches) else len(line)].strip()
        for i, match in enumerate(matches)
    }
    if found:
        fields["payload"] = payload
    return fields


def parse_dump_log_segments(text: str) -> list[dict]:
    """`DumpLogSegments --deep-iteration` output of `.log` files as a list of batches: each the dict of its
    `baseOffset: ... isvalid: ...` line, with the dicts of its `| offset: ...` record lines under "records"
    (values as printed, e.g. "payload", "endTxnMarker")."""
    batches = []
    for line in text.splitlines():
        if line.startswith("baseOffset:"):
            batches.append({**parse_dump_fields(line), "records": []})
        elif line.startswith("| offset:") and batches:
            batches[-1]["records"].append(parse_dump_fields(line[2:]))
    return batches
