"""Verdicts from vLLM's own decoders, reject classification, and case files."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

import msgspec

import view


# --------------------------------------------------------------------------
# vLLM environment


class Env:
    """Holds vLLM's classes (imported once)."""

    def __init__(self):
        import numpy as np
        import torch

        import vllm
        import vllm.v1.engine as eng
        from vllm.lora.request import LoRARequest
        from vllm.sampling_params import (
            RepetitionDetectionParams,
            RequestOutputKind,
            SamplingParams,
            StructuredOutputsParams,
        )
        from vllm.v1.engine.utils import EngineHandshakeMetadata, EngineZmqAddresses
        from vllm.v1.metrics import stats
        from vllm.v1.outputs import LogprobsLists, LogprobsTensors
        from vllm.v1.serial_utils import MsgpackDecoder, MsgpackEncoder, UtilityResult

        self.np, self.torch, self.vllm = np, torch, vllm
        self.version = vllm.__version__
        self.eng = eng
        self.EngineCoreRequest = eng.EngineCoreRequest
        self.EngineCoreOutputs = eng.EngineCoreOutputs
        self.EngineCoreOutput = eng.EngineCoreOutput
        self.UtilityOutput = eng.UtilityOutput
        self.FinishReason = eng.FinishReason
        self.EngineCoreEvent = eng.EngineCoreEvent
        self.EngineCoreEventType = eng.EngineCoreEventType
        self.EngineCoreRequestType = eng.EngineCoreRequestType
        self.EngineCoreReadyResponse = eng.EngineCoreReadyResponse
        self.RequestError = getattr(eng, "RequestError", None)
        self.LoRARequest = LoRARequest
        self.SamplingParams = SamplingParams
        self.StructuredOutputsParams = StructuredOutputsParams
        self.RepetitionDetectionParams = RepetitionDetectionParams
        self.RequestOutputKind = RequestOutputKind
        self.EngineHandshakeMetadata = EngineHandshakeMetadata
        self.EngineZmqAddresses = EngineZmqAddresses
        self.stats = stats
        self.PrefillStats = stats.PrefillStats
        self.SchedulerStats = stats.SchedulerStats
        self.LogprobsLists = LogprobsLists
        self.LogprobsTensors = LogprobsTensors
        self.MsgpackDecoder = MsgpackDecoder
        self.MsgpackEncoder = MsgpackEncoder
        self.UtilityResult = UtilityResult

        # What this release's classes have (introspected, never looked up
        # by version number): the case builders produce a case only where
        # its classes and fields exist.
        self.output_fields = self.fields(eng.EngineCoreOutput)
        self.outputs_fields = self.fields(eng.EngineCoreOutputs)
        self.request_fields = self.fields(eng.EngineCoreRequest)
        self.sp_fields = self.fields(SamplingParams)
        self.ready_fields = self.fields(eng.EngineCoreReadyResponse)
        # How this release's clients send a prompt: the type of
        # EngineCoreRequest.prompt_token_ids decides (list[int] | None up to
        # 0.33.0, numpy.ndarray | None from 0.34.0), never the version.
        self.prompt_type = view.type_str(self.field_type(eng.EngineCoreRequest, "prompt_token_ids"))
        self.prompt_is_array = prompt_is_array(eng.EngineCoreRequest)
        self.PrefixHashConfig = getattr(eng, "PrefixHashConfig", None)

    @staticmethod
    def fields(cls) -> list[str]:
        """Field names of a msgspec Struct, dataclass or NamedTuple, in wire
        order, as msgspec.inspect describes the installed class."""
        import msgspec.inspect as mi

        return [f.name for f in mi.type_info(cls).fields]

    @staticmethod
    def field_type(cls, name):
        """msgspec.inspect's type of one field of cls."""
        import msgspec.inspect as mi

        for f in mi.type_info(cls).fields:
            if f.name == name:
                return f.type
        raise KeyError(f"{cls.__name__} has no field {name}")

    @staticmethod
    def field_default(cls, name):
        """The default of one field of cls (msgspec.inspect.NODEFAULT when
        it has none or a factory)."""
        import msgspec.inspect as mi

        for f in mi.type_info(cls).fields:
            if f.name == name:
                return f.default
        raise KeyError(f"{cls.__name__} has no field {name}")

    @staticmethod
    def required_fields(cls) -> list[str]:
        import msgspec.inspect as mi

        return [f.name for f in mi.type_info(cls).fields if f.required]

    def find(self, module: str, name: str):
        """A class of this release, or None where the release lacks it."""
        import importlib

        try:
            return getattr(importlib.import_module(module), name, None)
        except ImportError:
            return None

    def schema_roots(self):
        roots = [
            self.EngineCoreRequest,
            self.EngineCoreOutputs,
            self.UtilityOutput,
            self.EngineCoreReadyResponse,
            self.EngineHandshakeMetadata,
        ]
        return roots

    def encode(self, obj) -> list[bytes]:
        return [bytes(f) for f in self.MsgpackEncoder().encode(obj)]

    def as_sent(self, request):
        """The request as this release's engine clients put it on the wire
        (module-level as_sent)."""
        return as_sent(request)


