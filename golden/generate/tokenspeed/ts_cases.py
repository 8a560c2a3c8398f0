"""The TokenSpeed cases built with TokenSpeed's own classes and encoders
(source ``tokenspeed-encoder``). Mutants are in ts_mutants.py.

One builder serves every version: what a version's wire has (fields, the
greedy seed pin, the logprob gates, the handshake entry point) is read off
TokenSpeed's code by tsenv.Env, and cases or docs that only hold for one
version say so through those flags."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Case:
    group: str
    name: str
    message: str
    doc: str
    frames: list[bytes]
    source: str = "tokenspeed-encoder"
    derived_from: str | None = None
    extra: dict = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.group}/{self.name}"


class Builder:
    def __init__(self, env):
        self.env = env
        self.cases: list[Case] = []
        self.by_id: dict[str, Case] = {}

    def add(self, c: Case) -> Case:
        if c.id in self.by_id:
            raise RuntimeError(f"duplicate case id {c.id}")
        self.cases.append(c)
        self.by_id[c.id] = c
        return c


# Fixed values (never time.time()): created_time as TokenSpeed's frontend
# would stamp it.
CREATED = 1700000000.25


def build_requests(b: Builder):
    env = b.env
    SP, TR = env.SamplingParams, env.TokenizedGenerateReqInput
    # The greedy seed pin (0.1.1) and the logprob gates (0.1.1 refuses
    # what 08-03 lets through) change what some docs must say.
    pin = ", seed 0" if env.pins_greedy_seed else ""
    pin_doc = ": greedy pins seed 0." if env.pins_greedy_seed else " (this version does not pin greedy's seed)."

    def gated(doc_011, doc_old):
        return doc_011 if env.full_logprob_gates else doc_old

    def add(name, doc, sp_kw=None, sp_attrs=None, normalize=False, **req_kw):
        sp = SP(**(sp_kw or {}))
        if normalize:
            # What TokenSpeed's InputProcessor does before it sends a request
            # (resolve_seed, normalize(tokenizer)); SMG sends this form.
            sp.resolve_seed(req_kw.get("rid", "r1")) if normalize == "seed" else None
            sp.normalize(tokenizer=None)
        for k, v in (sp_attrs or {}).items():
            setattr(sp, k, v)
        kw = {"rid": "r1", "input_ids": [1, 2, 3]}
        kw.update(req_kw)
        req = TR(sampling_params=sp, **kw)
        b.add(Case("request", name, "TokenizedGenerateReqInput", doc, env.encode_add(req)))

    add("add_default", "ADD with every SamplingParams field at its default (constructed, not normalised).")
    add("add_smg_r01", "TS-R01 as TokenSpeed encodes it in full: rid r1, ids [1,2,3], max_new_tokens 4, normalised, stream.",
        sp_kw={"max_new_tokens": 4}, normalize=True, stream=True)
    add("add_smg_greedy_g1", "TS-S02's request (rid g1, ids [7], max_new_tokens 1, temperature 0) built and normalised by TokenSpeed" + pin_doc,
        sp_kw={"max_new_tokens": 1, "temperature": 0.0}, normalize=True, rid="g1", input_ids=[7])
    add("add_normalized_seeded", "Normalised by TokenSpeed's own pipeline (resolve_seed then normalize): seed crc32(rid), stop_strs [], is_normalized true.",
        sp_kw={"max_new_tokens": 8}, normalize="seed")
    add("add_max_new_tokens_nil", "max_new_tokens nil (the engine clamps it later).", sp_kw={})
    add("add_max_new_tokens_zero", "max_new_tokens 0.", sp_kw={"max_new_tokens": 0})
    add("add_max_new_tokens_large", "max_new_tokens 1<<31 (uint32 on the wire).", sp_kw={"max_new_tokens": 1 << 31})
    add("add_greedy_temperature_zero", f"temperature 0.0 normalised at construction: temperature 1.0, top_k 1{pin}.", sp_kw={"temperature": 0.0, "max_new_tokens": 4})
    add("add_greedy_below_eps", f"temperature 1e-7, below the 1e-6 threshold: greedy (1.0, top_k 1{pin}).", sp_kw={"temperature": 1e-7})
    add("add_temperature_at_eps", "temperature exactly 1e-6 is not below the threshold: kept, top_k all (1<<30).", sp_kw={"temperature": 1e-6})
    add("add_temperature_07", "temperature 0.7 (a double).", sp_kw={"temperature": 0.7})
    add("add_temperature_f32_widened", "temperature 0.7 as an f32 proto value widened to f64 (0.699999988079071), as SMG sends it.",
        sp_kw={"temperature": 0.699999988079071})
    add("add_temperature_high", "temperature 2.0.", sp_kw={"temperature": 2.0})
    add("add_top_k_minus_one", "top_k -1 (API 'all') normalised to 1<<30 at construction.", sp_kw={"top_k": -1})
    add("add_top_k_40", "top_k 40.", sp_kw={"top_k": 40})
    add("add_top_k_127", "top_k 127, the largest finite top_k the fused kernel limit admits.", sp_kw={"top_k": 127})
    add("add_top_k_128", "top_k 128: decodes, refused by verify (fused kernel limit).", sp_kw={"top_k": 128})
    add("add_top_k_zero", "top_k 0: decodes, refused by verify.", sp_kw={"top_k": 0})
    if env.pins_greedy_seed:
        add("add_top_k_one_seed_pinned", "top_k 1 given directly: greedy, seed pinned to 0 even though seed 42 was asked.", sp_kw={"top_k": 1, "seed": 42})
    else:
        add("add_top_k_one_seed_kept", "top_k 1 given directly with seed 42: greedy, and the seed stays 42 (no greedy seed pin in this version).",
            sp_kw={"top_k": 1, "seed": 42})
    add("add_seed_explicit", "seed 42 with sampling.", sp_kw={"seed": 42, "temperature": 0.8})
    add("add_seed_zero", "seed 0 with sampling.", sp_kw={"seed": 0, "temperature": 0.8})
    add("add_seed_u32_max", "seed 4294967295.", sp_kw={"seed": 4294967295})
    add("add_seed_nil_rid_r1", "seed nil: the engine derives crc32(b'r1') = 219023793 (see finalized).", sp_kw={"temperature": 0.8})
    add("add_top_p_min_p", "top_p 0.9, min_p 0.05.", sp_kw={"top_p": 0.9, "min_p": 0.05})
    add("add_top_p_zero", "top_p 0: refused by verify.", sp_kw={"top_p": 0.0})
    add("add_min_p_above_one", "min_p 1.5: refused by verify.", sp_kw={"min_p": 1.5})
    add("add_penalties", "frequency 0.5, presence -0.5, repetition 1.2.", sp_kw={"frequency_penalty": 0.5, "presence_penalty": -0.5, "repetition_penalty": 1.2})
    add("add_penalty_out_of_range", "frequency_penalty 2.5: refused by verify.", sp_kw={"frequency_penalty": 2.5})
    add("add_repetition_penalty_out_of_range", "repetition_penalty 2.5: refused by verify.", sp_kw={"repetition_penalty": 2.5})
    add("add_negative_temperature", "temperature -1.0 (below the threshold, so normalised to greedy at construction).", sp_kw={"temperature": -1.0})
    add("add_min_new_tokens", "min_new_tokens 2, max_new_tokens 8.", sp_kw={"min_new_tokens": 2, "max_new_tokens": 8})
    add("add_min_above_max", "min_new_tokens 9 above max_new_tokens 8: refused by verify.", sp_kw={"min_new_tokens": 9, "max_new_tokens": 8})
    add("add_negative_max_new_tokens", "max_new_tokens -1: refused by verify.", sp_kw={"max_new_tokens": -1})
    add("add_stop_string", "stop 'END' (a bare string), copied to stop_strs at construction.", sp_kw={"stop": "END"})
    add("add_stop_list", "stop ['END', '\\n\\n'].", sp_kw={"stop": ["END", "\n\n"]})
    add("add_stop_normalized", "stop ['END','ab'] normalised: stop_strs list, stop_str_max_len 3 (characters), is_normalized true.",
        sp_kw={"stop": ["END", "ab"]}, normalize=True)
    add("add_stop_token_ids", "stop_token_ids {2}.", sp_kw={"stop_token_ids": {2}})
    add("add_stop_token_ids_many", "stop_token_ids {2, 3, 500}.", sp_kw={"stop_token_ids": {2, 3, 500}})
    add("add_stop_token_ids_hash_order", "stop_token_ids {1000, 7, 300}: a Python set, written in hash order.", sp_kw={"stop_token_ids": {1000, 7, 300}})
    add("add_stop_token_ids_empty", "stop_token_ids set() becomes nil at construction.", sp_kw={"stop_token_ids": set()})
    add("add_ignore_eos_flags", "ignore_eos, skip_special_tokens false, spaces_between_special_tokens false, no_stop_trim.",
        sp_kw={"ignore_eos": True, "skip_special_tokens": False, "spaces_between_special_tokens": False, "no_stop_trim": True})
    add("add_json_schema", "json_schema set.", sp_kw={"json_schema": '{"type":"object"}'})
    add("add_regex", "regex set.", sp_kw={"regex": "[a-z]+"})
    add("add_ebnf", "ebnf set.", sp_kw={"ebnf": 'root ::= "a"'})
    add("add_structural_tag", "structural_tag set (not counted by verify's one-grammar rule).", sp_kw={"structural_tag": '{"type":"structural_tag"}'})
    add("add_json_schema_and_regex", "json_schema and regex both set: refused by verify.", sp_kw={"json_schema": "{}", "regex": "a"})
    add("add_structural_tag_and_regex", "structural_tag and regex: verify counts only json_schema, regex, ebnf.", sp_kw={"structural_tag": "{}", "regex": "a"})
    add("add_thinking_budget_stream_interval", "thinking_budget 64, stream_interval 4.", sp_kw={"thinking_budget": 64, "stream_interval": 4})
    add("add_custom_params", "custom_params (an 'anything' dict).", sp_kw={"custom_params": {"a": 1, "b": [1.5, "x", None], "c": {"d": True}}})
    add("add_logit_bias", "logit_bias {'5': 1.5, '7': -2.0}.", sp_kw={"logit_bias": {"5": 1.5, "7": -2.0}})
    add("add_logit_bias_out_of_vocab", "logit_bias key 600, outside the vocabulary (512): refused by verify.", sp_kw={"logit_bias": {"600": 1.0}})
    add("add_logit_bias_not_a_number", "logit_bias key 'abc': verify's int() fails: refused.", sp_kw={"logit_bias": {"abc": 1.0}})
    add("add_sp_logprobs_zero", "SamplingParams.logprobs 0 (the sampled token's logprob).", sp_kw={"logprobs": 0})
    add("add_sp_logprobs_five", "SamplingParams.logprobs 5: refused by verify.", sp_kw={"logprobs": 5})
    add("add_n_two", "n 2: the wire layer marks it invalid (the frontend must fan out).", sp_kw={"n": 2})
    add("add_return_logprob", "return_logprob true, logprob_start_len -1 (output logprobs only).", return_logprob=True)
    add("add_return_logprob_last_prompt_token", "return_logprob with logprob_start_len 2 = len(prompt)-1: no prompt logprobs needed.", return_logprob=True, logprob_start_len=2)
    ungated = ": accepted (this version gates return_logprob on --enable-output-logprobs only)."
    add("add_return_logprob_prompt_start", gated("return_logprob with logprob_start_len 0: asks for prompt logprobs, refused.",
        "return_logprob with logprob_start_len 0 (prompt logprobs)" + ungated), return_logprob=True, logprob_start_len=0)
    add("add_return_logprob_start_past_prompt", gated("return_logprob with logprob_start_len 3 (past the prompt): refused.",
        "return_logprob with logprob_start_len 3 (past the prompt)" + ungated), return_logprob=True, logprob_start_len=3)
    add("add_return_logprob_start_below", gated("return_logprob with logprob_start_len -2: refused.",
        "return_logprob with logprob_start_len -2" + ungated), return_logprob=True, logprob_start_len=-2)
    add("add_return_logprob_top", gated("return_logprob with top_logprobs_num 1: refused.",
        "return_logprob with top_logprobs_num 1" + ungated), return_logprob=True, top_logprobs_num=1)
    add("add_return_logprob_token_ids", gated("return_logprob with token_ids_logprob [5]: refused.",
        "return_logprob with token_ids_logprob [5]" + ungated), return_logprob=True, token_ids_logprob=[5])
    add("add_top_logprobs_without_return", "top_logprobs_num 3 and token_ids_logprob [5] without return_logprob: the gates do not look.", top_logprobs_num=3, token_ids_logprob=[5])
    add("add_return_logprob_no_input_ids", gated("return_logprob with input_ids nil: refused.",
        "return_logprob with input_ids nil" + ungated), return_logprob=True, input_ids=None, input_text="hi")
    add("add_return_logprob_empty_prompt", gated("return_logprob with input_ids []: logprob_start_len resolves to 0, not below len-1.",
        "return_logprob with input_ids []: logprob_start_len stays -1 (this version does not resolve it)."), return_logprob=True, input_ids=[])
    add("add_stream", "stream true.", stream=True)
    add("add_input_text_only", "input_text 'hello' and input_ids nil.", input_ids=None, input_text="hello")
    add("add_input_ids_u32", "input_ids [4294967295, 0, 65536] (uint32 and uint32-range ids).", input_ids=[4294967295, 0, 65536])
    add("add_input_ids_long", "a 40-token prompt (array16 header).", input_ids=list(range(100, 140)))
    add("add_rid_unicode", "a non-ASCII rid.", rid="req-é-漢-🙂")
    add("add_rid_long", "a 300-byte rid (str16 header).", rid="r" * 300)
    add("add_rid_nil_seeded", "rid nil with a seed: decodes (no seed to derive).", rid=None, sp_kw={"seed": 5})
    add("add_rid_nil_unseeded", "rid nil and seed nil: resolve_seed fails on the engine.", rid=None)
    add("add_rid_nil_greedy_unseeded", "rid nil, seed nil, temperature 0 (greedy): " + (
        "the greedy seed pin sets seed 0, so no seed is derived from the rid: runs." if env.pins_greedy_seed else
        "no greedy seed pin in this version, so resolve_seed fails on the engine (0.1.1 runs it)."),
        rid=None, sp_kw={"temperature": 0.0})
    add("add_rid_list_seeded", "rid a list of strings with a seed: decodes.", rid=["a", "b"], sp_kw={"seed": 5})
    add("add_rid_list_unseeded", "rid a list with seed nil: resolve_seed fails on the engine.", rid=["a", "b"])
    add("add_http_worker_ipc", "http_worker_ipc set.", http_worker_ipc="ipc:///tmp/worker-0")
    if env.has_dp_rank:
        add("add_data_parallel_rank", "data_parallel_rank 1 (0.1.1's appended field).", data_parallel_rank=1)
    add("add_session_params", "session_params SessionParams(id='s1', rid='r0', offset=2, replace=True).",
        session_params=env.SessionParams(id="s1", rid="r0", offset=2, replace=True))
    add("add_session_params_empty", "session_params with every field nil.", session_params=env.SessionParams())
    add("add_misc_fields", "custom_logit_processor, return_hidden_states, created_time, bootstrap host/port/room.",
        custom_logit_processor='{"callable": "x"}', return_hidden_states=True, created_time=CREATED,
        bootstrap_host="10.0.0.1", bootstrap_port=8998, bootstrap_room=123456789012)
    add("add_input_embeds", "input_embeds (nested float lists) with input_ids nil.", input_ids=None, input_embeds=[[0.5, -0.25], [1.0, 2.0]])
    add("add_multi_ids_extra_infos", "input_multi_ids, input_extra_infos, input_ids_unpadded.",
        input_multi_ids=[[1, 2], [3]], input_extra_infos=[{"k": "v", "n": 1}], input_ids_unpadded=[1, 2, 3])
    add("add_validation_error_on_wire", "validation_error set by the sender: the engine aborts the request.", validation_error="bad")
    add("add_unnormalized_greedy", "TS-S03: temperature 0.0 and top_k -1 written after construction, is_normalized false: the engine's decode normalises.",
        sp_kw={}, sp_attrs={"temperature": 0.0, "top_k": -1})
    add("add_normalized_top_k_minus_one", "TS-S06: is_normalized true with top_k -1 (attribute writes): decode keeps -1 and verify allows it.",
        sp_kw={}, sp_attrs={"top_k": -1, "is_normalized": True, "stop_strs": []})
    add("add_all_fields", "every request and SamplingParams field set to a non-default value (multimodal_inputs aside).",
        sp_kw={"max_new_tokens": 16, "stop": ["END"], "stop_token_ids": {2, 4}, "temperature": 0.8, "top_p": 0.95, "top_k": 50,
               "min_p": 0.01, "frequency_penalty": 0.1, "presence_penalty": 0.2, "repetition_penalty": 1.1, "min_new_tokens": 1,
               "json_schema": '{"type":"string"}', "structural_tag": "{}", "ignore_eos": True, "skip_special_tokens": False,
               "spaces_between_special_tokens": False, "no_stop_trim": True, "thinking_budget": 32, "custom_params": {"k": 1},
               "stream_interval": 2, "logit_bias": {"10": 0.5}, "seed": 7, "logprobs": 0},
        normalize=True, rid="all-1", http_worker_ipc="ipc:///tmp/w", input_text="abc", input_ids=[5, 6, 7],
        return_logprob=True, logprob_start_len=-1, top_logprobs_num=0, token_ids_logprob=None, stream=True,
        input_embeds=None, session_params=env.SessionParams(id=None, rid="x", offset=0, replace=False),
        custom_logit_processor="clp", return_hidden_states=True, created_time=CREATED, bootstrap_host="h",
        bootstrap_port=1, bootstrap_room=2, input_multi_ids=[[5, 6, 7]], input_extra_infos=[{}],
        input_ids_unpadded=[5, 6, 7], validation_error=None, **({"data_parallel_rank": 0} if env.has_dp_rank else {}))
    # Multimodal payloads (SMG refuses multimodal for TokenSpeed, but the
    # engine's ADD decoder takes them): tensors below 256 bytes ride inline
    # as ext 3 raw views, larger ones in aux frames referenced by index.
    import torch
    from tokenspeed.runtime.multimodal.inputs import Modality, MultimodalDataItem, MultimodalInputs

    small = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    add("add_mm_inline_tensor", "multimodal_inputs with one image item whose float32 feature (24 bytes) rides inline as ext 3.",
        input_ids=[1, 9, 9, 2],
        multimodal_inputs=MultimodalInputs(mm_items=[MultimodalDataItem(modality=Modality.IMAGE, hash=12345, pad_value=99,
                                                                        offsets=[(1, 3)], feature=small)], im_token_id=9))
    big = (torch.arange(96, dtype=torch.int32) - 7).reshape(4, 24)
    add("add_mm_aux_frame_tensor", "multimodal_inputs with an int32 feature of 384 bytes, sent as an aux frame (index 1).",
        input_ids=[1, 9, 2],
        multimodal_inputs=MultimodalInputs(mm_items=[MultimodalDataItem(modality=Modality.AUDIO, feature=big,
                                                                        model_specific_data={"mask": torch.tensor([True, False])})]))
    add("add_mm_mrope", "multimodal_inputs with mrope tensors (int64, bfloat16) and two video items without features.",
        input_ids=[1, 8, 8, 2],
        multimodal_inputs=MultimodalInputs(
            mm_items=[MultimodalDataItem(modality=Modality.VIDEO, hash=1, offsets=[(1, 2), (2, 3)]),
                      MultimodalDataItem(modality=Modality.IMAGE, pad_value=5, encode_handshake={"bootstrap_room": 7})],
            video_token_id=8, mrope_positions=torch.arange(12, dtype=torch.int64).reshape(3, 4),
            mrope_position_delta=torch.tensor([0.5, -2.0], dtype=torch.bfloat16), mrope_position_delta_scalar=-3))
    add("add_smg_vector_vec1", "SMG's pinned request (rid vec-1, ids [1,2,3], temperature 0.5, top_p 0.9, max 8, stop ids {2}, seed 42, logprob, stream) built by TokenSpeed " + env.version + ".",
        sp_kw={"temperature": 0.5, "top_p": 0.9, "max_new_tokens": 8, "stop_token_ids": {2}, "seed": 42}, normalize=True,
        rid="vec-1", return_logprob=True, stream=True)


def build_aborts(b: Builder):
    env = b.env

    def add(name, doc, rids):
        b.add(Case("abort", name, "AbortRequest", doc, env.encode_abort(rids)))

    add("single", "ABORT ['r1'] (SMG's one-id form).", ["r1"])
    add("two", "ABORT ['a', 'b'] (the engine expands each into an AbortReq).", ["a", "b"])
    add("empty", "ABORT with an empty id list.", [])
    add("many_ids", "ABORT of 20 ids (array16 header).", [f"req-{i}" for i in range(20)])
    add("unicode", "ABORT of a non-ASCII id.", ["req-é-漢-🙂"])
    add("long_id", "ABORT of a 300-byte id (str16).", ["r" * 300])
    add("fanout_children", "ABORT of n>1 sub-requests r1-0, r1-1.", ["r1-0", "r1-1"])


def _full_out(env, rids, output_ids, finished, prompt, completion, cached, lp_val=None, lp_idx=None):
    """A BatchTokenIDOut as OutputProcesser fills it on the skip-tokenizer
    path (the columns from_full ignores hold neutral values)."""
    n = len(rids)
    return env.BatchTokenIDOut(
        rids=list(rids), finished_reasons=finished, decoded_texts=[""] * n, decode_ids=[[] for _ in rids],
        read_offsets=[0] * n, output_ids=output_ids, output_multi_ids=None, skip_special_tokens=[True] * n,
        spaces_between_special_tokens=[True] * n, no_stop_trim=[False] * n, prompt_tokens=prompt,
        completion_tokens=completion, cached_tokens=cached, spec_verify_ct=[0] * n,
        input_token_logprobs_val=[[] for _ in rids], input_token_logprobs_idx=[[] for _ in rids],
        output_token_logprobs_val=lp_val, output_token_logprobs_idx=lp_idx,
        input_top_logprobs_val=[[] for _ in rids], input_top_logprobs_idx=[[] for _ in rids],
        output_top_logprobs_val=[[] for _ in rids], output_top_logprobs_idx=[[] for _ in rids],
        input_token_ids_logprobs_val=[[] for _ in rids], input_token_ids_logprobs_idx=[[] for _ in rids],
        output_token_ids_logprobs_val=[[] for _ in rids], output_token_ids_logprobs_idx=[[] for _ in rids],
        output_hidden_states=[[] for _ in rids], batch_accept_draft_tokens=[None] * n,
        output_extra_infos=[{} for _ in rids], generated_time=12345.5,
    )


def build_outputs(b: Builder):
    env = b.env

    def add(name, doc, full, engine_index=0, load=None):
        b.add(Case("output", name, "BatchTokenIDOutSlim", doc, env.send_output(full, engine_index, load)))

    F = lambda *a, **k: _full_out(env, *a, **k)  # noqa: E731
    STOP = {"type": "stop", "matched": 2}
    STOP_STR = {"type": "stop", "matched": "END"}
    LEN = {"type": "length", "length": 2}
    ABORT = {"type": "abort", "message": "Invalid request: top_k must be < 128", "err_type": 522}
    add("chunk_r1", "One running row (finish None -> ''), ids [10], prompt 3, completion 1, no logprobs.",
        F(["r1"], [[10]], [None], [3], [1], [0]))
    add("terminal_stop_r1", "Terminal row from a stop dict {'type':'stop','matched':2}: the wire carries 'stop' only.",
        F(["r1"], [[11]], [STOP], [3], [2], [0]))
    add("terminal_stop_string", "Terminal row from a stop-string finish {'matched':'END'}: 'stop'.",
        F(["r1"], [[12, 13]], [STOP_STR], [3], [4], [0]))
    add("terminal_length", "Terminal row, finish length.", F(["r1"], [[14]], [LEN], [3], [2], [1]))
    add("terminal_abort_empty", "TS-O07 / validation abort: empty ids, 'abort', completion 0.", F(["bad"], [[]], [ABORT], [3], [0], [0]))
    add("terminal_no_new_ids", "Terminal stop row with no new ids.", F(["r1"], [[]], [STOP], [3], [5], [0]))
    add("finish_string_form", "A finish reason that is already a string is passed through by str().",
        F(["r1"], [[1]], ["stop"], [3], [1], [0]))
    add("finish_empty_dict", "An empty finish dict is falsy: ''.", F(["r1"], [[1]], [{}], [3], [1], [0]))
    add("finish_dict_without_type", "A finish dict without 'type' becomes ''.", F(["r1"], [[1]], [{"matched": 2}], [3], [1], [0]))
    add("speculative_multi_ids", "A running row carrying 4 ids (speculative decoding / stream interval).",
        F(["r1"], [[20, 21, 22, 23]], [None], [3], [5], [2]))
    add("two_rows_mixed", "Two rows: one running, one terminal.",
        F(["a", "b"], [[10], [20, 21]], [None, STOP], [3, 4], [1, 2], [0, 1]))
    add("three_rows_all_finishes", "Three rows: length, abort, stop.",
        F(["a", "b", "c"], [[1], [], [2]], [LEN, ABORT, STOP], [2, 2, 2], [3, 0, 4], [0, 0, 1]))
    add("many_rows", "Eighteen rows (array16 columns).",
        F([f"r{i}" for i in range(18)], [[i] for i in range(18)], [None] * 18, [3] * 18, [1] * 18, [0] * 18))
    add("empty_batch", "A batch with no rows.", F([], [], [], [], [], []))
    add("logprobs_chunk", "Row with sampled-token logprobs [-0.5] over [10].",
        F(["r1"], [[10]], [None], [3], [1], [0], [[-0.5]], [[10]]))
    add("logprobs_multi", "Two rows, one with logprobs (two ids), one without ([]).",
        F(["a", "b"], [[10, 11], [12]], [None, LEN], [3, 3], [2, 1], [0, 0], [[-0.5, -1.25], []], [[10, 11], []]))
    add("logprobs_none_columns", "BatchTokenIDOut logprob columns None: from_full writes [] per row.",
        F(["a", "b"], [[1], [2]], [None, None], [3, 3], [1, 1], [0, 0], None, None))
    add("logprobs_non_finite", "Logprob values -inf and a very small double.",
        F(["r1"], [[10, 11]], [None], [3], [2], [0], [[float("-inf"), -1e-300]], [[10, 11]]))
    if env.has_engine_index:
        add("engine_index_one", "engine_index 1 (DP rank 1's identity).", F(["r1"], [[10]], [None], [3], [1], [0]), engine_index=1)
    if env.has_load_tail:
        add("load_tail", "TS reference §15.6: terminal 'stop' row with engine_index 0 and load (5, 2, 120, 1000).",
            F(["r1"], [[11]], [STOP], [3], [2], [0]), load=(5, 2, 120, 1000))
        add("load_tail_large", "Load tail with large counts and engine_index 65535.",
            F(["r1"], [[10]], [None], [3], [1], [0]), engine_index=65535, load=(1000, 70000, 1 << 20, 1 << 33))
        add("smg_vector_vec1", "SMG's pinned output (vec-1, [10,11], length, 3/2/1, logprobs, engine_index 1, load 2/5/100/400) built by TokenSpeed 0.1.1.",
            F(["vec-1"], [[10, 11]], [LEN], [3], [2], [1], [[-0.5, -0.25]], [[10, 11]]), engine_index=1, load=(2, 5, 100, 400))
    else:
        add("smg_vector_vec1", f"SMG's pinned 9-element output (vec-1, [10,11], length, 3/2/1, logprobs) built by TokenSpeed {env.version}.",
            F(["vec-1"], [[10, 11]], [LEN], [3], [2], [1], [[-0.5, -0.25]], [[10, 11]]))
    add("large_token_ids", "Token ids and counts beyond 16 bits.",
        F(["r1"], [[70000, 4294967295]], [None], [100000], [2], [65536]))
    add("unicode_rid", "A non-ASCII rid.", F(["req-é-漢-🙂"], [[1]], [None], [1], [1], [0]))


INIT_IPC = "ipc:///tmp/smg-zmq/ts0.ipc"


def build_handshake_and_ready(b: Builder):
    env = b.env
    zw = env.zw

    def init_bytes(inputs, outputs, **kw):
        pc = kw.pop("parallel_config", {})
        return zw.encode(zw.WireHandshakeInitMessage(addresses=zw.WireHandshakeAddresses(inputs=inputs, outputs=outputs, **kw), parallel_config=pc))

    init_default = init_bytes([INIT_IPC + "-in.sock"], [INIT_IPC + "-out.sock"])
    b.add(Case("handshake", "init_ipc", "HandshakeInit", "TS reference §15.4: INIT for ipc:///tmp/smg-zmq/ts0.ipc, built with TokenSpeed's INIT classes.", [init_default]))
    b.add(Case("handshake", "init_tcp", "HandshakeInit", "INIT with tcp addresses.",
               [init_bytes(["tcp://127.0.0.1:5555"], ["tcp://127.0.0.1:5556"])]))
    b.add(Case("handshake", "init_many_addresses", "HandshakeInit", "INIT with two inputs and two outputs (the engine uses element 0 of each).",
               [init_bytes(["ipc:///a-in", "ipc:///b-in"], ["ipc:///a-out", "ipc:///b-out"])]))
    b.add(Case("handshake", "init_coordinator", "HandshakeInit", "INIT with coordinator and stats-publish addresses and a parallel_config.",
               [init_bytes(["ipc:///x-in"], ["ipc:///x-out"], coordinator_input="tcp://127.0.0.1:1", coordinator_output="tcp://127.0.0.1:2",
                           frontend_stats_publish_address="tcp://127.0.0.1:3", parallel_config={"data_parallel_size": 2, "hash": "abc", "x": [1, 2.5, None]})]))
    b.add(Case("handshake", "init_no_inputs", "HandshakeInit", "INIT with an empty inputs list: decodes, the engine refuses to go on.",
               [init_bytes([], ["ipc:///x-out"])]))
    b.add(Case("handshake", "init_no_outputs", "HandshakeInit", "INIT with an empty outputs list: the engine refuses to go on.",
               [init_bytes(["ipc:///x-in"], [])]))
    b.add(Case("handshake", "init_defaults", "HandshakeInit", "INIT built from WireHandshakeAddresses() defaults (empty lists): refused.",
               [zw.encode(zw.WireHandshakeInitMessage(addresses=zw.WireHandshakeAddresses()))]))

    # The engine's own handshake run (connect_msgpack_engine_for_loop on fake
    # sockets): HELLO, READY and the ready response exactly as it sends them.
    def run(name, doc, **loop_kw):
        loop = env.fake_loop(**loop_kw)
        got = env.run_handshake(loop, init_default)
        info = {"engine_identity": got["identity"].hex(), "input_address": got["input_address"]}
        b.add(Case("ready", name, "EngineCoreReadyResponse", doc, [got["ready_response"]], extra={"provenance": {"engine_run": info}}))
        return got

    size = "granularity" if env.ready_size_key == "prefix_granularity" else "block_size"
    got = run("default_bf16", f"Ready response of a bf16 engine (context 4096, 1000 pages, {size} 16, chunked prefill 8192).")
    b.add(Case("handshake", "hello", "HandshakeHello", "TS reference §15.3: HELLO as connect_msgpack_engine sends it.", [got["hello"]]))
    b.add(Case("handshake", "ready", "HandshakeReady", "READY as connect_msgpack_engine sends it.", [got["ready"]]))
    if not env.has_loop_handshake:
        # 08-03: the ready response's fields are set by EventLoop (see
        # Env.connect); only plain values are run, not its mappings.
        run("large_values", "Large geometry values (pages beyond 32 bits, context 1<<20, block_size 64).", num_device_pages=1 << 33,
            context_len=1 << 20, prefix_granularity=64, max_num_seqs=1024, chunked_prefill_size=16384, max_total_num_tokens=1 << 35,
            zmq_engine_index=7)
        add_ready_structs(b, env)
        return
    run("fp16", "Ready response of an fp16 engine (dtype 'torch.float16' mapped to 'float16').", dtype="torch.float16")
    run("fp32_short_name", "dtype 'fp32' mapped to 'float32'.", dtype="fp32")
    run("chunked_prefill_disabled", "chunked_prefill_size -1 clamped to max_num_batched_tokens 0.", chunked_prefill_size=-1)
    run("dp_rank_one", "DP size 2, rank 1, TP 2, world 4: identity 01 00 (see provenance).", dp_size=2, dp_rank=1, attn_tp_size=2, world_size=4)
    run("multimodal_dtype", "multimodal_encoder_dtype 'bfloat16', decode context parallel 2.", multimodal_encoder_dtype="bfloat16", decode_context_parallel_size=2)
    run("no_served_name", "served_model_name None: instance_id is the model path; kv_cache_size_tokens None.",
        served_model_name=None, max_total_num_tokens=None)
    run("large_values", "Large geometry values (pages beyond 32 bits, context 1<<20).", num_device_pages=1 << 33, context_len=1 << 20,
        prefix_granularity=64, max_num_seqs=1024, chunked_prefill_size=16384, max_total_num_tokens=1 << 35, zmq_engine_index=7)
    add_ready_structs(b, env)


def add_ready_structs(b: Builder, env):
    zw = env.zw
    b.add(Case("ready", "struct_defaults", "EngineCoreReadyResponse", "WireEngineCoreReadyResponse() with every field at its default.",
               [zw.encode(zw.WireEngineCoreReadyResponse())]))
    b.add(Case("ready", "kv_fields_set", "EngineCoreReadyResponse", "kv_cache_max_concurrency and kv_events_config set.",
               [zw.encode(zw.WireEngineCoreReadyResponse(max_model_len=64, num_gpu_blocks=8, **{env.ready_size_key: 16},
                                                         vllm_version=f"tokenspeed-{env.version_py}", kv_cache_size_tokens=128,
                                                         kv_cache_max_concurrency=2.5, kv_events_config={"enable": False, "topic": "kv"},
                                                         dp_stats_address="tcp://127.0.0.1:9"))]))


def build_all(env):
    b = Builder(env)
    build_requests(b)
    build_aborts(b)
    build_outputs(b)
    build_handshake_and_ready(b)
    import ts_mutants

    ts_mutants.build(b)
    return b.cases
