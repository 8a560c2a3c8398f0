#!/usr/bin/env python3
"""Finish the frame sets `gpu-runner run --dialect tokenspeed --record DIR`
recorded into golden cases, with TokenSpeed's own decoder.

The recorder writes every frame set of a run (HELLO, INIT, READY, the
registration, ADD / ABORT, output batches, the ENGINE_CORE_DEAD sentinel)
in the golden case shape, without a verdict (docs/runner/replay.md "Record mode").
This script adds what only TokenSpeed may say, as generate_tokenspeed.py
does for its own cases:

* `expect`: TokenSpeed's receive path on the frames (`tsenv.Env.decode`:
  the typed decode, `__post_init__`, the socket's gates); a message it
  drops or aborts is a rejection classified by `tsenv.classify`, its error
  kept in `provenance.engine_error`;
* `value` and `drift`: the canonical view rendered from the raw bytes with
  this version's classes (`tsenv.Env.view_of`);
* `encode`: `exact` when TokenSpeed's encoder, given what its typed decoder
  makes of the bytes (no finalisation), writes them again and the view
  carries everything they hold; otherwise `equivalent`, with
  `encode_note` saying why (for frames the gateway wrote, a difference is
  a finding about the gateway's encoder).

The verdict is that of the TokenSpeed code the environment imports (the
0.1.1 wheel, or the 08-03 tree with TOKENSPEED_SRC), so run it as
regenerate-tokenspeed.sh runs the generator:

    PYTHONHASHSEED=0 PYTHONPATH=<tokenspeed site dir> <vllm-0.33.0 venv>/bin/python \\
        golden/generate/tokenspeed/live_cases.py RECORD_DIR --out golden/tokenspeed/0.1.1 \\
        [--group live] [--max 200]

Every frame set becomes a case (`<group>/<scenario>-<seq>-<message>`); the
group folder under --out is rewritten from scratch, nothing else is
touched. The ENGINE_CORE_DEAD sentinel is left out: TokenSpeed's client
checks for it before decoding, so no decoder verdict applies.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import tsenv  # noqa: E402  (installs the kernel-package shim first)

import msgspec  # noqa: E402

from generate_tokenspeed import verdict  # noqa: E402
from records import load_record, recorded_fields  # noqa: E402

SENTINEL = b"ENGINE_CORE_DEAD"


def finish(env, d: dict, group: str, gen: dict) -> dict:
    frames = d["_frames"]
    rec = d["provenance"]
    role = d["case"].replace("/", "-")
    case = SimpleNamespace(id=f"{group}/{role}", frames=frames, message=d["message"], source="live-engine")
    v, vprov = verdict(env, case)
    v.pop("finalized", None)
    prov = {**rec, **gen, **vprov, "recorded_case": d["case"]}
    c = {
        "case": case.id,
        "dialect": "tokenspeed",
        "version": env.version,
        "kind": "message",
        "doc": d.get("doc", ""),
        "provenance": prov,
        "message": d["message"],
        "frames": d["frames"],
    }
    c.update(v)
    if v["expect"] == "accept":
        notes = list(v.get("encode_note", []))
        again = env.reencode(d["message"], env.raw_decode(d["message"], frames))
        if d.get("version") != env.version:
            c["encode"] = "equivalent"
            notes.append(f"recorded with a TokenSpeed {d.get('version')} engine, read as {env.version}")
        elif again == frames and not notes:
            c["encode"] = "exact"
        else:
            c["encode"] = "equivalent"
            if again != frames:
                who = "the gateway" if rec.get("direction") == "gateway->engine" else "the engine"
                notes.append(f"TokenSpeed {env.version}'s encoder, given the object its decoder makes of these bytes,"
                             f" writes other bytes ({len(again)} frames, {sum(map(len, again))} bytes); {who} wrote these")
        if notes:
            c["encode_note"] = notes
        else:
            c.pop("encode_note", None)
    c.update(recorded_fields(d))
    return c


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("record", help="directory written by gpu-runner run --dialect tokenspeed --record")
    ap.add_argument("--out", required=True, help="golden tree, e.g. golden/tokenspeed/0.1.1")
    ap.add_argument("--group", default="live")
    ap.add_argument("--max", type=int, default=0, help="fail if more cases than this would be written (0: no limit)")
    a = ap.parse_args()
    if os.environ.get("PYTHONHASHSEED") != "0":
        print("error: run with PYTHONHASHSEED=0", file=sys.stderr)
        return 2
    records = [d for d in load_record(a.record) if d.get("dialect") == "tokenspeed"]
    if not records:
        print(f"error: no recorded TokenSpeed frame sets under {a.record}", file=sys.stderr)
        return 2
    picked = [d for d in records if d["_frames"] != [SENTINEL]]
    if a.max and len(picked) > a.max:
        print(f"error: {len(picked)} cases, more than --max {a.max}", file=sys.stderr)
        return 1
    env = tsenv.Env()
    gen = {
        "tokenspeed": env.version,
        "msgspec": msgspec.__version__,
        "python": platform.python_version(),
        "pythonhashseed": os.environ.get("PYTHONHASHSEED", ""),
        "generator": "golden/generate/tokenspeed/live_cases.py",
    }
    if env.git_commit:
        gen["tokenspeed_commit"] = env.git_commit
    out_dir = os.path.join(a.out, a.group)
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    counts = {"accept": 0, "reject": 0, "exact": 0, "equivalent": 0}
    for d in picked:
        c = finish(env, d, a.group, gen)
        with open(os.path.join(out_dir, c["case"].split("/", 1)[1] + ".json"), "w") as f:
            json.dump(c, f, indent=1, ensure_ascii=False, allow_nan=False)
            f.write("\n")
        counts["accept" if c["expect"] == "accept" else "reject"] += 1
        if "encode" in c:
            counts[c["encode"]] += 1
    print(f"tokenspeed {env.version}: {len(picked)} cases from {len(records)} frame sets -> {out_dir} "
          + ", ".join(f"{k}={v}" for k, v in counts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
