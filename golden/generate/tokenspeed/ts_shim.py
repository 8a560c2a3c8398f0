"""Import shim for TokenSpeed's wire modules (no GPU toolchain needed).

TokenSpeed 0.1.1's wire code (``tokenspeed.runtime.engine.io_struct``,
``zmq_wire``, ``zmq_msgpack``, ``runtime.sampling.sampling_params``) is pure
Python, but importing ``io_struct`` pulls in, through
``runtime.multimodal.inputs -> runtime.utils.common / runtime.utils.env ->
runtime.distributed -> runtime.execution -> runtime.utils.triton``, two
kernel packages that have nothing to do with the wire and are not on PyPI
as pure-Python wheels: ``tokenspeed_kernel`` (CUDA kernels and a platform
probe) and ``tokenspeed_triton`` (TokenSpeed's Triton fork).

This module stubs exactly those two packages and nothing else: a
``sys.meta_path`` finder serves ``tokenspeed_kernel``, ``tokenspeed_triton``
and any submodule of them (``tokenspeed_kernel.platform``,
``tokenspeed_kernel.ops.attention.gdn.triton``,
``tokenspeed_kernel.ops.communication``, ``tokenspeed_triton.language``) as
empty modules whose attributes are placeholders. At import time TokenSpeed
only binds names from them (``current_platform``, ``pdl_enabled``,
``CHUNK_SIZE``, four ``*_rmsnorm`` / allreduce helpers) and decorates one
kernel with ``tokenspeed_triton.jit``; the placeholder ``jit`` returns the
decorated function's placeholder. Any other use of a placeholder (calling
it, testing its truth, arithmetic, iterating) raises ``StubUsed`` and is
logged in ``USES``, and ``assert_untouched()`` (run by the generator after
every case) fails the generation if anything but those import-time bindings
touched the stubs. So no wire value the goldens record can come from a stub.

If a real ``tokenspeed_kernel`` / ``tokenspeed_triton`` is importable the
shim refuses to install (it would shadow the real packages).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types

STUBBED = ("tokenspeed_kernel", "tokenspeed_triton")

# (what, name): every import served and every attribute bound at import time.
BOUND: list[tuple[str, str]] = []
# Uses other than binding a name: must stay empty.
USES: list[str] = []


class StubUsed(RuntimeError):
    pass


class _Placeholder:
    __slots__ = ("_name",)

    def __init__(self, name: str):
        object.__setattr__(self, "_name", name)

    def _use(self, how: str):
        USES.append(f"{how} {self._name}")
        raise StubUsed(f"stubbed kernel object {self._name} was used ({how}); the wire code must not need it")

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Placeholder(f"{self._name}.{attr}")

    def __call__(self, *args, **kwargs):
        # tokenspeed_triton.jit / .autotune / .heuristics used as decorators at
        # import time: the decorated kernel becomes a placeholder.
        if self._name.startswith("tokenspeed_triton") and len(args) == 1 and callable(args[0]) and not kwargs:
            BOUND.append(("decorate", f"{self._name}({getattr(args[0], '__qualname__', '?')})"))
            return _Placeholder(f"{self._name}({getattr(args[0], '__qualname__', '?')})")
        return self._use("call")

    def __bool__(self):
        return self._use("bool")

    def __iter__(self):
        return self._use("iter")

    def __index__(self):
        return self._use("index")

    def __int__(self):
        return self._use("int")

    def __float__(self):
        return self._use("float")

    def __eq__(self, other):
        return self._use("compare")

    __hash__ = object.__hash__

    def __repr__(self):
        return f"<stub {self._name}>"


class _StubModule(types.ModuleType):
    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        BOUND.append(("attr", f"{self.__name__}.{attr}"))
        return _Placeholder(f"{self.__name__}.{attr}")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname.split(".")[0] in STUBBED:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        BOUND.append(("import", spec.name))
        m = _StubModule(spec.name)
        m.__path__ = []
        return m

    def exec_module(self, module):
        pass


_installed = False


def install() -> None:
    global _installed
    if _installed:
        return
    for name in STUBBED:
        if name in sys.modules or importlib.util.find_spec(name) is not None:
            raise RuntimeError(f"a real {name} is importable; the shim would shadow it")
    sys.meta_path.insert(0, _Finder())
    _installed = True


def assert_untouched() -> None:
    if USES:
        raise RuntimeError(f"stubbed kernel packages were used: {USES}")


def report() -> dict:
    """What the stubs served (for the generator's provenance and README)."""
    imports = sorted({n for w, n in BOUND if w == "import"})
    attrs = sorted({n for w, n in BOUND if w == "attr"})
    decorated = sorted({n for w, n in BOUND if w == "decorate"})
    return {"stubbed_packages": list(STUBBED), "modules": imports, "names_bound": attrs, "decorated": decorated}
