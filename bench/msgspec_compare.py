#!/usr/bin/env python3
"""Times vLLM's own MsgpackEncoder / MsgpackDecoder on the very bytes the Rust
codec is timed on, and prints both side by side.

The inputs are golden cases produced by vLLM's encoder
(golden/vllm/<version>/<id>.json). For each case:
  - vLLM decode: MsgpackDecoder(<type>).decode(frames)  (request: without the
    request-type frame, as the engine's input thread does);
  - vLLM encode: MsgpackEncoder().encode(<the decoded object>);
  - Rust: `conformance bench` on the same files (decode frames; encode the
    decoded value), best of repeats, same method as here.
Run through bench/compare.sh, which sets up the venv and builds the binary.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import timeit

CASES = [
    ("request/prompt_512_tokens", "encode a typical request (512 prompt tokens)"),
    ("output/batch_64", "64 outputs, no logprobs"),
    ("output/batch_64_top5_logprobs", "64 outputs, top-5 logprobs"),
    ("output/batch_256", "256 outputs"),
    ("output/batch_logprobs_aux_large", "large logprobs batch in aux frames"),
]


def best_ns(fn, repeats):
    t = timeit.Timer(fn)
    number, _ = t.autorange()
    number = max(number // 4, 1)
    return min(t.repeat(repeat=repeats, number=number)) / number * 1e9


def python_times(golden, version, repeats):
    from vllm.v1.engine import EngineCoreOutputs, EngineCoreRequest
    from vllm.v1.serial_utils import MsgpackDecoder, MsgpackEncoder

    enc = MsgpackEncoder()
    decoders = {
        "EngineCoreRequest": MsgpackDecoder(EngineCoreRequest),
        "EngineCoreOutputs": MsgpackDecoder(EngineCoreOutputs),
    }
    out = {}
    for case_id, _ in CASES:
        path = os.path.join(golden, "vllm", version, case_id + ".json")
        with open(path) as f:
            case = json.load(f)
        frames = [bytes.fromhex(h) for h in case["frames"]]
        if case["message"] == "EngineCoreRequest":
            frames = frames[1:]
        dec = decoders[case["message"]]
        data = frames if len(frames) > 1 else frames[0]
        obj = dec.decode(data)
        out[case_id] = (
            best_ns(lambda: dec.decode(data), repeats),
            best_ns(lambda: enc.encode(obj), repeats),
        )
    return out


def rust_times(golden, version, conformance_bin, repeats):
    tmp = tempfile.mkdtemp(prefix="bench-corpus-")
    try:
        for case_id, _ in CASES:
            src = os.path.join(golden, "vllm", version, case_id + ".json")
            dst = os.path.join(tmp, case_id.replace("/", "__") + ".json")
            shutil.copy(src, dst)
        res = subprocess.run(
            [conformance_bin, "bench", "--corpus", tmp, "--repeats", str(repeats)],
            check=True, capture_output=True, text=True,
        )
    finally:
        shutil.rmtree(tmp)
    out = {}
    for line in res.stdout.splitlines():
        ident, dec, enc = line.split()
        case_id = ident.split("/", 2)[2]
        out[case_id] = (int(dec.split("=")[1]), int(enc.split("=")[1]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--golden", default="golden")
    ap.add_argument("--version", default="0.33.0")
    ap.add_argument("--conformance", default="target/release/conformance",
                    help="conformance binary built with mimalloc (the default features)")
    ap.add_argument("--conformance-sysalloc", default="target/sysalloc/release/conformance",
                    help="conformance binary built with --no-default-features (system malloc)")
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    import msgspec
    import vllm

    py = python_times(args.golden, args.version, args.repeats)
    rs = rust_times(args.golden, args.version, args.conformance, args.repeats)
    sysrs = None
    if os.path.exists(args.conformance_sysalloc):
        sysrs = rust_times(args.golden, args.version, args.conformance_sysalloc, args.repeats)
    print(f"vLLM {vllm.__version__}, msgspec {msgspec.__version__}, Python {sys.version.split()[0]}; "
          f"best of {args.repeats}, ns per call; ours with mimalloc (system malloc in brackets)")
    print()
    print("| case | what | decode: ours | decode: vLLM/msgspec | speed-up | encode: ours | encode: vLLM/msgspec | speed-up |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    worst = None
    worst_sys = None
    for case_id, what in CASES:
        pd, pe = py[case_id]
        rd, re_ = rs[case_id]
        sd, se = pd / rd, pe / re_
        worst = min(sd, se) if worst is None else min(worst, sd, se)
        extra_d = extra_e = ""
        if sysrs:
            yd, ye = sysrs[case_id]
            extra_d, extra_e = f" ({yd:,.0f})", f" ({ye:,.0f})"
            worst_sys = min(pd / yd, pe / ye) if worst_sys is None else min(worst_sys, pd / yd, pe / ye)
        print(f"| `{case_id}` | {what} | {rd:,.0f}{extra_d} | {pd:,.0f} | {sd:.1f}x | {re_:,.0f}{extra_e} | {pe:,.0f} | {se:.1f}x |")
    print()
    print(f"lowest speed-up: {worst:.2f}x with mimalloc"
          + (f", {worst_sys:.2f}x with the system allocator" if worst_sys is not None else "")
          + " (target: 1.5x)")


if __name__ == "__main__":
    main()
