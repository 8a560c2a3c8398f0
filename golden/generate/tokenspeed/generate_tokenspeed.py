#!/usr/bin/env python3
"""Golden-case generator for TokenSpeed's ZMQ msgpack wire dialect.

Builds messages with TokenSpeed's own classes, encodes them with TokenSpeed's
own encoders, and takes every verdict from TokenSpeed's own receive path
(see tsenv.py and golden/generate/README.md, "TokenSpeed").

    PYTHONHASHSEED=0 PYTHONPATH=<tokenspeed site dir> <vllm-0.33.0 venv>/bin/python \
        golden/generate/tokenspeed/generate_tokenspeed.py --out golden/tokenspeed/0.1.1 \
        [--schema-dump golden/generate/schema/tokenspeed-0.1.1.json] [--check]

``--check`` re-reads the written tree and checks it (see check()).
golden/generate/regenerate-tokenspeed.sh does all of it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import tsenv  # noqa: E402  (installs the kernel-package shim first)
import ts_shim  # noqa: E402

import msgspec  # noqa: E402
import msgspec.inspect as mi  # noqa: E402
from msgspec.msgpack import Ext  # noqa: E402

import rawmp  # noqa: E402
import view  # noqa: E402

GENERATOR = "golden/generate/tokenspeed/generate_tokenspeed.py"
GROUPS = ("request", "abort", "output", "handshake", "ready", "mutant")


def to_raw(t, v):
    """The msgpack tree an encoder writes for view value v of type t
    (floats as float64, as Python floats are written): used to check that
    ``exact`` cases' bytes are a function of their view."""
    if isinstance(t, mi.UnionType):
        if v is None:
            return None
        members = [m for m in t.types if not isinstance(m, mi.NoneType)]
        for m in members:
            if isinstance(m, mi.IntType) and isinstance(v, int) and not isinstance(v, bool):
                return v
        for m in members:
            if isinstance(m, mi.CustomType) and isinstance(v, dict) and "dtype" in v:
                return to_raw(m, v)
            if isinstance(m, mi.FloatType) and isinstance(v, (int, float, str)) and not isinstance(v, bool):
                return to_raw(m, v)
            if isinstance(m, mi.StrType) and isinstance(v, str):
                return v
            if isinstance(m, (mi.ListType, mi.SetType)) and isinstance(v, list):
                return to_raw(m, v)
            if isinstance(m, (mi.DictType,)) and isinstance(v, dict):
                return to_raw(m, v)
            if isinstance(m, mi.StructType) and isinstance(v, dict):
                return to_raw(m, v)
            if isinstance(m, mi.BoolType) and isinstance(v, bool):
                return v
        raise ValueError(f"no member of {t} for {v!r}")
    if isinstance(t, mi.CustomType) and getattr(t.cls, "__module__", "").startswith("torch"):
        return tensor_raw(v)
    if isinstance(t, mi.TupleType):
        return [to_raw(it, x) for it, x in zip(t.item_types, v)]
    if isinstance(t, mi.FloatType):
        return {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}.get(v, v) if isinstance(v, str) else float(v)
    if isinstance(t, (mi.ListType, mi.SetType, mi.VarTupleType)):
        return [to_raw(t.item_type, x) for x in v]
    if isinstance(t, mi.DictType):
        return {k: to_raw(t.value_type, x) for k, x in v.items()}
    if isinstance(t, mi.StructType):
        if t.array_like:
            body = [to_raw(f.type, v[f.name]) for f in t.fields]
            return ([t.tag] if t.tag is not None else []) + body
        return {f.encode_name: to_raw(f.type, v[f.name]) for f in t.fields}
    if isinstance(t, mi.AnyType):
        return _from_plain(v)
    return v


# Aux frames an encoder given the view writes (TokenSpeed's rule: a tensor
# buffer of MSGPACK_ZERO_COPY_THRESHOLD = 256 bytes or more goes to its own
# frame, referenced by index; smaller ones inline as ext 3).
AUX: list[bytes] = []
TORCH_NP = {"float32": "<f4", "float64": "<f8", "float16": "<f2", "int64": "<i8", "int32": "<i4", "int16": "<i2",
            "int8": "|i1", "uint8": "|u1", "bool": "|b1"}


