"""Schema walking, schema dumps and the canonical view, driven by vLLM's own
class definitions through ``msgspec.inspect``.

Nothing in here copies vLLM code: the schema comes from introspecting the
installed vLLM classes, and the view is rendered from the raw MessagePack tree
(``msgspec.msgpack.decode`` without a type) guided by that schema.
"""

from __future__ import annotations

import enum
import math
from typing import Any

import msgspec
import msgspec.inspect as mi
import numpy as np

MISSING = object()

# --------------------------------------------------------------------------
# readable type strings and schema dump


def type_name(cls) -> str:
    return getattr(cls, "__name__", repr(cls))


def type_str(t) -> str:
    if isinstance(t, mi.AnyType):
        return "any"
    if isinstance(t, mi.NoneType):
        return "None"
    if isinstance(t, mi.BoolType):
        return "bool"
    if isinstance(t, mi.IntType):
        return "int"
    if isinstance(t, mi.FloatType):
        return "float"
    if isinstance(t, mi.StrType):
        return "str"
    if isinstance(t, (mi.BytesType, mi.ByteArrayType, mi.MemoryViewType)):
        return "bytes"
    if isinstance(t, mi.EnumType):
        return f"enum {type_name(t.cls)}"
    if isinstance(t, mi.LiteralType):
        return "Literal[" + ", ".join(repr(v) for v in t.values) + "]"
    if isinstance(t, mi.ListType):
        return f"list[{type_str(t.item_type)}]"
    if isinstance(t, mi.SetType):
        return f"set[{type_str(t.item_type)}]"
    if isinstance(t, mi.FrozenSetType):
        return f"frozenset[{type_str(t.item_type)}]"
    if isinstance(t, mi.VarTupleType):
        return f"tuple[{type_str(t.item_type)}, ...]"
    if isinstance(t, mi.TupleType):
        return "tuple[" + ", ".join(type_str(x) for x in t.item_types) + "]"
    if isinstance(t, mi.DictType):
        return f"dict[{type_str(t.key_type)}, {type_str(t.value_type)}]"
    if isinstance(t, mi.UnionType):
        return " | ".join(type_str(x) for x in t.types)
    if isinstance(t, (mi.StructType, mi.DataclassType, mi.NamedTupleType, mi.TypedDictType)):
        return type_name(t.cls)
    if isinstance(t, mi.CustomType):
        c = t.cls
        mod = getattr(c, "__module__", "")
        if mod.startswith("torch"):
            return "torch.Tensor"
        if mod.startswith("numpy"):
            return "numpy.ndarray"
        return type_name(c)
    return repr(t)


def encoding_of(t) -> str:
    if isinstance(t, mi.StructType):
        return "array_like struct" if t.array_like else "map struct"
    if isinstance(t, mi.DataclassType):
        return "dataclass"
    if isinstance(t, mi.NamedTupleType):
        return "namedtuple"
    if isinstance(t, mi.TypedDictType):
        return "typeddict"
    return "?"


def children(t):
    if isinstance(t, (mi.StructType, mi.DataclassType, mi.NamedTupleType, mi.TypedDictType)):
        for f in t.fields:
            yield f.type
    elif isinstance(t, (mi.ListType, mi.SetType, mi.FrozenSetType, mi.VarTupleType)):
        yield t.item_type
    elif isinstance(t, mi.TupleType):
        yield from t.item_types
    elif isinstance(t, mi.DictType):
        yield t.key_type
        yield t.value_type
    elif isinstance(t, mi.UnionType):
        yield from t.types


def collect(roots) -> tuple[list, list]:
    """All struct-like types and enums reachable from roots, in walk order."""
    seen, out, enums, eseen = set(), [], [], set()

    def walk(t):
        if isinstance(t, (mi.EnumType,)):
            if t.cls not in eseen:
                eseen.add(t.cls)
                enums.append(t.cls)
            return
        if isinstance(t, (mi.StructType, mi.DataclassType, mi.NamedTupleType, mi.TypedDictType)):
            if t.cls in seen:
                return
            seen.add(t.cls)
            out.append(t)
        for c in children(t):
            walk(c)

    for r in roots:
        walk(mi.type_info(r))
    return out, enums


def default_json(f, t=None):
    """JSON form of a field default for the schema dump."""
    if f.required:
        return "required"
    if f.default_factory is not mi.NODEFAULT:
        fac = f.default_factory
        return "factory:" + getattr(fac, "__qualname__", repr(fac))
    return render_default(f)


