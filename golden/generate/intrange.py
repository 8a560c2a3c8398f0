"""Integer-range cases (group `intrange`): every kind of integer field
(token ids in lists, ids, counts, seeds, call ids, indices) set to each
boundary of what MessagePack carries and msgspec accepts for a Python `int`
(-2^63 ..= 2^64-1), derived byte-level from generated cases with the small
writer `rawmp.py` (smallest form of each integer: `int 64` for i64::MIN,
`uint 64` above 2^32). The verdict of each is vLLM's own decoder's
(verdict.py): msgspec takes every one of these for `int`, and what vLLM's
`__post_init__` rules then refuse is refused with their class."""

from __future__ import annotations

from rawmp import pack, unpack
from verdict import INPUT_KINDS, Case

I64_MIN = -(2**63)
I64_MAX = 2**63 - 1
U64_MAX = 2**64 - 1

# (name suffix, value): the boundaries of the wire's integer range, and 0 / -1.
BOUNDS = [
    ("i64_min", I64_MIN),
    ("minus1", -1),
    ("zero", 0),
    ("i64_max", I64_MAX),
    ("i64_max_plus1", I64_MAX + 1),
    ("u64_max", U64_MAX),
]


def _payload_index(message: str) -> int:
    return 1 if message in INPUT_KINDS else 0


