"""Mutants: bytes derived from generated cases. The verdict of every mutant is
whatever vLLM's own decoder says (see verdict.py); the expectations written in
the docs below are only descriptions of the change."""

from __future__ import annotations

import copy

import msgspec
from msgspec.msgpack import Ext

from rawmp import F32, pack, unpack
from verdict import INPUT_KINDS, Case


def _pop(container, key):
    """Remove a key; returns None so that mut() keeps the mutated tree."""
    del container[key]


def payload_index(message: str) -> int:
    return 1 if message in INPUT_KINDS else 0


def _count(n: int, what: str) -> str:
    return f"one {what}" if n == 1 else f"{n} {what}s"


# Fields the byte-level changes below address by position, checked against
# the installed classes (so a release that moved one fails loudly here).
REQUEST_POSITIONS = ["request_id", "prompt_token_ids", "mm_features", "sampling_params", "pooling_params", "arrival_time",
                     "lora_request", "cache_salt", "data_parallel_rank", "prompt_embeds", "prompt_is_token_ids", "client_index",
                     "current_wave", "priority", "trace_headers", "resumable"]
OUTPUTS_POSITIONS = ["engine_index", "outputs", "scheduler_stats", "timestamp", "utility_output", "finished_requests",
                     "wave_complete", "start_wave"]
OUTPUT_POSITIONS = ["request_id", "new_token_ids", "new_logprobs", "new_prompt_logprobs_tensors", "pooling_output",
                    "finish_reason", "stop_reason", "events"]


