#!/usr/bin/env python3
"""Runs the reproduction command of committed findings, as the report site
prints it, and checks that it reproduces the finding.

For each gateway report in REPORTS_DIR with findings (outcome `fail` or
`expected failure`), this takes one finding (the quickest to run, or those
named with --finding GATEWAY:SCENARIO), reads its bug report
SITE_DIR/gateways/<gateway>/<scenario>.md (written by
`gpu-runner report --html SITE_DIR`), runs the setup line and the command of
its "Reproduce" block exactly as written there (from the checkout root),
with `--report-json` added, and checks that:

- the command exits 1 (without the expectations file the finding is a failure);
- the scenario's outcome in the new report is `fail`;
- the checks that fail are the committed report's failing checks
  (the same (request, check) pairs).

Usage: check_repro.py SITE_DIR [--reports golden/gateway/reports]
                      [--finding GATEWAY:SCENARIO]... [--dry-run]
Prints a line per finding and a summary; exits 1 if one did not reproduce.
The vLLM frontends take 30-90 s each to start on CPU: the scheduled
workflow runs this for every gateway; `docs/report-site.md` has the figures.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time


def failing(result):
    return sorted({(c.get("request", ""), c["check"]) for c in result.get("checks", []) if not c.get("ok")})


def repro_block(md):
    """The lines of the fenced block after the '## Reproduce' heading."""
    tail = md.split("## Reproduce", 1)[1]
    m = re.search(r"```sh\n(.*?)\n```", tail, re.S)
    if not m:
        raise ValueError("no sh block under '## Reproduce'")
    return [line for line in m.group(1).splitlines() if line.strip()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("site")
    ap.add_argument("--reports", default="golden/gateway/reports")
    ap.add_argument("--finding", action="append", default=[], help="GATEWAY:SCENARIO (repeatable)")
    ap.add_argument("--dry-run", action="store_true", help="print the commands only")
    args = ap.parse_args()

    reports = {}
    for name in sorted(os.listdir(args.reports)):
        if not name.endswith(".json") or name.endswith("-instruct.json"):
            continue
        with open(os.path.join(args.reports, name)) as f:
            r = json.load(f)
        if "results" in r:
            reports[r["gateway"]] = r

    chosen = []
    if args.finding:
        for spec in args.finding:
            gw, _, sc = spec.partition(":")
            chosen.append((gw, sc))
    else:
        for gw, r in reports.items():
            found = [x for x in r["results"] if x["outcome"] in ("fail", "expected failure")]
            if found:
                chosen.append((gw, min(found, key=lambda x: x.get("seconds", 0))["scenario"]))

    bad = 0
    for gw, sc in chosen:
        committed = next((x for x in reports[gw]["results"] if x["scenario"] == sc), None)
        if committed is None:
            print(f"{gw} {sc}: no such finding in {args.reports}")
            bad += 1
            continue
        md_path = os.path.join(args.site, "gateways", gw, f"{sc}.md")
        with open(md_path) as f:
            lines = repro_block(f.read())
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "report.json")
            lines[-1] = f"{lines[-1]} --report-json {out}"
            print(f"== {gw} {sc}:", " && ".join(lines), flush=True)
            if args.dry_run:
                continue
            started = time.time()
            rc = None
            for line in lines:
                p = subprocess.run(line, shell=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                rc = p.returncode
                if line is not lines[-1] and rc != 0:
                    break
            secs = time.time() - started
            problems = []
            if rc != 1:
                problems.append(f"exit status {rc}, expected 1 ({p.stderr.strip()[-300:]})")
            if os.path.exists(out):
                with open(out) as f:
                    new = json.load(f)
                row = next((x for x in new["results"] if x["scenario"] == sc), None)
                if row is None:
                    problems.append("the scenario is not in the new report")
                else:
                    if row["outcome"] != "fail":
                        problems.append(f"outcome {row['outcome']}, expected fail")
                    if failing(row) != failing(committed):
                        problems.append(f"failing checks {failing(row)}, committed {failing(committed)}")
            else:
                problems.append("no report written")
        verdict = "reproduced" if not problems else "NOT reproduced: " + "; ".join(problems)
        print(f"{gw} {sc}: {verdict} ({len(failing(committed))} failing checks, {secs:.0f} s)", flush=True)
        bad += bool(problems)
    if not args.dry_run:
        print(f"{len(chosen) - bad} of {len(chosen)} findings reproduced by their site's command")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
