#!/usr/bin/env python3
"""Times vLLM's own MsgpackEncoder / MsgpackDecoder on the very bytes the Rust
codec is timed on, and prints both side by side.

The inputs are golden cases produced by vLLM's encoder
(golden/vllm/<version>/<id>.json). For each case:
  - vLLM decode: MsgpackDecoder(<type>).decode(frames)  (request: without the
    request-type frame, as the engine's input thread does);
  - vLLM encode: MsgpackEncoder().encode(<the decoded object>);
  - Rust: `conformance bench` on the same files (decode frames; encode the
    decoded value), best of repeats, same method as here; for output batches
    also the borrowing fast decoder a gateway's output loop uses
    (`engine_protocol::hot::decode_outputs`, `fast_decode_ns=`);
  - optionally (--vllm-rust BIN) vLLM's own Rust client codec, run as
    `BIN bench CASE.json...`, which prints `<case id> decode_ns=<n>
    encode_ns=<n>` per case: its times and ours over them.
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


def copy_cases(golden, version, tmp):
    paths = {}
    for case_id, _ in CASES:
        src = os.path.join(golden, "vllm", version, case_id + ".json")
        dst = os.path.join(tmp, case_id.replace("/", "__") + ".json")
        shutil.copy(src, dst)
        paths[case_id] = dst
    return paths


def parse_bench_lines(text):
    """`<case id> key=<n> key=<n>...` lines -> {case id: {key: n}}; lines
    that do not have that form are ignored."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 2 or not all("=" in p for p in parts[1:]):
            continue
        try:
            out[parts[0]] = {k: int(v) for k, v in (p.split("=", 1) for p in parts[1:])}
        except ValueError:
            continue
    return out


def match_case(ident, case_id):
    """A bench line's id names `case_id` when it is the id itself or ends
    with `/<case id>` (ours: `vllm/0.33.0/output/batch_64`)."""
    return ident == case_id or ident.endswith("/" + case_id)


def by_case(lines):
    out = {}
    for case_id, _ in CASES:
        for ident, fields in lines.items():
            if match_case(ident, case_id):
                out[case_id] = fields
    return out


def rust_times(golden, version, conformance_bin, repeats):
    tmp = tempfile.mkdtemp(prefix="bench-corpus-")
    try:
        copy_cases(golden, version, tmp)
        res = subprocess.run(
            [conformance_bin, "bench", "--corpus", tmp, "--repeats", str(repeats)],
            check=True, capture_output=True, text=True,
        )
    finally:
        shutil.rmtree(tmp)
    return by_case(parse_bench_lines(res.stdout))


def vllm_rust_times(golden, version, binary):
    """vLLM's Rust client codec: `BIN bench CASE.json...`."""
    tmp = tempfile.mkdtemp(prefix="bench-corpus-")
    try:
        paths = copy_cases(golden, version, tmp)
        res = subprocess.run([binary, "bench", *paths.values()], check=True, capture_output=True, text=True)
    finally:
        shutil.rmtree(tmp)
    return by_case(parse_bench_lines(res.stdout))


def fmt_ns(v):
    return "-" if v is None else f"{v:,.0f}"


def fmt_x(a, b):
    return "-" if a is None or b is None or b == 0 else f"{a / b:.1f}x"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--golden", default="golden")
    ap.add_argument("--version", default="0.33.0")
    ap.add_argument("--conformance", default="target/release/conformance",
                    help="conformance binary built with mimalloc (the default features)")
    ap.add_argument("--conformance-sysalloc", default="target/sysalloc/release/conformance",
                    help="conformance binary built with --no-default-features (system malloc)")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--vllm-rust", metavar="BIN",
                    help="vLLM's Rust client codec binary (`BIN bench CASE.json...` prints "
                         "`<case id> decode_ns=<n> encode_ns=<n>`): adds its times and our ratio over it")
    args = ap.parse_args()
    import msgspec
    import vllm

    py = python_times(args.golden, args.version, args.repeats)
    rs = rust_times(args.golden, args.version, args.conformance, args.repeats)
    sysrs = None
    if os.path.exists(args.conformance_sysalloc):
        sysrs = rust_times(args.golden, args.version, args.conformance_sysalloc, args.repeats)
    vr = vllm_rust_times(args.golden, args.version, args.vllm_rust) if args.vllm_rust else None
    print_tables(py, rs, sysrs, vr, args.repeats, f"vLLM {vllm.__version__}, msgspec {msgspec.__version__}, "
                 f"Python {sys.version.split()[0]}")


