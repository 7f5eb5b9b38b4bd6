#!/usr/bin/env python3
"""Renders the Grafana dashboard `mirrorlog-links.json` to a picture from a real run, without Grafana.

A source `mirrorlog serve` and a destination `serve --metrics-listen` run on loopback; the destination mirrors the
source's `orders.*` topics through a link created by pattern while a producer writes to them; Prometheus (a real
one: its binary is an argument) scrapes the destination every 2 s. The run pauses the link, resumes it, lets a
consumer group commit, and finally deletes one source topic so that rounds fail. Each panel's queries are then
asked of Prometheus (`/api/v1/query_range`, the PromQL of the dashboard unchanged, `$link` as `.*`) and drawn
with matplotlib in the dashboard's grid: the picture shows what the dashboard's queries answer, in Grafana's
layout but not Grafana's look.

    python3 -m venv /tmp/render-venv && /tmp/render-venv/bin/pip install matplotlib==3.9.2 confluent-kafka==2.16.1
    GOBIN=/tmp/prom go install github.com/prometheus/prometheus/cmd/prometheus@v0.316.0
    cargo build --release -p mirrorlog
    /tmp/render-venv/bin/python docs/grafana/render.py --mirrorlog target/release/mirrorlog \
        --prometheus /tmp/prom/prometheus --out docs/grafana/mirrorlog-links.png

Nothing here is part of the test suite; the dashboard's queries are the ones docs/metrics.md documents.
"""

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

DASHBOARD = Path(__file__).with_name("mirrorlog-links.json")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_serve(binary: str, data_dir: Path, cluster_id: str, *extra) -> tuple[subprocess.Popen, str, list[str]]:
    """A `serve` on an ephemeral port: the process, its bootstrap address and the lines it printed at start."""
    data_dir.mkdir(parents=True)
    log = open(data_dir.parent / f"{cluster_id}.log", "wb")
    process = subprocess.Popen(
        [binary, "serve", "--listen", "127.0.0.1:0", "--cluster-id", cluster_id, "--data-dir", str(data_dir),
         *extra],
        stdout=subprocess.PIPE, stderr=log,
    )
    lines = [process.stdout.readline().decode()]
    if "listening on" not in lines[0]:
        raise SystemExit(f"serve did not start: {lines[0]!r}")
    if "--metrics-listen" in extra:
        while "metrics on" not in lines[-1] and len(lines) < 8:
            lines.append(process.stdout.readline().decode())
    return process, "127.0.0.1:" + lines[0].rsplit(":", 1)[1].strip(), lines


def mirror(binary: str, action: str, bootstrap: str, *args) -> dict:
    done = subprocess.run([binary, "mirror", action, "--bootstrap", bootstrap, *args, "--json"],
                          capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise SystemExit(f"mirror {action}: {done.stdout} {done.stderr}")
    return json.loads(done.stdout)


def produce_until(stop: threading.Event, bootstrap: str, topics: dict[str, int], per_second: int):
    """Writes `per_second` records a second, spread over the topics' partitions, until `stop`."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True})
    targets = [(topic, p) for topic, count in topics.items() for p in range(count)]
    sent = 0
    started = time.monotonic()
    while not stop.is_set():
        due = int((time.monotonic() - started) * per_second)
        while sent < due:
            topic, partition = targets[sent % len(targets)]
            try:
                producer.produce(topic, value=b"x" * 200, partition=partition)
            except Exception:  # a deleted topic's records are refused: the run goes on
                pass
            sent += 1
        producer.poll(0.05)
    producer.flush(10)


def wait_ready(process: subprocess.Popen, url: str, log: str):
    """Waits until Prometheus answers `/-/ready` (30 s at most)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"prometheus exited ({process.returncode}); see {log}")
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"prometheus is not ready after 30 s; see {log}")


def query_range(prometheus: str, expr: str, start: float, end: float) -> list[dict]:
    params = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": 2})
    with urllib.request.urlopen(f"{prometheus}/api/v1/query_range?{params}", timeout=30) as answer:
        body = json.load(answer)
    if body.get("status") != "success":
        raise SystemExit(f"{expr}: {body}")
    return body["data"]["result"]


def legend(template: str, labels: dict) -> str:
    out = template
    for key, value in labels.items():
        out = out.replace("{{" + key + "}}", value)
    return out


