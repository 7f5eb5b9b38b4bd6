#!/usr/bin/env python3
"""Where the time of one benchmark path goes, from `perf` stacks folded by `inferno-collapse-perf`.

    perf record -F 2000 --call-graph dwarf,65528 -o perf.data \
        target/release/bench-report --backends fs --only log-appends --out /tmp/r
    perf script -i perf.data | inferno-collapse-perf > stacks.folded
    docs/profiles/breakdown.py log-appends stacks.folded      # or: mirror-copy

Only samples under the path's own frame count (`append_as_leader` for log-appends, `mirror_of` for
mirror-copy: the catch-up, not the set-up or the raw baseline). Each sample goes to the first category whose
frame names it contains; the table is what docs/benchmarks.md quotes.
"""
import collections
import sys

CATEGORIES = {
    "log-appends": (
        "append_as_leader",
        [
            ("CRC-32C check", ["validate_client_append;crc32c", "verify_crc"]),
            ("record checks", ["validate_client_append"]),
            ("producer state: plan", ["plan_append"]),
            ("producer state: commit", ["ProducerStateManager>::commit", "ProducerStateManager::update"]),
            ("write(2) into the page cache", ["libc_write"]),
            ("storage bookkeeping (index entries, contract checks)", ["FsPartition", "Segment", "Checked", "Offloaded"]),
            ("offset and epoch assignment", ["set_base_offset", "set_partition_leader_epoch"]),
        ],
    ),
    "mirror-copy": (
        "mirror_of",
        [
            ("CRC-32C check", ["crc32c"]),
            ("fetch: pread(2)", ["read_exact_at"]),
            ("fetch: other", ["read_for_replica", "LocalFetcher"]),
            ("append: write(2)/writev(2)", ["libc_write", "writev"]),
            ("append: copy into one buffer", ["Segment::append;alloc", "extend_from_slice"]),
            ("append: other (index entries, checks)", ["Segment::append", "FsPartition"]),
            ("producer state", ["producer_state"]),
        ],
    ),
}


def main() -> None:
    if len(sys.argv) != 3 or sys.argv[1] not in CATEGORIES:
        sys.exit(f"usage: {sys.argv[0]} {{{','.join(CATEGORIES)}}} STACKS.folded")
    anchor, rules = CATEGORIES[sys.argv[1]]
    totals: collections.Counter = collections.Counter()
    for line in open(sys.argv[2], encoding="utf-8"):
        stack, _, count = line.rstrip("\n").rpartition(" ")
        frames = stack.split(";")
        starts = [i for i, frame in enumerate(frames) if anchor in frame]
        if not starts:
            continue
        below = ";".join(frames[starts[0] + 1 :])
        name = next(
            (name for name, needles in rules if any(needle in below for needle in needles)),
            "other (allocation, drops, async glue)",
        )
        totals[name] += int(count)
    total = sum(totals.values())
    if total == 0:
        sys.exit(f"no sample under a frame named {anchor!r} (were the stacks cut short? use dwarf,65528)")
    print(f"| where | share of `{anchor}` |")
    print("|---|---:|")
    for name, count in totals.most_common():
        print(f"| {name} | {100 * count / total:.1f} % |")


if __name__ == "__main__":
    main()
