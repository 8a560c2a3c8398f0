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
             [--in-place [--no-debuginfo]] [--skip-baseline] [--quick-first]
             [--resume] [--again DIR]...
                                       run them (cargo-mutants from PATH);
                                       --quick-first: against the quick
                                       tests first, then the ones they miss
                                       against every test; --resume: go on
                                       with a run cut short in DIR; --again:
                                       only what runs in DIR did not judge
  run.py score DIR... [--min 90] [--markdown FILE] [--record [FILE]
                [--measured DAY] [--sample N]]
                                       the score per module from runs' outcomes
                                       (shards merged); fails below --min in a
                                       module of GATED

cargo-mutants 27.1.0 (`cargo install --locked cargo-mutants@27.1.0`; .ci/run
caches it under ~/.cache/engine-conformance/tools/cargo-mutants).
"""

import argparse
import datetime
import fnmatch
import glob
import json
import os
import re
import shutil
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


# The quick pass (`run --quick-first`): every test but those of the slow
# test targets, skipped by exact name read from their files (`compat`,
# `hot_request`, `fuzz_seed_corpus`, `hot_outputs`, `robustness` and
# `limits` are 52 of the 63 s of tests a surviving mutant costs).
# cargo-mutants runs the test command once per package, so the targets
# themselves cannot be named: each name would have to be a target of both
# packages. A mutant the quick pass kills, every test kills; the ones it
# misses run again against every test, so the score is the same as one
# run against every test, at half the time.
SLOW = ["conformance/tests/compat.rs"] + [
    f"protocol/tests/{n}.rs" for n in ("hot_request", "fuzz_seed_corpus", "hot_outputs", "robustness", "limits")]


def test_names(path):
    """The tests of one file: `#[test]` functions and those of `proptest!` blocks."""
    with open(path, encoding="utf-8") as f:
        src = f.read()
    names = re.findall(r"#\[test\]\s*(?:#\[[^\]]*\]\s*)*fn (\w+)", src)
    for block in re.findall(r"proptest!\s*\{(.*?)\n\}", src, re.S):
        names += re.findall(r"^\s*fn (\w+)\s*\(", block, re.M)
    return sorted(set(names))


def skips(paths):
    args = ["--exact"]
    for path in paths:
        for n in test_names(path):
            args += ["--skip", n]
    return args


def test_args(path=SELF_COMPARING):
    return ["--lib", "--tests", "--"] + skips([path])


def quick_test_args():
    return ["--lib", "--tests", "--"] + skips([SELF_COMPARING] + [os.path.join(ROOT, p) for p in SLOW])


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


def module_of_mutant(name):
    """The module of a mutant named `file:line:col: ...` or `file: ...`."""
    return module_of(name.split(":")[0])


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
    return [e for e in eq if e not in names and module_of_mutant(e) in modules]


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
    # The mutants of the code now (both passes mutate the same code).
    current = [m["name"] for m in listed(modules)]
    if args.again:
        # The runs it goes on from, and every mutant of the code now: the
        # earlier runs' mutants of code since removed no longer count.
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "again.json"), "w", encoding="utf-8") as f:
            json.dump({"again": [os.path.abspath(d) for d in args.again],
                       "current": sorted({strip_position(n) for n in current})}, f, indent=0)
    # Left out of every pass, named without their position: the mutants
    # judged by the runs `--again` goes on from, and the listed equivalents.
    judged = set(judged_before(args.again)) | set(equivalents())
    if not args.quick_first:
        return run_pass(args, modules, args.out, test_args(), current, judged)
    quick = os.path.join(args.out, "quick")
    rc = run_pass(args, modules, quick, quick_test_args(), current, judged, timeout=args.quick_timeout)
    if rc not in (0, 2, 3):
        # 2: some mutants missed, 3: some timed out (cargo-mutants' exit codes).
        return rc
    missed = {n for n, (_, summary) in read_outcomes(parts(quick)).items() if summary == "MissedMutant"}
    print(f"{len(missed)} missed by the quick tests: again against every test", flush=True)
    if not missed:
        return rc
    return run_pass(args, modules, os.path.join(args.out, "every-test"), test_args(), current, judged, only=missed)


def skipped(current, judged, done=(), only=None):
    """The mutants of `current` (exact names, as listed now) a pass leaves
    out: those `judged` names (without position: judged by earlier runs, or
    listed equivalent) at any position, those `done` (exact names: a pass
    resumed), and, when `only` is given, every one it does not name."""
    judged, done = set(judged), set(done)
    return [n for n in current
            if strip_position(n) in judged or n in done or (only is not None and n not in only)]


def shard_args(args, only=None):
    """cargo-mutants' split of the list for `--shard K/N` or `--sample N`
    (every N-th mutant: round-robin shard 1/N). None for a second pass
    (`only`): the mutants its first pass missed are all run, being already
    of the shard or the sample, where cargo-mutants would split what is
    left after the exclusions again."""
    if only is not None:
        return []
    if args.shard:
        return ["--shard", args.shard, "--sharding", "round-robin"]
    if args.sample:
        return ["--shard", f"1/{args.sample}", "--sharding", "round-robin"]
    return []


def run_pass(args, modules, out, tests, current, judged, only=None, timeout=None):
    """One cargo-mutants run into `out` over the mutants `current` (exact
    names, as listed now): those `judged` (named without position) left
    out, and when `only` is given (exact names) every other one.

    cargo-mutants 27.1.0 applies `--re` and `--exclude-re` to every mutant
    but those deleting a field of a struct expression, which always run.
    Its `--iterate` leaves out, by exact name, each mutant named in
    `mutants.out/previously_caught.txt` of the output directory: the names
    to leave out are written there, from the list of the code now."""
    # In file order: a run cut short has whole modules done.
    os.makedirs(out, exist_ok=True)
    done = resume(out) if args.resume else []
    current = os.path.join(out, "mutants.out")
    if os.path.exists(current):
        # An earlier run's caught.txt would be read as judged: set aside, as
        # cargo-mutants itself does.
        shutil.rmtree(current + ".old", ignore_errors=True)
        os.rename(current, current + ".old")
    skip = skipped(current, judged, done, only)
    os.makedirs(current)
    with open(os.path.join(current, "previously_caught.txt"), "w", encoding="utf-8") as f:
        f.writelines(n + "\n" for n in skip)
    cmd = ["cargo"] + base_args(modules)
    cmd += ["-o", out, "--timeout", str(timeout or args.timeout), "--no-shuffle", "--iterate"]
    if not args.in_place:
        cmd += ["-j", str(args.jobs)]
    if args.in_place:
        # The checkout itself, its target directory reused (a throwaway
        # checkout only: an interrupted run leaves a mutated file).
        cmd += ["--in-place"]
    # The baseline is run.py's own (below): cargo-mutants' runs the
    # mutated package's tests only.
    cmd += ["--baseline", "skip"]
    cmd += shard_args(args, only)
    cmd += ["--"] + tests
    env = dict(os.environ)
    if not args.in_place or args.no_debuginfo:
        env.update(ENV)
    if not args.skip_baseline:
        rc = subprocess.run(baseline_command(tests), cwd=ROOT, env=env).returncode
        if rc != 0:
            print(f"the unmutated tests fail (exit {rc}): no mutant can be judged", file=sys.stderr)
            return 4
    print(f"{len(skip)} mutants left out (judged, equivalent or not asked for)", flush=True)
    print(" ".join(cmd), flush=True)
    return subprocess.run(cmd, cwd=ROOT, env=env).returncode


def judged_before(dirs):
    """The mutants (named without their position) earlier runs in `dirs`
    caught, timed out or found unviable at every position they name: `run
    --again DIR` leaves them out, so it runs what those runs missed, and
    the mutants of code changed since (new names), after new tests."""
    if not dirs:
        return []
    by_name = {}
    for name, (_, summary) in outcomes(dirs).items():
        by_name.setdefault(strip_position(name), set()).add(summary)
    return sorted(n for n, s in by_name.items() if "MissedMutant" not in s)


def resume(out):
    """The mutants a pass cut short already judged (their outcomes kept):
    its last output moves to `earlier-K/`, which `score` reads first."""
    current = os.path.join(out, "mutants.out")
    if os.path.exists(current):
        k = len(glob.glob(os.path.join(out, "earlier-*"))) + 1
        os.makedirs(os.path.join(out, f"earlier-{k}"))
        os.rename(current, os.path.join(out, f"earlier-{k}", "mutants.out"))
    done = list(read_outcomes(parts(out)))
    print(f"resuming {out}: {len(done)} mutants already judged", flush=True)
    return done


def baseline_command(tests):
    """The tests every mutant gets, run on the unmutated tree. A command
    that fails by itself would count every mutant as caught, and
    cargo-mutants' own baseline (27.1.0) runs the mutated package's tests
    only, engine-protocol's, where each mutant runs both packages'."""
    return ["cargo", "test", "--package", "conformance", "--package", "engine-protocol",
            "--features", "translate"] + tests


def parts(pass_dir):
    """One pass's outcome files in order: those of the runs it was resumed
    after (`earlier-1/`, ...), then its last."""
    earlier = sorted(glob.glob(os.path.join(pass_dir, "earlier-*")), key=lambda e: int(e.rsplit("-", 1)[1]))
    files = [os.path.join(e, "mutants.out", "outcomes.json") for e in earlier]
    files.append(os.path.join(pass_dir, "mutants.out", "outcomes.json"))
    return [f for f in files if os.path.exists(f)]


def outcome_files(d):
    """A run's outcome files, in the order they count: one pass, or a
    --quick-first run's two (its second pass decides the mutants it reran)."""
    return parts(d) or [f for sub in ("quick", "every-test") for f in parts(os.path.join(d, sub))]