def render(prometheus: str, start: float, end: float, out: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dashboard = json.loads(DASHBOARD.read_text())
    panels = dashboard["panels"]
    rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels) // 8
    figure, axes = plt.subplots(rows, 2, figsize=(16, 3.4 * rows), squeeze=False)
    for panel in panels:
        grid = panel["gridPos"]
        axis = axes[grid["y"] // 8][grid["x"] // 12]
        axis.set_title(panel["title"], fontsize=10, loc="left")
        drawn = 0
        for target in panel["targets"]:
            expr = target["expr"].replace("$link", ".*")
            for series in query_range(prometheus, expr, start, end):
                times = [float(t) - start for t, _ in series["values"]]
                values = [float(v) for _, v in series["values"]]
                axis.plot(times, values, linewidth=1.2,
                          label=legend(target.get("legendFormat", ""), series["metric"]) or expr)
                drawn += 1
        if drawn == 0:
            axis.text(0.5, 0.5, "no data", ha="center", va="center", transform=axis.transAxes, color="grey")
        elif drawn <= 8:
            axis.legend(fontsize=7, loc="best", framealpha=0.6)
        axis.set_xlabel("seconds into the run", fontsize=8)
        axis.tick_params(labelsize=8)
        axis.grid(alpha=0.3)
    figure.suptitle(f"{dashboard['title']} — the dashboard's queries answered by Prometheus over a "
                    f"{int(end - start)} s run (docs/grafana/render.py)", fontsize=12)
    figure.tight_layout(rect=(0, 0, 1, 0.985))
    figure.savefig(out, dpi=80)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirrorlog", required=True)
    parser.add_argument("--prometheus", required=True)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--seconds", type=int, default=240)
    parser.add_argument("--prometheus-log", default="/tmp/render-prometheus.log")
    options = parser.parse_args()
    binary = options.mirrorlog
    processes = []
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        try:
            source, source_bootstrap, _ = start_serve(binary, root / "source", "source",
                                                     "--topic", "orders.eu:3", "--topic", "orders.us:2")
            processes.append(source)
            dest, dest_bootstrap, lines = start_serve(binary, root / "dest", "dest",
                                                     "--metrics-listen", "127.0.0.1:0")
            processes.append(dest)
            metrics = lines[-1].rsplit(" ", 1)[1].strip().removeprefix("http://").removesuffix("/metrics")
            web = free_port()
            (root / "prometheus.yml").write_text(
                "global:\n  scrape_interval: 2s\nscrape_configs:\n  - job_name: mirrorlog\n"
                f"    static_configs:\n      - targets: ['{metrics}']\n")
            prometheus = subprocess.Popen(
                [options.prometheus, f"--config.file={root / 'prometheus.yml'}",
                 f"--storage.tsdb.path={root / 'tsdb'}", f"--web.listen-address=127.0.0.1:{web}"],
                stdout=subprocess.DEVNULL, stderr=open(options.prometheus_log, "wb"))
            processes.append(prometheus)
            prometheus_url = f"http://127.0.0.1:{web}"
            wait_ready(prometheus, prometheus_url, options.prometheus_log)
            start = time.time()
            stop = threading.Event()
            writer = threading.Thread(target=produce_until,
                                      args=(stop, source_bootstrap, {"orders.eu": 3, "orders.us": 2}, 2000))
            writer.start()
            mirror(binary, "create", dest_bootstrap, "--link", "eu-us", "--source", source_bootstrap,
                   "--include", r"orders\..*")
            mirror(binary, "alter", dest_bootstrap, "--link", "eu-us",
                   "--config", "mirror.metadata.refresh.interval.ms=2000")
            phase = options.seconds / 6
            time.sleep(phase)
            mirror(binary, "pause", dest_bootstrap, "--link", "eu-us")
            time.sleep(phase)
            mirror(binary, "resume", dest_bootstrap, "--link", "eu-us")
            from confluent_kafka import Consumer

            consumer = Consumer({"bootstrap.servers": source_bootstrap, "group.id": "reporting",
                                 "auto.offset.reset": "earliest"})
            consumer.subscribe(["orders.eu"])
            consumed = 0
            while consumed < 3000:
                consumed += len([m for m in consumer.consume(500, 1.0) if not m.error()])
            consumer.commit(asynchronous=False)
            consumer.close()
            time.sleep(phase)
            stop.set()
            writer.join()
            from confluent_kafka.admin import AdminClient

            admin = AdminClient({"bootstrap.servers": source_bootstrap})  # held until the answer is in
            admin.delete_topics(["orders.us"])["orders.us"].result(30)
            time.sleep(options.seconds - 3 * phase - (time.time() - start - 3 * phase))
            end = time.time()
            time.sleep(4)  # the last scrape in
            if prometheus.poll() is not None:
                raise SystemExit(f"prometheus exited ({prometheus.returncode}); see {options.prometheus_log}")
            render(prometheus_url, start, end, options.out)
        finally:
            for process in processes:
                process.terminate()
                process.wait(30)
    print(f"rendered {options.out}")


if __name__ == "__main__":
    sys.exit(main())