@functools.lru_cache(maxsize=None)
def prompt_is_array(EngineCoreRequest) -> bool:
    """Whether this release types EngineCoreRequest.prompt_token_ids as an
    ndarray (numpy.ndarray | None from 0.34.0) rather than a list of ids,
    read from the installed class."""
    return "numpy.ndarray" in view.type_str(Env.field_type(EngineCoreRequest, "prompt_token_ids"))


def as_sent(request):
    """An EngineCoreRequest as this release's engine clients put it on the
    wire. Where prompt_token_ids is typed as an ndarray, the clients send a
    list prompt as an int32 array: vLLM's own
    `core_client._with_packed_prompt` does it (a copy of the request; an id
    outside int32 raises OverflowError). A release typing the field as an
    ndarray without that function gets the same int32 array
    (`np.frombuffer(array("i", ids), np.int32)`). A list-typed field, and a
    prompt that is already an array or None, are sent as they are."""
    if not isinstance(request.prompt_token_ids, list) or not prompt_is_array(type(request)):
        return request
    import importlib

    try:
        pack = getattr(importlib.import_module("vllm.v1.engine.core_client"), "_with_packed_prompt", None)
    except ImportError:
        pack = None
    if pack is not None:
        return pack(request)
    from array import array

    import numpy as np
    import msgspec.structs

    packed = np.frombuffer(array("i", request.prompt_token_ids), dtype=np.int32)
    return msgspec.structs.replace(request, prompt_token_ids=packed)


# --------------------------------------------------------------------------
# message kinds

INPUT_KINDS = {
    "EngineCoreRequest": b"\x00",
    "AbortRequest": b"\x01",
    "StartDpWave": b"\x02",
    "UtilityRequest": b"\x03",
}


# CPython's default recursion limit, which msgspec's decoder counts every
# nesting level against (after the Python frames already on the decoding
# thread's stack). The engine runs with it unless something in its process
# raised it (torch's inductor raises it to 2000 when it compiles a graph).
ENGINE_RECURSION_LIMIT = 1000


def _process_input_sockets(decode_call, data, box):
    """Stands in for EngineCoreProc.process_input_sockets: the thread's
    target, calling the decoder directly. With threading's own
    _bootstrap/_bootstrap_inner/run and MsgpackDecoder.decode that makes the
    5 Python frames the engine's input thread has when msgspec runs."""
    try:
        box["value"] = decode_call(data)
    except BaseException as e:  # noqa: BLE001 - whatever the decoder raises
        box["error"] = e


def on_input_thread(decode_call, data):
    """Runs decode_call(data) the way the engine's input thread runs its
    decoder: on a fresh thread, under the engine's recursion limit, with the
    same Python frames below it. That makes msgspec's depth verdict (a
    RecursionError past 995 levels) the engine's."""
    if sys.getrecursionlimit() != ENGINE_RECURSION_LIMIT:
        raise RuntimeError(f"decode under recursion limit {sys.getrecursionlimit()}, not {ENGINE_RECURSION_LIMIT}")
    box: dict = {}
    t = threading.Thread(target=_process_input_sockets, args=(decode_call, data, box))
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


