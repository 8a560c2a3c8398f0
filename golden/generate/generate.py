#!/usr/bin/env python3
"""Golden-case generator for vLLM's EngineCore wire protocol.

Builds messages with vLLM's own classes, encodes them with vLLM's own
MsgpackEncoder (or msgspec.msgpack.encode where vLLM does that), and asks
vLLM's own decoders for the verdict. See golden/README.md.

    PYTHONHASHSEED=0 VLLM_TARGET_DEVICE=cpu <venv>/bin/python \
        golden/generate/generate.py --out golden/vllm/<version> \
        [--schema-dump golden/generate/schema/vllm-<version>.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import msgspec  # noqa: E402

import view  # noqa: E402
import verdict  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", help="output tree, e.g. golden/vllm/0.33.0")
    ap.add_argument("--schema-dump", help="write the schema JSON here")
    args = ap.parse_args()
    if os.environ.get("PYTHONHASHSEED") != "0":
        print("error: run with PYTHONHASHSEED=0", file=sys.stderr)
        return 2
    if not args.out and not args.schema_dump:
        ap.error("nothing to do: give --out and/or --schema-dump")

    import vllm

    env = verdict.Env()
    info = {
        "vllm": vllm.__version__,
        "msgspec": msgspec.__version__,
        "python": platform.python_version(),
    }

    if args.schema_dump:
        dump = view.schema_dump(env.schema_roots(), {"generator": "golden/generate/generate.py", **info})
        dump["request_types"] = [
            {"name": m.name, "byte": m.value.hex()} for m in env.EngineCoreRequestType
        ]
        os.makedirs(os.path.dirname(os.path.abspath(args.schema_dump)), exist_ok=True)
        with open(args.schema_dump, "w") as f:
            json.dump(dump, f, indent=1)
            f.write("\n")
        print(f"schema: {len(dump['types'])} types -> {args.schema_dump}")

    if args.out:
        import cases

        b = cases.build_all(env)
        written = verdict.finalize_and_write(env, b.cases, args.out, info)
        counts: dict[str, int] = {}
        for c in written:
            g = c["case"].split("/")[0]
            counts[g] = counts.get(g, 0) + 1
        print(f"{vllm.__version__}: {len(written)} cases " + ", ".join(f"{g}={n}" for g, n in sorted(counts.items())))
        # Cases of other releases that this release's classes cannot carry:
        # named, never silently dropped.
        print(f"{vllm.__version__}: {len(b.skipped)} cases not producible in this release")
        for case_id, reason in sorted(b.skipped):
            print(f"  not produced: {case_id}: {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