def outcomes(dirs):
    """{mutant name: (file, summary)} of the runs in `dirs`: shards merged,
    then each `run --again` run (it says so in its `again.json`) deciding
    anew every mutant it ran, whatever its position in the runs before
    (the code may have moved), and dropping those of code removed since
    (not in its `current` list); the mutants equivalent.txt lists now left
    out."""
    for d in dirs:
        if not outcome_files(d):
            sys.exit(f"{d}: no mutants.out/outcomes.json (nor quick/ or every-test/ ones): not a run's output")
    again = [d for d in dirs if os.path.exists(os.path.join(d, "again.json"))]
    base = [d for d in dirs if d not in again]
    out = read_outcomes([p for d in base for p in outcome_files(d)])
    for d in again:
        with open(os.path.join(d, "again.json"), encoding="utf-8") as f:
            current = set(json.load(f).get("current", []))
        # `current` lists the mutants of the modules that run mutated only.
        its_modules = {module_of_mutant(n) for n in current}
        later = read_outcomes(outcome_files(d))
        rerun = {strip_position(n) for n in later}
        out = {n: o for n, o in out.items()
               if strip_position(n) not in rerun
               and (module_of(o[0]) not in its_modules or strip_position(n) in current)}
        out.update(later)
    eq = equivalents()
    return {n: o for n, o in out.items() if strip_position(n) not in eq}


