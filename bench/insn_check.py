#!/usr/bin/env python3
"""The typed codec paths' instructions per call against a committed baseline.

Wall-clock baselines do not carry from one machine to another (and this
project's machines change speed mid-run); instruction counts under
`valgrind --tool=callgrind` do, and a loaded machine counts the same as an
idle one. For each typed path of the bench cases (vLLM 0.33.0 goldens:
`tdec` / `tenc` of the request, `hot` / `tenc` of the output batches;
vLLM 0.34.0's requests, named `0.34.0/<case>`: `sdec` / `senc`, the
shared-frame paths; see `conformance/examples/prof.rs`) this runs the
release-built probe for 20
and for 120 calls and takes `(instructions at 120 - instructions at 20) /
100`: the probe's set-up cancels out.

    bench/insn_check.py              # check against bench/insn-baseline.txt
    bench/insn_check.py --record     # write the baseline from this build

A path above its baseline by more than --tolerance percent (default 3)
fails, naming the baseline file, the case, the path and both figures; one
below by as much is reported (record the new baseline when a change makes
it faster). The counts depend on the toolchain and the allocator
(mimalloc, the probe's default): the baseline file names the rustc it was
recorded with and a check under another one says so. `--measured FILE`
reads the counts from a file in the baseline's format instead of running
valgrind (this script's tests).

valgrind is required: when it is missing the script installs it with
apt-get if it runs as root, and otherwise fails saying so.
"""
import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASELINE = os.path.join(ROOT, "bench", "insn-baseline.txt")
GOLDEN = os.path.join(ROOT, "golden", "vllm")
# A case named without a release is 0.33.0's.
DEFAULT_RELEASE = "0.33.0"
PROBE = os.path.join(ROOT, "target", "release", "examples", "prof")

# (golden case, probe path): the typed paths docs/bench.md's tables time.
PATHS = [
    ("request/prompt_512_tokens", "tdec"),
    ("request/prompt_512_tokens", "tenc"),
    ("output/batch_64", "hot"),
    ("output/batch_64", "tenc"),
    ("output/batch_64_top5_logprobs", "hot"),
    ("output/batch_64_top5_logprobs", "tenc"),
    ("output/batch_256", "hot"),
    ("output/batch_256", "tenc"),
    ("output/batch_logprobs_aux_large", "hot"),
    ("output/batch_logprobs_aux_large", "tenc"),
    ("0.34.0/request/prompt_512_tokens", "sdec"),
    ("0.34.0/request/prompt_512_tokens", "senc"),
    ("0.34.0/request/prompt_array_63", "sdec"),
    ("0.34.0/request/prompt_array_63", "senc"),
    ("0.34.0/request/prompt_array_70000", "sdec"),
    ("0.34.0/request/prompt_array_70000", "senc"),
]
FEW, MANY = 20, 120


class CheckError(Exception):
    pass


def read_counts(path):
    """{(case, path): instructions per call} and the header's rustc line."""
    counts, rustc = {}, None
    try:
        text = open(path).read()
    except OSError as e:
        raise CheckError(f"{path}: {e.strerror}") from e
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if line.startswith("# rustc "):
            rustc = line[2:]
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 3 or not parts[2].isdigit():
            raise CheckError(f"{path}:{n}: expected `<case> <path> <instructions>`, got {line!r}")
        counts[(parts[0], parts[1])] = int(parts[2])
    return counts, rustc


def write_counts(path, counts, rustc):
    with open(path, "w") as f:
        f.write("# Instructions per call of the typed codec paths (bench/insn_check.py --record):\n")
        f.write("# conformance/examples/prof.rs under callgrind, (calls 120 - calls 20) / 100.\n")
        f.write(f"# {rustc}\n")
        for (case, p), n in counts.items():
            f.write(f"{case} {p} {n}\n")


