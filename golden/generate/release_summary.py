"""What a new vLLM release changed and whom it breaks, in markdown, from the
files `golden/generate/new-release.sh VERSION --gateways` wrote
(docs/new-release.md): the body of the watch's pull request.

Reads, relative to the repository root:
  - the schema diff against PREVIOUS (`conformance schema-diff PREV VERSION
    --format json`, run here);
  - golden/gateway/reports/releases-*.json: every swept gateway's row for
    VERSION (an engine of VERSION behind that gateway);
  - golden/gateway/reports/<name>.json of each named gateway of VERSION
    (gpu_runner/named-gateways.json): its own frontends scored;
  - golden/gateway/reports/differential-vllm-VERSION.json: its Python
    frontend against PREVIOUS's.
A file that is missing is said, not skipped.

Usage: python3 golden/generate/release_summary.py VERSION PREVIOUS [CONFORMANCE_BIN]
"""

import json
import os
import subprocess
import sys
from collections import Counter


def read(path):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def schema_diff(conformance, prev, version):
    out = subprocess.run(
        [conformance, "schema-diff", prev, version, "--format", "json"], check=True, capture_output=True, text=True
    ).stdout
    return json.loads(out)["changes"]


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    version, prev = argv[1], argv[2]
    conformance = argv[3] if len(argv) > 3 else "target/release/conformance"
    reports = "golden/gateway/reports"
    lines = [f"# vLLM {version}", ""]

    changes = schema_diff(conformance, prev, version)
    worst = Counter()
    for c in changes:
        for side in ("a_reads_b", "b_reads_a"):
            worst[c[side]["verdict"]] += 1
    lines += [
        f"## On the wire against {prev}",
        "",
        f"{len(changes)} changes (docs/reports/releases/vllm-{version}.md); verdicts, each change read both ways: "
        + ", ".join(f"{n} {v}" for v, n in sorted(worst.items())),
        "",
    ]
    for c in changes:
        verdicts = {c["a_reads_b"]["verdict"], c["b_reads_a"]["verdict"]}
        if "breaking" in verdicts:
            lines.append(f"- breaking: `{c['path']}` {c['change']}: {c.get('detail', '')}")
    lines.append("")

    lines += [f"## Gateways against a vLLM {version} engine", "", "| gateway | outcome | passed | first failure |", "| --- | --- | --- | --- |"]
    sweeps = sorted(f for f in os.listdir(reports) if f.startswith("releases-"))
    for f in sweeps:
        sweep = read(os.path.join(reports, f))
        row = next((r for r in sweep.get("releases", []) if r.get("release") == version), None)
        if row is None:
            lines.append(f"| {sweep.get('gateway')} | not swept ({f} has no row for {version}) | | |")
            continue
        lines.append(
            f"| {sweep.get('gateway')} | {row['outcome']} | {row['passed']}/{row['total']} | {(row.get('reason') or '').replace('|', '/')} |"
        )
    lines.append("")

    recipes = read("gpu_runner/named-gateways.json")
    mine = [g["name"] for g in recipes["gateways"] if g["release"] == version]
    lines += [f"## vLLM {version}'s own frontends", "", "| gateway | scenarios | pass | fail | expected failure |", "| --- | --- | --- | --- | --- |"]
    for name in mine:
        r = read(os.path.join(reports, f"{name}.json"))
        if r is None:
            lines.append(f"| {name} | no report ({reports}/{name}.json) | | | |")
            continue
        t = r.get("totals", {})
        total = sum(t.get(k, 0) for k in ("passed", "failed", "expected_failures", "skipped"))
        lines.append(f"| {name} | {total} | {t.get('passed')} | {t.get('failed')} | {t.get('expected_failures')} |")
    lines.append("")

    d = read(os.path.join(reports, f"differential-vllm-{version}.json"))
    if d is None:
        lines.append(f"No differential of vllm-{version} against vllm-{prev} ({reports}/differential-vllm-{version}.json).")
    else:
        cells = d.get("matrix_cells", {})
        lines.append(
            f"## vllm-{version} against vllm-{prev}, parameter by parameter",
        )
        lines.append("")
        lines.append(
            f"{d.get('probes')} probes; matrix cells: " + ", ".join(f"{n} {v}" for v, n in sorted(cells.items()))
        )
        changed = {}
        for f in d.get("findings", []):
            field = f.get("field") or "(every request)"
            paths = sorted({x.get("path", "") for x in f.get("differences", [])})
            changed.setdefault(field, set()).update(paths)
        for field in sorted(changed):
            lines.append(f"- `{field}`: " + ", ".join(f"`{p}`" for p in sorted(changed[field])[:8]))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
