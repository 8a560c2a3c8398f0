#!/usr/bin/env python3
"""One row of fuzz/README.md's coverage table, from `llvm-cov export`.

    coverage_table.py TARGET EXPORT_JSON OUT_DIR INPUTS   # one target
    coverage_table.py --table OUT_DIR...                   # the table

Reads the JSON `llvm-cov export -format=text` wrote for TARGET's coverage
build (fuzz/coverage.sh) and keeps, in OUT_DIR, the region and line
coverage summed over the decoder files of engine-protocol that TARGET is
meant to exercise (DECODER_FILES) and how often each function of
protocol/src ran (generic instantiations summed; closures left to their
function's regions). `--table` prints the markdown table: per target its
figures, how many functions of its files it never runs, and which of
those another target's corpus does run (a decode path reachable from some
input that this target's corpus misses); then the functions of those files
no target runs.
"""

import json
import re
import subprocess
import sys

# protocol/src files whose code each target decodes with: the decoder it is
# named after and what every decode runs through. A target missing here
# (a new one) is measured over DEFAULT.
VLLM = ["decode.rs", "msgpack.rs", "message.rs", "frames.rs", "validate.rs"]
TOKENSPEED = ["decode.rs", "msgpack.rs", "message.rs", "frames.rs", "validate/tokenspeed.rs"]
FRAMES_ONLY = ["decode.rs", "msgpack.rs", "message.rs", "frames.rs"]
PAYLOAD = ["decode.rs", "msgpack.rs", "validate.rs"]
DEFAULT = sorted(set(VLLM + TOKENSPEED))
DECODER_FILES = {
    "engine_core_request": VLLM,
    "engine_core_outputs": VLLM,
    "utility_output": VLLM,
    "handshake": VLLM,
    "ready_response": VLLM,
    "frames": VLLM,
    "sampling_params": PAYLOAD,
    "structured_outputs_params": PAYLOAD,
    "hot_outputs": ["hot/mod.rs", "hot/owned.rs"],
    "hot_request": ["hot/request.rs", "typed/mod.rs", "typed/int_list.rs"],
    "roundtrip": ["encode.rs", "decode.rs", "msgpack.rs", "message.rs"],
    "stop_detector": ["translate/stop.rs"],
    "tokenspeed_request": TOKENSPEED,
    "tokenspeed_abort": FRAMES_ONLY,
    "tokenspeed_outputs": FRAMES_ONLY + ["hot/tokenspeed.rs"],
    "tokenspeed_handshake": FRAMES_ONLY,
    "tokenspeed_ready_response": FRAMES_ONLY,
    "tokenspeed_sampling_params": ["decode.rs", "msgpack.rs", "validate/tokenspeed.rs"],
}
SHOWN = 6
PROTOCOL_SRC = "/protocol/src/"


