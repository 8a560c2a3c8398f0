#!/usr/bin/env python3
"""Two builds of `conformance` timed against each other on the bench cases
of docs/bench.md: interleaved rounds (the order alternates), the ratio
new/old taken per round, reported as the median (and the highest) over the
rounds, for the typed path's decode and encode.

    bench/compare_builds.py OLD_BIN NEW_BIN [--rounds N] [--repeats N]

Build the old one from a worktree of the old commit, e.g.:

    git worktree add /tmp/old <commit>
    (cd /tmp/old && CARGO_TARGET_DIR=/tmp/old-target cargo build --release -q -p conformance)
    cargo build --release -q -p conformance
    bench/compare_builds.py /tmp/old-target/release/conformance target/release/conformance
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import msgspec_compare as m  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--golden", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden"))
    args = ap.parse_args()
    rounds = []
    for i in range(args.rounds):
        order = [("old", args.old), ("new", args.new)]
        if i % 2:
            order.reverse()
        rounds.append({name: m.rust_times(args.golden, "0.33.0", b, args.repeats) for name, b in order})
    print("| case | metric | old ns | new ns | new/old median (highest) |")
    print("|---|---|---:|---:|---:|")
    for case_id, _ in m.CASES:
        for metric in ["typed decode", "typed encode"]:
            r = m.ratios(rounds, case_id, "new", metric, "old", metric)
            if not r:
                continue
            old = m.median(m.series(rounds, "old", case_id, metric))
            new = m.median(m.series(rounds, "new", case_id, metric))
            print(f"| `{case_id}` | {metric} | {m.fmt_ns(old)} | {m.fmt_ns(new)} | {m.median(r):.3f} ({max(r):.3f}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
