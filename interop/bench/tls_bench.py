"""What TLS and SASL_SSL cost `mirrorlog serve`, and how it compares with Apache Kafka over the same listener: the
same librdkafka loads through a PLAINTEXT, an SSL and a SASL_SSL (SCRAM-SHA-512) listener of one release `serve`
(fs, buffered durability), and — with `--libs` — through the PLAINTEXT and SASL_SSL listeners of one Kafka 4.1.2
node (its default durability, the same as buffered), in one run, on this machine.

Loads (confluent-kafka / librdkafka, 1 KiB values, no compression), as in peer_bench.py: `idempotent 12p` (one
idempotent producer, acks=all, linger 5 ms, spread over 12 partitions: MiB/s first produce to last
acknowledgement, with delivery latency p50/p99) and `consume 12p` (three read_committed passes over the topic). Each
listener gets its own topic, warmed by a quarter of the load through that listener first; the order of the
listeners rotates from run to run; a ratio is the median over the
runs of the listener's figure ÷ PLAINTEXT's in the same run.

    python interop/bench/tls_bench.py --bin target/release/mirrorlog [--libs KAFKA_LIBS] [--messages N] \
        [--runs N] [--out DIR]

Certificates are generated for the run (interop/kafka/certificates.py).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kafka"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from certificates import make_pki  # noqa: E402
from kafka_node import KafkaNode  # noqa: E402
from peer_bench import consume, produce  # noqa: E402

LISTENERS = ("PLAINTEXT", "SSL", "SASL_SSL")
# Kafka's node in the harness has a PLAINTEXT and a SASL_SSL listener.
KAFKA_LISTENERS = ("PLAINTEXT", "SASL_SSL")
PASSWORD = "bench-secret"


def start_kafka(libs: str, root: Path, pki: dict) -> tuple[KafkaNode, dict]:
    """A Kafka node with the user `bench` and a 12-partition topic per listener; the node and the addresses."""
    from confluent_kafka.admin import AdminClient, NewTopic

    keystore = root / "keystore.pem"
    keystore.write_text(Path(pki["server.key"]).read_text() + Path(pki["server.pem"]).read_text())
    node = KafkaNode(root / "kafka", libs=libs, sasl_ssl={"keystore": keystore, "users": {"bench": PASSWORD}})
    node.start()
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    for future in admin.create_topics([NewTopic(name.lower(), 12, 1) for name in KAFKA_LISTENERS]).values():
        future.result(60)
    return node, {"PLAINTEXT": node.bootstrap, "SASL_SSL": node.sasl_ssl_bootstrap}


def start(binary: str, root: Path, pki: dict, *extra: str) -> tuple[subprocess.Popen, dict]:
    """`mirrorlog users add` then `serve` with the three listeners (and `extra` flags); the process and each
    listener's address."""
    data = root / "data"
    config = root / "storage.toml"
    config.write_text(f'backend = "fs"\ndata_dir = "{data}"\ndurability = "buffered"\n')
    subprocess.run(
        [binary, "users", "add", "--config", str(config), "--user", "bench", "--mechanism", "SCRAM-SHA-512"],
        input=PASSWORD + "\n", text=True, check=True, capture_output=True,
    )
    topics = [arg for name in LISTENERS for arg in ("--topic", f"{name.lower()}:12")]
    process = subprocess.Popen(
        [binary, "serve", "--config", str(config), *topics,
         "--listen", "PLAINTEXT://127.0.0.1:0", "--listen", "SSL://127.0.0.1:0", "--listen", "SASL_SSL://127.0.0.1:0",
         "--tls-cert", pki["server.pem"], "--tls-key", pki["server.key"], *extra],
        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
    )
    first = process.stdout.readline().decode()
    if "listening on" not in first:
        process.kill()
        raise RuntimeError(f"mirrorlog serve did not start: {first!r}")
    addresses = {}
    for _ in LISTENERS:
        protocol, address = process.stdout.readline().decode().strip().rsplit(" ", 1)[-1].split("://", 1)
        addresses[protocol] = address
    return process, addresses