def tensor_raw(v):
    import numpy as np

    dtype, data = v["dtype"], v["data"]
    vals = [{"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}.get(x, x) if isinstance(x, str) else x for x in data]
    if dtype == "bfloat16":
        buf = (np.array(vals, dtype="<f4").view("<u4") >> 16).astype("<u2").tobytes()
    else:
        buf = np.array(vals, dtype=TORCH_NP.get(dtype, dtype)).tobytes()
    if len(buf) < 256:
        ref = Ext(3, buf)
    else:
        AUX.append(buf)
        ref = len(AUX)
    return [dtype, list(v["shape"]), ref]


def _from_plain(v):
    if isinstance(v, dict):
        if set(v) == {"$bytes"}:
            return bytes.fromhex(v["$bytes"])
        return {k: _from_plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_from_plain(x) for x in v]
    return v


def payload_of(message: str, frames: list[bytes]) -> bytes:
    if message in ("TokenizedGenerateReqInput", "AbortRequest"):
        return frames[1]
    if message == "HandshakeInit":
        return frames[-1]
    return frames[0]


def render_finalized(env, obj) -> dict:
    """The request as the engine holds it after its receive path (decode
    with __post_init__, resolve_seed, normalize, the socket's gates)."""
    raw = msgspec.msgpack.decode(env.io.MsgpackEncoder().encode(obj.sampling_params)[0])
    return {
        "sampling_params": view.render(mi.type_info(env.SamplingParams), raw, "SamplingParams", [], []),
        "logprob_start_len": obj.logprob_start_len,
        "validation_error": obj.validation_error,
    }


def verdict(env, c) -> dict:
    """expect/value/drift/encode/... of one case, from TokenSpeed's code."""
    frames = [bytes(f) for f in c.frames]
    d: dict[str, Any] = {}
    prov: dict[str, Any] = {}
    try:
        obj, outcome = env.decode(c.message, frames)
        exc = None
    except Exception as e:  # noqa: BLE001 - the verdict is whatever TokenSpeed raises
        obj, outcome, exc = None, None, e
    ts_shim.assert_untouched()
    if c.message == "TokenizedGenerateReqInput" and exc is None:
        d["finalized"] = render_finalized(env, obj)
    if exc is None and outcome is None:
        d["expect"] = "accept"
        try:
            value, drift, notes = env.view_of(c.message, frames)
        except Exception as e:
            raise RuntimeError(f"{c.id}: accepted by TokenSpeed but the view cannot be rendered: {e}") from e
        d["value"] = value
        exact = False
        if c.source == "tokenspeed-encoder":
            cls = env.cls_of(c.message)
            AUX.clear()
            if cls is None:  # AbortRequest: a plain list of str
                again = rawmp.pack(value)
            else:
                again = rawmp.pack(to_raw(mi.type_info(cls), value))
            n_pay = 2 if c.message in ("TokenizedGenerateReqInput", "AbortRequest") else 1
            if (again != payload_of(c.message, frames) or AUX != frames[n_pay:]) and not notes:
                raise RuntimeError(f"{c.id}: TokenSpeed-encoded bytes are not the packed view")
            raw_obj = env.raw_decode(c.message, frames)
            if c.message != "TokenizedGenerateReqInput" and env.reencode(c.message, raw_obj) != frames:
                raise RuntimeError(f"{c.id}: TokenSpeed's encoder does not reproduce the frames from the decoded object")
            exact = not notes
        d["encode"] = "exact" if exact else "equivalent"
        if notes:
            d["encode_note"] = notes
        if drift:
            d["drift"] = drift
    else:
        cls, rule = tsenv.classify(exc, outcome)
        d["expect"] = {"reject": cls}
        err = f"{type(exc).__name__}: {exc}" if exc is not None else f"validation_error: {outcome}"
        if len(err) > 300:
            err = err[:297] + "..."
        prov["engine_error"] = err
        prov["engine_outcome"] = "dropped" if exc is not None else "aborted"
        prov["reject_rule"] = rule
        if c.source == "tokenspeed-encoder":
            d["encode"] = "exact"
    return d, prov


def build_file(env, c, info) -> dict:
    frames = [bytes(f) for f in c.frames]
    prov: dict[str, Any] = {"source": c.source, **info, "pythonhashseed": os.environ.get("PYTHONHASHSEED", "")}
    if c.message in ("TokenizedGenerateReqInput", "AbortRequest"):
        prov["engine_config"] = env.engine_config()
    if c.derived_from:
        prov["derived_from"] = c.derived_from
    v, vprov = verdict(env, c)
    prov.update(vprov)
    d: dict[str, Any] = {
        "case": c.id,
        "dialect": "tokenspeed",
        "version": env.version,
        "kind": "message",
        "doc": c.doc,
        "provenance": prov,
        "message": c.message,
        "frames": [f.hex() for f in frames],
    }
    fin = v.pop("finalized", None)
    d.update(v)
    if fin is not None:
        d["finalized"] = fin
    extra = dict(c.extra)
    prov.update(extra.pop("provenance", {}))
    d.update(extra)
    return d


# Published vectors some cases must equal byte for byte (checked here).
PUBLISHED = {
    "tokenspeed-wire.md §15.1 (TS-R01 ADD payload)": "9bb9546f6b656e697a656447656e6572617465526571496e707574a27231c0c093010203dc001d04c0c0cb3ff0000000000000cb3ff0000000000000ce40000000cb0000000000000000cb0000000000000000cb0000000000000000cb3ff000000000000000c0c0c0c0c2c3c3c2c0c0c0c0c0c0019000c3c2ff00c0c3",
    "tokenspeed-wire.md §15.2 (greedy ADD)": "9bb9546f6b656e697a656447656e6572617465526571496e707574a26731c0c09107dc001d01c0c0cb3ff0000000000000cb3ff000000000000001cb0000000000000000cb0000000000000000cb0000000000000000cb3ff000000000000000c0c0c0c0c2c3c3c2c0c0c0c0c0c0019000c3c2ff00c0c2",
    "tokenspeed-wire.md §15.5 (chunk row)": "99b34261746368546f6b656e49444f7574536c696d91a2723191910a91a091039101910091909190",
    "tokenspeed-wire.md §15.5 (terminal row)": "99b34261746368546f6b656e49444f7574536c696d91a2723191910b91a473746f7091039102910091909190",
    "tokenspeed-wire.md §15.7 (validation-abort row)": "99b34261746368546f6b656e49444f7574536c696d91a3626164919091a561626f727491039100910091909190",
    "SMG crates/engine_zmq_client/src/protocol/tokenspeed/request.rs PYTHON_REQUEST_VECTOR": "dc0018b9546f6b656e697a656447656e6572617465526571496e707574a57665632d31c0c093010203dc001d08c09102cb3fe0000000000000cb3feccccccccccccdce40000000cb0000000000000000cb0000000000000000cb0000000000000000cb3ff000000000000000c0c0c0c0c2c3c3c2c0c0c0c02ac0019000c3c3ff00c0c3c0c0c0c2cb0000000000000000c0c0c0c0c0c0c0c0",
    "SMG output.rs PYTHON_OUTPUT_VECTOR_PRE_LOAD": "9ab34261746368546f6b656e49444f7574536c696d91a57665632d3191920a0b91a66c656e6774689103910291019192cbbfe0000000000000cbbfd000000000000091920a0b01",
    "SMG output.rs PYTHON_OUTPUT_VECTOR_PRE_DP": "99b34261746368546f6b656e49444f7574536c696d91a57665632d3191920a0b91a66c656e6774689103910291019192cbbfe0000000000000cbbfd000000000000091920a0b",
    "SMG output.rs PYTHON_OUTPUT_VECTOR": "9eb34261746368546f6b656e49444f7574536c696d91a57665632d3191920a0b91a66c656e6774689103910291019192cbbfe0000000000000cbbfd000000000000091920a0b01020564cd0190",
    "tokenspeed-wire.md §15.3 (HELLO)": "84a6737461747573a548454c4c4fa56c6f63616cc3a8686561646c657373c3b4706172616c6c656c5f636f6e6669675f68617368c0",
    "tokenspeed-wire.md §15.4 (INIT)": "82a961646472657373657385a6696e7075747391d9226970633a2f2f2f746d702f736d672d7a6d712f7473302e6970632d696e2e736f636ba76f75747075747391d9236970633a2f2f2f746d702f736d672d7a6d712f7473302e6970632d6f75742e736f636bb1636f6f7264696e61746f725f696e707574c0b2636f6f7264696e61746f725f6f7574707574c0be66726f6e74656e645f73746174735f7075626c6973685f61646472657373c0af706172616c6c656c5f636f6e66696780",
    "tokenspeed-wire.md §15.6 (0.1.1 terminal row with load)": "9eb34261746368546f6b656e49444f7574536c696d91a2723191910b91a473746f709103910291009190919000050278cd03e8",
}
# Non-mutant cases whose payload equals a published vector.
PUBLISHED_FOR = {
    "output/smg_vector_vec1": ["SMG output.rs PYTHON_OUTPUT_VECTOR"],
    "handshake/hello": ["tokenspeed-wire.md §15.3 (HELLO)"],
    "handshake/init_ipc": ["tokenspeed-wire.md §15.4 (INIT)"],
    "output/load_tail": ["tokenspeed-wire.md §15.6 (0.1.1 terminal row with load)"],
}


# The same vectors for a version whose own shapes they are (08-03: the
# 9-element batch, the 24-element request).
PUBLISHED_FOR_PRE_DP = {
    "output/smg_vector_vec1": ["SMG output.rs PYTHON_OUTPUT_VECTOR_PRE_DP"],
    "output/chunk_r1": ["tokenspeed-wire.md §15.5 (chunk row)"],
    "output/terminal_stop_r1": ["tokenspeed-wire.md §15.5 (terminal row)"],
    "output/terminal_abort_empty": ["tokenspeed-wire.md §15.7 (validation-abort row)"],
    "request/add_smg_vector_vec1": ["SMG crates/engine_zmq_client/src/protocol/tokenspeed/request.rs PYTHON_REQUEST_VECTOR"],
    "handshake/hello": ["tokenspeed-wire.md §15.3 (HELLO)"],
    "handshake/init_ipc": ["tokenspeed-wire.md §15.4 (INIT)"],
}


def check_published(cases, files, env=None):
    """Compare payloads with the published vectors they claim to match;
    record the outcome in the case (``matches`` only when equal,
    ``differs_from`` otherwise)."""
    for c, d in zip(cases, files):
        table = PUBLISHED_FOR if env is None or env.has_engine_index else PUBLISHED_FOR_PRE_DP
        claims = list(d.pop("matches", [])) + table.get(c.id, [])
        if not claims:
            continue
        payload = payload_of(c.message, [bytes(f) for f in c.frames]).hex()
        ok, bad = [], []
        for name in claims:
            (ok if PUBLISHED[name] == payload else bad).append(name)
        if ok:
            d["matches"] = ok
        if bad:
            d["differs_from"] = bad


def schema_dump(env, info) -> dict:
    dump = view.schema_dump(env.schema_roots(), {"generator": GENERATOR, **info})
    for t in dump["types"]:
        cls = {x.__name__: x for x in env.schema_roots() + [env.SamplingParams, env.SessionParams]}.get(t["name"])
        if cls is not None:
            ti = mi.type_info(cls)
            if isinstance(ti, mi.StructType) and ti.tag is not None:
                t["tag"] = ti.tag
                t["tag_field"] = ti.tag_field
    dump["request_types"] = [{"name": "ADD", "byte": env.zw.REQ_TYPE_ADD.hex()}, {"name": "ABORT", "byte": env.zw.REQ_TYPE_ABORT.hex()}]
    dump["shim"] = ts_shim.report()
    return dump


def write_tree(out, cases, files):
    if os.path.isdir(out):
        for g in GROUPS:
            p = os.path.join(out, g)
            if os.path.isdir(p):
                shutil.rmtree(p)
    for c, d in zip(cases, files):
        path = os.path.join(out, c.group, c.name + ".json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(d, f, indent=1, ensure_ascii=False, allow_nan=False)
            f.write("\n")


def check(env, out, minimum=150) -> list[str]:
    """Re-read a tree: contract keys, ids matching paths, unique ids, every
    verdict/value/drift/encode reproduced from the frames by TokenSpeed's
    code, derived_from naming a case, and at least `minimum` cases."""
    from ts_cases import Case

    errs, ids, n = [], set(), 0
    for root, _, names in sorted(os.walk(out)):
        for name in sorted(names):
            if not name.endswith(".json"):
                continue
            path = os.path.join(root, name)
            d = json.load(open(path))
            if d.get("kind") != "message":
                continue  # other kinds (translation/) have their own generator and check
            n += 1
            rel = os.path.relpath(path, out)[:-5]
            if d.get("case") != rel:
                errs.append(f"{path}: case id {d.get('case')} does not match its path")
            ids.add(d["case"])
            for k in ("case", "dialect", "version", "kind", "doc", "provenance", "message", "frames", "expect"):
                if k not in d:
                    errs.append(f"{path}: missing {k}")
            if d["dialect"] != "tokenspeed" or d["version"] != env.version:
                errs.append(f"{path}: dialect/version")
            g, nm = d["case"].split("/", 1)
            c = Case(g, nm, d["message"], d["doc"], [bytes.fromhex(f) for f in d["frames"]], source=d["provenance"]["source"])
            v, vprov = verdict(env, c)
            for k in ("expect", "value", "drift", "encode", "encode_note", "finalized"):
                if v.get(k) != d.get(k) and not (k == "encode" and d["provenance"]["source"] == "mutant" and "encode" not in v):
                    errs.append(f"{path}: {k} differs on re-check: {v.get(k)!r} vs {d.get(k)!r}")
            if vprov.get("engine_error") != d["provenance"].get("engine_error"):
                errs.append(f"{path}: engine_error differs")
    for root, _, names in os.walk(out):
        for name in names:
            d = json.load(open(os.path.join(root, name)))
            df = d["provenance"].get("derived_from")
            if df and df not in ids:
                errs.append(f"{d['case']}: derived_from {df} is not a case")
    if n < minimum:
        errs.append(f"only {n} cases (< {minimum})")
    return errs


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", help="output tree, e.g. golden/tokenspeed/0.1.1")
    ap.add_argument("--schema-dump", help="write the schema JSON here")
    ap.add_argument("--check", action="store_true", help="re-check the tree in --out after writing (or alone with --no-write)")
    ap.add_argument("--no-write", action="store_true", help="with --check: check an existing tree without regenerating it")
    args = ap.parse_args()
    if os.environ.get("PYTHONHASHSEED") != "0":
        print("error: run with PYTHONHASHSEED=0", file=sys.stderr)
        return 2
    if not args.out and not args.schema_dump:
        ap.error("nothing to do: give --out and/or --schema-dump")
    env = tsenv.Env()
    info = {"tokenspeed": env.version, "msgspec": msgspec.__version__, "python": platform.python_version()}
    if env.git_commit:
        # A tree from TokenSpeed's repository, not a wheel: the full commit.
        info["tokenspeed_commit"] = env.git_commit
    if args.schema_dump:
        dump = schema_dump(env, info)
        os.makedirs(os.path.dirname(os.path.abspath(args.schema_dump)), exist_ok=True)
        with open(args.schema_dump, "w") as f:
            json.dump(dump, f, indent=1)
            f.write("\n")
        print(f"schema: {len(dump['types'])} types -> {args.schema_dump}")
    if args.out and not args.no_write:
        import ts_cases

        cases = ts_cases.build_all(env)
        ids = {c.id for c in cases}
        for c in cases:
            if c.derived_from and c.derived_from not in ids:
                raise RuntimeError(f"{c.id}: derived_from {c.derived_from} is not a case")
        files = [build_file(env, c, info) for c in cases]
        check_published(cases, files, env)
        write_tree(args.out, cases, files)
        counts: dict[str, int] = {}
        for c in cases:
            counts[c.group] = counts.get(c.group, 0) + 1
        print(f"tokenspeed {env.version}: {len(cases)} cases " + ", ".join(f"{g}={n}" for g, n in sorted(counts.items())))
        diffs = [(c.id, d["differs_from"]) for c, d in zip(cases, files) if "differs_from" in d]
        for cid, names in diffs:
            print(f"note: {cid} differs from {names}")
    if args.check:
        errs = check(env, args.out)
        for e in errs:
            print("CHECK", e)
        print(f"check: {len(errs)} problem(s)")
        return 1 if errs else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
