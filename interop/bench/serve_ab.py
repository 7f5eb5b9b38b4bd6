"""Two or more `mirrorlog` builds under the peer benchmark's produce and consume loads, alternating, in one run:
medians of the runs and the peak and final resident memory of each (ADR 0063 compared allocators with it).

    python interop/bench/serve_ab.py --bins OLD,NEW [--runs 5]

Each run starts every build fresh on fs (`durability = "buffered"`), produces 100,000 idempotent messages of 1 KiB
over 12 partitions, then reads them back five times with read_committed consumers (`peer_bench.consume`).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import peer_bench as pb  # noqa: E402


def memory(pid: int) -> dict:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmHWM", "VmRSS"):
            fields[name] = int(value.split()[0]) // 1024
    return fields


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bins", required=True, help="comma-separated mirrorlog binaries")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    binaries = args.bins.split(",")
    figures = {binary: {"produce": [], "consume": [], "peak_mb": [], "after_mb": []} for binary in binaries}
    for run in range(args.runs):
        for binary in binaries:
            with tempfile.TemporaryDirectory(prefix="serve-ab-") as root:
                serve = pb.Serve(binary, Path(root), "buffered")
                try:
                    produced = pb.produce(serve.bootstrap, "p12", 12, 100_000, False)["mib_s"]
                    consumed = pb.consume(serve.bootstrap, "p12", 12, 100_000, passes=5)["mib_s"]
                    used = memory(serve.pid)
                finally:
                    serve.stop()
            mine = figures[binary]
            mine["produce"].append(produced)
            mine["consume"].append(consumed)
            mine["peak_mb"].append(used["VmHWM"])
            mine["after_mb"].append(used["VmRSS"])
            print(f"run {run + 1}, {binary}: produce {produced:.1f} MiB/s, consume {consumed:.1f} MiB/s, "
                  f"peak {used['VmHWM']} MB, after {used['VmRSS']} MB", flush=True)
    for binary, mine in figures.items():
        medians = {name: statistics.median(values) for name, values in mine.items()}
        print(f"{binary}: " + ", ".join(f"{name} {value:.1f}" for name, value in medians.items()))


if __name__ == "__main__":
    main()
