#!/usr/bin/env python3
"""Check a generated golden tree against the installed vLLM.

    PYTHONHASHSEED=0 VLLM_TARGET_DEVICE=cpu <venv>/bin/python \
        golden/generate/check_cases.py golden/vllm/<version> [--min 150]

Checks: every file parses and has the contract keys; ids are unique and match
the file path; each case's verdict is what vLLM's decoder says now, run as on
the engine's input thread (accept, or the same reject class); accepted cases re-render to the stored value and
drift; every `exact` case re-encodes byte-identically from the decoded object
with vLLM's encoder; the view's ndarray prompt (dtype, shape, ids) and its
bytes values (block hashes, the ready response's none_hash) agree with the
object vLLM's decoder built; at least --min cases. Prints counts per group.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

GROUPS = {"handshake", "request", "abort", "utility", "output", "ready", "mutant", "intrange", "live", "stop", "logprobs", "translation"}
MESSAGES = {"EngineCoreRequest", "EngineCoreOutputs", "UtilityOutput", "AbortRequest", "UtilityRequest", "StartDpWave",
            "EngineCoreReadyResponse", "HandshakeHello", "HandshakeInit", "HandshakeReady"}
CLASSES = {"malformed", "type", "missing-field", "enum", "validation", "limits", "frames"}


def decoded_agrees(message: str, obj, value) -> list[str]:
    """Where the view renders an ndarray prompt or bytes values, checks it
    against vLLM's decoded object (independently of view.py's rendering):
    the dtype string names the decoded dtype, the shape as sent resolves to
    the decoded shape, the data are the decoded ids in C order, a bin is the
    decoded bytes. Returns the disagreements."""
    import numpy as np

    import view

    out = []
    if message == "EngineCoreRequest":
        p, v = obj.prompt_token_ids, value.get("prompt_token_ids")
        if isinstance(p, np.ndarray):
            if not isinstance(v, dict) or set(v) != {"dtype", "shape", "data"}:
                out.append(f"prompt_token_ids: decoded an ndarray, the view is {v!r:.80}")
            else:
                if np.dtype(v["dtype"]) != p.dtype:
                    out.append(f"prompt_token_ids: view dtype {v['dtype']} but vLLM decoded {p.dtype.str}")
                if len(v["shape"]) != p.ndim or any(d >= 0 and d != e for d, e in zip(v["shape"], p.shape)):
                    out.append(f"prompt_token_ids: view shape {v['shape']} but vLLM decoded {list(p.shape)}")
                ids = [view.fnum(x) if isinstance(x, float) else x for x in p.ravel().tolist()]
                if json.loads(json.dumps(ids)) != v["data"]:
                    out.append("prompt_token_ids: view data differ from the ids vLLM decoded")
        elif p is not None and v != list(p):
            out.append("prompt_token_ids: view differs from the list vLLM decoded")
        bh = getattr(obj, "block_hashes", None)
        if bh is not None and value.get("block_hashes") != [{"$bytes": bytes(h).hex()} for h in bh]:
            out.append("block_hashes: view differs from the bytes vLLM decoded")
    if message == "EngineCoreReadyResponse":
        phc = getattr(obj, "prefix_hash_config", None)
        if phc is not None and value["prefix_hash_config"]["none_hash"] != {"$bytes": bytes(phc.none_hash).hex()}:
            out.append("prefix_hash_config.none_hash: view differs from the bytes vLLM decoded")
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("tree")
    ap.add_argument("--min", type=int, default=150)
    args = ap.parse_args()

    import view
    import verdict

    env = verdict.Env()
    errors: list[str] = []
    ids: dict[str, str] = {}
    counts: dict[str, int] = {}
    verdicts = {"accept": 0, "reject": 0}
    files = sorted(glob.glob(os.path.join(args.tree, "**", "*.json"), recursive=True))
    for path in files:
        rel = os.path.relpath(path, args.tree)

        def err(msg):
            errors.append(f"{rel}: {msg}")

        try:
            with verdict.deep_python(), open(path) as f:
                d = json.load(f)
        except Exception as e:  # noqa: BLE001
            err(f"does not parse: {e}")
            continue
        if "case" not in d:
            continue
        if d.get("kind") != "message":
            continue  # other kinds are checked by the generator that writes them (generate/frontend/)
        for k in ("case", "dialect", "version", "kind", "doc", "provenance", "message", "frames", "expect", "encode"):
            if k not in d and not (k == "encode" and d.get("expect") != "accept"):
                err(f"missing key {k}")
        if errors and errors[-1].startswith(f"{rel}: missing key"):
            continue
        cid = d["case"]
        if cid in ids:
            err(f"duplicate id {cid} (also {ids[cid]})")
        ids[cid] = rel
        group = cid.split("/")[0]
        if cid != rel[: -len(".json")]:
            err(f"id {cid} does not match path")
        # Recorded groups are `live` and its variants (`live-dp`, `live-dp-moe`).
        if group not in GROUPS and not group.startswith("live-"):
            err(f"unknown group {group}")
        counts[group] = counts.get(group, 0) + 1
        if d["dialect"] != "vllm" or d["kind"] != "message":
            err("dialect/kind")
        if d["version"] != env.version:
            err(f"version {d['version']} but installed vLLM is {env.version}")
        if d["message"] not in MESSAGES:
            err(f"unknown message {d['message']}")
        prov = d["provenance"]
        for k in ("source", "vllm", "msgspec", "python", "pythonhashseed"):
            if k not in prov:
                err(f"provenance lacks {k}")
        if prov.get("source") == "mutant" and prov.get("derived_from") not in ids and not os.path.exists(os.path.join(args.tree, str(prov.get("derived_from")) + ".json")):
            err(f"derived_from {prov.get('derived_from')} is not a case in this tree")
        if not isinstance(d["doc"], str) or not d["doc"]:
            err("empty doc")
        try:
            frames = [bytes.fromhex(h) for h in d["frames"]]
        except Exception as e:  # noqa: BLE001
            err(f"bad hex: {e}")
            continue
        try:
            obj = verdict.decode(env, d["message"], frames)
            exc = None
        except Exception as e:  # noqa: BLE001
            obj, exc = None, e
        if d["expect"] == "accept":
            verdicts["accept"] += 1
            if exc is not None:
                err(f"expected accept, vLLM raised {type(exc).__name__}: {exc}")
                continue
            if "value" not in d:
                err("accepted case without value")
                continue
            with verdict.deep_python():
                value, drift = verdict.view_of(env, d["message"], frames)
                if json.loads(json.dumps(value, allow_nan=False)) != d["value"]:
                    err("value differs from a fresh rendering")
            if drift != d.get("drift", []):
                err(f"drift differs: {drift} vs {d.get('drift')}")
            for problem in decoded_agrees(d["message"], obj, d["value"]):
                err(problem)
            if d["encode"] not in ("exact", "equivalent"):
                err(f"bad encode {d['encode']}")
            if d["encode"] == "exact":
                with verdict.deep_python():
                    again = verdict.reencode(env, d["message"], obj)
                if again != frames:
                    err("exact case does not re-encode byte-identically with vLLM's encoder")
            if prov.get("source") == "mutant" and d["encode"] != "equivalent":
                err("accepted mutant must be equivalent")
        else:
            verdicts["reject"] += 1
            cls = d["expect"].get("reject") if isinstance(d["expect"], dict) else None
            if cls not in CLASSES:
                err(f"bad expect {d['expect']}")
            if "value" in d:
                err("rejected case carries a value")
            if exc is None:
                err("expected reject, vLLM accepted")
            else:
                got, _ = verdict.classify(exc)
                if got != cls:
                    err(f"reject class {cls}, now classified {got}")
                if "engine_error" not in prov:
                    err("rejected case without provenance.engine_error")
    total = sum(counts.values())
    if total < args.min:
        errors.append(f"only {total} cases (< {args.min})")
    for e in errors:
        print("FAIL", e)
    print(f"vllm {env.version}: {total} cases ({verdicts['accept']} accept, {verdicts['reject']} reject) " + ", ".join(f"{g}={n}" for g, n in sorted(counts.items())))
    print("OK" if not errors else f"{len(errors)} problems")
    return 0 if not errors else 1


if __name__ == "__main__":
    sys.exit(main())
