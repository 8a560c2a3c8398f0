#!/usr/bin/env python3
"""Mutation testing of engine-protocol with cargo-mutants (docs/mutation.md).

The mutants are those cargo-mutants makes of the modules in MODULES (the
translation layer, the validations the engines' decoders run, the decoders);
the tests that must kill them are engine-protocol's and conformance's (the
golden cases, as vLLM's own code wrote them). A mutant that no test can kill
because it does not change what the code does is listed, with the reason, in
protocol/mutation/equivalent.txt and left out of every run.

  run.py list [--module M]...         the mutants, per module; fails on a stale
                                       line of equivalent.txt (no such mutant)
  run.py run --out DIR [--shard K/N] [--module M]... [--sample N] [--jobs J]
             [--in-place [--no-debuginfo]] [--skip-baseline]
                                       run them (cargo-mutants from PATH)
  run.py score DIR... [--min 90] [--markdown FILE]
                                       the score per module from runs' outcomes
                                       (shards merged); fails below --min in a
                                       module of GATED

cargo-mutants 27.1.0 (`cargo install --locked cargo-mutants@27.1.0`; .ci/run
caches it under ~/.cache/engine-conformance/tools/cargo-mutants).
"""

import argparse
import fnmatch
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EQUIVALENT = os.path.join(ROOT, "protocol", "mutation", "equivalent.txt")

# Module -> the files of it cargo-mutants mutates.
MODULES = {
    "translate/stop": ["protocol/src/translate/stop.rs"],
    "translate/logprobs": ["protocol/src/translate/logprobs.rs"],
    "translate/request": ["protocol/src/translate/request/*.rs"],
    "translate/finish": ["protocol/src/translate/finish.rs"],
    "translate/generation": ["protocol/src/translate/generation.rs"],
    "translate/tokenizer": ["protocol/src/translate/tokenizer.rs"],
    "translate/tokenspeed": ["protocol/src/translate/tokenspeed.rs"],
    "validate": ["protocol/src/validate.rs", "protocol/src/validate/*.rs"],
    "decode": ["protocol/src/decode/*.rs", "protocol/src/decode.rs"],
}
# The modules whose score must reach --min (the goal).
GATED = [m for m in MODULES if m.startswith("translate/") or m == "validate"]

# The tests: the libraries' unit tests and every integration test of both
# packages (doc tests and examples left out: they kill nothing here and
# cost a build each), but for conformance's `testee` tests, which run the
# mutated library as a testee against in-process `verify` on the same
# mutated library: both sides carry the mutant, so they cannot kill one
# (and they are 40 s of each mutant's minute). They are skipped by exact
# name, read from their file. Targets are not listed by name: cargo
# refuses a target name that one of the two packages lacks, and
# cargo-mutants would count that refusal as a kill. (cargo-nextest is no
# help: it runs each test in a process of its own, and each of the golden
# harness's ten thousand cases would read the corpus again.)
SELF_COMPARING = os.path.join(ROOT, "conformance", "tests", "testee.rs")


def test_args(path=SELF_COMPARING):
    with open(path, encoding="utf-8") as f:
        names = re.findall(r"#\[test\]\s*fn (\w+)", f.read())
    args = ["--lib", "--tests", "--", "--exact"]
    for n in names:
        args += ["--skip", n]
    return args


# Mutants are built without debug information: linking some thirty test
# binaries is most of a build, and debug information most of a link. Not
# by default in place (CI's sample reuses the target directory its other
# steps built with the dev profile's line tables: a profile of its own
# would build every dependency again); `--no-debuginfo` asks for it there.
ENV = {"CARGO_PROFILE_DEV_DEBUG": "false"}


def module_of(path):
    for m, globs in MODULES.items():
        if any(fnmatch.fnmatch(path, g) for g in globs):
            return m
    return None


def strip_position(name):
    """`file:12:5: replace ...` -> `file: replace ...` (lines move; the rest names the mutant)."""
    return re.sub(r"^([^:]+):\d+:\d+: ", r"\1: ", name)


def equivalents(path=None):
    """{mutant name without its position: reason} of equivalent.txt."""
    path = path or EQUIVALENT
    out = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            name, sep, reason = line.partition(" -- ")
            if not sep or not reason.strip():
                sys.exit(f"{path}:{n}: expected `<file>: <mutation> -- <why it is equivalent>`")
            out[name.strip()] = reason.strip()
    return out


def base_args(modules):
    args = ["mutants", "-p", "engine-protocol", "--features", "translate",
            "--test-package", "engine-protocol", "--test-package", "conformance"]
    for m in modules:
        for g in MODULES[m]:
            args += ["-f", g]
    return args


def listed(modules):
    p = subprocess.run(["cargo"] + base_args(modules) + ["--list", "--json"], cwd=ROOT,
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"cargo mutants --list failed:\n{p.stderr}")
    return json.loads(p.stdout)


def stale_lines(eq, mutant_names, modules):
    """The lines of equivalent.txt, in `modules`, that name no mutant of the list."""
    names = {strip_position(n) for n in mutant_names}
    return [e for e in eq if e not in names and module_of(e.split(":")[0]) in modules]