def compare(baseline, measured, tolerance, baseline_path):
    """Failures (above the baseline by more than tolerance %, or missing)
    and notes (below it by as much), as lines naming the file and figures."""
    failures, notes = [], []
    for key, base in baseline.items():
        case, p = key
        if key not in measured:
            failures.append(f"{baseline_path}: {case} {p}: not measured")
            continue
        now = measured[key]
        change = (now - base) / base * 100
        line = (f"{baseline_path}: {case} {p}: {now:,} instructions per call, "
                f"baseline {base:,} ({change:+.1f}%, tolerance {tolerance:+g}%)")
        if change > tolerance:
            failures.append(line)
        elif change < -tolerance:
            notes.append(line + ": faster; record the new baseline with bench/insn_check.py --record")
    for key in measured.keys() - baseline.keys():
        notes.append(f"{baseline_path}: {key[0]} {key[1]}: no baseline (measured {measured[key]:,})")
    return failures, notes


def ensure_valgrind():
    if shutil.which("valgrind"):
        return
    if os.geteuid() == 0 and shutil.which("apt-get"):
        print("valgrind missing: apt-get install -y valgrind", file=sys.stderr)
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        if subprocess.run(["apt-get", "install", "-y", "-q", "valgrind"], env=env).returncode != 0:
            subprocess.run(["apt-get", "update", "-q"], env=env, check=False)
            subprocess.run(["apt-get", "install", "-y", "-q", "valgrind"], env=env, check=False)
    if not shutil.which("valgrind"):
        raise CheckError("valgrind is required for the instruction-count check and could not be installed "
                         "(not root, or apt-get failed): install valgrind")


def golden_file(case):
    """The case file: `<release>/<group>/<name>` or 0.33.0's `<group>/<name>`."""
    first = case.split("/", 1)[0]
    if first[:1].isdigit():
        return os.path.join(GOLDEN, case + ".json")
    return os.path.join(GOLDEN, DEFAULT_RELEASE, case + ".json")


def instructions(probe, case, path, calls):
    golden = golden_file(case)
    r = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", probe, golden,
                        str(calls), path], capture_output=True, text=True)
    m = re.search(r"Collected : (\d+)", r.stderr)
    if r.returncode != 0 or not m:
        raise CheckError(f"{probe} {golden} {calls} {path} under callgrind: exit {r.returncode}\n{r.stderr[-2000:]}")
    return int(m.group(1))


def measure(probe):
    jobs = [(case, p, n) for case, p in PATHS for n in (FEW, MANY)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        got = dict(zip(jobs, pool.map(lambda j: instructions(probe, *j), jobs)))
    return {(case, p): round((got[(case, p, MANY)] - got[(case, p, FEW)]) / (MANY - FEW)) for case, p in PATHS}


def rustc_version():
    return subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline", default=BASELINE)
    ap.add_argument("--tolerance", type=float, default=3.0, help="percent above the baseline that fails")
    ap.add_argument("--record", action="store_true", help="write the baseline from this build")
    ap.add_argument("--measured", help="counts from this file (the baseline's format), not from valgrind")
    ap.add_argument("--probe", default=PROBE, help="the prof example, built with the release profile")
    ap.add_argument("--no-build", action="store_true", help="do not build the probe first")
    args = ap.parse_args(argv)
    try:
        if args.measured:
            measured, rustc = read_counts(args.measured)
        else:
            ensure_valgrind()
            if not args.no_build:
                subprocess.run(["cargo", "build", "--release", "-q", "-p", "conformance", "--example", "prof"],
                               cwd=ROOT, check=True)
            measured, rustc = measure(args.probe), rustc_version()
        if args.record:
            write_counts(args.baseline, measured, rustc)
            print(f"recorded {len(measured)} paths in {args.baseline} ({rustc})")
            return 0
        baseline, base_rustc = read_counts(args.baseline)
        for (case, p), n in measured.items():
            print(f"{case} {p}: {n:,} instructions per call (baseline {baseline.get((case, p), 'none')})")
        if base_rustc and rustc and base_rustc != rustc:
            print(f"note: baseline recorded with {base_rustc}, measured with {rustc}", file=sys.stderr)
        failures, notes = compare(baseline, measured, args.tolerance, args.baseline)
        for line in notes:
            print("note: " + line, file=sys.stderr)
        for line in failures:
            print("regression: " + line, file=sys.stderr)
        return 1 if failures else 0
    except CheckError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