@contextlib.contextmanager
def deep_python(limit: int = 20000):
    """A raised recursion limit for the generator's own work on deep values
    (rendering views, writing and reading JSON, re-encoding with vLLM's
    encoder); never around a verdict."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(limit)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def decode(env: Env, message: str, frames: list[bytes]):
    """Decode exactly the way vLLM does for this message kind. Returns the
    decoded object; raises whatever vLLM raises. The decoder runs as on the
    engine's input thread (on_input_thread)."""
    if message in INPUT_KINDS:
        # EngineCoreProc.process_input_sockets: type frame, then data frames.
        type_frame, *data_frames = frames
        request_type = env.EngineCoreRequestType(bytes(type_frame))
        RT = env.EngineCoreRequestType
        if request_type == RT.ADD:
            return on_input_thread(env.MsgpackDecoder(env.EngineCoreRequest).decode, data_frames)
        request = on_input_thread(env.MsgpackDecoder().decode, data_frames)
        if request_type == RT.UTILITY:
            client_idx, call_id, method, args = request
        elif request_type == RT.START_DP_WAVE:
            # DPEngineCoreProc._handle_client_request
            new_wave, exclude_eng_index = request
        return request
    if message == "EngineCoreOutputs":
        return on_input_thread(env.MsgpackDecoder(env.EngineCoreOutputs).decode, frames)
    if message == "UtilityOutput":
        return on_input_thread(env.MsgpackDecoder(env.UtilityOutput).decode, frames)
    if message == "EngineCoreReadyResponse":
        (payload,) = frames
        return on_input_thread(lambda p: msgspec.msgpack.decode(p, type=env.EngineCoreReadyResponse), payload)
    if message == "HandshakeInit":
        (payload,) = frames
        return on_input_thread(lambda p: msgspec.msgpack.decode(p, type=env.EngineHandshakeMetadata), payload)
    if message in ("HandshakeHello", "HandshakeReady"):
        (payload,) = frames
        msg = on_input_thread(msgspec.msgpack.decode, payload)
        # vllm/v1/engine/utils.py wait_for_engine_startup reads these keys.
        status, local, headless = msg["status"], msg["local"], msg["headless"]
        return msg
    raise ValueError(f"unknown message kind {message}")


def reencode(env: Env, message: str, obj) -> list[bytes]:
    """Re-encode a decoded object the way vLLM encodes that message kind."""
    if message in INPUT_KINDS:
        return [INPUT_KINDS[message]] + env.encode(obj)
    if message in ("EngineCoreOutputs", "UtilityOutput"):
        return env.encode(obj)
    return [msgspec.msgpack.encode(obj)]


def view_of(env: Env, message: str, frames: list[bytes]):
    """Canonical view (value, drift) rendered from the raw wire bytes."""
    if message == "EngineCoreRequest":
        return view.render_message(env.EngineCoreRequest, frames[1:], "EngineCoreRequest")
    if message == "EngineCoreOutputs":
        return view.render_message(env.EngineCoreOutputs, frames, "EngineCoreOutputs")
    if message == "UtilityOutput":
        return view.render_message(env.UtilityOutput, frames, "UtilityOutput")
    if message == "EngineCoreReadyResponse":
        return view.render_message(env.EngineCoreReadyResponse, frames, "EngineCoreReadyResponse")
    if message == "HandshakeInit":
        return view.render_message(env.EngineHandshakeMetadata, frames, "HandshakeInit")
    if message in ("AbortRequest", "UtilityRequest", "StartDpWave"):
        return view.plain(msgspec.msgpack.decode(frames[1])), []
    if message in ("HandshakeHello", "HandshakeReady"):
        return view.plain(msgspec.msgpack.decode(frames[0])), []
    raise ValueError(message)


VIEW_NOTES_KINDS = {"EngineCoreRequest", "EngineCoreOutputs", "UtilityOutput", "EngineCoreReadyResponse", "HandshakeInit"}

# --------------------------------------------------------------------------
# reject classification (documented in golden/README.md)

FRAME_PATTERNS = (
    "buffer size must be a multiple of element size",
    "cannot reshape array",
    "is invalid for input of size",
    "buffer is smaller than requested size",
    # torch: a buffer whose size is not a multiple of the dtype's item size
    "to view Byte as",
)