def schema_dump(roots, extra_info: dict) -> dict:
    types, enums = collect(roots)
    out = dict(extra_info)
    out["types"] = []
    for t in types:
        d = {
            "name": type_name(t.cls),
            "module": getattr(t.cls, "__module__", ""),
            "encoding": encoding_of(t),
        }
        if isinstance(t, mi.StructType):
            cfg = t.cls.__struct_config__
            d["omit_defaults"] = bool(cfg.omit_defaults)
            d["forbid_unknown_fields"] = bool(cfg.forbid_unknown_fields)
        d["has_post_init"] = hasattr(t.cls, "__post_init__")
        fields = []
        for i, f in enumerate(t.fields):
            fd = {
                "index": i,
                "name": f.name,
                "wire_name": f.encode_name,
                "type": type_str(f.type),
                "default": default_json(f),
            }
            if f.default_factory is not mi.NODEFAULT:
                fd["factory_value"] = render_default(f)
            fields.append(fd)
        d["fields"] = fields
        d["num_fields"] = len(fields)
        d["num_required"] = sum(1 for f in t.fields if f.required)
        out["types"].append(d)
    out["enums"] = []
    for e in enums:
        members = []
        for m in e:
            v = m.value
            if isinstance(v, bytes):
                v = {"$bytes": v.hex()}
            members.append({"name": m.name, "value": v})
        out["enums"].append(
            {
                "name": type_name(e),
                "module": e.__module__,
                "kind": "IntEnum" if issubclass(e, int) else "Enum",
                "members": members,
            }
        )
    return out


# --------------------------------------------------------------------------
# plain JSON rendering of raw msgpack values (rules 4-8)


def fnum(x: float):
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return x


def key_str(k) -> str:
    if isinstance(k, str):
        return k
    if isinstance(k, bool):
        return "true" if k else "false"
    if isinstance(k, int):
        return str(k)
    if isinstance(k, float):
        return repr(k)
    if k is None:
        return "null"
    if isinstance(k, bytes):
        return k.hex()
    return repr(k)


def plain(raw):
    if raw is None or isinstance(raw, (bool, int, str)):
        return raw
    if isinstance(raw, float):
        return fnum(raw)
    if isinstance(raw, (bytes, bytearray, memoryview)):
        return {"$bytes": bytes(raw).hex()}
    if isinstance(raw, msgspec.msgpack.Ext):
        return {"$ext": raw.code, "hex": bytes(raw.data).hex()}
    if isinstance(raw, (list, tuple)):
        return [plain(x) for x in raw]
    if isinstance(raw, dict):
        return {key_str(k): plain(v) for k, v in raw.items()}
    raise TypeError(f"unexpected raw value {type(raw)}")


# --------------------------------------------------------------------------
# defaults


_DEFAULT_ENCODER = None


def _encoder():
    global _DEFAULT_ENCODER
    if _DEFAULT_ENCODER is None:
        from vllm.v1.serial_utils import MsgpackEncoder

        _DEFAULT_ENCODER = MsgpackEncoder()
    return _DEFAULT_ENCODER


def render_default(f):
    if f.default_factory is not mi.NODEFAULT:
        v = f.default_factory()
    else:
        v = f.default
    if v is None:
        return None
    # Encode the default with vLLM's encoder and render it like wire data.
    frames = _encoder().encode(v)
    raw = msgspec.msgpack.decode(frames[0])
    return render(f.type, raw, "<default>", [], [bytes(x) for x in frames])


# --------------------------------------------------------------------------
# typed rendering


class ViewError(Exception):
    pass


TORCH_TO_NUMPY = {
    "float32": "<f4",
    "float64": "<f8",
    "float16": "<f2",
    "half": "<f2",
    "float": "<f4",
    "double": "<f8",
    "int64": "<i8",
    "long": "<i8",
    "int32": "<i4",
    "int": "<i4",
    "int16": "<i2",
    "short": "<i2",
    "int8": "|i1",
    "uint8": "|u1",
    "uint16": "<u2",
    "uint32": "<u4",
    "uint64": "<u8",
    "bool": "|b1",
}


