"""What the ACL authorizer costs `mirrorlog serve`: the same librdkafka loads through the SASL_SSL (SCRAM-SHA-512)
listener of two release `serve` processes started alike, one without an authorizer and one with `--authorizer acl`
holding the ACLs the load needs (WRITE and READ on every topic, READ on every group, IDEMPOTENT_WRITE on the
cluster, all for `User:bench`) among 200 others for other principals, in one run, on this machine.

Loads as in tls_bench.py (`idempotent 12p`, `consume 12p`, a quarter of the load first as warm-up); the two
brokers take turns first from run to run; a ratio is the median over the runs of the authorizing broker's figure ÷
the other's in the same run.

    python interop/bench/acl_bench.py --bin target/release/mirrorlog [--messages N] [--runs N]
"""

from __future__ import annotations

import argparse
import signal
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kafka"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from certificates import make_pki  # noqa: E402
from tls_bench import measure, start  # noqa: E402

UNRELATED_ACLS = 200


def grant(plaintext: str):
    """The load's ACLs and 200 unrelated ones, made over the PLAINTEXT listener (`User:ANONYMOUS`, a super user)."""
    from confluent_kafka.admin import (
        AclBinding, AclOperation, AclPermissionType, AdminClient, ResourcePatternType, ResourceType,
    )

    def allow(kind, name, principal, operation):
        return AclBinding(kind, name, ResourcePatternType.LITERAL, principal, "*", operation, AclPermissionType.ALLOW)

    bindings = [
        allow(ResourceType.TOPIC, "*", "User:bench", AclOperation.WRITE),
        allow(ResourceType.TOPIC, "*", "User:bench", AclOperation.READ),
        allow(ResourceType.GROUP, "*", "User:bench", AclOperation.READ),
        allow(ResourceType.BROKER, "kafka-cluster", "User:bench", AclOperation.IDEMPOTENT_WRITE),
    ] + [allow(ResourceType.TOPIC, f"other-{i}", f"User:other-{i}", AclOperation.READ) for i in range(UNRELATED_ACLS)]
    admin = AdminClient({"bootstrap.servers": plaintext})
    for future in admin.create_acls(bindings).values():
        future.result(60)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", required=True, help="a release mirrorlog binary")
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    kinds = ("no authorizer", "--authorizer acl")
    runs = {kind: [] for kind in kinds}
    with tempfile.TemporaryDirectory(prefix="acl-bench-") as root:
        pki = make_pki(Path(root) / "pki")
        for run in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="run-", dir=root) as run_root:
                for name in ("plain", "acl"):
                    (Path(run_root) / name).mkdir()
                plain, plain_addresses = start(args.bin, Path(run_root) / "plain", pki)
                acl, acl_addresses = start(args.bin, Path(run_root) / "acl", pki, "--authorizer", "acl",
                                           "--super-user", "User:ANONYMOUS")
                try:
                    grant(acl_addresses["PLAINTEXT"])
                    brokers = {kinds[0]: plain_addresses, kinds[1]: acl_addresses}
                    for kind in (kinds if run % 2 == 0 else kinds[::-1]):
                        runs[kind].append(measure(brokers[kind]["SASL_SSL"], "SASL_SSL", pki, args.messages))
                        print(f"run {run + 1}, {kind}: {runs[kind][-1]}", flush=True)
                finally:
                    for process in (plain, acl):
                        process.send_signal(signal.SIGTERM)
                        process.wait(60)
    print(f"\n{args.messages:,} messages of 1 KiB per load over SASL_SSL, median of {args.runs} runs; ratio: the "
          "median over the runs of the authorizing broker's figure ÷ the other's in the same run.\n")
    print("| load | metric | no authorizer | --authorizer acl | ratio |\n|---|---|---|---|---|")
    for load in runs[kinds[0]][0]:
        for metric in ("mib_s", "p50_ms", "p99_ms"):
            if metric not in runs[kinds[0]][0][load]:
                continue
            values = [statistics.median(r[load][metric] for r in runs[kind]) for kind in kinds]
            ratios = [a[load][metric] / b[load][metric] for a, b in zip(runs[kinds[1]], runs[kinds[0]])
                      if b[load][metric]]
            print(f"| {load} | {metric} | {values[0]:.2f} | {values[1]:.2f} | {statistics.median(ratios):.2f}× |")


if __name__ == "__main__":
    main()
