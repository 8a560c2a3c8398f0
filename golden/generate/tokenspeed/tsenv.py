"""TokenSpeed's own classes, encoders and receive paths, the verdict
classification, and the canonical view, for the TokenSpeed golden generator.

Nothing here copies TokenSpeed code: every message is built with TokenSpeed's
classes and encoded by TokenSpeed's encoders, and every verdict is what
TokenSpeed's own functions do with the frames (see ``decode``). The view is
rendered from the raw MessagePack guided by ``msgspec.inspect`` of
TokenSpeed's classes, with the helpers of the vLLM generator
(``golden/generate/view.py``).
"""

from __future__ import annotations

import inspect
import os
import re
import sys
import types
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
GEN = os.path.dirname(HERE)
for p in (HERE, GEN):
    if p not in sys.path:
        sys.path.insert(0, p)

import ts_shim  # noqa: E402

ts_shim.install()

import msgspec  # noqa: E402
import msgspec.inspect as mi  # noqa: E402
import zmq  # noqa: E402

import view  # noqa: E402  (golden/generate/view.py: the vLLM generator's view helpers)
from verdict import FRAME_PATTERNS, SHAPE_PATTERNS  # noqa: E402  (the same torch/numpy message patterns)

# The engine configuration the receive-path verdicts are taken under (the
# MsgpackRecvSocket gates depend on it). vocab 512 is golden/tiny's.
ENGINE_CONFIG = {
    "vocab_size": 512,
    "enable_output_logprobs": True,
    "supports_prompt_logprobs": True,
}


