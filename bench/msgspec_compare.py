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
The implementations are interleaved: each of --rounds rounds times every
one of them on every case, and the tables report per-round ratios (their
median and lowest), so a change of machine speed between rounds (this VM
runs at two speeds about 1.6x apart) does not favour one side. The typed
path (the target: 5x msgspec) is the fast decoder for output batches,
the direct request decoder on shared frames (`decode_request_shared`) for
the request, and the typed structs' shared encode (`encode_shared`).
Each release's rows are timed with that release's own vLLM (--version, in
its venv). Run through bench/compare.sh, which sets up the venvs and
builds the binary.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import timeit

# The rows of each release's table. 0.34.0's are its requests: the prompt
# as the int32 array vLLM's frontend sends, inline (63 ids) and in an aux
# frame (512 ids, 70 000 ids: 280 000 bytes that neither side copies).
CASES_BY_VERSION = {
    "0.33.0": [
        ("request/prompt_512_tokens", "encode a typical request (512 prompt tokens)"),
        ("output/batch_64", "64 outputs, no logprobs"),
        ("output/batch_64_top5_logprobs", "64 outputs, top-5 logprobs"),
        ("output/batch_256", "256 outputs"),
        ("output/batch_logprobs_aux_large", "large logprobs batch in aux frames"),
    ],
    "0.34.0": [
        ("request/prompt_512_tokens", "a typical request: 512 prompt tokens, an int32 array in an aux frame"),
        ("request/prompt_array_63", "63 prompt tokens, the int32 array inline (252 bytes)"),
        ("request/prompt_array_70000", "70 000 prompt tokens: a 280 000-byte aux frame"),
    ],
}
CASES = CASES_BY_VERSION["0.33.0"]


# The typed path's target over vLLM/msgspec, every row, both directions.
TARGET = 5


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
        out[case_id] = {
            "decode_ns": best_ns(lambda: dec.decode(data), repeats),
            "encode_ns": best_ns(lambda: enc.encode(obj), repeats),
        }
    return out