def tensor_values(dtype: str, shape, buf: bytes, torch_like: bool):
    """The flat C-order numbers of a tensor's buffer. The shape is checked
    the way numpy's reshape reads it (one negative dimension is inferred
    from the buffer size; vLLM's decoder has already accepted it), and kept
    as sent by the caller."""
    if dtype == "bfloat16":
        u16 = np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16
        arr = u16.view("<f4")
    else:
        npd = TORCH_TO_NUMPY.get(dtype, dtype) if torch_like else dtype
        arr = np.frombuffer(buf, dtype=np.dtype(npd))
    try:
        arr = arr.reshape(shape)
    except ValueError as e:
        raise ViewError(f"buffer holds {arr.size} items, shape {shape} does not fit: {e}") from e
    out = []
    for v in arr.ravel().tolist():
        if isinstance(v, float):
            out.append(fnum(v))
        else:
            out.append(v)
    return out


def render_tensor(t, raw, path, frames):
    if not isinstance(raw, (list, tuple)) or len(raw) != 3:
        raise ViewError(f"{path}: tensor is not a 3-array")
    dtype, shape, data = raw
    if isinstance(data, msgspec.msgpack.Ext):
        buf = bytes(data.data)
    elif isinstance(data, (bytes, bytearray)):
        buf = bytes(data)
    elif isinstance(data, int) and not isinstance(data, bool):
        # vLLM indexes a Python list of the frames: negative indices count
        # from the end.
        buf = bytes(frames[data])
    else:
        raise ViewError(f"{path}: tensor data neither ext, bin nor index")
    torch_like = getattr(t.cls, "__module__", "").startswith("torch")
    return {
        "dtype": dtype,
        "shape": list(shape),
        "data": tensor_values(dtype, list(shape), buf, torch_like),
    }


class _TorchLike:
    __module__ = "torch"


_TORCH_T = mi.CustomType(_TorchLike)


def render_nested_tensors(raw, path, frames):
    """NestedTensors as vLLM's encoder hook writes them: a tensor triple
    [dtype, shape, data], a number, or a list of those."""
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return fnum(raw) if isinstance(raw, float) else raw
    if isinstance(raw, list) and raw and isinstance(raw[0], str):
        return render_tensor(_TORCH_T, raw, path, frames)
    if isinstance(raw, list):
        return [render_nested_tensors(x, f"{path}[{i}]", frames) for i, x in enumerate(raw)]
    return plain(raw)


def render_mm_item(raw, path, frames):
    """MultiModalKwargsItem: {key: {"data": NestedTensors|nil, "field": [factory, kwargs]}}."""
    if not isinstance(raw, dict):
        return plain(raw)
    out = {}
    for k, elem in raw.items():
        ks = key_str(k)
        if isinstance(elem, dict):
            e = {}
            for ek, ev in elem.items():
                if ek == "data" and ev is not None:
                    e["data"] = render_nested_tensors(ev, f"{path}.{ks}.data", frames)
                else:
                    e[key_str(ek)] = plain(ev)
            out[ks] = e
        else:
            out[ks] = plain(elem)
    return out


def _matches(t, raw) -> bool:
    if isinstance(t, mi.NoneType):
        return raw is None
    if isinstance(t, mi.AnyType):
        return True
    if isinstance(t, mi.BoolType):
        return isinstance(raw, bool)
    if isinstance(t, mi.IntType):
        return isinstance(raw, int) and not isinstance(raw, bool)
    if isinstance(t, mi.FloatType):
        return isinstance(raw, (int, float)) and not isinstance(raw, bool)
    if isinstance(t, mi.StrType):
        return isinstance(raw, str)
    if isinstance(t, (mi.BytesType, mi.ByteArrayType, mi.MemoryViewType)):
        return isinstance(raw, (bytes, bytearray))
    if isinstance(t, (mi.EnumType,)):
        return any(m.value == raw and type(m.value) is type(raw) for m in t.cls)
    if isinstance(t, mi.LiteralType):
        return raw in t.values
    if isinstance(t, (mi.ListType, mi.SetType, mi.FrozenSetType, mi.VarTupleType, mi.TupleType, mi.NamedTupleType)):
        return isinstance(raw, list)
    if isinstance(t, mi.StructType):
        return isinstance(raw, list) if t.array_like else isinstance(raw, dict)
    if isinstance(t, (mi.DataclassType, mi.DictType, mi.TypedDictType)):
        return isinstance(raw, dict)
    if isinstance(t, mi.CustomType):
        return True
    return False


def _ordered_union_members(types):
    # msgspec prefers int over float for ints; keep declaration order otherwise
    return list(types)


