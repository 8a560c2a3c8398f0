"""Reading what `gpu-runner run --record DIR` wrote: the frame sets of a
live run, one JSON file each (`<scenario>/<seq>-<message>.json`), shared
by the vLLM and TokenSpeed finishing scripts (live_cases.py,
tokenspeed/live_cases.py)."""

from __future__ import annotations

import glob
import json
import os
import re


def load_record(root: str) -> list[dict]:
    """Every recorded frame set under root, in recording order."""
    out = []
    for path in glob.glob(os.path.join(root, "**", "*.json"), recursive=True):
        name = os.path.basename(path)
        if not re.match(r"\d+-", name):
            continue
        with open(path) as f:
            d = json.load(f)
        if "case" not in d or "frames" not in d:
            continue
        d["_seq"] = int(name.split("-", 1)[0])
        d["_frames"] = [bytes.fromhex(h) for h in d["frames"]]
        out.append(d)
    out.sort(key=lambda d: d["_seq"])
    return out


def recorded_fields(d: dict) -> dict:
    """What a finished case keeps of its record: `volatile`, `capture` (how
    and when it was recorded) and `engine_version` (the release of the
    engine that sent or received the bytes)."""
    rec = d["provenance"]
    return {
        "volatile": d.get("volatile", []),
        "capture": (f"gpu-runner run --record, {rec.get('engine', '?')} ({rec.get('launcher', '?')} launcher),"
                    f" {rec.get('recorded_at', '?')}"),
        "engine_version": rec.get("engine_version", d.get("version")),
    }