class Env:
    def __init__(self):
        import logging

        # The receive path logs every dropped or aborted message; the verdicts
        # are recorded in the cases instead.
        logging.getLogger("tokenspeed").setLevel(logging.CRITICAL)
        import tokenspeed
        import tokenspeed.runtime.engine.io_struct as io
        import tokenspeed.runtime.engine.zmq_msgpack as zm
        import tokenspeed.runtime.engine.zmq_wire as zw
        from tokenspeed.runtime.sampling import sampling_params as spm
        from tokenspeed.version import __version__

        self.io, self.zw, self.zm, self.spm = io, zw, zm, spm
        # The golden version: the wheel's release, or "git-<commit[:8]>" for
        # a tree that setup-tokenspeed-git.sh extracted from TokenSpeed's
        # repository (its version.py still says the previous release).
        marker = os.path.join(os.path.dirname(os.path.dirname(tokenspeed.__file__)), "TOKENSPEED_GIT_COMMIT")
        if os.path.exists(marker):
            commit = open(marker).read().strip()
            self.version = f"git-{commit[:8]}"
            self.git_commit = commit
        else:
            self.version = __version__
            self.git_commit = None
        self.version_py = __version__
        self.tokenspeed_file = tokenspeed.__file__
        self.SamplingParams = spm.SamplingParams
        self.TokenizedGenerateReqInput = io.TokenizedGenerateReqInput
        self.SessionParams = io.SessionParams
        self.BatchTokenIDOut = io.BatchTokenIDOut
        self.BatchTokenIDOutSlim = io.BatchTokenIDOutSlim
        self.AbortReq = io.AbortReq
        self.WireReadyMessage = zw.WireReadyMessage
        self.WireHandshakeAddresses = zw.WireHandshakeAddresses
        self.WireHandshakeInitMessage = zw.WireHandshakeInitMessage
        self.WireEngineCoreReadyResponse = zw.WireEngineCoreReadyResponse
        # The view's defaults are rendered through TokenSpeed's own encoder.
        view._DEFAULT_ENCODER = io.MsgpackEncoder()
        # What this version's wire has (read off TokenSpeed's classes and
        # signatures, so that one case builder serves every version).
        self.request_fields = [f.name for f in mi.type_info(self.TokenizedGenerateReqInput).fields]
        self.output_fields = [f.name for f in mi.type_info(self.BatchTokenIDOutSlim).fields]
        self.ready_fields = [f.name for f in mi.type_info(self.WireEngineCoreReadyResponse).fields]
        self.has_dp_rank = "data_parallel_rank" in self.request_fields
        self.has_engine_index = "engine_index" in self.output_fields
        self.has_load_tail = "num_running" in self.output_fields
        self.ready_size_key = "prefix_granularity" if "prefix_granularity" in self.ready_fields else "block_size"
        recv_params = inspect.signature(zm.MsgpackRecvSocket.__init__).parameters
        # 0.1.1's ingress gates the SGLang logprob knobs (top-k, token ids,
        # prompt start, token inputs); 08-03 gates return_logprob only.
        self.full_logprob_gates = "supports_prompt_logprobs" in recv_params
        # 0.1.1's SamplingParams.__post_init__ pins greedy (top_k 1) to seed 0;
        # 08-03's does not. Read off the behaviour of TokenSpeed's class.
        self.pins_greedy_seed = self.SamplingParams(top_k=1, seed=42).seed == 0
        self.has_loop_handshake = hasattr(zm, "connect_msgpack_engine_for_loop")
        ts_shim.assert_untouched()

    def engine_config(self) -> dict:
        """ENGINE_CONFIG as far as this version's receive socket takes it."""
        cfg = dict(ENGINE_CONFIG)
        if not self.full_logprob_gates:
            del cfg["supports_prompt_logprobs"]
        return cfg

    def recv_socket(self, sock):
        """zmq_msgpack.MsgpackRecvSocket over ``sock`` under ENGINE_CONFIG
        (0.1.1 also takes supports_prompt_logprobs)."""
        kw = {"enable_output_logprobs": ENGINE_CONFIG["enable_output_logprobs"]}
        if self.full_logprob_gates:
            kw["supports_prompt_logprobs"] = ENGINE_CONFIG["supports_prompt_logprobs"]
        return self.zm.MsgpackRecvSocket(sock, ENGINE_CONFIG["vocab_size"], **kw)

    # ------------------------------------------------------------------
    # encoders (TokenSpeed's own)

    def encode_add(self, req) -> list[bytes]:
        """``[REQ_TYPE_ADD, payload, aux...]``: the request encoded by
        io_struct.MsgpackEncoder (TokenSpeed's IPC encoder)."""
        return [self.zw.REQ_TYPE_ADD] + [bytes(f) for f in self.io.MsgpackEncoder().encode(req)]

    def encode_abort(self, rids: list[str]) -> list[bytes]:
        return [self.zw.REQ_TYPE_ABORT, self.zw.encode(rids)]

    def send_output(self, full, engine_index: int = 0, load=None) -> list[bytes]:
        """What MsgpackSendSocket.send_pyobj puts on the output PUSH for a
        BatchTokenIDOut (from_full slicing, then MsgpackEncoder)."""
        sock = FakeSocket()
        if not self.has_engine_index:
            if engine_index or load is not None:
                raise ValueError(f"TokenSpeed {self.version} has no engine_index or load tail")
            s = self.zm.MsgpackSendSocket(sock)
        else:
            s = self.zm.MsgpackSendSocket(sock, engine_index=engine_index)
        if load is not None:
            s.set_load_snapshot(*load)
        s.send_pyobj(full)
        (frames,) = sock.sent
        return [bytes(f) for f in frames]

    def run_handshake(self, loop, init_payload: bytes):
        """Run connect_msgpack_engine_for_loop against fake sockets: returns
        what the engine sent (HELLO, READY on the handshake socket, the ready
        response on the input socket), its identity, and the input address it
        dialled."""
        ctx = FakeContext(init_payload)
        self.connect(ctx, loop)
        hs, inp, out = ctx.sockets
        return {
            "hello": hs.sent[0][0],
            "ready": hs.sent[1][0],
            "ready_response": inp.sent[0][0],
            "identity": hs.opts[zmq.IDENTITY],
            "handshake_address": hs.connected,
            "input_address": inp.connected,
            "output_address": out.connected,
        }

    def connect(self, ctx, loop):
        """The engine's side of the handshake on ``ctx``'s fake sockets.
        0.1.1: zmq_msgpack.connect_msgpack_engine_for_loop(ctx, loop).
        08-03 has no such function: its EventLoop._init_msgpack_transport
        (event_loop.py, not importable without the scheduler's compiled
        package) builds a WireEngineCoreReadyResponse from the loop's state
        and calls zmq_msgpack.connect_msgpack_engine; this does the same
        with TokenSpeed's class and function, setting the fields that method
        sets (page size as block_size; dtype already a wire string)."""
        if self.has_loop_handshake:
            return self.zm.connect_msgpack_engine_for_loop(ctx, loop)
        sa = loop.server_args
        if loop.dp_size > 1:
            raise NotImplementedError("--zmq-msgpack does not support data-parallel size > 1 yet")
        ready = self.zw.WireEngineCoreReadyResponse(
            max_model_len=loop.model_config.context_len,
            num_gpu_blocks=loop._scheduler_cache_geometry.num_device_pages,
            block_size=loop._scheduler_cache_geometry.prefix_granularity,
            dtype=str(loop.model_config.dtype).replace("torch.", ""),
            vllm_version=f"tokenspeed-{self.version_py}",
            world_size=loop.world_size, data_parallel_size=loop.dp_size, tensor_parallel_size=loop.attn_tp_size,
            data_parallel_rank=loop.dp_rank, max_num_seqs=sa.max_num_seqs,
            max_num_batched_tokens=max(0, sa.chunked_prefill_size),
            instance_id=sa.served_model_name or sa.model, kv_cache_size_tokens=loop.max_total_num_tokens,
        )
        return self.zm.connect_msgpack_engine(
            ctx, sa.zmq_handshake_endpoint(), sa.zmq_engine_index, ready, loop.model_config.vocab_size,
            enable_output_logprobs=sa.enable_output_logprobs,
        )

    def fake_loop(self, **kw):
        """The attributes connect_msgpack_engine_for_loop reads from an
        EventLoop."""
        d = dict(
            context_len=4096, num_device_pages=1000, prefix_granularity=16, dtype="torch.bfloat16",
            multimodal_encoder_dtype=None, world_size=1, dp_size=1, attn_tp_size=1, dp_rank=0,
            decode_context_parallel_size=1, max_num_seqs=256, chunked_prefill_size=8192,
            served_model_name="tiny", model="/models/tiny", zmq_engine_index=0, vocab_size=512,
            enable_output_logprobs=True, supports_prompt_logprobs=True, max_total_num_tokens=16000,
            handshake="tcp://127.0.0.1:30500",
        )
        d.update(kw)
        sa = types.SimpleNamespace(
            decode_context_parallel_size=d["decode_context_parallel_size"], max_num_seqs=d["max_num_seqs"],
            chunked_prefill_size=d["chunked_prefill_size"], served_model_name=d["served_model_name"],
            model=d["model"], zmq_engine_index=d["zmq_engine_index"],
            enable_output_logprobs=d["enable_output_logprobs"],
            zmq_handshake_endpoint=lambda: d["handshake"],
        )
        return types.SimpleNamespace(
            server_args=sa,
            _scheduler_cache_geometry=types.SimpleNamespace(
                num_device_pages=d["num_device_pages"], prefix_granularity=d["prefix_granularity"]),
            model_config=types.SimpleNamespace(context_len=d["context_len"], dtype=d["dtype"], vocab_size=d["vocab_size"]),
            multimodal_encoder_dtype=d["multimodal_encoder_dtype"], world_size=d["world_size"], dp_size=d["dp_size"],
            attn_tp_size=d["attn_tp_size"], dp_rank=d["dp_rank"], max_total_num_tokens=d["max_total_num_tokens"],
            supports_prompt_logprobs=d["supports_prompt_logprobs"],
        )

    # ------------------------------------------------------------------
    # receive paths (TokenSpeed's own)

    def decode(self, message: str, frames: list[bytes]):
        """Decode frames the way TokenSpeed's receiving code does. Returns
        (obj, outcome) where outcome is None for a clean accept or the
        reason string a TokenSpeed receive path stored in
        ``validation_error`` (the engine then admits the request already
        finished and publishes a terminal "abort" row); raises whatever
        TokenSpeed raises (the engine drops such a message)."""
        ts_shim.assert_untouched()
        if message in ("TokenizedGenerateReqInput", "AbortRequest"):
            # zmq_msgpack.MsgpackRecvSocket.recv_pyobj -> zmq_wire.decode_request_frames,
            # then (ADD) the socket's validation gate.
            decoded = self.zw.decode_request_frames(list(frames))
            want = self.TokenizedGenerateReqInput if message == "TokenizedGenerateReqInput" else self.AbortReq
            if not all(type(o) is want for o in decoded):
                raise WrongKind(f"decoded as {[type(o).__name__ for o in decoded]}, not {want.__name__}")
            # The same frames through the real socket adapter: the objects
            # it hands out, with validation_error set by its gate.
            sock = FakeSocket([list(frames)])
            rs = self.recv_socket(sock)
            objs = []
            while True:
                try:
                    objs.append(rs.recv_pyobj(zmq.NOBLOCK))
                except zmq.Again:
                    break
            if len(objs) != len(decoded):
                raise RuntimeError("socket adapter and decode_request_frames disagree")
            if message == "TokenizedGenerateReqInput":
                (obj,) = objs
                return obj, obj.validation_error
            return objs, None
        if message == "HandshakeInit":
            # The engine reads the last frame of INIT with zmq_wire.decode_init,
            # then requires non-empty inputs and outputs (connect_msgpack_engine).
            ctx = FakeContext(frames[-1], all_frames=list(frames))
            loop = self.fake_loop()
            self.connect(ctx, loop)
            return self.zw.decode_init(frames[-1]), None
        # Messages only TokenSpeed sends (no TokenSpeed code receives them):
        # msgspec's typed decode into the TokenSpeed class they are encoded from.
        if message == "BatchTokenIDOutSlim":
            return self.io.MsgpackDecoder(self.BatchTokenIDOutSlim).decode(list(frames)), None
        (payload,) = frames
        if message in ("HandshakeHello", "HandshakeReady"):
            return msgspec.msgpack.decode(payload, type=self.WireReadyMessage), None
        if message == "EngineCoreReadyResponse":
            return msgspec.msgpack.decode(payload, type=self.WireEngineCoreReadyResponse), None
        raise ValueError(message)

    def raw_decode(self, message: str, frames: list[bytes]):
        """The typed decode alone (no finalisation, no gates), for re-encoding."""
        if message == "TokenizedGenerateReqInput":
            return self.io.MsgpackDecoder(self.TokenizedGenerateReqInput).decode(list(frames[1:]))
        if message == "AbortRequest":
            return self.zw.decode_abort(frames[1])
        if message == "BatchTokenIDOutSlim":
            return self.io.MsgpackDecoder(self.BatchTokenIDOutSlim).decode(list(frames))
        cls = {
            "HandshakeHello": self.WireReadyMessage,
            "HandshakeReady": self.WireReadyMessage,
            "HandshakeInit": self.WireHandshakeInitMessage,
            "EngineCoreReadyResponse": self.WireEngineCoreReadyResponse,
        }[message]
        return msgspec.msgpack.decode(frames[-1], type=cls)

    def reencode(self, message: str, obj) -> list[bytes]:
        if message == "TokenizedGenerateReqInput":
            return self.encode_add(obj)
        if message == "AbortRequest":
            return self.encode_abort(obj)
        if message == "BatchTokenIDOutSlim":
            return [bytes(f) for f in self.io.MsgpackEncoder().encode(obj)]
        return [self.zw.encode(obj)]

    # ------------------------------------------------------------------
    # view

    def cls_of(self, message: str):
        return {
            "TokenizedGenerateReqInput": self.TokenizedGenerateReqInput,
            "BatchTokenIDOutSlim": self.BatchTokenIDOutSlim,
            "HandshakeHello": self.WireReadyMessage,
            "HandshakeReady": self.WireReadyMessage,
            "HandshakeInit": self.WireHandshakeInitMessage,
            "EngineCoreReadyResponse": self.WireEngineCoreReadyResponse,
        }.get(message)

    def view_of(self, message: str, frames: list[bytes]):
        """(value, drift, notes) rendered from the raw wire bytes."""
        view.NOTES.clear()
        if message == "AbortRequest":
            return view.plain(msgspec.msgpack.decode(frames[1])), [], []
        payload = frames[1] if message == "TokenizedGenerateReqInput" else frames[-1] if message == "HandshakeInit" else frames[0]
        raw = msgspec.msgpack.decode(payload)
        t = mi.type_info(self.cls_of(message))
        drift: list[str] = []
        # Aux indices count from the payload frame (index 0).
        frames = list(frames[1:]) if message == "TokenizedGenerateReqInput" else list(frames)
        if isinstance(t, mi.StructType) and t.array_like and t.tag is not None:
            value = render_tagged(t, raw, message, drift, list(frames))
        else:
            value = view.render(t, raw, message, drift, list(frames))
        return value, drift, list(view.NOTES)

    def schema_roots(self):
        return [
            self.TokenizedGenerateReqInput,
            self.BatchTokenIDOutSlim,
            self.WireReadyMessage,
            self.WireHandshakeInitMessage,
            self.WireEngineCoreReadyResponse,
        ]


