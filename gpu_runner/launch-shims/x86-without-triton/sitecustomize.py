"""Lets vLLM 0.34.0's OpenAI frontend start on an x86 CPU without triton-cpu.

Put on PYTHONPATH by the launch of a named gateway that asks for it
(gpu_runner/named-gateways.json, "shim": "x86-without-triton"); Python
imports this module at start-up, before vLLM.

Why: from vLLM 0.34.0 on, `vllm.platforms.cpu.CpuPlatform.check_and_update_config`
raises "vLLM on x86 CPUs requires Triton (triton-cpu)." when
`vllm.triton_utils.HAS_TRITON` is false on x86 (0.33.0 only warned). The
check runs while `EngineArgs.create_engine_config` builds the `VllmConfig`,
in the frontend process too, although a frontend with no local engine
(`--data-parallel-size-local 0`) runs no kernel: triton-cpu is not on PyPI
for this platform, so without this the frontend cannot start here at all.

What: `check_and_update_config` runs with `HAS_TRITON` reading true for
the duration of the call, and only then (the platform method reads it at
call time; it is the only reader in the config update). Every other reader
of `HAS_TRITON` sees the real value. docs/runner/gateway.md, "Named
gateways", says which gateways use it.
"""

import sys


def _install() -> None:
    import vllm.triton_utils as triton_utils
    from vllm.platforms.cpu import CpuPlatform

    original = CpuPlatform.check_and_update_config.__func__

    def check_and_update_config(cls, vllm_config):
        saved = triton_utils.HAS_TRITON
        triton_utils.HAS_TRITON = True
        try:
            return original(cls, vllm_config)
        finally:
            triton_utils.HAS_TRITON = saved

    CpuPlatform.check_and_update_config = classmethod(check_and_update_config)
    print("x86-without-triton: CpuPlatform.check_and_update_config runs with HAS_TRITON true", file=sys.stderr)


try:
    _install()
except Exception as e:  # a venv without vLLM's CPU platform: say so, change nothing
    print(f"x86-without-triton: not installed ({type(e).__name__}: {e})", file=sys.stderr)