def measure(bootstrap: str, protocol: str, pki: dict, messages: int) -> dict:
    """The loads through one listener (its own topic, named after the protocol), after a quarter of the load
    through it unmeasured (a fresh JVM runs interpreted at first, as peer_bench.py warms each broker too)."""
    extra, topic = client(protocol, pki), protocol.lower()
    produce(bootstrap, topic, 12, messages // 4, False, extra)
    return {
        "idempotent 12p": produce(bootstrap, topic, 12, messages, False, extra),
        "consume 12p": consume(bootstrap, topic, 12, messages, 3, extra),
    }


def client(protocol: str, pki: dict) -> dict:
    if protocol == "PLAINTEXT":
        return {}
    config = {"security.protocol": protocol, "ssl.ca.location": pki["ca.pem"]}
    if protocol == "SASL_SSL":
        config.update({"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bench", "sasl.password": PASSWORD})
    return config


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", required=True, help="a release mirrorlog binary")
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", help="a directory for tls.json and tls.md")
    parser.add_argument("--libs", help="Apache Kafka's jars: also measure Kafka's PLAINTEXT and SASL_SSL listeners")
    args = parser.parse_args()
    runs = {protocol: [] for protocol in LISTENERS}
    kafka_runs = {protocol: [] for protocol in KAFKA_LISTENERS}
    with tempfile.TemporaryDirectory(prefix="tls-bench-") as root:
        pki = make_pki(Path(root) / "pki")
        for run in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="run-", dir=root) as run_root:
                process, addresses = start(args.bin, Path(run_root), pki)
                try:
                    order = LISTENERS[run % 3:] + LISTENERS[:run % 3]
                    for protocol in order:
                        runs[protocol].append(measure(addresses[protocol], protocol, pki, args.messages))
                        print(f"run {run + 1}, {protocol}: {json.dumps(runs[protocol][-1])}", flush=True)
                finally:
                    process.send_signal(signal.SIGTERM)
                    process.wait(60)
                if args.libs:
                    node, addresses = start_kafka(args.libs, Path(run_root), pki)
                    try:
                        for protocol in KAFKA_LISTENERS:
                            kafka_runs[protocol].append(measure(addresses[protocol], protocol, pki, args.messages))
                            print(f"run {run + 1}, Kafka {protocol}: {json.dumps(kafka_runs[protocol][-1])}", flush=True)
                    finally:
                        node.stop()
    lines = [
        f"{args.messages:,} messages of 1 KiB per load, median of {args.runs} runs; ratio: the median over the runs "
        "of the listener's figure ÷ PLAINTEXT's in the same run.",
        "",
        "| load | metric | PLAINTEXT | SSL | ratio | SASL_SSL (SCRAM-SHA-512) | ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    names = {"mib_s": ("throughput", "MiB/s"), "p50_ms": ("latency p50", "ms"), "p99_ms": ("latency p99", "ms")}
    medians = {}
    for load in runs["PLAINTEXT"][0]:
        for metric, (name, unit) in names.items():
            if metric not in runs["PLAINTEXT"][0][load]:
                continue
            cells = []
            for protocol in LISTENERS:
                value = statistics.median(run[load][metric] for run in runs[protocol])
                medians.setdefault(protocol, {}).setdefault(load, {})[metric] = value
                cells.append(f"{value:.1f} {unit}" if unit == "MiB/s" else f"{value:.2f} {unit}")
                if protocol != "PLAINTEXT":
                    ratios = [
                        mine[load][metric] / base[load][metric]
                        for mine, base in zip(runs[protocol], runs["PLAINTEXT"])
                        if base[load][metric]
                    ]
                    cells.append(f"{statistics.median(ratios):.2f}×")
            lines.append(f"| {load} | {name} | " + " | ".join(cells) + " |")
    if args.libs:
        lines += [
            "",
            "Against Apache Kafka 4.1.2 over the same listener (ratio: the median over the runs of serve ÷ Kafka in the "
            "same run):",
            "",
            "| load | metric | Kafka PLAINTEXT | serve PLAINTEXT | ratio | Kafka SASL_SSL | serve SASL_SSL | ratio |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for load in runs["PLAINTEXT"][0]:
            for metric, (name, unit) in names.items():
                if metric not in runs["PLAINTEXT"][0][load]:
                    continue
                cells = []
                for protocol in KAFKA_LISTENERS:
                    theirs = statistics.median(run[load][metric] for run in kafka_runs[protocol])
                    ours = statistics.median(run[load][metric] for run in runs[protocol])
                    medians.setdefault(f"kafka {protocol}", {}).setdefault(load, {})[metric] = theirs
                    ratios = [
                        mine[load][metric] / base[load][metric]
                        for mine, base in zip(runs[protocol], kafka_runs[protocol])
                        if base[load][metric]
                    ]
                    shown = (lambda v: f"{v:.1f} {unit}") if unit == "MiB/s" else (lambda v: f"{v:.2f} {unit}")
                    cells += [shown(theirs), shown(ours), f"{statistics.median(ratios):.2f}×"]
                lines.append(f"| {load} | {name} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "tls.json").write_text(json.dumps({"medians": medians, "runs": runs, "kafka_runs": kafka_runs}, indent=1))
        (out / "tls.md").write_text(text)


if __name__ == "__main__":
    main()
