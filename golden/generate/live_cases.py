#!/usr/bin/env python3
"""Finish the frame sets `gpu-runner run --record DIR` recorded into golden
cases, with vLLM's own decoder.

The recorder writes every frame set of a live run (handshake, registration,
ADD / ABORT / UTILITY, output batches, the ENGINE_CORE_DEAD sentinel) in the
golden case shape but without a verdict (docs/runner/replay.md "Record mode"). This
script adds what only vLLM may say, exactly as generate.py does for its own
cases (verdict.py, view.py):

* `expect`: vLLM's decoder run on the frames as the engine or its client
  runs it (`verdict.decode`); a rejection is classified by
  `verdict.classify` and its message kept in `provenance.engine_error`;
* `value` and `drift`: the canonical view rendered from the raw bytes with
  this release's classes (`verdict.view_of`);
* `encode`: `exact` when vLLM's encoder, given the decoded object, writes
  the recorded bytes again and the view carries everything they hold;
  otherwise `equivalent`, with `encode_note` saying why (a set in hash
  order or a default written explicitly, as view.py notes it; bytes of an
  engine of another release; or bytes that vLLM's encoder does not
  reproduce, which for frames the gateway wrote is a finding about the
  gateway's encoder).

The verdict is always that of the installed vLLM: run it in the venv of the
release the output tree is for. The 0.33.0 tree of a 0.32.0 recording shows
how a 0.33 reader takes 0.32 engine bytes (`engine_version` says which
engine sent them).

    PYTHONHASHSEED=0 VLLM_TARGET_DEVICE=cpu ~/.cache/engine-conformance/venvs/vllm-0.32.0/bin/python \\
        golden/generate/live_cases.py RECORD_DIR --out golden/vllm/0.32.0 [--pick representative|all] \\
        [--group live] [--max 60]

`--pick representative` (the default) keeps a subset: the main engine's
handshake, the first ADD of every scenario, the first, a middle and the
last output of greedy_determinism, the finishing output of every other
scenario's first request, one inline sample-logprobs batch, the batches
carrying prompt logprobs (inline and in aux frames), ABORTs, utility
requests and replies, ERROR outputs and the death sentinel. `--pick all`
keeps every frame set. The group folder under --out is rewritten from
scratch; nothing else is touched.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import sys

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import msgspec  # noqa: E402

import verdict  # noqa: E402
import view  # noqa: E402
from records import load_record, recorded_fields  # noqa: E402

SENTINEL = b"ENGINE_CORE_DEAD"
# Outputs shown step by step (first, middle, last) for these scenarios.
STEP_BY_STEP = {"greedy_determinism"}


class Info:
    """What vLLM's decoder says about one frame set (selection only)."""

    def __init__(self, env, d):
        self.d = d
        self.scenario = d["provenance"].get("scenario", "")
        self.message = d["message"]
        self.obj = None
        self.exc = None
        try:
            self.obj = verdict.decode(env, self.message, d["_frames"])
        except Exception as e:  # noqa: BLE001 - the verdict is whatever vLLM raises
            self.exc = e
        self.sentinel = self.message == "EngineCoreOutputs" and d["_frames"] == [SENTINEL]
        self.request_ids: list[str] = []
        self.finished: list[str] = []
        self.error_outputs = False
        self.logprobs = False
        self.prompt_logprobs = False
        self.utility = False
        self.wave_complete = None
        self.start_wave = None
        o = self.obj
        if self.message == "EngineCoreRequest" and o is not None:
            self.request_ids = [o.request_id]
        elif self.message == "AbortRequest" and isinstance(o, list):
            self.request_ids = [str(x) for x in o]
        elif self.message == "EngineCoreOutputs" and o is not None:
            for out in o.outputs:
                self.request_ids.append(out.request_id)
                if out.finish_reason is not None:
                    self.finished.append(out.request_id)
                    if int(out.finish_reason) == 3:
                        self.error_outputs = True
                if out.new_logprobs is not None:
                    self.logprobs = True
                if out.new_prompt_logprobs_tensors is not None:
                    self.prompt_logprobs = True
            self.utility = o.utility_output is not None
            self.wave_complete = o.wave_complete
            self.start_wave = o.start_wave