def read_outcomes(files):
    """{mutant name: (file, summary)}, a later file deciding a mutant again."""
    out = {}
    for path in files:
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
    if args.record:
        record(args.record, rows, missed, args.measured or datetime.date.today().isoformat(), args.sample)
    if low:
        print(f"below {args.min} %: {', '.join(low)}")
        return 1
    return 0


SCORES = os.path.join(ROOT, "protocol", "mutation", "scores.json")


def record(path, rows, missed, measured, sample=None):
    """Writes the modules measured into the scores file (`gpu-runner
    scoreboard` shows it): each such module's row replaced, the others kept
    as they were measured, a module never measured listed without counts.
    `sample` N: the runs measured a fixed sample, one mutant in N (`run
    --sample N`), which the row says."""
    old = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            old = {m["module"]: m for m in json.load(f)["modules"]}
    modules = []
    for mod in MODULES:
        r = rows.get(mod)
        if r is None:
            modules.append(old.get(mod, {"module": mod, "measured": None}))
            continue
        modules.append({
            "module": mod,
            "measured": measured,
            "caught": r["CaughtMutant"],
            "missed": r["MissedMutant"],
            "timeout": r["Timeout"],
            "unviable": r["Unviable"],
            "score": round(percent(r), 1),
            "missed_mutants": [m for m in missed if module_of_mutant(m) == mod],
        })
        if sample:
            modules[-1]["sample"] = sample
    doc = {
        "about": "engine-protocol's mutation score per module, as protocol/mutation/run.py score --record "
                 "last measured each (docs/mutation.md)",
        "gated": GATED,
        "goal": 90.0,
        "modules": modules,
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


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
    p.add_argument("--timeout", type=int, default=300, help="seconds a mutant's tests may take (every test)")
    p.add_argument("--quick-timeout", type=int, default=60,
                   help="seconds a mutant's quick tests may take (they take about 15 unmutated, in debug)")
    p.add_argument("--again", action="append", metavar="DIR",
                   help="leave out the mutants runs in DIR judged (caught, timed out, unviable): after new tests, "
                        "run what they missed and what changed since")
    p.add_argument("--resume", action="store_true",
                   help="go on with a run cut short: mutants already judged in OUT are not run again")
    p.add_argument("--in-place", action="store_true", help="mutate this checkout (CI's throwaway clone)")
    p.add_argument("--skip-baseline", action="store_true",
                   help="the unmutated tests are not run first (they already passed, with these arguments)")
    p.add_argument("--no-debuginfo", action="store_true", help="in place too, build without debug information")
    p.add_argument("--quick-first", action="store_true",
                   help="every test but the slow targets' first, the mutants they miss again against every test")
    p = sub.add_parser("score")
    p.add_argument("dirs", nargs="+")
    p.add_argument("--min", type=float, default=90.0)
    p.add_argument("--markdown")
    p.add_argument("--record", nargs="?", const=SCORES, metavar="FILE",
                   help="write the modules measured into FILE (default protocol/mutation/scores.json, "
                        "which gpu-runner scoreboard shows), keeping the others")
    p.add_argument("--measured", help="the date the runs were made (default today)")
    p.add_argument("--sample", type=int, metavar="N",
                   help="with --record: the runs were `run --sample N` (one mutant in N), as the row says")
    args = ap.parse_args()
    if args.cmd == "run" and args.resume and (args.shard or args.sample):
        # cargo-mutants shards the list after exclusions: the shard would change.
        ap.error("--resume runs a whole list again less what was judged: not with --shard or --sample")
    return {"list": cmd_list, "run": cmd_run, "score": cmd_score}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