def render(t, raw, path: str, drift: list, frames) -> Any:
    if isinstance(t, mi.UnionType):
        if raw is None:
            return None
        members = [m for m in _ordered_union_members(t.types) if not isinstance(m, mi.NoneType)]
        # exact kind first (int before float for ints)
        for m in members:
            if isinstance(m, mi.IntType) and isinstance(raw, int) and not isinstance(raw, bool):
                return raw
        for m in members:
            if _matches(m, raw):
                return render(m, raw, path, drift, frames)
        raise ViewError(f"{path}: no union member of {type_str(t)} matches {type(raw).__name__}")
    if isinstance(t, mi.AnyType):
        return plain(raw)
    if isinstance(t, mi.NoneType):
        return None
    if isinstance(t, mi.BoolType):
        return raw
    if isinstance(t, mi.IntType):
        return raw
    if isinstance(t, mi.FloatType):
        return fnum(float(raw))
    if isinstance(t, mi.StrType):
        return raw
    if isinstance(t, (mi.BytesType, mi.ByteArrayType, mi.MemoryViewType)):
        return {"$bytes": bytes(raw).hex()}
    if isinstance(t, (mi.EnumType, mi.LiteralType)):
        return raw
    if isinstance(t, (mi.ListType, mi.VarTupleType)):
        return [render(t.item_type, x, f"{path}[{i}]", drift, frames) for i, x in enumerate(raw)]
    if isinstance(t, mi.TupleType):
        return [render(it, x, f"{path}[{i}]", drift, frames) for i, (it, x) in enumerate(zip(t.item_types, raw))]
    if isinstance(t, (mi.SetType, mi.FrozenSetType)):
        items = [render(t.item_type, x, f"{path}[{i}]", drift, frames) for i, x in enumerate(raw)]
        uniq = []
        for x in items:  # a set holds each element once
            if x not in uniq:
                uniq.append(x)
        out = sorted(uniq)
        if out != items:
            NOTES.append(f"{path}: set written in hash order, not ascending")
        return out
    if isinstance(t, mi.DictType):
        out = {}
        for k, v in raw.items():
            ks = key_str(k)
            out[ks] = render(t.value_type, v, f"{path}.{ks}", drift, frames)
        return out
    if isinstance(t, mi.StructType) and t.array_like or isinstance(t, mi.NamedTupleType):
        out = {}
        for i, f in enumerate(t.fields):
            if i < len(raw):
                out[f.name] = render(f.type, raw[i], f"{path}.{f.name}", drift, frames)
            elif f.required:
                raise ViewError(f"{path}: missing required element {i}")
            else:
                out[f.name] = render_default(f)
        for i in range(len(t.fields), len(raw)):
            drift.append(f"{path}[{i}]")
        return out
    if isinstance(t, (mi.StructType, mi.DataclassType, mi.TypedDictType)):
        out = {}
        by_wire = {f.encode_name: f for f in t.fields}
        omit = isinstance(t, mi.StructType) and t.cls.__struct_config__.omit_defaults
        for f in t.fields:
            if f.encode_name in raw:
                out[f.name] = render(f.type, raw[f.encode_name], f"{path}.{f.name}", drift, frames)
                if omit and not f.required and out[f.name] == render_default(f):
                    NOTES.append(f"{path}.{f.name}: default value written explicitly")
            elif f.required:
                raise ViewError(f"{path}: missing required key {f.encode_name}")
            else:
                out[f.name] = render_default(f)
        for k in raw:
            if k not in by_wire:
                drift.append(f"{path}.{key_str(k)}")
        return out
    if isinstance(t, mi.CustomType):
        mod = getattr(t.cls, "__module__", "")
        if mod.startswith("torch") or mod.startswith("numpy"):
            return render_tensor(t, raw, path, frames)
        if type_name(t.cls) == "MultiModalKwargsItem":
            return render_mm_item(raw, path, frames)
        return plain(raw)
    raise ViewError(f"{path}: unsupported type {t!r}")


# Reasons why an encoder given only the view cannot reproduce vLLM's bytes
# (hash-ordered sets, defaults that msgspec wrote because the value was not
# the identical default object). Filled by render(), read by verdict.py.
NOTES: list[str] = []


def render_message(cls, frames: list[bytes], name: str):
    """Canonical view of frames (payload first, then aux) as type cls.
    Returns (value, drift)."""
    NOTES.clear()
    raw = msgspec.msgpack.decode(frames[0])
    drift: list[str] = []
    v = render(mi.type_info(cls), raw, name, drift, frames)
    return v, drift