def spec_of(request_id: str) -> str:
    """`<scenario>.<spec>[-<copy>]` -> spec."""
    rest = request_id.split(".", 1)[-1]
    return re.sub(r"-\d+$", "", rest)


def engine_of(i: Info):
    """The engine (data-parallel rank) a frame set went to or came from."""
    return i.d["provenance"].get("engine_index")


def dp_suffix(rank) -> str:
    return f"-dp{rank}" if rank else ""


def pick_representative(infos: list[Info]) -> list[tuple[str, Info]]:
    picked: list[tuple[str, Info]] = []
    used: set[int] = set()

    def take(role: str, i: Info | None):
        if i is not None and id(i) not in used:
            used.add(id(i))
            picked.append((role, i))

    def first(pred):
        return next((i for i in infos if pred(i)), None)

    hs = [i for i in infos if i.scenario == "handshake"]
    # A data-parallel run: every rank's handshake, each rank's first ADD and
    # final output, and every START_DP_WAVE (suffix -dp<rank> past rank 0).
    ranks = sorted({engine_of(i) for i in infos if engine_of(i) is not None})
    for rank in ranks or [None]:
        sfx = dp_suffix(rank)
        mine = [i for i in hs if rank is None or engine_of(i) == rank]
        for role, msg in (("hello", "HandshakeHello"), ("init", "HandshakeInit"),
                          ("ready-response", "EngineCoreReadyResponse"), ("ready", "HandshakeReady")):
            take(f"handshake-{role}{sfx}", next((i for i in mine if i.message == msg), None))
    scenarios = []
    for i in infos:
        if i.scenario not in ("handshake", "shutdown") and i.scenario not in scenarios:
            scenarios.append(i.scenario)
    logprobs_taken = False
    for s in scenarios:
        mine = [i for i in infos if i.scenario == s]
        add = next((i for i in mine if i.message == "EngineCoreRequest"), None)
        take(f"{s}-add", add)
        for i in mine:
            if i.message == "StartDpWave":
                take(f"{s}-start-dp-wave{dp_suffix(engine_of(i))}", i)
            if i.wave_complete is not None:
                take(f"{s}-output-wave-complete-{i.wave_complete}{dp_suffix(engine_of(i))}", i)
            if i.start_wave is not None:
                take(f"{s}-output-start-wave-{i.start_wave}{dp_suffix(engine_of(i))}", i)
        for rank in ranks[1:]:
            on = [i for i in mine if engine_of(i) == rank]
            add_r = next((i for i in on if i.message == "EngineCoreRequest" and i.request_ids), None)
            take(f"{s}-add{dp_suffix(rank)}", add_r)
            if add_r is not None:
                done = [i for i in on if i.message == "EngineCoreOutputs" and add_r.request_ids[0] in i.finished]
                take(f"{s}-output-final{dp_suffix(rank)}", done[0] if done else None)
        for i in mine:
            if i.error_outputs:
                take(f"{s}-output-error", i)
            if i.sentinel:
                take(f"{s}-engine-core-dead", i)
        rid = add.request_ids[0] if add is not None and add.request_ids else None
        if rid is not None:
            outs = [i for i in mine if i.message == "EngineCoreOutputs" and rid in i.request_ids]
            if outs and s in STEP_BY_STEP:
                take(f"{s}-output-first", outs[0])
                take(f"{s}-output-middle", outs[len(outs) // 2])
            if outs:
                done = next((i for i in outs if rid in i.finished), outs[-1])
                take(f"{s}-output-{'final' if rid in done.finished else 'last'}", done)
        take(f"{s}-abort", next((i for i in mine if i.message == "AbortRequest"), None))
        for i in mine:
            if i.message == "UtilityRequest" and isinstance(i.obj, list) and len(i.obj) > 2:
                take(f"{s}-utility-{i.obj[2]}", i)
        for n, i in enumerate(i for i in mine if i.utility):
            take(f"{s}-utility-output-{n}", i)
        if not logprobs_taken:
            i = first(lambda i: i.scenario == s and i.logprobs and not i.prompt_logprobs)
            if i is not None:
                take(f"{s}-output-logprobs-inline", i)
                logprobs_taken = True
        for i in mine:
            if i.prompt_logprobs:
                kind = "aux" if len(i.d["_frames"]) > 1 else "inline"
                take(f"{s}-output-prompt-logprobs-{kind}", i)
    return picked


def pick_all(infos: list[Info]) -> list[tuple[str, Info]]:
    return [(f"{i.scenario}-{i.d['_seq']:05d}-{i.message}", i) for i in infos]


def first_difference(a: list[bytes], b: list[bytes]) -> str:
    if len(a) != len(b):
        return f"{len(b)} frames instead of {len(a)}"
    for n, (x, y) in enumerate(zip(a, b)):
        if x != y:
            k = next((k for k in range(min(len(x), len(y))) if x[k] != y[k]), min(len(x), len(y)))
            return f"frame {n}, byte {k} (of {len(x)} recorded, {len(y)} re-encoded)"
    return "no difference"


def describe(message: str, frames: list[bytes], again: list[bytes]) -> str:
    """Where vLLM's re-encode differs, in words."""
    where = first_difference(frames, again)
    if message != "EngineCoreRequest" or len(frames) < 2 or len(again) < 2:
        return where
    try:
        a, b = msgspec.msgpack.decode(frames[1]), msgspec.msgpack.decode(again[1])
    except msgspec.DecodeError:
        return where
    parts = []
    if isinstance(a, list) and isinstance(b, list) and len(a) > 3 and isinstance(a[3], dict) and isinstance(b[3], dict):
        sa, sb = a[3], b[3]
        extra = [k for k in sb if k not in sa]
        if extra:
            parts.append("it also writes SamplingParams " + ", ".join(f"{k}={sb[k]!r}" for k in extra)
                         + " (set by SamplingParams.__post_init__ on decode)")
        missing = [k for k in sa if k not in sb]
        if missing:
            parts.append("it omits SamplingParams " + ", ".join(missing))
        reordered = [k for k in sa if k in sb and sa[k] != sb[k] and isinstance(sa[k], list)
                     and sorted(map(repr, sa[k])) == sorted(map(repr, sb[k]))]
        if reordered:
            parts.append("set-valued " + ", ".join(reordered) + " in another order")
        changed = [k for k in sa if k in sb and sa[k] != sb[k] and k not in reordered]
        if changed:
            parts.append("other values for " + ", ".join(changed))
        if a[:3] + a[4:] != b[:3] + b[4:]:
            parts.append("other EngineCoreRequest fields differ")
    return "; ".join(parts) + f" [{where}]" if parts else where


def finish(env, role: str, info: Info, group: str, gen: dict) -> dict:
    d = info.d
    frames = d["_frames"]
    rec = d["provenance"]
    engine_version = rec.get("engine_version", d.get("version"))
    prov = dict(rec)
    prov.update(gen)
    prov["recorded_case"] = d["case"]
    who = "the gateway" if rec.get("direction") == "gateway->engine" else "the engine"
    doc = d.get("doc", "")
    if info.sentinel:
        doc += (" The verdict is what vLLM's typed decoder says about these 16 bytes as an output batch; its client"
                " (vllm/v1/engine/core_client.py) never decodes them.")
    c = {
        "case": f"{group}/{role}",
        "dialect": "vllm",
        "version": env.version,
        "kind": "message",
        "doc": doc,
        "provenance": prov,
        "message": info.message,
        "frames": d["frames"],
    }
    if info.exc is None:
        c["expect"] = "accept"
        with verdict.deep_python():
            value, drift = verdict.view_of(env, info.message, frames)
            notes = list(view.NOTES) if info.message in verdict.VIEW_NOTES_KINDS else []
            again = verdict.reencode(env, info.message, info.obj)
        c["value"] = json.loads(json.dumps(value, allow_nan=False))
        if engine_version != env.version:
            # As generate.py's live cases: the bytes carry the other
            # release's field set (msgspec even re-encodes a decoded
            # dataclass with only the keys it was sent, so vLLM's own
            # re-encode is no test here).
            c["encode"] = "equivalent"
            c["encode_note"] = notes + [f"recorded with a vLLM {engine_version} engine: the bytes carry that release's"
                                        f" field set, which the value of this release's schema does not record"]
        elif again == frames and not notes:
            c["encode"] = "exact"
        else:
            c["encode"] = "equivalent"
            why = list(notes)
            if again != frames:
                why.append(f"vLLM {env.version}'s encoder, given the object its decoder makes of these bytes, writes"
                           f" other bytes ({describe(info.message, frames, again)}); {who} wrote these")
            c["encode_note"] = why
        if drift:
            c["drift"] = drift
    else:
        cls, _rule = verdict.classify(info.exc)
        c["expect"] = {"reject": cls}
        err = f"{type(info.exc).__name__}: {info.exc}"
        prov["engine_error"] = err if len(err) <= 300 else err[:297] + "..."
    c.update(recorded_fields(d))
    return c


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("record", help="directory written by gpu-runner run --record")
    ap.add_argument("--out", required=True, help="golden tree, e.g. golden/vllm/0.32.0")
    ap.add_argument("--group", default="live")
    ap.add_argument("--pick", choices=["representative", "all"], default="representative")
    ap.add_argument("--max", type=int, default=0, help="fail if more cases than this would be written (0: no limit)")
    a = ap.parse_args()
    if os.environ.get("PYTHONHASHSEED") != "0":
        print("error: run with PYTHONHASHSEED=0", file=sys.stderr)
        return 2
    records = load_record(a.record)
    if not records:
        print(f"error: no recorded frame sets under {a.record}", file=sys.stderr)
        return 2
    env = verdict.Env()
    infos = [Info(env, d) for d in records]
    picked = pick_representative(infos) if a.pick == "representative" else pick_all(infos)
    if a.max and len(picked) > a.max:
        print(f"error: {len(picked)} cases picked, more than --max {a.max}", file=sys.stderr)
        return 1
    gen = {
        "vllm": env.version,
        "msgspec": msgspec.__version__,
        "python": platform.python_version(),
        "pythonhashseed": os.environ.get("PYTHONHASHSEED", ""),
        "generator": "golden/generate/live_cases.py",
    }
    out_dir = os.path.join(a.out, a.group)
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    counts = {"accept": 0, "reject": 0, "exact": 0, "equivalent": 0}
    findings = []
    for role, info in picked:
        c = finish(env, role, info, a.group, gen)
        with verdict.deep_python(), open(os.path.join(out_dir, role + ".json"), "w") as f:
            json.dump(c, f, indent=1, ensure_ascii=False, allow_nan=False)
            f.write("\n")
        counts["accept" if c["expect"] == "accept" else "reject"] += 1
        if "encode" in c:
            counts[c["encode"]] += 1
        for n in c.get("encode_note", []):
            if "writes other bytes" in n:
                findings.append(f"{c['case']}: {n}")
    print(f"vllm {env.version}: {len(picked)} cases from {len(records)} frame sets -> {out_dir} "
          + ", ".join(f"{k}={v}" for k, v in counts.items()))
    for f in findings:
        print("NOTE", f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