# torch / numpy refusing a shape itself (a well-typed field with a bad value):
# two dimensions to infer, a negative dimension other than -1, a negative
# dimension with an empty buffer.
SHAPE_PATTERNS = (
    "can only specify one unknown dimension",
    "only one dimension can be inferred",
    "invalid shape dimension",
    "Trying to create tensor with negative dimension",
    "SymIntArrayRef expected to contain only concrete integers",
)


def classify(exc: BaseException) -> tuple[str, str]:
    """Map the exception vLLM raised to a reject class. Returns (class, rule)."""
    try:
        from vllm.exceptions import VLLMValidationError
    except ImportError:  # a release without it

        class VLLMValidationError(Exception):
            pass

    msg = str(exc)
    if isinstance(exc, RecursionError):
        return "limits", "RecursionError: nesting beyond what msgspec admits under the recursion limit"
    if isinstance(exc, msgspec.ValidationError):
        if "Invalid enum value" in msg:
            return "enum", "ValidationError 'Invalid enum value'"
        if "Object missing required field" in msg or "of at least length" in msg:
            return "missing-field", "ValidationError 'Object missing required field' / 'Expected `array` of at least length'"
        m = re.match(r"Expected `array` of length (\d+) to (\d+), got (\d+)", msg)
        if m and int(m.group(3)) < int(m.group(1)):
            return "missing-field", "ValidationError 'Expected `array` of length N to M, got K' with K < N"
        if m:
            return "type", "ValidationError 'Expected `array` of length N to M, got K' with K > M"
        if "not enough values to unpack" in msg:
            return "missing-field", "ValidationError 'not enough values to unpack' (a decode hook unpacking a short array)"
        if "too many values to unpack" in msg:
            return "type", "ValidationError 'too many values to unpack' (a decode hook unpacking a long array)"
        if "cannot unpack non-iterable" in msg:
            return "type", "ValidationError 'cannot unpack non-iterable' (a decode hook unpacking a scalar)"
        if any(p in msg for p in FRAME_PATTERNS):
            return "frames", "ValidationError wrapping a numpy/torch buffer-size error"
        if any(p in msg for p in SHAPE_PATTERNS):
            return "validation", "ValidationError wrapping a numpy refusal of the shape"
        if re.match(r"Expected `[^`]+`( of length at most \d+)?, got `[^`]+`", msg) or re.match(
            r"Expected `[^`]+`, got `", msg
        ):
            return "type", "ValidationError 'Expected `X`, got `Y`'"
        if "Expected `array` of length" in msg:
            return "type", "ValidationError 'Expected `array` of length ...'"
        return "validation", "other ValidationError (ValueError/TypeError from __post_init__ or a decode hook)"
    if isinstance(exc, msgspec.DecodeError):
        return "malformed", "msgspec.DecodeError (not ValidationError)"
    if isinstance(exc, VLLMValidationError):
        return "validation", "VLLMValidationError from __post_init__"
    if isinstance(exc, AssertionError):
        return "validation", "AssertionError from vLLM validation"
    if isinstance(exc, IndexError):
        return "frames", "IndexError (aux frame index / missing payload frame)"
    if isinstance(exc, RuntimeError) and any(p in msg for p in FRAME_PATTERNS):
        return "frames", "torch RuntimeError on buffer size"
    if isinstance(exc, RuntimeError) and any(p in msg for p in SHAPE_PATTERNS):
        return "validation", "torch RuntimeError refusing the shape"
    if isinstance(exc, ValueError) and "is not a valid EngineCoreRequestType" in msg:
        return "frames", "ValueError from EngineCoreRequestType(bytes)"
    if isinstance(exc, ValueError) and "not enough values to unpack" in msg:
        return "missing-field", "ValueError unpacking a short UTILITY/START_DP_WAVE array"
    if isinstance(exc, ValueError) and "too many values to unpack" in msg:
        return "type", "ValueError unpacking a long UTILITY/START_DP_WAVE array"
    if isinstance(exc, KeyError):
        return "missing-field", "KeyError reading a HELLO/READY key"
    if isinstance(exc, AttributeError) and "torch" in msg:
        return "validation", "AttributeError: unknown torch dtype name"
    if isinstance(exc, NotImplementedError) and "Extension type" in msg:
        return "type", "NotImplementedError: unsupported ext type"
    if isinstance(exc, TypeError):
        return "type", "TypeError"
    raise RuntimeError(f"unclassified exception {type(exc).__name__}: {exc}")