def case_bytes(golden, version):
    """Bytes on the wire per case: every frame (a request's type byte too)."""
    out = {}
    for case_id, _ in CASES:
        with open(os.path.join(golden, "vllm", version, case_id + ".json")) as f:
            out[case_id] = sum(len(h) // 2 for h in json.load(f)["frames"])
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


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return None if n == 0 else (xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2)


def typed_decode(fields):
    """The typed path's decode: the fast decoder where there is one."""
    return fields.get("fast_decode_ns", fields.get("typed_decode_ns"))


def typed_encode(fields):
    return fields.get("typed_encode_ns")


METRICS = {
    "typed decode": typed_decode,
    "typed encode": typed_encode,
    "value decode": lambda f: f.get("decode_ns"),
    "value encode": lambda f: f.get("encode_ns"),
    "decode": lambda f: f.get("decode_ns"),
    "encode": lambda f: f.get("encode_ns"),
}


def series(rounds, impl, case_id, metric):
    """Per-round times of `impl` on `case_id` (rounds missing it left out)."""
    get = METRICS[metric]
    out = []
    for r in rounds:
        fields = (r.get(impl) or {}).get(case_id)
        v = get(fields) if fields else None
        if v is not None:
            out.append(v)
    return out


def ratios(rounds, case_id, num_impl, num_metric, den_impl, den_metric):
    """Per-round num / den (above 1: the denominator is faster)."""
    out = []
    for r in rounds:
        a = (r.get(num_impl) or {}).get(case_id)
        b = (r.get(den_impl) or {}).get(case_id)
        x = METRICS[num_metric](a) if a else None
        y = METRICS[den_metric](b) if b else None
        if x and y:
            out.append(x / y)
    return out


def fmt_ratio(xs):
    if not xs:
        return "-"
    return f"{median(xs):.1f}x ({min(xs):.1f}x)" if len(xs) > 1 else f"{xs[0]:.1f}x"


def mbps(nbytes, ns):
    return "-" if not ns else f"{nbytes / ns * 1e3:,.0f}"


def print_tables(rounds, nbytes, repeats, versions):
    """rounds: [{impl: {case: {metric key: ns}}}] with impl in msgspec, ours,
    ours-sys, vllm-rust; nbytes: {case: wire bytes}."""
    have_sys = any(r.get("ours-sys") for r in rounds)
    have_vr = any(r.get("vllm-rust") for r in rounds)
    print(f"{versions}; {len(rounds)} interleaved rounds, best of {repeats} per round; times: median over "
          "rounds, ns per call; speed-up: vLLM/msgspec time / ours, per round, median (lowest)")
    lows = {}
    for direction in ("decode", "encode"):
        print()
        print(f"Typed path, {direction}: ours with mimalloc and with the system allocator")
        print()
        print(f"| case | bytes | {direction}: vLLM/msgspec | ours (mimalloc) | ours (system) "
              "| speed-up (mimalloc) | speed-up (system) | ours MB/s |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for case_id, _ in CASES:
            py = median(series(rounds, "msgspec", case_id, direction))
            ours = median(series(rounds, "ours", case_id, "typed " + direction))
            osys = median(series(rounds, "ours-sys", case_id, "typed " + direction))
            rm = ratios(rounds, case_id, "msgspec", direction, "ours", "typed " + direction)
            rsys = ratios(rounds, case_id, "msgspec", direction, "ours-sys", "typed " + direction)
            for k, xs in (("mimalloc", rm), ("system", rsys)):
                if xs:
                    lows[(direction, k)] = min(lows.get((direction, k), min(xs)), min(xs))
            print(f"| `{case_id}` | {nbytes[case_id]:,} | {fmt_ns(py)} | {fmt_ns(ours)} | {fmt_ns(osys)} "
                  f"| {fmt_ratio(rm)} | {fmt_ratio(rsys)} | {mbps(nbytes[case_id], ours)} |")
    print()
    for (direction, k), v in sorted(lows.items()):
        print(f"lowest typed-path {direction} speed-up over vLLM/msgspec, {k}: {v:.2f}x (target: {TARGET}x)")
    print()
    # The row closest to its target, every round shown (not just the median
    # and the lowest).
    case_id = CASES[0][0]
    for impl, k in (("ours", "mimalloc"), ("ours-sys", "system")):
        xs = ratios(rounds, case_id, "msgspec", "encode", impl, "typed encode")
        if xs:
            print(f"typed-path encode speed-up of {case_id} in each round, {k}: "
                  + " ".join(f"{x:.2f}x" for x in xs))
    print()
    print("Value path (`decode_message` / `encode_message`, the conformance view's codec), for reference")
    print()
    print("| case | decode: ours (system) | speed-up | encode: ours (system) | speed-up |")
    print("|---|---:|---:|---:|---:|")
    for case_id, _ in CASES:
        d = median(series(rounds, "ours", case_id, "value decode"))
        dsys = median(series(rounds, "ours-sys", case_id, "value decode"))
        e = median(series(rounds, "ours", case_id, "value encode"))
        esys = median(series(rounds, "ours-sys", case_id, "value encode"))
        rd = ratios(rounds, case_id, "msgspec", "decode", "ours", "value decode")
        re_ = ratios(rounds, case_id, "msgspec", "encode", "ours", "value encode")
        sd = f" ({fmt_ns(dsys)})" if have_sys else ""
        se = f" ({fmt_ns(esys)})" if have_sys else ""
        print(f"| `{case_id}` | {fmt_ns(d)}{sd} | {fmt_ratio(rd)} | {fmt_ns(e)}{se} | {fmt_ratio(re_)} |")
    if have_vr:
        print()
        print("vLLM's Rust client codec (vLLM 0.33.0 `rust/src/engine-core-client`) on the same files; "
              "ratio: its time / ours on the typed path, per round, median (lowest); above 1x: ours is faster")
        print()
        print("| case | decode: vLLM Rust | ours (typed) | ratio | encode: vLLM Rust | ours (typed) | ratio |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        low = None
        for case_id, _ in CASES:
            vd = median(series(rounds, "vllm-rust", case_id, "decode"))
            ve = median(series(rounds, "vllm-rust", case_id, "encode"))
            od = median(series(rounds, "ours", case_id, "typed decode"))
            oe = median(series(rounds, "ours", case_id, "typed encode"))
            xd = ratios(rounds, case_id, "vllm-rust", "decode", "ours", "typed decode")
            xe = ratios(rounds, case_id, "vllm-rust", "encode", "ours", "typed encode")
            for xs in (xd, xe):
                if xs:
                    low = min(xs) if low is None else min(low, min(xs))
            print(f"| `{case_id}` | {fmt_ns(vd)} | {fmt_ns(od)} | {fmt_ratio(xd)} | {fmt_ns(ve)} | {fmt_ns(oe)} "
                  f"| {fmt_ratio(xe)} |")
        if low is not None:
            print()
            print(f"lowest ratio over vLLM's Rust client: {low:.2f}x (target: 2x)")


def main():
    global CASES
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--golden", default="golden")
    ap.add_argument("--version", default="0.33.0")
    ap.add_argument("--conformance", default="target/release/conformance",
                    help="conformance binary built with mimalloc (the default features)")
    ap.add_argument("--conformance-sysalloc", default="target/sysalloc/release/conformance",
                    help="conformance binary built with --no-default-features (system malloc)")
    ap.add_argument("--repeats", type=int, default=7, help="best of N batches per implementation per round")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (every implementation per round)")
    ap.add_argument("--vllm-rust", metavar="BIN",
                    help="vLLM's Rust client codec binary (`BIN bench CASE.json...` prints "
                         "`<case id> decode_ns=<n> encode_ns=<n>`): adds its times and our ratio over it")
    args = ap.parse_args()
    import msgspec
    import vllm

    if args.version not in CASES_BY_VERSION:
        ap.error(f"no bench rows for vLLM {args.version} (rows for {', '.join(CASES_BY_VERSION)})")
    if vllm.__version__.split("+")[0] != args.version:
        ap.error(f"this interpreter's vLLM is {vllm.__version__}, not {args.version}: run it in that release's venv")
    CASES = CASES_BY_VERSION[args.version]
    have_sys = os.path.exists(args.conformance_sysalloc)
    rounds = []
    for i in range(args.rounds):
        print(f"round {i + 1}/{args.rounds}", file=sys.stderr)
        r = {"msgspec": python_times(args.golden, args.version, args.repeats),
             "ours": rust_times(args.golden, args.version, args.conformance, args.repeats)}
        if have_sys:
            r["ours-sys"] = rust_times(args.golden, args.version, args.conformance_sysalloc, args.repeats)
        if args.vllm_rust:
            r["vllm-rust"] = vllm_rust_times(args.golden, args.version, args.vllm_rust)
        rounds.append(r)
    print_tables(rounds, case_bytes(args.golden, args.version), args.repeats,
                 f"vLLM {vllm.__version__}, msgspec {msgspec.__version__}, Python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