def demangle(names):
    """Readable paths for symbol names: c++filt (legacy and v0 mangling),
    without crate hashes, symbol hashes and the crate's own prefix."""
    out = subprocess.run(
        ["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True
    ).stdout.splitlines()
    cleaned = []
    for name in out:
        name = re.sub(r"\[[0-9a-f]+\]", "", name)
        name = re.sub(r"::h[0-9a-f]{16}$", "", name)
        name = name.replace("engine_protocol::", "")
        name = re.sub(r"\b(core|alloc)::(\w+::)*(?=[A-Z])", "", name)
        cleaned.append(name)
    return cleaned


def strip_generics(name):
    """`a::f::<T, U>::g` -> `a::f::g`: type arguments (balanced) dropped."""
    out, depth, i = [], 0, 0
    while i < len(name):
        if depth == 0 and name.startswith("::<", i):
            depth, i = 1, i + 3
            continue
        if depth:
            depth += {"<": 1, ">": -1}.get(name[i], 0)
        else:
            out.append(name[i])
        i += 1
    return "".join(out)


def relative(filename):
    return filename.split(PROTOCOL_SRC, 1)[1] if PROTOCOL_SRC in filename else None


def pct(covered, count):
    return f"{100.0 * covered / count:.1f} %" if count else "-"


def measure(target, export_path, out_dir, inputs):
    """Per target: out_dir/summary.json (figures over its decoder files),
    out_dir/functions.json (every function of protocol/src: how often it
    ran) and out_dir/uncovered.txt."""
    wanted = DECODER_FILES.get(target, DEFAULT)
    data = json.load(open(export_path))["data"][0]

    per_file = {}
    for f in data["files"]:
        rel = relative(f["filename"])
        if rel in wanted:
            per_file[rel] = f["summary"]
    regions = [sum(s["regions"][k] for s in per_file.values()) for k in ("covered", "count")]
    lines = [sum(s["lines"][k] for s in per_file.values()) for k in ("covered", "count")]

    # A function counts as run when any instantiation of it ran (generic
    # code has one entry per instantiation, named by its type arguments);
    # closures are left to the regions of the function holding them.
    mangled = sorted({fn["name"] for fn in data["functions"]})
    readable = dict(zip(mangled, demangle(mangled))) if mangled else {}
    by_place = {}
    for fn in data["functions"]:
        rel = relative(fn["filenames"][0])
        name = strip_generics(readable[fn["name"]])
        if rel is None or "{closure" in name or not fn["regions"]:
            continue
        place = f"{rel}:{fn['regions'][0][0]} {name}"
        by_place[place] = by_place.get(place, 0) + fn["count"]
    json.dump(by_place, open(f"{out_dir}/functions.json", "w"), indent=0, sort_keys=True)
    json.dump(
        {"target": target, "inputs": int(inputs), "files": wanted, "regions": regions, "lines": lines},
        open(f"{out_dir}/summary.json", "w"),
    )
    with open(f"{out_dir}/uncovered.txt", "w") as out:
        out.write(f"# {target}: functions of {', '.join(wanted)} its corpus never runs\n")
        for rel in wanted:
            s = per_file.get(rel)
            if s is None:
                out.write(f"# {rel}: not in the binary\n")
                continue
            out.write(
                f"# {rel}: regions {s['regions']['covered']}/{s['regions']['count']}, "
                f"lines {s['lines']['covered']}/{s['lines']['count']}\n"
            )
        for place in sorted(by_place, key=sort_key):
            if by_place[place] == 0 and file_of(place) in wanted:
                out.write(place + "\n")


def file_of(place):
    return place.split(":", 1)[0]


def sort_key(place):
    where, name = place.split(" ", 1)
    rel, line = where.split(":")
    return (rel, int(line), name)


def short(place):
    name = place.split(" ", 1)[1]
    return name.split("::")[-1] if not name.startswith("<") else name


def table(out_dirs):
    """The README table from every target's summary.json and functions.json,
    and the functions of the decoder files no target runs."""
    targets = [(json.load(open(f"{d}/summary.json")), json.load(open(f"{d}/functions.json"))) for d in out_dirs]
    ran_anywhere = {}
    for _, functions in targets:
        for place, count in functions.items():
            ran_anywhere[place] = ran_anywhere.get(place, 0) + count
    print("| target | inputs | decoder files | regions | lines | never run: of those files' functions | that another target runs |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for summary, functions in targets:
        never = sorted(
            (p for p, c in functions.items() if c == 0 and file_of(p) in summary["files"]), key=sort_key
        )
        elsewhere = [p for p in never if ran_anywhere.get(p, 0) > 0]
        shown = [f"`{short(p)}`" for p in elsewhere[:SHOWN]]
        if len(elsewhere) > SHOWN:
            shown.append(f"+{len(elsewhere) - SHOWN} more")
        r, l = summary["regions"], summary["lines"]
        files = ", ".join(f"`{f}`" for f in summary["files"])
        print(
            f"| `{summary['target']}` | {summary['inputs']} | {files} | {pct(*r)} | {pct(*l)} "
            f"| {len(never)} | {len(elsewhere)}: {', '.join(shown) if shown else '-'} |"
        )
    measured = sorted({f for summary, _ in targets for f in summary["files"]})
    nowhere = sorted((p for p, c in ran_anywhere.items() if c == 0 and file_of(p) in measured), key=sort_key)
    print()
    print(f"Functions of those files that no target's corpus runs ({len(nowhere)}):")
    print()
    print("| file | functions |")
    print("| --- | --- |")
    for f in measured:
        # Functions a macro writes once per type share a line: one entry.
        groups = {}
        for p in nowhere:
            if file_of(p) == f:
                line = p.split(" ", 1)[0]
                groups.setdefault((line, p.rsplit("::", 1)[-1]), []).append(p)
        names = [
            f"`{short(ps[0])}`" if len(ps) == 1 else f"`{ps[0].rsplit('::', 1)[-1]}` ({len(ps)} types)"
            for _, ps in sorted(groups.items(), key=lambda kv: sort_key(kv[1][0]))
        ]
        if names:
            print(f"| `{f}` | {', '.join(names)} |")


def main():
    if sys.argv[1] == "--table":
        return table(sys.argv[2:])
    measure(*sys.argv[1:])


if __name__ == "__main__":
    main()
