"""A tiny MessagePack writer used only to build mutants (hand-shaped bytes such
as float32 floats or unusual headers). Golden cases proper are always encoded
by vLLM's own MsgpackEncoder."""

from __future__ import annotations

import struct

import msgspec


class F32:
    """A float to be written as msgpack float32 (ca)."""

    def __init__(self, v: float):
        self.v = v


class Raw:
    """Pre-encoded msgpack bytes spliced in verbatim."""

    def __init__(self, b: bytes):
        self.b = bytes(b)


def _int(v: int) -> bytes:
    if 0 <= v < 128:
        return bytes([v])
    if -32 <= v < 0:
        return struct.pack("b", v)
    if v >= 0:
        if v < 256:
            return b"\xcc" + struct.pack(">B", v)
        if v < 65536:
            return b"\xcd" + struct.pack(">H", v)
        if v < 2**32:
            return b"\xce" + struct.pack(">I", v)
        return b"\xcf" + struct.pack(">Q", v)
    if v >= -128:
        return b"\xd0" + struct.pack(">b", v)
    if v >= -32768:
        return b"\xd1" + struct.pack(">h", v)
    if v >= -(2**31):
        return b"\xd2" + struct.pack(">i", v)
    return b"\xd3" + struct.pack(">q", v)


def _len(n: int, fix: int, fixmax: int, c16: int, c32: int) -> bytes:
    if n <= fixmax:
        return bytes([fix | n])
    if n < 65536:
        return bytes([c16]) + struct.pack(">H", n)
    return bytes([c32]) + struct.pack(">I", n)


def pack(o) -> bytes:
    if isinstance(o, Raw):
        return o.b
    if o is None:
        return b"\xc0"
    if o is True:
        return b"\xc3"
    if o is False:
        return b"\xc2"
    if isinstance(o, int):
        return _int(o)
    if isinstance(o, F32):
        return b"\xca" + struct.pack(">f", o.v)
    if isinstance(o, float):
        return b"\xcb" + struct.pack(">d", o)
    if isinstance(o, str):
        b = o.encode()
        n = len(b)
        if n < 32:
            h = bytes([0xA0 | n])
        elif n < 256:
            h = b"\xd9" + bytes([n])
        elif n < 65536:
            h = b"\xda" + struct.pack(">H", n)
        else:
            h = b"\xdb" + struct.pack(">I", n)
        return h + b
    if isinstance(o, (bytes, bytearray, memoryview)):
        b = bytes(o)
        n = len(b)
        if n < 256:
            h = b"\xc4" + bytes([n])
        elif n < 65536:
            h = b"\xc5" + struct.pack(">H", n)
        else:
            h = b"\xc6" + struct.pack(">I", n)
        return h + b
    if isinstance(o, msgspec.msgpack.Ext):
        b = bytes(o.data)
        n = len(b)
        fixed = {1: 0xD4, 2: 0xD5, 4: 0xD6, 8: 0xD7, 16: 0xD8}
        if n in fixed:
            h = bytes([fixed[n], o.code & 0xFF])
        elif n < 256:
            h = b"\xc7" + bytes([n, o.code & 0xFF])
        elif n < 65536:
            h = b"\xc8" + struct.pack(">H", n) + bytes([o.code & 0xFF])
        else:
            h = b"\xc9" + struct.pack(">I", n) + bytes([o.code & 0xFF])
        return h + b
    if isinstance(o, (list, tuple)):
        return _len(len(o), 0x90, 15, 0xDC, 0xDD) + b"".join(pack(x) for x in o)
    if isinstance(o, dict):
        return _len(len(o), 0x80, 15, 0xDE, 0xDF) + b"".join(
            pack(k) + pack(v) for k, v in o.items()
        )
    raise TypeError(f"cannot pack {type(o)}")


def unpack(b: bytes):
    """Untyped decode keeping Ext objects (msgspec's default)."""
    return msgspec.msgpack.decode(b)