def cmd_list(args):
    modules = args.module or list(MODULES)
    mutants = listed(modules)
    eq = equivalents()
    stale = stale_lines(eq, [m["name"] for m in mutants], modules)
    counts = {}
    for m in mutants:
        mod = module_of(m["file"])
        key = "equivalent" if strip_position(m["name"]) in eq else "mutants"
        counts.setdefault(mod, {"mutants": 0, "equivalent": 0})[key] += 1
    for mod, c in sorted(counts.items()):
        print(f"{mod:24} {c['mutants']:5} mutants, {c['equivalent']} listed equivalent")
    print(f"{sum(c['mutants'] for c in counts.values())} mutants in all")
    if stale:
        print("stale lines of protocol/mutation/equivalent.txt (no such mutant now):")
        for s in stale:
            print(f"  {s}")
        return 1
    return 0


def cmd_run(args):
    modules = args.module or list(MODULES)
    # In file order: a run cut short has whole modules done.
    cmd = ["cargo"] + base_args(modules) + ["-o", args.out, "--timeout", str(args.timeout), "--no-shuffle"]
    if not args.in_place:
        cmd += ["-j", str(args.jobs)]
    for name in equivalents():
        file, _, rest = name.partition(": ")
        cmd += ["--exclude-re", "^" + re.escape(file) + r":\d+:\d+: " + re.escape(rest) + "$"]
    if args.in_place:
        # The checkout itself, its target directory reused (a throwaway
        # checkout only: an interrupted run leaves a mutated file).
        cmd += ["--in-place"]
    if args.skip_baseline:
        cmd += ["--baseline", "skip"]
    if args.shard:
        cmd += ["--shard", args.shard, "--sharding", "round-robin"]
    if args.sample:
        # A fixed sample: every N-th mutant of the list (round-robin shard 1/N).
        cmd += ["--shard", f"1/{args.sample}", "--sharding", "round-robin"]
    cmd += ["--"] + test_args()
    print(" ".join(cmd), flush=True)
    env = dict(os.environ)
    if not args.in_place or args.no_debuginfo:
        env.update(ENV)
    return subprocess.run(cmd, cwd=ROOT, env=env).returncode


def outcomes(dirs):
    out = {}
    for d in dirs:
        path = os.path.join(d, "mutants.out", "outcomes.json")
        with open(path, encoding="utf-8") as f:
            for o in json.load(f)["outcomes"]:
                s = o.get("scenario")
                if not isinstance(s, dict) or "Mutant" not in s:
                    continue
                out[s["Mutant"]["name"]] = (s["Mutant"]["file"], o["summary"])
    return out


def score_rows(results):
    """{module: counts by outcome} and the missed mutants, from {name: (file, summary)}."""
    rows = {}
    missed = []
    for name, (file, summary) in sorted(results.items()):
        mod = module_of(file) or file
        r = rows.setdefault(mod, {"CaughtMutant": 0, "MissedMutant": 0, "Timeout": 0, "Unviable": 0})
        r[summary] = r.get(summary, 0) + 1
        if summary == "MissedMutant":
            missed.append(name)
    return rows, missed


def percent(r):
    viable = r["CaughtMutant"] + r["MissedMutant"] + r["Timeout"]
    return 100.0 * (r["CaughtMutant"] + r["Timeout"]) / viable if viable else 100.0


def cmd_score(args):
    rows, missed = score_rows(outcomes(args.dirs))
    lines = ["| module | caught | missed | timeout | unviable | score |", "| --- | --- | --- | --- | --- | --- |"]
    low = []
    for mod, r in sorted(rows.items()):
        score = percent(r)
        lines.append(f"| `{mod}` | {r['CaughtMutant']} | {r['MissedMutant']} | {r['Timeout']} | {r['Unviable']} | {score:.1f} % |")
        if mod in GATED and score < args.min:
            low.append(f"{mod} {score:.1f} %")
    text = "\n".join(lines) + "\n"
    print(text)
    if missed:
        print("missed:\n" + "\n".join(f"  {m}" for m in missed))
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as f:
            f.write(text)
    if low:
        print(f"below {args.min} %: {', '.join(low)}")
        return 1
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("list")
    p.add_argument("--module", action="append", choices=list(MODULES))
    p = sub.add_parser("run")
    p.add_argument("--out", required=True)
    p.add_argument("--module", action="append", choices=list(MODULES))
    p.add_argument("--shard")
    p.add_argument("--sample", type=int)
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--timeout", type=int, default=300)
    p.add_argument("--in-place", action="store_true", help="mutate this checkout (CI's throwaway clone)")
    p.add_argument("--skip-baseline", action="store_true", help="the tests already passed unmutated")
    p.add_argument("--no-debuginfo", action="store_true", help="in place too, build without debug information")
    p = sub.add_parser("score")
    p.add_argument("dirs", nargs="+")
    p.add_argument("--min", type=float, default=90.0)
    p.add_argument("--markdown")
    args = ap.parse_args()
    return {"list": cmd_list, "run": cmd_run, "score": cmd_score}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