# --------------------------------------------------------------------------
# cases


@dataclass
class Case:
    group: str
    name: str
    message: str
    doc: str
    frames: list[bytes]
    source: str = "vllm-encoder"
    derived_from: str | None = None
    extra: dict = field(default_factory=dict)
    # Nests deeper than an indented JSON file comfortably shows.
    deep: bool = False

    @property
    def id(self) -> str:
        return f"{self.group}/{self.name}"


def finalize_and_write(env: Env, built: list[Case], out: str, info: dict) -> list[dict]:
    ids = set()
    for c in built:
        if c.id in ids:
            raise RuntimeError(f"duplicate case id {c.id}")
        ids.add(c.id)
    for c in built:
        if c.derived_from and c.derived_from not in ids:
            raise RuntimeError(f"{c.id}: derived_from {c.derived_from} is not a case")

    # Rewrite only the groups this generator writes (other generators, such
    # as the frontend one, own other groups of the same tree).
    if os.path.isdir(out):
        for g in sorted({c.group for c in built}):
            p = os.path.join(out, g)
            if os.path.isdir(p):
                shutil.rmtree(p)
    written = []
    for c in built:
        frames = [bytes(f) for f in c.frames]
        prov: dict[str, Any] = {"source": c.source, "vllm": info["vllm"], "msgspec": info["msgspec"], "python": info["python"], "pythonhashseed": os.environ.get("PYTHONHASHSEED", "")}
        if c.derived_from:
            prov["derived_from"] = c.derived_from
        doc = c.doc
        try:
            obj = decode(env, c.message, frames)
            exc = None
        except Exception as e:  # noqa: BLE001 - verdict is whatever vLLM raises
            exc = e
        d: dict[str, Any] = {
            "case": c.id,
            "dialect": "vllm",
            "version": env.version,
            "kind": "message",
            "doc": doc,
            "provenance": prov,
            "message": c.message,
            "frames": [f.hex() for f in frames],
        }
        if exc is None:
            d["expect"] = "accept"
            with deep_python():
                value, drift = view_of(env, c.message, frames)
            d["value"] = value
            notes = list(view.NOTES) if c.message in VIEW_NOTES_KINDS else []
            if c.source == "live-engine" and (c.extra.get("engine_version") != env.version or reencode(env, c.message, obj) != frames):
                # Bytes of an engine of another release: this release's
                # encoder writes its own field set.
                d["encode"] = "equivalent"
                d["encode_note"] = ["captured from a vLLM release other than this tree's: the bytes carry that release's field set, which the value of this release's schema does not record"]
            elif c.source in ("vllm-encoder", "live-engine"):
                with deep_python():
                    again = reencode(env, c.message, obj)
                if again != frames:
                    raise RuntimeError(f"{c.id}: vLLM re-encode is not byte-identical")
                if notes:
                    # vLLM's encoder made these bytes, but they are not a
                    # function of the view alone (see README).
                    d["encode"] = "equivalent"
                    d["encode_note"] = notes
                else:
                    d["encode"] = "exact"
            else:
                d["encode"] = "equivalent"
            if drift:
                d["drift"] = drift
        else:
            cls, rule = classify(exc)
            d["expect"] = {"reject": cls}
            err = f"{type(exc).__name__}: {exc}"
            if len(err) > 300:
                err = err[:297] + "..."
            prov["engine_error"] = err
            if c.source == "vllm-encoder":
                # vLLM's encoder produced it, vLLM's decoder refuses it.
                d["encode"] = "exact"
        extra = dict(c.extra)
        prov.update(extra.pop("provenance", {}))
        d.update(extra)
        path = os.path.join(out, c.group, c.name + ".json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with deep_python(), open(path, "w") as f:
            # A deeply nested value is written without indentation (indented,
            # each level would add its depth in spaces to its line).
            json.dump(d, f, indent=None if c.deep else 1, ensure_ascii=False, allow_nan=False)
            f.write("\n")
        written.append(d)
    return written
