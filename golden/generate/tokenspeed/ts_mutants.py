"""TokenSpeed mutants: bytes derived from generated cases. Every verdict is
what TokenSpeed's own receive path does with the bytes (tsenv.Env.decode);
the docs only describe the change."""

from __future__ import annotations

from msgspec.msgpack import Ext

from rawmp import F32, Raw, pack, unpack  # golden/generate/rawmp.py
from ts_cases import Case

INPUT = ("TokenizedGenerateReqInput", "AbortRequest")

# SamplingParams positions (0-based, untagged) and request positions (tag = 0).
SP = {n: i for i, n in enumerate([
    "max_new_tokens", "stop", "stop_token_ids", "temperature", "top_p", "top_k", "min_p", "frequency_penalty",
    "presence_penalty", "repetition_penalty", "min_new_tokens", "json_schema", "regex", "ebnf", "structural_tag",
    "ignore_eos", "skip_special_tokens", "spaces_between_special_tokens", "no_stop_trim", "thinking_budget",
    "custom_params", "stream_interval", "logit_bias", "seed", "logprobs", "n", "stop_strs", "stop_str_max_len",
    "is_normalized"])}
# The 0.1.1 orders; an older version's structs are prefixes of them
# (fields are only ever appended), and check_positions narrows RQ and OUT to
# the version at hand.
RQ_0_1_1 = {n: i + 1 for i, n in enumerate([
    "rid", "http_worker_ipc", "input_text", "input_ids", "sampling_params", "return_logprob", "logprob_start_len",
    "top_logprobs_num", "token_ids_logprob", "stream", "input_embeds", "session_params", "custom_logit_processor",
    "return_hidden_states", "created_time", "bootstrap_host", "bootstrap_port", "bootstrap_room", "input_multi_ids",
    "input_extra_infos", "input_ids_unpadded", "multimodal_inputs", "validation_error", "data_parallel_rank"])}
OUT_0_1_1 = {n: i + 1 for i, n in enumerate([
    "rids", "output_ids", "finished_reasons", "prompt_tokens", "completion_tokens", "cached_tokens",
    "output_token_logprobs_val", "output_token_logprobs_idx", "engine_index", "num_running", "num_waiting",
    "kv_active_pages", "kv_total_pages"])}


RQ: dict = {}
OUT: dict = {}


def check_positions(env):
    """The position tables above must be TokenSpeed's declaration order
    (this version's fields a prefix of 0.1.1's)."""
    import msgspec.inspect as mi

    global RQ, OUT
    assert [f.name for f in mi.type_info(env.SamplingParams).fields] == list(SP), "SamplingParams order"
    assert env.request_fields == list(RQ_0_1_1)[: len(env.request_fields)], "request order"
    assert env.output_fields == list(OUT_0_1_1)[: len(env.output_fields)], "output order"
    RQ = {n: RQ_0_1_1[n] for n in env.request_fields}
    OUT = {n: OUT_0_1_1[n] for n in env.output_fields}