def render_tagged(t, raw, path, drift, frames):
    """A tagged array_like struct: element 0 is the tag (not a field, so not
    in the view); elements 1.. are the fields in declaration order. Extra
    elements are drift at their wire position (the tag counting as 0)."""
    if not isinstance(raw, list) or not raw or raw[0] != t.tag:
        raise view.ViewError(f"{path}: not a {t.tag}-tagged array")
    out = {}
    for i, f in enumerate(t.fields):
        if i + 1 < len(raw):
            out[f.name] = view.render(f.type, raw[i + 1], f"{path}.{f.name}", drift, frames)
        elif f.required:
            raise view.ViewError(f"{path}: missing required element {i + 1}")
        else:
            out[f.name] = view.render_default(f)
    for i in range(len(t.fields) + 1, len(raw)):
        drift.append(f"{path}[{i}]")
    return out


class WrongKind(Exception):
    pass


# --------------------------------------------------------------------------
# fake zmq sockets, so that TokenSpeed's own socket adapters and handshake
# run unchanged on in-memory frames


class FakeSocket:
    def __init__(self, incoming=None):
        self.incoming = list(incoming or [])
        self.sent: list[list[bytes]] = []
        self.opts: dict = {}
        self.connected = None

    def setsockopt(self, opt, value):
        self.opts[opt] = value

    def connect(self, addr):
        self.connected = addr

    def send(self, data, flags=0):
        self.sent.append([bytes(data)])

    def send_multipart(self, frames, copy=True, flags=0):
        self.sent.append([bytes(f) for f in frames])

    def poll(self, timeout=None, flags=None):
        return 1 if self.incoming else 0

    def recv_multipart(self, flags=0):
        if not self.incoming:
            raise zmq.Again()
        return self.incoming.pop(0)

    def close(self):
        pass


