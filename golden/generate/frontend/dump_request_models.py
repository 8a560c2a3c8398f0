#!/usr/bin/env python3
"""Dumps the request models of vLLM's OpenAI server (the pydantic classes
`CompletionRequest` and `ChatCompletionRequest` of the installed release)
into a JSON table: every field with its alias, its type as Python writes
it, its default (or `required` / `factory`), its bounds (ge/gt/le/lt,
min/max length) and the first line of its description. The gateway
differential takes its request space from this table, so a field a new
release adds becomes a row without code.

    PYTHONHASHSEED=0 VLLM_TARGET_DEVICE=cpu <venv>/bin/python \\
        golden/generate/frontend/dump_request_models.py --out golden/generate/schema/openai-requests-vllm-<version>.json

Nothing of vLLM is copied: the script imports the installed wheel and reads
its classes.
"""

from __future__ import annotations

import argparse
import enum
import importlib
import json
import math
import platform
import sys

# Where each release keeps the classes (the first module that has it wins).
MODULES = {
    "CompletionRequest": [
        "vllm.entrypoints.openai.completion.protocol",
        "vllm.entrypoints.openai.protocol",
    ],
    "ChatCompletionRequest": [
        "vllm.entrypoints.openai.chat_completion.protocol",
        "vllm.entrypoints.openai.protocol",
    ],
}
ENDPOINTS = {"CompletionRequest": "/v1/completions", "ChatCompletionRequest": "/v1/chat/completions"}


def find(name: str):
    for m in MODULES[name]:
        try:
            mod = importlib.import_module(m)
        except ImportError:
            continue
        if hasattr(mod, name):
            return m, getattr(mod, name)
    sys.exit(f"{name} not found in {MODULES[name]}")


def kinds(t) -> list:
    """The JSON shapes a field takes, one entry per alternative: int, float,
    bool, str, bytes, null, literal (values), list (items), map (values),
    object (a class: pydantic model or TypedDict), any."""
    import types
    import typing

    origin, args = typing.get_origin(t), typing.get_args(t)
    if origin is typing.Annotated:
        inner = kinds(args[0])
        b = {}
        for m in args[1:]:
            for meta in [m, *getattr(m, "metadata", [])]:
                for k in ("ge", "gt", "le", "lt", "min_length", "max_length"):
                    v = getattr(meta, k, None)
                    if v is not None:
                        b[k] = jsonable(v)
        for k in inner:
            if b:
                k.setdefault("bounds", {}).update(b)
        return inner
    if origin in (typing.Union, types.UnionType):
        out = []
        for a in args:
            out.extend(kinds(a))
        return out
    if origin is typing.Literal:
        return [{"kind": "literal", "values": [jsonable(a) for a in args]}]
    if origin in (list, tuple, set, frozenset) or (origin is not None and getattr(origin, "__name__", "") in ("Sequence", "Iterable")):
        return [{"kind": "list", "items": kinds(args[0]) if args else [{"kind": "any"}]}]
    if origin is dict or (origin is not None and getattr(origin, "__name__", "") == "Mapping"):
        return [{"kind": "map", "values": kinds(args[1]) if len(args) > 1 else [{"kind": "any"}]}]
    if t is type(None) or t is None:
        return [{"kind": "null"}]
    if t is bool:
        return [{"kind": "bool"}]
    if t is int:
        return [{"kind": "int"}]
    if t is float:
        return [{"kind": "float"}]
    if t is str:
        return [{"kind": "str"}]
    if t is bytes:
        return [{"kind": "bytes"}]
    if t is typing.Any:
        return [{"kind": "any"}]
    if isinstance(t, type) and issubclass(t, enum.Enum):
        return [{"kind": "literal", "values": [jsonable(m.value) for m in t]}]
    return [{"kind": "object", "class": getattr(t, "__qualname__", repr(t))}]


def type_text(t) -> str:
    s = repr(t) if not isinstance(t, type) else t.__name__
    for junk in ("typing.", "typing_extensions.", "collections.abc.", "pydantic.main.", "openai.types."):
        s = s.replace(junk, "")
    return s


def jsonable(v):
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else repr(v)
    if isinstance(v, enum.Enum):
        return jsonable(v.value)
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    return repr(v)


def bounds(field) -> dict:
    out = {}
    for m in field.metadata:
        for k in ("ge", "gt", "le", "lt", "min_length", "max_length", "pattern"):
            v = getattr(m, k, None)
            if v is not None:
                out[k] = jsonable(v)
    return out


def row(name: str, field) -> dict:
    from pydantic_core import PydanticUndefined

    if field.default_factory is not None:
        try:
            a, b = field.default_factory(), field.default_factory()
            # A factory that makes a new value each time (a random id).
            default = {"factory": jsonable(a) if jsonable(a) == jsonable(b) else "varies"}
        except Exception as e:  # noqa: BLE001 - a factory that needs arguments
            default = {"factory": repr(e)}
    elif field.default is PydanticUndefined:
        default = "required"
    else:
        default = {"value": jsonable(field.default)}
    desc = (field.description or "").strip().splitlines()
    r = {
        "name": name,
        "type": type_text(field.annotation),
        "kinds": kinds(field.annotation),
        "default": default,
    }
    if field.alias and field.alias != name:
        r["alias"] = field.alias
    b = bounds(field)
    if b:
        r["bounds"] = b
    if desc:
        r["doc"] = desc[0]
    return r


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    import pydantic
    import vllm

    models = []
    for name in ("CompletionRequest", "ChatCompletionRequest"):
        module, cls = find(name)
        models.append({
            "name": name,
            "module": module,
            "endpoint": ENDPOINTS[name],
            "extra": cls.model_config.get("extra"),
            "fields": [row(n, f) for n, f in cls.model_fields.items()],
        })
    dump = {
        "generator": "golden/generate/frontend/dump_request_models.py",
        "vllm": vllm.__version__.split("+")[0],
        "pydantic": pydantic.VERSION,
        "python": platform.python_version(),
        "models": models,
    }
    with open(a.out, "w") as f:
        json.dump(dump, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"{sum(len(m['fields']) for m in models)} fields of {len(models)} models -> {a.out}")


if __name__ == "__main__":
    main()