def build(b):
    env = b.env
    nout = len(env.output_fields)
    nouts = len(env.outputs_fields)
    nreq = len(env.request_fields)
    lt_n = len(env.fields(env.LogprobsTensors))
    lora_fields = env.fields(env.LoRARequest)
    ox = env.output_fields.index  # EngineCoreOutput positions that moved between releases
    assert env.request_fields[: len(REQUEST_POSITIONS)] == REQUEST_POSITIONS, env.request_fields
    assert env.outputs_fields[: len(OUTPUTS_POSITIONS)] == OUTPUTS_POSITIONS, env.outputs_fields
    assert env.output_fields[: len(OUTPUT_POSITIONS)] == OUTPUT_POSITIONS, env.output_fields

    def mut(name, base_id, doc, fn=None, frames_fn=None, extra=None):
        if base_id not in b.by_id:
            b.cannot(f"mutant/{name}", f"its base {base_id} is not produced")
            return
        base = b.by_id[base_id]
        frames = [bytes(f) for f in base.frames]
        if fn is not None:
            i = payload_index(base.message)
            raw = unpack(frames[i])
            r = fn(raw)
            frames[i] = pack(raw if r is None else r)
        if frames_fn is not None:
            frames = frames_fn(frames)
        b.add(Case("mutant", name, base.message, doc, frames, source="mutant", derived_from=base_id, extra=extra or {}))

    def sp_set(**kv):
        def f(raw):
            for k, v in kv.items():
                raw[3][k] = v
        return f

    def sp_del(*keys):
        def f(raw):
            for k in keys:
                raw[3].pop(k, None)
        return f

    def payload_op(op):
        def ff(frames):
            base_i = 1 if len(frames) > 1 and len(frames[0]) == 1 else 0
            frames[base_i] = op(frames[base_i])
            return frames
        return ff

    R = "request/add_stop_logprobs"
    # ---- wrong types in the request ------------------------------------
    mut("req_temperature_str", R, "temperature sent as a string.", sp_set(temperature="hot"))
    mut("req_max_tokens_float", R, "max_tokens sent as a float.", sp_set(max_tokens=8.0))
    mut("req_top_k_float", R, "top_k sent as float 40.0.", sp_set(top_k=40.0))
    mut("req_include_stop_int", R, "include_stop_str_in_output sent as integer 1.", sp_set(include_stop_str_in_output=1))
    mut("req_request_id_bin", R, "request_id sent as bin instead of str.", lambda r: r.__setitem__(0, b"req-stop"))
    if env.prompt_is_array:
        b.cannot("mutant/req_prompt_token_str", f"EngineCoreRequest.prompt_token_ids is {env.prompt_type}: ids are array bytes, with no MessagePack type of their own (a list where the array belongs: mutant/prompt_list_*)")
    else:
        mut("req_prompt_token_str", R, "A prompt token id sent as a string.", lambda r: r.__setitem__(1, [5, "6", 7]))
    mut("req_prompt_not_list", R, "prompt_token_ids sent as a bare integer.", lambda r: r.__setitem__(1, 5))
    mut("req_arrival_time_str", R, "arrival_time sent as a string.", lambda r: r.__setitem__(5, "now"))
    mut("req_arrival_time_int", R, "arrival_time sent as an integer (typed float accepts ints).", lambda r: r.__setitem__(5, 1700000000))
    mut("req_resumable_int", R, "resumable sent as 0 instead of false.", lambda r: r.__setitem__(15, 0))
    mut("req_priority_float", R, "priority sent as 1.0.", lambda r: r.__setitem__(13, 1.0))
    mut("req_sampling_params_array", R, "sampling_params sent as an array instead of a map.", lambda r: r.__setitem__(3, [1, 2]))
    mut("req_stop_int", R, "stop sent as an integer.", sp_set(stop=5))
    mut("req_logit_bias_str_keys", "request/sp_logit_bias", "logit_bias with string keys where integers are required.", lambda r: r[3].__setitem__("logit_bias", {"5": -1.5}))
    mut("req_output_kind_7", "request/sp_output_kind_delta", "output_kind 7 (outside RequestOutputKind).", sp_set(output_kind=7))
    mut("req_extra_args_pickle_ext", "request/sp_extra_args", "An ext type 1 (pickle) value inside extra_args.", lambda r: r[3]["extra_args"].__setitem__("p", Ext(1, b"\x80\x04N.")))
    if env.prompt_is_array:
        mut("req_negative_token_id", R, "A negative prompt token id in the <i4 prompt array (the decoder takes any value the dtype holds).",
            lambda r: r.__setitem__(1, ["<i4", [3], Ext(3, env.np.array([5, -1, 7], dtype="<i4").tobytes())]))
    else:
        mut("req_negative_token_id", R, "A negative prompt token id (list[int] accepts it).", lambda r: r.__setitem__(1, [5, -1, 7]))

    # ---- structured outputs --------------------------------------------
    mut("so_two_constraints", "request/so_regex_backend", "Structured outputs with both json and regex set.", lambda r: r[3]["structured_outputs"].__setitem__("json", "{}"))
    mut("so_zero_constraints", "request/so_regex_backend", "Structured outputs with every constraint nil.", lambda r: r[3]["structured_outputs"].__setitem__("regex", None))
    mut("so_empty_map", "request/so_regex_backend", "Structured outputs as an empty map.", lambda r: r[3].__setitem__("structured_outputs", {}))
    mut("so_sparse_smg", "request/so_regex_backend", "Sparse structured outputs map {regex, _backend} as SMG sends it.", lambda r: r[3].__setitem__("structured_outputs", {"regex": "a+", "_backend": "guidance"}))
    mut("so_choice_not_list", "request/so_choice_backend", "choice sent as a string.", lambda r: r[3]["structured_outputs"].__setitem__("choice", "yes"))

    # ---- out-of-range SamplingParams -------------------------------------
    rng = [
        ("temperature_3", dict(temperature=3.0), "temperature 3.0"),
        ("temperature_negative", dict(temperature=-0.5), "temperature -0.5"),
        ("temperature_nan", dict(temperature=float("nan")), "temperature NaN"),
        ("top_p_0", dict(top_p=0.0), "top_p 0"),
        ("top_p_1_5", dict(top_p=1.5), "top_p 1.5"),
        ("top_k_minus2", dict(top_k=-2), "top_k -2"),
        ("min_p_2", dict(min_p=2.0), "min_p 2"),
        ("max_tokens_0", dict(max_tokens=0), "max_tokens 0"),
        ("min_tokens_gt_max", dict(min_tokens=10, max_tokens=5), "min_tokens 10 above max_tokens 5"),
        ("min_tokens_negative", dict(min_tokens=-1), "min_tokens -1"),
        ("presence_penalty_3", dict(presence_penalty=3.0), "presence_penalty 3"),
        ("frequency_penalty_minus3", dict(frequency_penalty=-3.0), "frequency_penalty -3"),
        ("repetition_penalty_0", dict(repetition_penalty=0.0), "repetition_penalty 0"),
        ("repetition_penalty_inf", dict(repetition_penalty=float("inf")), "repetition_penalty +inf"),
        ("logprobs_minus2", dict(logprobs=-2), "logprobs -2"),
        ("prompt_logprobs_minus3", dict(prompt_logprobs=-3), "prompt_logprobs -3"),
        ("stop_empty_string", dict(stop=["x", ""]), "an empty stop string"),
        ("stop_without_detokenize", dict(detokenize=False), "stop strings with detokenize false"),
        ("n_0", dict(n=0), "n 0"),
        ("stream_interval_0", dict(stream_interval=0), "stream_interval 0"),
        ("thinking_budget_minus5", dict(thinking_token_budget=-5), "thinking_token_budget -5"),
        ("bad_words_empty", dict(bad_words=[""]), "an empty bad word"),
    ]
    for name, kv, what in rng:
        if b.can(f"mutant/sp_{name}", env.SamplingParams, *kv):
            mut(f"sp_{name}", R, f"SamplingParams with {what}.", sp_set(**kv))
    mut("sp_n2_greedy", "request/add_greedy_max_tokens", "n 2 with greedy sampling (temperature 0).", sp_set(n=2))
    mut("sp_repetition_detection_bad", "request/sp_repetition_detection", "repetition_detection with min_pattern_size above max_pattern_size.",
        lambda r: r[3].__setitem__("repetition_detection", {"max_pattern_size": 2, "min_pattern_size": 3, "min_count": 2}))
    mut("sp_repetition_detection_count1", "request/sp_repetition_detection", "repetition_detection enabled with min_count 1.",
        lambda r: r[3].__setitem__("repetition_detection", {"max_pattern_size": 4, "min_pattern_size": 1, "min_count": 1}))
    # RepetitionDetectionParams.__post_init__'s two conditions at their edges:
    # the sizes are judged whether or not detection is on, min_count only
    # when it is.
    for name, rd, what in [
        ("min_above_disabled_max", (0, 1, 0), "min_pattern_size 1 above a max_pattern_size of 0 (detection off)"),
        ("min_equals_max", (3, 3, 2), "min_pattern_size equal to max_pattern_size, min_count 2"),
        ("negative_min", (2, -1, 2), "a negative min_pattern_size"),
        ("negative_max", (-1, 0, 2), "a negative max_pattern_size"),
        ("negative_count_disabled", (0, 0, -1), "min_count -1 with detection off"),
        ("negative_count_enabled", (2, 1, -1), "min_count -1 with detection on"),
    ]:
        mut(f"sp_repetition_detection_{name}", "request/sp_repetition_detection", f"repetition_detection with {what}.",
            lambda r, rd=rd: r[3].__setitem__("repetition_detection",
                                              dict(zip(("max_pattern_size", "min_pattern_size", "min_count"), rd))))
    # accepted: wire values the typed decoder takes but __post_init__ normalises
    mut("sp_seed_minus_one", R, "seed -1 on the wire (accepted; __post_init__ turns it into None, the view keeps -1).", sp_set(seed=-1))
    mut("sp_thinking_budget_minus1", R, "thinking_token_budget -1 on the wire (accepted, normalised after decode).", sp_set(thinking_token_budget=-1))
    mut("sp_stop_as_string", R, "stop as a bare string on the wire (accepted; the view keeps the string).", sp_set(stop="END"))
    mut("sp_stop_nil", R, "stop explicitly nil on the wire (accepted).", sp_set(stop=None))
    mut("sp_all_stop_duplicates", "request/add_frontend_like", "_all_stop_token_ids array with a duplicate (a set on decode).", sp_set(_all_stop_token_ids=[2, 2, 7]))
    mut("sp_float32_temperature", R, "temperature as msgpack float32 (accepted, widened).", sp_set(temperature=F32(0.8)))
    mut("sp_int_temperature", R, "temperature as integer 1 (typed float accepts ints).", sp_set(temperature=1))
    mut("sp_unknown_key", R, "An unknown SamplingParams key future_knob (ignored).", sp_set(future_knob=1))
    mut("sp_empty_map", R, "SamplingParams as an empty fixmap (all defaults).", lambda r: r.__setitem__(3, {}))
    mut("sp_defaults_written", R, "SamplingParams with default values written out explicitly, as rmp-serde/SMG sends them.",
        lambda r: r.__setitem__(3, {"n": 1, "temperature": F32(0.7), "top_p": 1.0, "top_k": 0, "stop": [], "stop_token_ids": [], "max_tokens": 8, "min_tokens": 0, "output_kind": 1, "_eos_token_id": 2, "_all_stop_token_ids": [2]}))

    # ---- LoRA -------------------------------------------------------------
    mut("lora_int_id_0", "request/lora_minimal", "LoRARequest with lora_int_id 0.", lambda r: r[6].__setitem__(1, 0))
    mut("lora_empty_path", "request/lora_minimal", "LoRARequest with an empty lora_path.", lambda r: r[6].__setitem__(2, ""))
    mut("lora_two_elements", "request/lora_minimal", "LoRARequest with only name and id (path defaults to empty, which vLLM refuses).", lambda r: r.__setitem__(6, ["ad", 3]))
    if "tensorizer_config_dict" not in lora_fields:
        mut("lora_seven_elements_030", "request/lora_full", "A 0.22-0.30 shaped 7-element LoRARequest (tensorizer_config_dict at index 4).",
            lambda r: r.__setitem__(6, ["adapter-a", 7, "/adapters/a", "base-model", None, True, True]))
        b.cannot("mutant/lora_six_elements_032", "LoRARequest has no tensorizer_config_dict: the 6-element array is this release's own shape")
    else:
        b.cannot("mutant/lora_seven_elements_030", "LoRARequest has tensorizer_config_dict: the 7-element array is this release's own shape")
        mut("lora_six_elements_032", "request/lora_full", "A 0.32-shaped 6-element LoRARequest (no tensorizer_config_dict: load_inplace true lands at index 4, where this release reads tensorizer_config_dict).",
            lambda r: r.__setitem__(6, ["adapter-a", 7, "/adapters/a", "base-model", True, True]))

    # ---- array lengths ----------------------------------------------------
    # A mutant named for its element count has that many elements; where
    # that is the release's own length it would be its base's bytes.
    def same_length(name, n, what, unit="elements"):
        return b.cannot(f"mutant/{name}", f"{what} has {n} {unit} in this release: the same bytes as its base")

    if nreq < 23:
        mut("req_23_elements", R, f"A 23-element EngineCoreRequest ({_count(23 - nreq, 'unknown trailing element')}).", lambda r: r.extend(["future"] * (23 - nreq)), extra={})
        b.cannot("mutant/req_24_elements", f"EngineCoreRequest has {nreq} elements in this release: req_23_elements carries its unknown trailing elements")
    elif nreq == 23:
        same_length("req_23_elements", nreq, "EngineCoreRequest")
        mut("req_24_elements", R, f"A 24-element EngineCoreRequest ({_count(24 - nreq, 'unknown trailing element')}).", lambda r: r.extend(["future"] * (24 - nreq)))
    else:
        b.cannot("mutant/req_23_elements", f"EngineCoreRequest has {nreq} elements in this release: 23 would cut it")
        b.cannot("mutant/req_24_elements", f"EngineCoreRequest has {nreq} elements in this release: 24 would cut it")
    mut("req_9_elements", R, "A 9-element EngineCoreRequest (only the required fields).", lambda r: r[:9])
    mut("req_8_elements", R, "An 8-element EngineCoreRequest (data_parallel_rank missing).", lambda r: r[:8])
    if nreq > 20:
        mut("req_20_elements_smg", R, "A 20-element EngineCoreRequest (0.22/0.26 length, as SMG sends).", lambda r: r[:20])
    else:
        same_length("req_20_elements_smg", nreq, "EngineCoreRequest")

    # ---- framing / bytes --------------------------------------------------
    mut("req_truncated_1", R, "ADD payload truncated to its first byte.", frames_fn=payload_op(lambda p: p[:1]))
    mut("req_truncated_half", R, "ADD payload truncated in the middle.", frames_fn=payload_op(lambda p: p[: len(p) // 2]))
    mut("req_truncated_last", R, "ADD payload missing its last byte.", frames_fn=payload_op(lambda p: p[:-1]))
    mut("req_trailing_byte", R, "ADD payload followed by one extra nil byte.", frames_fn=payload_op(lambda p: p + b"\xc0"))
    mut("req_empty_payload", R, "ADD with an empty payload frame.", frames_fn=payload_op(lambda p: b""))
    mut("req_not_msgpack", R, "ADD payload that is not MessagePack (reserved byte c1).", frames_fn=payload_op(lambda p: b"\xc1\x00"))
    mut("req_unknown_type_byte", R, "Request-type byte 09 (not an EngineCoreRequestType).", frames_fn=lambda f: [b"\x09"] + f[1:])
    mut("req_type_two_bytes", R, "Request-type frame of two bytes 0000.", frames_fn=lambda f: [b"\x00\x00"] + f[1:])
    mut("req_missing_type_frame", R, "ADD without its request-type frame (payload first).", frames_fn=lambda f: f[1:])
    mut("req_missing_payload", R, "ADD with only the request-type frame.", frames_fn=lambda f: f[:1])
    mut("req_extra_aux_frame", "request/add_default", "ADD with an extra unreferenced aux frame (ignored).", frames_fn=lambda f: f + [b"\x00" * 8])
    E = "request/prompt_embeds_aux"
    mut("embeds_aux_index_out_of_range", E, "prompt_embeds referencing aux frame 5 of 2.", lambda r: r[9].__setitem__(2, 5))
    mut("embeds_aux_index_zero", E, "prompt_embeds referencing aux index 0 (the payload frame itself).", lambda r: r[9].__setitem__(2, 0))
    mut("embeds_aux_size_mismatch", E, "prompt_embeds aux frame 4 bytes short of dtype*shape.", frames_fn=lambda f: f[:2] + [f[2][:-4]])
    mut("embeds_inline_shape_mismatch", "request/prompt_embeds_inline", "Inline prompt_embeds whose shape needs more bytes than sent.", lambda r: r[9].__setitem__(1, [3, 4]))
    mut("embeds_numpy_dtype", "request/prompt_embeds_inline", "Torch-typed prompt_embeds with numpy dtype string <f4.", lambda r: r[9].__setitem__(0, "<f4"))
    base = b.by_id[E]
    raw = unpack(base.frames[1])
    raw[9][2] = Ext(3, base.frames[2])
    b.add(Case("mutant", "embeds_inline_256", base.message, "The 256-byte prompt_embeds sent inline as ext 3 instead of in an aux frame.",
               [base.frames[0], pack(raw)], source="mutant", derived_from=E))

    mut("mm_aux_index_out_of_range", "request/mm_image", "Multimodal pixel_values tensor referencing aux frame 4 of 2.",
        lambda r: r[2][0]["data"]["pixel_values"]["data"].__setitem__(2, 4))
    mut("mm_aux_size_mismatch", "request/mm_image", "Multimodal pixel_values aux frame 8 bytes short.", frames_fn=lambda f: f[:2] + [f[2][:-8]])

    # ---- block hashes -------------------------------------------------------
    BH = "request/block_hashes"
    bh = env.request_fields.index("block_hashes") if "block_hashes" in env.request_fields else None
    mut("block_hashes_str_element", BH, "A block hash sent as a str (its hex) instead of bin.", lambda r: r[bh].__setitem__(0, bytes(r[bh][0]).hex()))
    mut("block_hashes_bin", BH, "block_hashes as one bin (the three hashes concatenated) instead of a list.", lambda r: r.__setitem__(bh, b"".join(bytes(x) for x in r[bh])))
    mut("block_hashes_short_hash", BH, "A 31-byte block hash (the decoder takes bytes of any length).", lambda r: r[bh].__setitem__(0, bytes(r[bh][0])[:31]))

    # ---- prompts as arrays -------------------------------------------------
    # Where EngineCoreRequest.prompt_token_ids is an ndarray (0.34.0 on),
    # vLLM's decoder reads [dtype, shape, data] with
    # np.frombuffer(buffer, dtype).reshape(shape); what the engine does with
    # what the decoder accepts is in each doc (vllm/v1/token_buffer.py: the
    # array is copied into an int32 TokenBuffer, asserting an integer dtype
    # of item size 4, while the input thread preprocesses the ADD; a failure
    # there ends the request with an ERROR output and the engine goes on).
    PROMPT_ARRAY_MUTANTS = [
        "prompt_dtype_float32", "prompt_dtype_int64", "prompt_dtype_int64_whole", "prompt_dtype_big_endian", "prompt_dtype_bool",
        "prompt_dtype_bool_whole", "prompt_dtype_unknown", "prompt_dtype_int", "prompt_dtype_torch_name", "prompt_dtype_native_uint32",
        "prompt_shape_5_over_16_bytes", "prompt_not_whole_items", "prompt_shape_two_unknown", "prompt_shape_minus_one", "prompt_shape_2d",
        "prompt_aux_index_out_of_range", "prompt_aux_index_zero", "prompt_aux_short", "prompt_aux_missing_frame", "prompt_inline_256",
        "prompt_bin_data", "prompt_list_2", "prompt_list_3", "prompt_list_4", "prompt_list_empty", "prompt_array_two_elements",
        "prompt_array_four_elements", "req_033_all_request_fields", "req_033_frontend_like",
    ]
    if not env.prompt_is_array:
        for name in PROMPT_ARRAY_MUTANTS:
            b.cannot(f"mutant/{name}", f"EngineCoreRequest.prompt_token_ids is {env.prompt_type}: a prompt is a list of ids")
    else:
        np = env.np
        engine_fails = ("the engine's TokenBuffer then asserts a 4-byte integer dtype while preprocessing the ADD, "
                        "and the request ends with an ERROR output (the engine goes on)")

        def set_prompt(value):
            return lambda r: r.__setitem__(1, value)

        def set_dtype(d):
            return lambda r: r[1].__setitem__(0, d)

        def set_prompt_shape(shape):
            return lambda r: r[1].__setitem__(1, shape)

        def prompt_bytes(r):
            return bytes(r[1][2].data)

        def with_data(dtype, shape, data):
            return set_prompt([dtype, shape, Ext(3, data)])

        RA = R  # prompt [5, 6, 7]: <i4, shape [3], 12 bytes inline
        D = "request/add_default"  # prompt [1, 2, 3, 4]: 16 bytes inline
        A64 = "request/prompt_array_64"  # 256 bytes in aux frame 1
        mut("prompt_dtype_float32", RA, f"The prompt's dtype string changed to <f4 (the 12 bytes unchanged): vLLM's decoder accepts a float32 array; {engine_fails}.", set_dtype("<f4"))
        mut("prompt_dtype_int64", RA, "The prompt's dtype string changed to <i8 over its 12 bytes: not a whole number of 8-byte items.", set_dtype("<i8"))
        mut("prompt_dtype_int64_whole", RA, f"The prompt as a <i8 array of the same 3 ids (24 bytes): vLLM's decoder accepts it; {engine_fails}.",
            with_data("<i8", [3], np.array([5, 6, 7], dtype="<i8").tobytes()))
        mut("prompt_dtype_big_endian", RA, "The prompt's dtype string changed to >i4 (bytes unchanged): vLLM's decoder accepts it and reads 83886080, 100663296, 117440512; the engine's TokenBuffer copies the bytes as they are and reads them in its own byte order (5, 6, 7 on a little-endian machine).",
            set_dtype(">i4"))
        mut("prompt_dtype_bool", RA, "The prompt's dtype string changed to |b1: its 12 bytes are 12 items, which do not fit shape [3].", set_dtype("|b1"))
        mut("prompt_dtype_bool_whole", RA, f"The prompt's 12 bytes as a |b1 array of shape [12]: vLLM's decoder accepts it; {engine_fails}.",
            lambda r: with_data("|b1", [12], prompt_bytes(r))(r))
        mut("prompt_dtype_unknown", RA, "The prompt's dtype string <zz, which numpy does not parse.", set_dtype("<zz"))
        mut("prompt_dtype_int", RA, "The prompt's dtype an integer (4) instead of a string.", set_dtype(4))
        mut("prompt_dtype_torch_name", RA, "The prompt's dtype string int32 (numpy parses the name as <i4): accepted, and the engine reads the ids.", set_dtype("int32"))
        mut("prompt_dtype_native_uint32", "request/prompt_array_uint32", "The uint32 prompt with the dtype string =u4 (native byte order), as vLLM's Rust frontend writes it: accepted; the engine copies the bits, so 2^32-1 becomes the id -1.",
            set_dtype("=u4"))
        mut("prompt_shape_5_over_16_bytes", D, "The prompt's shape [5] over its 16 bytes (4 items).", set_prompt_shape([5]))
        mut("prompt_not_whole_items", D, "The prompt's buffer cut to 15 bytes (shape [4]): not a whole number of 4-byte items.",
            lambda r: with_data("<i4", [4], prompt_bytes(r)[:15])(r))
        mut("prompt_shape_two_unknown", D, "The prompt's shape [-1, -1]: two dimensions to infer.", set_prompt_shape([-1, -1]))
        mut("prompt_shape_minus_one", D, "The prompt's shape [-1]: numpy infers 4 from the 16 bytes; accepted.", set_prompt_shape([-1]))
        mut("prompt_shape_2d", D, "The prompt's 4 ids with shape [2, 2]: vLLM's decoder accepts a 2-D array; the engine's TokenBuffer copies its bytes flat, a 4-token prompt.",
            set_prompt_shape([2, 2]))
        mut("prompt_aux_index_out_of_range", A64, "The 64-id prompt referencing aux frame 5 of 2.", lambda r: r[1].__setitem__(2, 5))
        mut("prompt_aux_index_zero", A64, "The 64-id prompt referencing aux index 0, the payload frame itself.", lambda r: r[1].__setitem__(2, 0))
        mut("prompt_aux_short", A64, "The 64-id prompt's aux frame 4 bytes short (63 items for shape [64]).", frames_fn=lambda f: f[:2] + [f[2][:-4]])
        mut("prompt_aux_missing_frame", A64, "The 64-id prompt referencing aux frame 1, which is absent.", frames_fn=lambda f: f[:2])
        if A64 in b.by_id:
            base = b.by_id[A64]
            raw = unpack(base.frames[1])
            raw[1][2] = Ext(3, base.frames[2])
            b.add(Case("mutant", "prompt_inline_256", base.message, "The 64-id prompt's 256 bytes inline as ext 3 where vLLM's encoder uses an aux frame: accepted.",
                       [base.frames[0], pack(raw)], source="mutant", derived_from=A64))
        else:
            b.cannot("mutant/prompt_inline_256", f"its base {A64} is not produced")
        mut("prompt_bin_data", RA, "The prompt's data as bin instead of ext 3: np.frombuffer reads it the same; accepted.", lambda r: r[1].__setitem__(2, prompt_bytes(r)))
        mut("prompt_list_2", RA, "A list of 2 ids where the array belongs: vLLM's decode hook unpacks [dtype, shape, data] from it.", set_prompt([5, 6]))
        mut("prompt_list_3", RA, "A list of 3 ids where the array belongs: read as dtype 5, shape 6 and aux index 7.", set_prompt([5, 6, 7]))
        mut("prompt_list_4", RA, "A list of 4 ids where the array belongs.", set_prompt([5, 6, 7, 8]))
        mut("prompt_list_empty", RA, "An empty list where the array belongs (an empty prompt as a release typing it list[int] sends it).", set_prompt([]))
        mut("prompt_array_two_elements", RA, "The prompt array as [dtype, shape] (data missing).", lambda r: r.__setitem__(1, r[1][:2]))
        mut("prompt_array_four_elements", RA, "The prompt array with a fourth element (nil) after [dtype, shape, data].", lambda r: r[1].append(None))

        def as_033(frames):
            # vLLM 0.33.0's EngineCoreRequest: these 22 fields, block_hashes
            # after them, the prompt a list of ids. vLLM's encoder writes the
            # request with the list an in-process client holds (it encodes the
            # list as it is); the trailing block_hashes nil is dropped and the
            # array header says 22. The rest is vLLM's encoder's bytes.
            obj = env.MsgpackDecoder(env.EngineCoreRequest).decode(frames[1:])
            assert env.request_fields[22:] == ["block_hashes"] and obj.block_hashes is None
            payload = env.encode(msgspec.structs.replace(obj, prompt_token_ids=obj.prompt_token_ids.tolist()))[0]
            assert payload[:3] == b"\xdc\x00\x17" and payload[-1:] == b"\xc0", payload[:3]
            return [frames[0], b"\xdc\x00\x16" + payload[3:-1]]

        mut("req_033_all_request_fields", "request/all_request_fields", "What a 0.33.0 gateway sends: this request (every request-level field set) as a 22-element 0.33.0 ADD, its prompt the list [1, 2, 3] (the bytes of vllm/0.33.0's request/all_request_fields), which vLLM's decode hook reads as dtype 1, shape 2 and aux index 3.",
            frames_fn=as_033)
        mut("req_033_frontend_like", "request/add_frontend_like", "What a 0.33.0 gateway sends: a frontend-shaped request as a 22-element 0.33.0 ADD, its prompt the list of 6 ids (the bytes of vllm/0.33.0's request/add_frontend_like), which vLLM's decode hook cannot unpack into [dtype, shape, data].",
            frames_fn=as_033)

    # ---- outputs ----------------------------------------------------------
    O1 = "output/one_token"
    mut("out_finish_reason_7", O1, "finish_reason 7 (outside FinishReason).", lambda r: r[1][0].__setitem__(5, 7))
    mut("out_finish_reason_str", O1, "finish_reason sent as the string stop.", lambda r: r[1][0].__setitem__(5, "stop"))
    mut("out_stop_reason_float", O1, "stop_reason sent as a float.", lambda r: r[1][0].__setitem__(6, 1.5))
    mut("out_token_ids_str", O1, "new_token_ids holding a string.", lambda r: r[1][0].__setitem__(1, ["x"]))
    if nout < 20:
        mut("out_output_20_elements", O1, "An EngineCoreOutput with 20 elements (unknown trailing ones).", lambda r: r[1][0].extend([None] * (20 - nout)))
    elif nout == 20:
        same_length("out_output_20_elements", nout, "EngineCoreOutput")
    else:
        b.cannot("mutant/out_output_20_elements", f"EngineCoreOutput has {nout} elements in this release: 20 would cut it")
    mut("out_output_22_elements", O1, "An EngineCoreOutput with 22 elements (vLLM-Omni style extensions).", lambda r: r[1][0].extend(["ext", 1, {"k": True}][: 22 - nout] + [None] * max(0, 22 - nout - 3)))
    if nout > 14:
        mut("out_output_14_elements", O1, "A 14-element EngineCoreOutput (0.26 shape).", lambda r: r[1].__setitem__(0, r[1][0][:14]))
    else:
        b.cannot("mutant/out_output_14_elements", f"EngineCoreOutput has {nout} elements in this release: cutting to 14 leaves its base's bytes")
    mut("out_output_2_elements", O1, "An EngineCoreOutput with only request_id and new_token_ids.", lambda r: r[1].__setitem__(0, r[1][0][:2]))
    mut("out_output_1_element", O1, "An EngineCoreOutput with only request_id.", lambda r: r[1].__setitem__(0, r[1][0][:1]))
    mut("out_outputs_10_elements", O1, f"A 10-element EngineCoreOutputs ({_count(10 - nouts, 'unknown trailing element')}).", lambda r: r.extend(["future"] * (10 - nouts)))
    if nouts > 8:
        mut("out_outputs_8_elements", O1, "An 8-element EngineCoreOutputs (0.30 shape, no weight_version).", lambda r: r[:8])
    else:
        same_length("out_outputs_8_elements", nouts, "EngineCoreOutputs")
    mut("out_outputs_4_elements", O1, "A 4-element EngineCoreOutputs (engine_index, outputs, stats, timestamp).", lambda r: r[:4])
    mut("out_timestamp_int", O1, "timestamp as an integer.", lambda r: r.__setitem__(3, 12345))
    mut("out_timestamp_float32", O1, "timestamp as msgpack float32.", lambda r: r.__setitem__(3, F32(12345.5)))
    mut("out_engine_index_negative", O1, "engine_index -1.", lambda r: r.__setitem__(0, -1))
    mut("out_truncated", O1, "Outputs payload missing its last byte.", frames_fn=payload_op(lambda p: p[:-1]))
    mut("out_truncated_header", O1, "Outputs payload cut after two bytes.", frames_fn=payload_op(lambda p: p[:2]))
    mut("out_trailing_bytes", O1, "Outputs payload followed by two extra bytes.", frames_fn=payload_op(lambda p: p + b"\x90\x90"))
    mut("out_finished_duplicates", "output/finished_one", "finished_requests array with a duplicate id (a set on decode).", lambda r: r.__setitem__(5, ["r9", "r9", "r1"]))
    mut("out_event_type_9", "output/events", "EngineCoreEvent type 9 (outside EngineCoreEventType).", lambda r: r[1][0][7][0].__setitem__("type", 9))
    mut("out_event_missing_timestamp", "output/events", "EngineCoreEvent without its timestamp.", lambda r: _pop(r[1][0][7][0], "timestamp"))
    mut("out_prefill_stats_unknown_key", "output/prefill_stats_live_like", "prefill_stats with an unknown key (ignored).", lambda r: r[1][0][ox("prefill_stats")].__setitem__("num_future_tokens", 3))
    mut("out_scheduler_stats_unknown_key", "output/scheduler_stats_only", "scheduler_stats with an unknown key (ignored).", lambda r: r[2].__setitem__("future_stat", [1, 2]))
    mut("out_scheduler_stats_sparse", "output/scheduler_stats_only", "scheduler_stats with only the three load keys.", lambda r: r.__setitem__(2, {"num_running_reqs": 1, "num_waiting_reqs": 0, "kv_cache_usage": 0.5}))
    LI = "output/logprobs_inline"
    mut("lp_five_elements", LI, "LogprobsLists with 5 elements.", lambda r: r[1][0][2].append(None))
    mut("lp_three_elements", LI, "LogprobsLists with 3 elements (cu_num_generated_tokens missing).", lambda r: r[1][0].__setitem__(2, r[1][0][2][:3]))
    mut("lp_two_elements", LI, "LogprobsLists with 2 elements.", lambda r: r[1][0].__setitem__(2, r[1][0][2][:2]))
    mut("lp_torch_dtype_name", LI, "numpy-typed logprob ids with torch-style dtype string int32 (accepted).", lambda r: r[1][0][2][0].__setitem__(0, "int32"))
    mut("lp_big_endian", LI, "numpy-typed ranks with big-endian dtype >i8 (accepted, bytes read big-endian).", lambda r: r[1][0][2][2].__setitem__(0, ">i8"))
    mut("lp_bad_dtype", LI, "numpy-typed logprobs with dtype string xyz.", lambda r: r[1][0][2][1].__setitem__(0, "xyz"))
    mut("lp_inline_size_mismatch", LI, "Inline logprob ids with 3 bytes too few.", lambda r: r[1][0][2][0].__setitem__(2, Ext(3, bytes(r[1][0][2][0][2].data)[:-3])))
    mut("lp_shape_mismatch", LI, "Inline logprobs whose shape [2,6] needs twice the bytes sent.", lambda r: r[1][0][2][1].__setitem__(1, [2, 6]))
    LA = "output/logprobs_aux"
    mut("lp_aux_index_out_of_range", LA, "Logprob ids referencing aux frame 7 of 3.", lambda r: r[1][0][2][0].__setitem__(2, 7))
    mut("lp_aux_size_mismatch", LA, "Logprob ids aux frame 24 bytes short of dtype*shape.", frames_fn=lambda f: [f[0], f[1][:-24], f[2]])
    mut("lp_aux_not_multiple", LA, "Logprobs aux frame one byte short (not a multiple of the item size).", frames_fn=lambda f: [f[0], f[1], f[2][:-1]])
    mut("lp_aux_missing_frame", LA, "Logprobs referencing aux frame 2 which is absent.", frames_fn=lambda f: f[:2])
    mut("lp_aux_extra_frame", LA, "Logprobs with an extra unreferenced trailing aux frame (ignored).", frames_fn=lambda f: f + [b"\xff" * 4])
    # ---- tensor shapes holding a negative dimension -----------------------
    # numpy (LogprobsLists, `np.frombuffer(buf, dtype).reshape(shape)`) and
    # torch (prompt_embeds, LogprobsTensors, `.view(shape)`) infer one
    # unknown dimension from the buffer size.
    def lp_ids(r):
        return r[1][0][2][0]

    def set_shape(get, shape):
        return lambda r: get(r).__setitem__(1, shape)

    def set_buffer(get, shape, data):
        def f(r):
            get(r)[1] = shape
            get(r)[2] = Ext(3, data)
        return f

    mut("lp_shape_minus_one", LI, "numpy logprob ids (inline, 1x6) with shape [1, -1]: numpy infers 6.", set_shape(lp_ids, [1, -1]))
    mut("lp_shape_only_minus_one", LI, "numpy logprob ids (inline) with shape [-1]: a flat array of 6.", set_shape(lp_ids, [-1]))
    mut("lp_shape_minus_two", LI, "numpy logprob ids with shape [-2, 6]: numpy takes any negative dimension as the unknown one.", set_shape(lp_ids, [-2, 6]))
    mut("lp_shape_two_unknown", LI, "numpy logprob ids with shape [-1, -1]: two unknown dimensions.", set_shape(lp_ids, [-1, -1]))
    mut("lp_shape_minus_one_not_dividing", LI, "numpy logprob ids (6 items) with shape [-1, 4]: 4 does not divide 6.", set_shape(lp_ids, [-1, 4]))
    mut("lp_shape_minus_one_zero_dim", LI, "numpy logprob ids with shape [0, -1] and 6 items: nothing to infer from.", set_shape(lp_ids, [0, -1]))
    mut("lp_shape_minus_one_empty_buffer", LI, "numpy logprob ids with shape [-1] and an empty buffer: a 0-item array.", set_buffer(lp_ids, [-1], b""))
    mut("lp_shape_two_minus_one_empty_buffer", LI, "numpy logprob ids with shape [2, -1] and an empty buffer: shape (2, 0).", set_buffer(lp_ids, [2, -1], b""))
    mut("lp_shape_zero_minus_one_empty_buffer", LI, "numpy logprob ids with shape [0, -1] and an empty buffer.", set_buffer(lp_ids, [0, -1], b""))
    mut("lp_aux_shape_minus_one", LA, "numpy logprob ids in aux frame 1 (12x6) with shape [-1, 6].", set_shape(lp_ids, [-1, 6]))
    mut("lp_aux_shape_minus_one_not_dividing", LA, "numpy logprob ids in aux frame 1 (72 items) with shape [-1, 7].", set_shape(lp_ids, [-1, 7]))
    mut("lp_tensor_two_elements", LI, "numpy logprob ids as a 2-array [dtype, shape] (data missing).", lambda r: r[1][0][2].__setitem__(0, r[1][0][2][0][:2]))
    mut("lp_tensor_four_elements", LI, "numpy logprob ids as a 4-array (one element more than [dtype, shape, data]).", lambda r: r[1][0][2][0].append(None))
    def emb(r):
        return r[9]

    EI = "request/prompt_embeds_inline"
    mut("embeds_shape_minus_one", EI, "torch prompt_embeds (inline, 2x4 float32) with shape [-1, 4]: torch infers 2.", set_shape(emb, [-1, 4]))
    mut("embeds_aux_shape_minus_one", E, "torch prompt_embeds in aux frame 1 (4x16) with shape [4, -1].", set_shape(emb, [4, -1]))
    mut("embeds_shape_two_unknown", EI, "torch prompt_embeds with shape [-1, -1].", set_shape(emb, [-1, -1]))
    mut("embeds_shape_minus_two", EI, "torch prompt_embeds with shape [-2, 4]: torch infers -1 only.", set_shape(emb, [-2, 4]))
    mut("embeds_shape_minus_one_not_dividing", EI, "torch prompt_embeds (8 items) with shape [-1, 3].", set_shape(emb, [-1, 3]))
    mut("embeds_shape_minus_one_empty_buffer", EI, "torch prompt_embeds with shape [-1] and an empty buffer (vLLM asserts a 0 dimension).", set_buffer(emb, [-1], b""))
    mut("embeds_empty_buffer_zero_dim", EI, "torch prompt_embeds with shape [0, 4] and an empty buffer: an empty tensor.", set_buffer(emb, [0, 4], b""))
    mut("embeds_empty_buffer_without_zero_dim", EI, "torch prompt_embeds with shape [2, 4] and an empty buffer (vLLM asserts a 0 dimension).", set_buffer(emb, [2, 4], b""))
    mut("embeds_not_multiple_of_item", EI, "torch prompt_embeds float32 with a 7-byte buffer and shape [-1].", lambda r: set_buffer(emb, [-1], bytes(emb(r)[2].data)[:7])(r))
    mut("embeds_tensor_two_elements", EI, "torch prompt_embeds as a 2-array [dtype, shape].", lambda r: r.__setitem__(9, r[9][:2]))

    PL = "output/prompt_logprobs_inline"
    mut("plp_shape_minus_one", PL, "torch prompt logprob ids (inline, 2x2 int32) with shape [-1]: a flat tensor of 4.", lambda r: r[1][0][3][0].__setitem__(1, [-1]))

    mut("plp_numpy_dtype", PL, "Torch-typed prompt logprob ids with numpy dtype string <i4.", lambda r: r[1][0][3][0].__setitem__(0, "<i4"))
    if lt_n > 4:
        mut("plp_four_elements", PL, "LogprobsTensors with 4 elements (0.18-0.28 shape).", lambda r: r[1][0].__setitem__(3, r[1][0][3][:4]))
        b.cannot("mutant/plp_five_elements", f"LogprobsTensors has {lt_n} elements in this release: the same bytes as its base")
    else:
        same_length("plp_four_elements", lt_n, "LogprobsTensors")
        mut("plp_five_elements", PL, "LogprobsTensors with 5 elements (the 0.29+ shape, cu_num_generated_tokens_tensor nil).", lambda r: r[1][0][3].append(None))
    mut("plp_six_elements", PL, "LogprobsTensors with 6 elements.", lambda r: r[1][0][3].extend([None] * (6 - lt_n)))
    PA = "output/prompt_logprobs_aux"
    mut("plp_aux_size_mismatch", PA, "Prompt logprob ids aux frame 4 bytes short.", frames_fn=lambda f: [f[0], f[1][:-4]] + f[2:])
    mut("plp_aux_index_out_of_range", PA, "Prompt logprob ids referencing aux frame 9.", lambda r: r[1][0][3][0].__setitem__(2, 9))
    U = "output/utility_success"
    mut("util_result_type_info", U, "UtilityResult with a non-nil type_info (needs insecure serialization).", lambda r: r[4][2].__setitem__(0, ["builtins", "list"]))
    mut("util_result_three", U, "UtilityResult as a 3-array (more elements than [type_info, value]).", lambda r: r[4][2].append(None))
    mut("util_result_one", U, "UtilityResult as the one-element array [type_info] (value missing).", lambda r: r[4].__setitem__(2, [None]))
    mut("util_result_empty", U, "UtilityResult as an empty array.", lambda r: r[4].__setitem__(2, []))
    mut("util_output_empty", U, "UtilityOutput as an empty array.", lambda r: r.__setitem__(4, []))
    mut("util_output_call_id_only", U, "UtilityOutput with only call_id.", lambda r: r.__setitem__(4, [7]))
    mut("util_call_id_str", U, "UtilityOutput call_id as a string.", lambda r: r[4].__setitem__(0, "7"))
    ER = "output/error_engine_paused"
    mut("out_error_missing_code", ER, "RequestError without code.", lambda r: _pop(r[1][0][ox("error")], "code"))
    mut("out_error_unknown_key", ER, "RequestError with an unknown key (ignored).", lambda r: r[1][0][ox("error")].__setitem__("details", {"x": 1}))
    mut("out_error_retryable_int", ER, "RequestError retryable as 1.", lambda r: r[1][0][ox("error")].__setitem__("retryable", 1))

    # ---- ready / handshake -------------------------------------------------
    RD = "ready/cpu_engine"
    mut("ready_missing_max_model_len", RD, "Ready response without max_model_len.", lambda r: _pop(r, "max_model_len"))
    mut("ready_unknown_key", RD, "Ready response with an unknown key (ignored).", lambda r: r.__setitem__("future_field", [1, "x"]))
    mut("ready_dtype_int", RD, "Ready response with dtype as an integer.", lambda r: r.__setitem__("dtype", 32))
    keys_026 = ["max_model_len", "num_gpu_blocks", "block_size", "dp_stats_address", "dtype", "vllm_version", "world_size", "data_parallel_size", "kv_cache_size_tokens", "kv_cache_max_concurrency"]
    if not all(k in env.ready_fields for k in keys_026):
        b.cannot("mutant/ready_026_shape", "EngineCoreReadyResponse lacks " + ", ".join(k for k in keys_026 if k not in env.ready_fields) + ": no values to cut a 0.26 shape from")
    elif len(env.ready_fields) == len(keys_026):
        same_length("ready_026_shape", len(keys_026), "EngineCoreReadyResponse", "keys")
    else:
        mut("ready_026_shape", RD, "A 0.26-shaped ready response (10 keys, no tensor_parallel_size and later required keys).",
            lambda r: {k: r[k] for k in keys_026})
    ready_required = env.required_fields(env.EngineCoreReadyResponse)
    mut("ready_optional_absent", RD, "Ready response with every defaulted key left out.", lambda r: {k: r[k] for k in r if k in ready_required})
    mut("ready_truncated", RD, "Ready response missing its last byte.", frames_fn=payload_op(lambda p: p[:-1]))
    PH = "ready/prefix_hash_sha256"
    mut("ready_none_hash_str", PH, "prefix_hash_config.none_hash sent as a str (its hex) instead of bin.",
        lambda r: r["prefix_hash_config"].__setitem__("none_hash", bytes(r["prefix_hash_config"]["none_hash"]).hex()))
    mut("ready_prefix_hash_missing_block_size", PH, "prefix_hash_config without hash_block_size.", lambda r: _pop(r["prefix_hash_config"], "hash_block_size"))
    mut("ready_prefix_hash_lookahead_absent", PH, "prefix_hash_config without num_lookahead_tokens (defaults to 0).", lambda r: _pop(r["prefix_hash_config"], "num_lookahead_tokens"))
    mut("ready_prefix_hash_unknown_key", PH, "prefix_hash_config with an unknown key (ignored).", lambda r: r["prefix_hash_config"].__setitem__("future_knob", 1))
    RF = "ready/rust_frontend_fields"
    mut("ready_expert_parallel_int", RF, "enable_expert_parallel sent as 1 instead of true.", lambda r: r.__setitem__("enable_expert_parallel", 1))
    mut("ready_cache_config_info_int", RF, "cache_config_info with an integer value where strings are required.",
        lambda r: r["cache_config_info"].__setitem__("block_size", 16))
    mut("ready_config_hash_nil", RF, "config_hash nil (the engine's hash_config() failed).", lambda r: r.__setitem__("config_hash", None))
    I = "handshake/init_one_client"
    mut("init_missing_parallel_config", I, "INIT without parallel_config.", lambda r: _pop(r, "parallel_config"))
    mut("init_missing_outputs", I, "INIT addresses without outputs.", lambda r: _pop(r["addresses"], "outputs"))
    mut("init_inputs_str", I, "INIT addresses.inputs as a string.", lambda r: r["addresses"].__setitem__("inputs", "ipc:///tmp/in.sock"))
    mut("init_sparse_addresses", I, "INIT addresses with only inputs and outputs (optional keys absent).", lambda r: r.__setitem__("addresses", {"inputs": ["ipc:///a"], "outputs": ["ipc:///b"]}))
    mut("init_unknown_key", I, "INIT with an unknown top-level key (ignored).", lambda r: r.__setitem__("future", 1))
    mut("init_parallel_config_float", I, "INIT parallel_config value of float type.", lambda r: r.__setitem__("parallel_config", {"x": 1.5}))
    H = "handshake/hello_headless"
    mut("hello_missing_headless", H, "HELLO without headless.", lambda r: _pop(r, "headless"))
    mut("hello_extra_key", H, "HELLO with an extra key (accepted).", lambda r: r.__setitem__("extra", 1))
    mut("hello_truncated", H, "HELLO missing its last byte.", frames_fn=payload_op(lambda p: p[:-1]))
    mut("ready_elastic_keys", "handshake/ready_headless", "READY with the elastic-EP keys added.", lambda r: r.update({"coord_store_port": 29560, "elastic_ep_max_dp_size": 8, "num_redundant_experts": 0}))

    # ---- abort / utility / wave ----------------------------------------------
    mut("abort_truncated", "abort/two_ids", "ABORT payload missing its last byte.", frames_fn=payload_op(lambda p: p[:-1]))
    mut("abort_trailing", "abort/two_ids", "ABORT payload with a trailing byte.", frames_fn=payload_op(lambda p: p + b"\x00"))
    mut("utility_three_elements", "utility/call_id_7", "UTILITY payload with 3 elements (args missing).", lambda r: r[:3])
    mut("utility_pickle_arg", "utility/call_id_7", "UTILITY with an ext type 1 (pickle) argument.", lambda r: r.__setitem__(3, [Ext(1, b"\x80\x04N.")]))
    mut("utility_truncated", "utility/call_id_7", "UTILITY payload missing its last byte.", frames_fn=payload_op(lambda p: p[:-1]))
    mut("wave_one_element", "utility/start_dp_wave_exclude", "START_DP_WAVE payload with only the wave.", lambda r: r[:1])