def build(b):
    env = b.env
    ox = env.output_fields.index  # EngineCoreOutput positions that moved between releases

    def case(name, base_id, doc, fn):
        if base_id not in b.by_id:
            b.cannot(f"intrange/{name}", f"its base {base_id} is not produced")
            return
        base = b.by_id[base_id]
        frames = [bytes(f) for f in base.frames]
        i = _payload_index(base.message)
        raw = unpack(frames[i])
        fn(raw)
        frames[i] = pack(raw)
        b.add(Case("intrange", name, base.message, doc, frames, source="mutant", derived_from=base_id))

    def each(field, base_id, what, setter, needs=None):
        for suffix, v in BOUNDS:
            if needs is not None and not b.can(f"intrange/{field}_{suffix}", *needs):
                continue
            case(f"{field}_{suffix}", base_id, f"{what} {v}.", lambda r, v=v: setter(r, v))

    def sp(key):
        def set_(r, v):
            r[3][key] = v
        return set_

    def at(*path):
        def set_(r, v):
            c = r
            for k in path[:-1]:
                c = c[k]
            c[path[-1]] = v
        return set_

    def one(f):
        return lambda r, v: f(r, v)

    R = "request/add_stop_logprobs"
    # ---- EngineCoreRequest ------------------------------------------------
    if env.prompt_is_array:
        # An int32 array holds no MessagePack integers: its ends are
        # request/prompt_array_int32_bounds and request/prompt_array_uint32.
        for suffix, _v in BOUNDS:
            b.cannot(f"intrange/prompt_token_id_{suffix}", f"EngineCoreRequest.prompt_token_ids is {env.prompt_type}: ids are array bytes, not MessagePack integers")
    else:
        each("prompt_token_id", R, "A prompt token id (list[int]) of", one(lambda r, v: r.__setitem__(1, [5, v, 7])))
    each("data_parallel_rank", R, "data_parallel_rank (int | None) of", at(8))
    each("client_index", R, "client_index (int) of", at(11))
    each("current_wave", R, "current_wave (int) of", at(12))
    each("priority", R, "priority (int) of", at(13))
    each("lora_int_id", "request/lora_minimal", "LoRARequest.lora_int_id (int) of", at(6, 1))
    # ---- SamplingParams: counts, seeds, indices, token ids ------------------
    for key, what in [
        ("n", "n (int)"),
        ("top_k", "top_k (int)"),
        ("seed", "seed (int | None)"),
        ("max_tokens", "max_tokens (int | None)"),
        ("min_tokens", "min_tokens (int)"),
        ("logprobs", "logprobs (int | None)"),
        ("prompt_logprobs", "prompt_logprobs (int | None)"),
        ("stream_interval", "stream_interval (int | None)"),
        ("thinking_token_budget", "thinking_token_budget (int | None)"),
        ("output_text_buffer_length", "output_text_buffer_length (int)"),
        ("_eos_token_id", "_eos_token_id (int | None)"),
        ("routed_experts_prompt_start", "routed_experts_prompt_start (int)"),
        ("output_kind", "output_kind (RequestOutputKind, an IntEnum)"),
    ]:
        each(f"sp_{key.lstrip('_')}", R, f"SamplingParams.{what} of", sp(key), needs=(env.SamplingParams, key))
    for key, what in [
        ("stop_token_ids", "stop_token_ids (list[int] | None)"),
        ("allowed_token_ids", "allowed_token_ids (list[int] | None)"),
        ("_all_stop_token_ids", "_all_stop_token_ids (set[int])"),
    ]:
        each(f"sp_{key.lstrip('_')}", R, f"SamplingParams.{what} holding", lambda r, v, key=key: r[3].__setitem__(key, [2, v]), needs=(env.SamplingParams, key))
    # n's upper bound is vLLM's `VLLM_MAX_N_SEQUENCES` (16384 by default).
    case("sp_n_max_sequences", R, "SamplingParams.n 16384 (VLLM_MAX_N_SEQUENCES, the default most).", lambda r: r[3].__setitem__("n", 16384))
    case("sp_n_max_sequences_plus1", R, "SamplingParams.n 16385 (one past VLLM_MAX_N_SEQUENCES).", lambda r: r[3].__setitem__("n", 16385))
    each("sp_logit_bias_key", R, "SamplingParams.logit_bias (dict[int, float]) keyed by", lambda r, v: r[3].__setitem__("logit_bias", {v: 1.5}),
         needs=(env.SamplingParams, "logit_bias"))
    each("sp_bad_words_token_ids", R, "SamplingParams._bad_words_token_ids (list[list[int]] | None) holding",
         lambda r, v: r[3].__setitem__("_bad_words_token_ids", [[3, v]]), needs=(env.SamplingParams, "_bad_words_token_ids"))
    each("sp_repetition_min_count", "request/sp_repetition_detection", "RepetitionDetectionParams.min_count (int) of",
         lambda r, v: r[3]["repetition_detection"].__setitem__("min_count", v))
    # ---- EngineCoreOutputs ------------------------------------------------
    O1 = "output/one_token"
    each("out_engine_index", O1, "EngineCoreOutputs.engine_index (int) of", at(0))
    each("out_new_token_id", O1, "A new token id (EngineCoreOutput.new_token_ids, list[int]) of", one(lambda r, v: r[1][0].__setitem__(1, [42, v])))
    each("out_stop_reason", "output/finish_stop_token", "EngineCoreOutput.stop_reason (int | str | None) of", at(1, 0, 6))
    each("out_num_nans_in_logits", O1, "EngineCoreOutput.num_nans_in_logits (int) of", at(1, 0, ox("num_nans_in_logits")))
    each("out_num_cached_tokens", "output/prefill_stats_live_like", "PrefillStats.num_cached_tokens (int) of",
         lambda r, v: r[1][0][ox("prefill_stats")].__setitem__("num_cached_tokens", v))
    each("out_wave_complete", "output/wave_complete", "EngineCoreOutputs.wave_complete (int | None) of", at(6))
    each("out_start_wave", "output/start_wave", "EngineCoreOutputs.start_wave (int | None) of", at(7))
    each("out_utility_call_id", "output/standalone_success", "UtilityOutput.call_id (int) of", at(0))
    # ---- UTILITY / START_DP_WAVE / ready response ---------------------------
    each("utility_call_id", "utility/call_id_7", "A UTILITY request's call_id of", at(1))
    each("utility_client_index", "utility/call_id_7", "A UTILITY request's client index of", at(0))
    each("start_dp_wave_wave", "utility/start_dp_wave_exclude", "START_DP_WAVE's wave of", at(0))
    each("ready_max_model_len", "ready/minimal", "EngineCoreReadyResponse.max_model_len (int) of",
         lambda r, v: r.__setitem__("max_model_len", v))
    each("ready_hash_block_size", "ready/prefix_hash_sha256", "PrefixHashConfig.hash_block_size (int) of",
         lambda r, v: r["prefix_hash_config"].__setitem__("hash_block_size", v))
    each("ready_num_lookahead_tokens", "ready/prefix_hash_sha256", "PrefixHashConfig.num_lookahead_tokens (int) of",
         lambda r, v: r["prefix_hash_config"].__setitem__("num_lookahead_tokens", v))