class FakeContext:
    def __init__(self, init_payload: bytes, all_frames=None):
        self.init_frames = all_frames if all_frames is not None else [init_payload]
        self.sockets: list[FakeSocket] = []

    def socket(self, kind):
        s = FakeSocket([self.init_frames] if not self.sockets else [])
        self.sockets.append(s)
        return s


# --------------------------------------------------------------------------
# reject classification (documented in golden/generate/README.md)


def classify(exc: BaseException | None, outcome: str | None) -> tuple[str, str]:
    """Map what TokenSpeed's receive path did to a reject class."""
    if exc is None:
        return "validation", "accepted by the decoder, marked validation_error by the receive path (terminal abort row)"
    msg = str(exc)
    if isinstance(exc, msgspec.ValidationError):
        if "Invalid enum value" in msg:
            return "enum", "ValidationError 'Invalid enum value'"
        if re.match(r"Invalid value '[^']*' - at `\$\[0\]`", msg):
            return "enum", "ValidationError 'Invalid value ... at `$[0]`' (wrong msgspec tag)"
        if "Object missing required field" in msg or "of at least length" in msg:
            return "missing-field", "ValidationError 'Object missing required field' / 'Expected `array` of at least length'"
        m = re.match(r"Expected `array` of length (\d+) to (\d+), got (\d+)", msg)
        if m and int(m.group(3)) < int(m.group(1)):
            return "missing-field", "ValidationError 'Expected `array` of length N to M, got K' with K < N"
        if m:
            return "type", "ValidationError 'Expected `array` of length N to M, got K' with K > M"
        if "not enough values to unpack" in msg:
            return "missing-field", "ValidationError 'not enough values to unpack' (the tensor decode hook unpacking a short array)"
        if "too many values to unpack" in msg or "cannot unpack non-iterable" in msg:
            return "type", "ValidationError 'too many values to unpack' / 'cannot unpack non-iterable' (the tensor decode hook)"
        if any(p in msg for p in FRAME_PATTERNS):
            return "frames", "ValidationError wrapping a numpy/torch buffer-size error (tensor decode hook)"
        if any(p in msg for p in SHAPE_PATTERNS):
            return "validation", "ValidationError wrapping a numpy/torch refusal of the shape (tensor decode hook)"
        if re.match(r"Expected `[^`]+`", msg):
            return "type", "ValidationError 'Expected `X`, got `Y`'"
        return "validation", "other ValidationError (ValueError/TypeError raised in __post_init__ or a decode hook)"
    if isinstance(exc, msgspec.DecodeError):
        return "malformed", "msgspec.DecodeError (not ValidationError)"
    if isinstance(exc, IndexError):
        return "frames", "IndexError (aux-frame index beyond the frames)"
    if isinstance(exc, RuntimeError) and any(p in msg for p in FRAME_PATTERNS):
        return "frames", "torch RuntimeError on a buffer that does not fit dtype and shape"
    if isinstance(exc, RuntimeError) and any(p in msg for p in SHAPE_PATTERNS):
        return "validation", "torch RuntimeError refusing the shape"
    if isinstance(exc, ValueError) and ("msgpack request needs >=2 frames" in msg or "unknown msgpack request type byte" in msg):
        return "frames", "ValueError from zmq_wire.decode_request_frames (frame count, request-type byte)"
    if isinstance(exc, WrongKind):
        return "frames", "request-type byte of another message kind"
    if isinstance(exc, AttributeError) and "encode" in msg:
        return "validation", "AttributeError in SamplingParams.resolve_seed (rid not a str while seed is nil)"
    if isinstance(exc, ValueError) and "did not carry both input and output addresses" in msg:
        return "validation", "ValueError from connect_msgpack_engine (INIT without input or output address)"
    if isinstance(exc, NotImplementedError) and "Extension type" in msg:
        return "type", "NotImplementedError: unsupported ext type"
    if isinstance(exc, TypeError):
        return "type", "TypeError"
    raise RuntimeError(f"unclassified exception {type(exc).__name__}: {exc}")