def build(b):
    env = b.env
    check_positions(env)

    def mut(name, base_id, doc, fn=None, frames_fn=None, extra=None):
        base = b.by_id[base_id]
        frames = [bytes(f) for f in base.frames]
        if fn is not None:
            i = 1 if base.message in INPUT else len(frames) - 1 if base.message == "HandshakeInit" else 0
            raw = unpack(frames[i])
            r = fn(raw)
            frames[i] = pack(raw if r is None else r)
        if frames_fn is not None:
            frames = frames_fn(frames)
        b.add(Case("mutant", name, base.message, doc, frames, source="mutant", derived_from=base_id, extra=extra or {}))

    def rq(field, value):
        def f(raw):
            raw[RQ[field]] = value
        return f

    def sp(field, value):
        def f(raw):
            raw[RQ["sampling_params"]][SP[field]] = value
        return f

    def payload(op, idx=1):
        def ff(frames):
            frames[idx] = op(frames[idx])
            return frames
        return ff

    R = "request/add_default"
    # ---- request: wrong types per field --------------------------------
    for field, value, what in [
        ("rid", 7, "an int"), ("http_worker_ipc", 1, "an int"), ("input_text", [1], "an array"),
        ("input_ids", "123", "a string"), ("input_ids", [1.5], "an array holding a float"),
        ("input_ids", [True], "an array holding a bool"), ("input_ids", {"0": 1}, "a map"),
        ("sampling_params", None, "nil"), ("sampling_params", 5, "an int"),
        ("return_logprob", 1, "the int 1"), ("return_logprob", None, "nil"), ("logprob_start_len", -1.0, "a float"),
        ("logprob_start_len", None, "nil"), ("top_logprobs_num", "0", "a string"), ("token_ids_logprob", 5, "an int"),
        ("stream", 1, "the int 1"), ("stream", None, "nil"), ("input_embeds", "x", "a string"),
        ("session_params", {"id": "s"}, "a map"), ("session_params", 1, "an int"),
        ("return_hidden_states", 0, "the int 0"), ("created_time", "now", "a string"), ("created_time", None, "nil"),
        ("bootstrap_port", "8998", "a string"), ("input_extra_infos", [1], "an array of ints"),
        ("multimodal_inputs", 5, "an int"), ("validation_error", 1, "an int"), ("data_parallel_rank", "1", "a string"),
        ("data_parallel_rank", 1.0, "a float"),
    ]:
        if field not in RQ:
            continue
        slug = what.replace(" ", "_").replace("the_", "")
        mut(f"req_{field}_{slug}", R, f"Request field {field} holds {what}.", rq(field, value))
    mut("req_created_time_int", R, "created_time sent as the integer 5 (a float field accepts an int).", rq("created_time", 5))
    mut("req_rid_bin", R, "rid as msgpack bin instead of str.", rq("rid", b"r1"))
    mut("req_rid_invalid_utf8", R, "rid a str whose bytes are not UTF-8.", rq("rid", Raw(b"\xa2\xff\xfe")))
    mut("req_input_ids_negative", R, "input_ids [-1, 2] (int64 range, negative).", rq("input_ids", [-1, 2]))
    mut("req_input_ids_u64", R, "input_ids [2**64-1] (uint64).", rq("input_ids", [2**64 - 1]))
    mut("req_ext_in_field", R, "input_text holds an ext 1 (pickle) value.", rq("input_text", Ext(1, b"\x80\x04N.")))
    mut("req_ext3_in_field", R, "input_text holds an ext 3 (raw view) value.", rq("input_text", Ext(3, b"abc")))

    # ---- SamplingParams: wrong types per field ---------------------------
    for field, value, what in [
        ("max_new_tokens", 4.0, "a float"), ("max_new_tokens", "4", "a string"), ("stop", 5, "an int"),
        ("stop", [1], "an array of ints"), ("stop_token_ids", ["a"], "an array of strings"), ("stop_token_ids", 2, "an int"),
        ("temperature", None, "nil"), ("temperature", "0.5", "a string"), ("temperature", True, "a bool"),
        ("top_p", None, "nil"), ("top_k", 1.0, "a float"), ("top_k", None, "nil"), ("min_p", "0", "a string"),
        ("repetition_penalty", None, "nil"), ("min_new_tokens", 0.0, "a float"), ("json_schema", {"type": "object"}, "a map"),
        ("ignore_eos", 0, "the int 0"), ("skip_special_tokens", None, "nil"), ("thinking_budget", "1", "a string"),
        ("custom_params", [1], "an array"), ("custom_params", {1: 2}, "a map with an int key"),
        ("stream_interval", 1.5, "a float"), ("logit_bias", {5: 1.0}, "a map with an int key"),
        ("logit_bias", {"5": "x"}, "a map with a string value"), ("seed", 1.0, "a float"), ("seed", "42", "a string"),
        ("logprobs", True, "a bool"), ("n", "1", "a string"), ("stop_strs", 3, "an int"), ("stop_str_max_len", None, "nil"),
        ("is_normalized", 1, "the int 1"), ("is_normalized", None, "nil"),
    ]:
        slug = what.replace(" ", "_").replace("the_", "")
        mut(f"sp_{field}_{slug}", R, f"SamplingParams.{field} holds {what}.", sp(field, value))
    mut("sp_temperature_int_zero", R, "temperature sent as the integer 0 (a float field accepts an int; decode normalises to greedy).", sp("temperature", 0))
    mut("sp_temperature_f32", R, "temperature 0.8 written as float32.", sp("temperature", F32(0.8)))
    mut("sp_top_p_f32", R, "top_p 0.9 written as float32.", sp("top_p", F32(0.9)))
    mut("sp_seed_negative", R, "seed -1 (an int; no range rule).", sp("seed", -1))
    mut("sp_seed_u64", R, "seed 2**64-1.", sp("seed", 2**64 - 1))
    mut("sp_stop_token_ids_duplicates", R, "TS-S04: stop_token_ids [2, 2, 3] (the set keeps 2 and 3).", sp("stop_token_ids", [2, 2, 3]))
    mut("sp_stop_token_ids_empty_array", R, "stop_token_ids [] on the wire (decode turns it into nil).", sp("stop_token_ids", []))
    mut("sp_nan_temperature", R, "temperature NaN.", sp("temperature", float("nan")))
    mut("sp_inf_top_p", R, "top_p +Infinity.", sp("top_p", float("inf")))

    # ---- request: shape ------------------------------------------------
    mut("req_five_elements", R, "TS-R03: only 5 elements (tag + 4 fields): sampling_params missing.", lambda raw: raw[:5])
    mut("req_six_elements", R, "TS-R03: the 6-element minimum (up to sampling_params).", lambda raw: raw[:6])
    mut("req_tag_only", R, "Only the tag.", lambda raw: raw[:1])
    mut("req_empty_array", R, "An empty array.", lambda raw: [])
    mut("req_extra_trailing", R, f"Two extra trailing elements after {env.request_fields[-1]}.", lambda raw: raw + [1, "future"])
    mut("req_extra_trailing_map", R, "An extra trailing map element.", lambda raw: raw + [{"k": 1}])
    mut("sp_extra_trailing", R, "SamplingParams with two extra trailing elements.", lambda raw: raw[RQ["sampling_params"]].extend([7, None]))
    mut("sp_empty_prefix", R, "TS-S10: SamplingParams [] (every field defaulted, decode normalises).", sp_prefix(0))
    mut("sp_prefix_four", R, "SamplingParams of 4 elements (max_new_tokens .. temperature).", sp_prefix(4))
    mut("sp_as_map", R, "TS-R05: SamplingParams as a map.", rq("sampling_params", {"max_new_tokens": 4}))
    mut("req_as_map", R, "TS-R05: the request as a map.", lambda raw: {"_tag": raw[0], "rid": raw[1], "sampling_params": raw[5]})
    mut("req_wrong_tag_abortreq", R, "TS-R04: element 0 'AbortReq'.", lambda raw: ["AbortReq"] + raw[1:])
    mut("req_wrong_tag_case", R, "Element 0 'tokenizedGenerateReqInput' (case differs).", lambda raw: ["tokenizedGenerateReqInput"] + raw[1:])
    mut("req_tag_missing", R, "The array without its tag (fields start at element 0).", lambda raw: raw[1:])
    mut("req_tag_int", R, "The tag as an int.", lambda raw: [0] + raw[1:])
    mut("req_not_array", R, "Payload is an int.", lambda raw: 5)
    mut("req_nil_payload", R, "Payload is nil.", lambda raw: Raw(b"\xc0"))
    mut("req_smg_prefix_11", "request/add_smg_r01", "TS-R01 cut to the 11-element prefix SMG emits (up to stream).", lambda raw: raw[:11],
        extra={"matches": ["tokenspeed-wire.md §15.1 (TS-R01 ADD payload)"]})
    mut("req_smg_greedy_prefix_11", "request/add_smg_greedy_g1", "The greedy g1 request cut to SMG's 11-element prefix (seed 0 from TokenSpeed, where SMG leaves it nil).",
        lambda raw: raw[:11])
    mut("req_smg_greedy_seed_nil_prefix_11", "request/add_smg_greedy_g1", "TS-S02: SMG's greedy form (seed nil) in the 11-element prefix; the engine derives crc32('g1').",
        lambda raw: (raw[5].__setitem__(SP["seed"], None), raw[:11])[1], extra={"matches": ["tokenspeed-wire.md §15.2 (greedy ADD)"]})
    if env.has_dp_rank:
        mut("req_pre_dp_24", "request/add_smg_vector_vec1", "The 24-element request of TokenSpeed before data_parallel_rank (SMG's pinned 08-03 vector).",
            lambda raw: raw[:24], extra={"matches": ["SMG crates/engine_zmq_client/src/protocol/tokenspeed/request.rs PYTHON_REQUEST_VECTOR"]})
    else:
        mut("req_with_dp_rank_25", "request/add_smg_vector_vec1", "0.1.1's 25-element form of SMG's vector (data_parallel_rank 1 appended), read by this version.",
            lambda raw: raw + [1])

    # ---- request: frames and bytes ----------------------------------------
    mut("req_truncated_last_byte", R, "Payload with its last byte cut.", frames_fn=payload(lambda p: p[:-1]))
    mut("req_truncated_half", R, "Payload cut in half.", frames_fn=payload(lambda p: p[: len(p) // 2]))
    mut("req_trailing_byte", R, "A byte after the payload's end.", frames_fn=payload(lambda p: p + b"\xc0"))
    mut("req_bad_opcode", R, "Payload starts with the never-used byte 0xc1.", frames_fn=payload(lambda p: b"\xc1" + p[1:]))
    mut("req_empty_payload", R, "An empty payload frame.", frames_fn=payload(lambda p: b""))
    mut("req_type_byte_only", R, "Only the type frame (no payload).", frames_fn=lambda fr: fr[:1])
    mut("req_no_frames", R, "No frames at all.", frames_fn=lambda fr: [])
    mut("req_type_start_dp_wave", R, "vLLM's START_DP_WAVE type byte 02.", frames_fn=lambda fr: [b"\x02"] + fr[1:])
    mut("req_type_utility", R, "vLLM's UTILITY type byte 03.", frames_fn=lambda fr: [b"\x03"] + fr[1:])
    mut("req_type_unknown", R, "TS-F04: type byte 09.", frames_fn=lambda fr: [b"\x09"] + fr[1:])
    mut("req_type_two_bytes", R, "Type frame 00 00.", frames_fn=lambda fr: [b"\x00\x00"] + fr[1:])
    mut("req_type_abort_byte", R, "An ADD payload under the ABORT type byte.", frames_fn=lambda fr: [b"\x01"] + fr[1:])
    mut("req_aux_frame", R, "An ADD followed by an aux frame no field references.", frames_fn=lambda fr: fr + [b"opaque"])

    # ---- multimodal tensors --------------------------------------------
    MI, MA = "request/add_mm_inline_tensor", "request/add_mm_aux_frame_tensor"
    MM = RQ["multimodal_inputs"]

    def item(raw):
        return raw[MM][0][0]

    def feat(fn):
        def f(raw):
            it = item(raw)
            it[4] = fn(it[4])
        return f

    mut("mm_modality_unknown", MI, "Modality 9 (no such enum member).", lambda raw: item(raw).__setitem__(0, 9))
    mut("mm_modality_string", MI, "Modality as the string 'IMAGE'.", lambda raw: item(raw).__setitem__(0, "IMAGE"))
    mut("mm_aux_index_out_of_range", MA, "The feature's aux-frame index 1 with the aux frame removed.", frames_fn=lambda fr: fr[:2])
    mut("mm_aux_index_two", MA, "The feature's aux-frame index 2 (past the last frame).", feat(lambda t: [t[0], t[1], 2]))
    mut("mm_aux_index_payload", MA, "The feature's aux-frame index 0 (the payload frame itself).", feat(lambda t: [t[0], t[1], 0]))
    mut("mm_aux_index_negative", MA, "The feature's aux-frame index -1 (Python counts from the last frame).", feat(lambda t: [t[0], t[1], -1]))
    mut("mm_aux_frame_short", MA, "The aux frame one byte short of the shape.", frames_fn=lambda fr: fr[:2] + [fr[2][:-1]])
    mut("mm_aux_frame_item_short", MA, "The aux frame 4 bytes short (a whole number of int32 items, not fitting the shape).", frames_fn=lambda fr: fr[:2] + [fr[2][:-4]])
    mut("mm_tensor_shape_infer", MI, "The inline tensor's shape [-1, 3] (torch infers -1).", feat(lambda t: [t[0], [-1, 3], t[2]]))
    mut("mm_tensor_shape_two_unknown", MI, "The inline tensor's shape [-1, -1].", feat(lambda t: [t[0], [-1, -1], t[2]]))
    mut("mm_tensor_shape_minus_two", MI, "The inline tensor's shape [-2, 3] (torch infers only -1).", feat(lambda t: [t[0], [-2, 3], t[2]]))
    mut("mm_tensor_shape_mismatch", MI, "The inline tensor's shape [4, 3] for 6 items.", feat(lambda t: [t[0], [4, 3], t[2]]))
    mut("mm_tensor_dtype_unknown", MI, "The inline tensor's dtype 'float99'.", feat(lambda t: ["float99", t[1], t[2]]))
    mut("mm_tensor_dtype_numpy", MI, "The inline tensor's dtype '<f4' (a numpy spelling: decoded through numpy).", feat(lambda t: ["<f4", t[1], t[2]]))
    mut("mm_tensor_two_elements", MI, "The inline tensor as a 2-element array.", feat(lambda t: t[:2]))
    mut("mm_tensor_four_elements", MI, "The inline tensor as a 4-element array.", feat(lambda t: t + [0]))
    mut("mm_tensor_bin_data", MI, "The inline tensor's data as bin instead of ext 3.", feat(lambda t: [t[0], t[1], bytes(t[2].data)]))
    mut("mm_tensor_ext1_data", MI, "The inline tensor's data as ext 1 (pickle).", feat(lambda t: [t[0], t[1], Ext(1, bytes(t[2].data))]))
    mut("mm_tensor_empty", MI, "An empty float32 tensor of shape [0, 3].", feat(lambda t: [t[0], [0, 3], Ext(3, b"")]))
    mut("mm_items_missing", MI, "MultimodalInputs [] (mm_items, required, missing).", lambda raw: raw.__setitem__(MM, []))

    # ---- abort ----------------------------------------------------------
    A = "abort/two"
    mut("abort_int_element", A, "ABORT [1].", lambda raw: [1])
    mut("abort_nil_element", A, "ABORT [nil].", lambda raw: [None])
    mut("abort_nil", A, "ABORT payload nil.", lambda raw: Raw(b"\xc0"))
    mut("abort_string", A, "ABORT payload a bare string.", lambda raw: "r1")
    mut("abort_map", A, "ABORT payload a map.", lambda raw: {"rid": "r1"})
    mut("abort_tagged_struct", A, "ABORT payload as a tagged AbortReq array.", lambda raw: ["AbortReq", "r1", None])
    mut("abort_nested", A, "ABORT [['a']].", lambda raw: [["a"]])
    mut("abort_truncated", A, "ABORT payload with its last byte cut.", frames_fn=payload(lambda p: p[:-1]))
    mut("abort_trailing_byte", A, "ABORT payload with a trailing byte.", frames_fn=payload(lambda p: p + b"\x00"))
    mut("abort_aux_frame", A, "ABORT followed by an extra frame.", frames_fn=lambda fr: fr + [b"x"])
    mut("abort_no_payload", A, "ABORT type frame only.", frames_fn=lambda fr: fr[:1])

    # ---- output ---------------------------------------------------------
    O = "output/two_rows_mixed"
    mut("out_finish_nil", "output/chunk_r1", "TS-O12: finished_reasons [nil].", lambda raw: raw.__setitem__(OUT["finished_reasons"], [None]))
    mut("out_finish_dict", "output/terminal_stop_r1", "finished_reasons holding the full dict {'type':'stop','matched':2}.",
        lambda raw: raw.__setitem__(OUT["finished_reasons"], [{"type": "stop", "matched": 2}]))
    mut("out_finish_unknown_string", "output/terminal_stop_r1", "TS-O10: finish 'weird' (any string decodes).",
        lambda raw: raw.__setitem__(OUT["finished_reasons"], ["weird"]))
    mut("out_finish_error", "output/terminal_stop_r1", "TS-O10: finish 'error'.", lambda raw: raw.__setitem__(OUT["finished_reasons"], ["error"]))
    mut("out_ragged_output_ids", O, "TS-O04: rids of length 2, output_ids of length 1 (no length rule in the decoder).",
        lambda raw: raw.__setitem__(OUT["output_ids"], raw[OUT["output_ids"]][:1]))
    mut("out_ragged_logprobs", O, "TS-O04: one logprob column one entry short.",
        lambda raw: raw.__setitem__(OUT["output_token_logprobs_val"], raw[OUT["output_token_logprobs_val"]][:1]))
    mut("out_output_ids_nil", O, "output_ids nil.", lambda raw: raw.__setitem__(OUT["output_ids"], None))
    mut("out_rids_nil", O, "rids nil (the base field is Optional).", lambda raw: raw.__setitem__(OUT["rids"], None))
    mut("out_prompt_tokens_strings", O, "prompt_tokens ['3', '4'].", lambda raw: raw.__setitem__(OUT["prompt_tokens"], ["3", "4"]))
    mut("out_logprob_int", "output/logprobs_chunk", "A logprob written as the integer -1 (float column).",
        lambda raw: raw.__setitem__(OUT["output_token_logprobs_val"], [[-1]]))
    mut("out_logprob_f32", "output/logprobs_chunk", "A logprob written as float32.",
        lambda raw: raw.__setitem__(OUT["output_token_logprobs_val"], [[F32(-0.5)]]))
    mut("out_logprob_nil", "output/logprobs_chunk", "A logprob value nil.",
        lambda raw: raw.__setitem__(OUT["output_token_logprobs_val"], [[None]]))
    if env.has_engine_index:
        mut("out_engine_index_string", O, "engine_index '0'.", lambda raw: raw.__setitem__(OUT["engine_index"], "0"))
        mut("out_engine_index_negative", O, "engine_index -1 (an int; no range rule).", lambda raw: raw.__setitem__(OUT["engine_index"], -1))
    mut("out_wrong_tag", "output/smg_vector_vec1", "TS-O13: tag 'XatchTokenIDOutSlim'.", lambda raw: ["XatchTokenIDOutSlim"] + raw[1:])
    mut("out_wrong_tag_full", "output/chunk_r1", "Tag 'BatchTokenIDOut' (the full struct's name).", lambda raw: ["BatchTokenIDOut"] + raw[1:])
    mut("out_as_map", "output/chunk_r1", "The batch as a map.", lambda raw: {"rids": raw[1]})
    mut("out_eight_elements", "output/chunk_r1", "8 elements: output_token_logprobs_idx missing.", lambda raw: raw[:8])
    if env.has_load_tail:
        mut("out_extra_trailing", "output/load_tail", "A 15th element after the load tail (a future column).", lambda raw: raw + [[99]])
        mut("out_pre_load_10", "output/smg_vector_vec1", "The 10-element batch of the engine_index era (no load tail).", lambda raw: raw[:10],
            extra={"matches": ["SMG output.rs PYTHON_OUTPUT_VECTOR_PRE_LOAD"]})
        mut("out_pre_dp_9", "output/smg_vector_vec1", "The 9-element batch of 08-03 (no engine_index).", lambda raw: raw[:9],
            extra={"matches": ["SMG output.rs PYTHON_OUTPUT_VECTOR_PRE_DP"]})
        mut("out_chunk_9", "output/chunk_r1", "TS reference §15.5: the chunk row in the 9-element shape.", lambda raw: raw[:9],
            extra={"matches": ["tokenspeed-wire.md §15.5 (chunk row)"]})
        mut("out_terminal_9", "output/terminal_stop_r1", "TS reference §15.5: the terminal row in the 9-element shape.", lambda raw: raw[:9],
            extra={"matches": ["tokenspeed-wire.md §15.5 (terminal row)"]})
        mut("out_abort_row_9", "output/terminal_abort_empty", "TS reference §15.7: the validation-abort row in the 9-element shape.", lambda raw: raw[:9],
            extra={"matches": ["tokenspeed-wire.md §15.7 (validation-abort row)"]})
    else:
        # An engine of this version reading later shapes (fields are only
        # appended, so these are extra trailing elements to it).
        mut("out_extra_trailing", "output/chunk_r1", "A 10th element after output_token_logprobs_idx (a later version's engine_index).",
            lambda raw: raw + [0])
        mut("out_with_load_tail_14", "output/smg_vector_vec1", "0.1.1's 14-element form of SMG's vector (engine_index 1, load 2/5/100/400 appended), read by this version.",
            lambda raw: raw + [1, 2, 5, 100, 400], extra={"matches": ["SMG output.rs PYTHON_OUTPUT_VECTOR"]})
    mut("out_truncated", "output/chunk_r1", "Output payload with its last byte cut.", frames_fn=payload(lambda p: p[:-1], 0))
    mut("out_trailing_byte", "output/chunk_r1", "Output payload with a trailing byte.", frames_fn=payload(lambda p: p + b"\xc0", 0))
    mut("out_aux_frame", "output/chunk_r1", "TS-F05: a batch followed by an aux frame 'opaque'.", frames_fn=lambda fr: fr + [b"opaque"])
    mut("out_empty_payload", "output/chunk_r1", "An empty output frame.", frames_fn=payload(lambda p: b"", 0))

    # ---- handshake ------------------------------------------------------
    H = "handshake/hello"
    mut("hello_positional", H, "TS-H10: HELLO as a positional array.", lambda raw: ["HELLO", True, True, None])
    mut("hello_unknown_key", H, "HELLO with an extra key.", lambda raw: raw.__setitem__("future", 1))
    mut("hello_status_int", H, "HELLO status 1.", lambda raw: raw.__setitem__("status", 1))
    mut("hello_local_int", H, "HELLO local 1.", lambda raw: raw.__setitem__("local", 1))
    mut("hello_empty_map", H, "An empty map in place of HELLO (every key optional).", lambda raw: {})
    mut("hello_only_status", H, "HELLO with only the status key.", lambda raw: {"status": "HELLO"})
    mut("hello_status_other", H, "Status 'BOGUS' (the class has no status rule).", lambda raw: raw.__setitem__("status", "BOGUS"))
    mut("hello_parallel_hash", H, "parallel_config_hash 'abc'.", lambda raw: raw.__setitem__("parallel_config_hash", "abc"))
    mut("hello_truncated", H, "HELLO with its last byte cut.", frames_fn=payload(lambda p: p[:-1], 0))
    I = "handshake/init_ipc"
    mut("init_missing_addresses", I, "INIT without addresses.", lambda raw: {"parallel_config": {}})
    mut("init_inputs_string", I, "INIT inputs a string.", lambda raw: raw["addresses"].__setitem__("inputs", "ipc:///x"))
    mut("init_parallel_config_list", I, "INIT parallel_config a list.", lambda raw: raw.__setitem__("parallel_config", []))
    mut("init_unknown_keys", I, "INIT with unknown keys at both levels.", lambda raw: (raw.__setitem__("x", 1), raw["addresses"].__setitem__("y", 2))[0])
    mut("init_positional", I, "INIT as a positional array.", lambda raw: [raw["addresses"], {}])
    mut("init_only_addresses", I, "INIT with addresses holding only inputs and outputs.",
        lambda raw: {"addresses": {"inputs": raw["addresses"]["inputs"], "outputs": raw["addresses"]["outputs"]}})
    mut("init_two_frames", I, "INIT arrives as two frames: the engine reads the last one.", frames_fn=lambda fr: [b"\x90"] + fr)
    Y = "ready/default_bf16"
    # The size key this version does not have (block_size until 08-14,
    # prefix_granularity since).
    other = "block_size" if env.ready_size_key == "prefix_granularity" else "prefix_granularity"
    if other == "block_size":
        mut("ready_block_size", Y, "TS-H04 inverted: the pre-08-14 form (block_size, no prefix_granularity).",
            lambda raw: {("block_size" if k == "prefix_granularity" else k): v for k, v in raw.items()})
    else:
        mut("ready_prefix_granularity", Y, "TS-H04: the 08-14 and later form (prefix_granularity, no block_size).",
            lambda raw: {("prefix_granularity" if k == "block_size" else k): v for k, v in raw.items()})
    mut("ready_both_sizes", Y, "Both block_size and prefix_granularity.", lambda raw: raw.__setitem__(other, 16))
    mut("ready_dtype_float8", Y, "TS-H07: dtype 'float8' (the class types dtype as str).", lambda raw: raw.__setitem__("dtype", "float8"))
    mut("ready_dtype_nil", Y, "dtype nil.", lambda raw: raw.__setitem__("dtype", None))
    mut("ready_batched_minus_one", Y, "TS-H05: max_num_batched_tokens -1 (as pre-merge builds sent).", lambda raw: raw.__setitem__("max_num_batched_tokens", -1))
    mut("ready_concurrency_int", Y, "kv_cache_max_concurrency as the int 3 (float field).", lambda raw: raw.__setitem__("kv_cache_max_concurrency", 3))
    mut("ready_world_size_string", Y, "world_size '1'.", lambda raw: raw.__setitem__("world_size", "1"))
    mut("ready_max_model_len_nil", Y, "max_model_len nil.", lambda raw: raw.__setitem__("max_model_len", None))
    mut("ready_positional", Y, "The ready response as a positional array.", lambda raw: list(raw.values()))
    mut("ready_empty_map", Y, "An empty map (every key has a default).", lambda raw: {})
    mut("ready_unknown_keys", Y, "TS-H06: extra keys.", lambda raw: (raw.__setitem__("future_key", [1, 2]), raw.__setitem__(other, None))[0])
    mut("ready_truncated", Y, "Ready response with its last byte cut.", frames_fn=payload(lambda p: p[:-1], 0))
    mut("ready_version_vllm", Y, "vllm_version '0.33.0' (any string).", lambda raw: raw.__setitem__("vllm_version", "0.33.0"))


def sp_prefix(n):
    def f(raw):
        raw[RQ["sampling_params"]] = raw[RQ["sampling_params"]][:n]
    return f