def print_tables(py, rs, sysrs, vr, repeats, versions):
    """py: {case: (decode, encode)}; rs / sysrs: {case: {decode_ns, encode_ns[, fast_decode_ns]}};
    vr: {case: {decode_ns, encode_ns}} or None."""
    print(f"{versions}; best of {repeats}, ns per call; ours with mimalloc (system malloc in brackets); "
          "fast decode: engine_protocol::hot::decode_outputs (output batches)")
    print()
    print("| case | what | decode: ours | fast decode: ours | decode: vLLM/msgspec | speed-up | fast speed-up "
          "| encode: ours | encode: vLLM/msgspec | speed-up |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    worst = worst_sys = worst_fast = worst_fast_sys = None

    def lo(cur, *xs):
        xs = [x for x in xs if x is not None]
        return min([cur] + xs) if cur is not None else (min(xs) if xs else None)

    for case_id, what in CASES:
        pd, pe = py[case_id]
        r = rs[case_id]
        rd, re_, rf = r["decode_ns"], r["encode_ns"], r.get("fast_decode_ns")
        worst = lo(worst, pd / rd, pe / re_)
        extra_d = extra_e = extra_f = extra_fx = ""
        fx = f"{pd / rf:.1f}x" if rf else "-"
        if rf:
            worst_fast = lo(worst_fast, pd / rf)
        if sysrs:
            y = sysrs[case_id]
            yd, ye, yf = y["decode_ns"], y["encode_ns"], y.get("fast_decode_ns")
            extra_d, extra_e = f" ({yd:,.0f})", f" ({ye:,.0f})"
            worst_sys = lo(worst_sys, pd / yd, pe / ye)
            if yf:
                extra_f, extra_fx = f" ({yf:,.0f})", f" ({pd / yf:.1f}x)"
                worst_fast_sys = lo(worst_fast_sys, pd / yf)
        print(f"| `{case_id}` | {what} | {rd:,.0f}{extra_d} | {fmt_ns(rf)}{extra_f} | {pd:,.0f} | {pd / rd:.1f}x "
              f"| {fx}{extra_fx} | {re_:,.0f}{extra_e} | {pe:,.0f} | {pe / re_:.1f}x |")
    print()
    print(f"lowest speed-up: {worst:.2f}x with mimalloc"
          + (f", {worst_sys:.2f}x with the system allocator" if worst_sys is not None else "")
          + " (target: 1.5x)")
    if worst_fast is not None:
        print(f"lowest fast-decode speed-up (output batches): {worst_fast:.2f}x with mimalloc"
              + (f", {worst_fast_sys:.2f}x with the system allocator" if worst_fast_sys is not None else "")
              + " (target: 3x)")
    if vr is not None:
        print()
        print("vLLM's Rust client codec on the same files (ns per call); ours over it: its time / ours "
              "(above 1x: ours is faster)")
        print()
        print("| case | decode: vLLM Rust | decode: ours | fast decode: ours | ours over it (decode, fast) "
              "| encode: vLLM Rust | encode: ours | ours over it |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for case_id, _ in CASES:
            v = vr.get(case_id)
            r = rs[case_id]
            vd = v.get("decode_ns") if v else None
            ve = v.get("encode_ns") if v else None
            rf = r.get("fast_decode_ns")
            print(f"| `{case_id}` | {fmt_ns(vd)} | {r['decode_ns']:,.0f} | {fmt_ns(rf)} "
                  f"| {fmt_x(vd, r['decode_ns'])}, {fmt_x(vd, rf)} | {fmt_ns(ve)} | {r['encode_ns']:,.0f} "
                  f"| {fmt_x(ve, r['encode_ns'])} |")


if __name__ == "__main__":
    main()
