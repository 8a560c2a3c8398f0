"""Golden cases of kind ``tokenspeed_translation``: gateway-level requests
run through TokenSpeed 0.1.1's own request handler.

For each case a gateway request (the JSON shape of
``engine_protocol::translate::GenerateRequest``) is mapped onto TokenSpeed's
``GenerateReqInput`` by the field table ``to_generate_req_input`` below (the
gateway's field mapping, documented in docs/translation.md, "TokenSpeed"),
then handed to TokenSpeed's own code, in the order ``AsyncLLM.generate_request``
runs it:

1. ``InputProcessor.validate_request(obj)``;
2. ``obj.normalize_batch_and_arguments()``;
3. ``InputProcessor.tokenize_one_request(obj)`` (input limit, max_new_tokens,
   ``SamplingParams`` construction, ``resolve_seed``, ``normalize``,
   ``verify``, the logprob gates);
4. the resulting ``TokenizedGenerateReqInput`` encoded by TokenSpeed's own
   ``io_struct.MsgpackEncoder``.

The case records those payload bytes (and their decoded view), or the
exception TokenSpeed raised. Nothing expected is computed here.

The engine the handler runs against is a stand-in holding only the
attributes the handler reads (``StubEngine``): the engine behind a gateway
(``skip_tokenizer_init``: no tokenizer, token-id prompts), no attention DP,
no disaggregation, no reasoning parser, ``max_req_input_len`` unset (so the
handler's own fallback ``context_len - 1`` applies), the vocabulary of
``golden/tiny`` (512) and no prompt-logprob support (the msgpack wire has no
prompt-logprob columns, docs/tokenspeed-wire.md §5.1).
``created_time`` (the handler's ``time.time()``) is pinned per case.

Usage (from the repository root, see regenerate-tokenspeed.sh):
    python golden/generate/tokenspeed/generate_translation.py --out golden/tokenspeed/0.1.1/translation [--check]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import sys
import types
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import ts_shim  # noqa: E402

ts_shim.install()

import msgspec  # noqa: E402

CREATED_TIME = 1767225600.25
VOCAB = 512
GENERATOR = "golden/generate/tokenspeed/generate_translation.py"


class _Capture(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.records: list[str] = []

    def emit(self, record):
        self.records.append(record.getMessage())


class StubEngine:
    """The attributes of ``AsyncLLM`` that ``InputProcessor`` reads."""

    def __init__(self, max_model_len: int, enable_output_logprobs: bool):
        self.is_generation = True
        self.tokenizer = None
        self.context_len = max_model_len
        self.max_req_input_len = None
        self.supports_prompt_logprobs = False
        self.server_args = types.SimpleNamespace(
            reasoning_parser=None,
            enable_output_logprobs=enable_output_logprobs,
            enable_prefix_caching=True,
            disaggregation_mode="null",
            language_model_only=False,
            mapping=types.SimpleNamespace(has_attn_dp=False),
        )
        self.model_config = types.SimpleNamespace(
            vocab_size=VOCAB, is_multimodal=False, is_multimodal_active=False
        )
        self.logger = logging.getLogger("ts-translation-golden")
        self.logger.propagate = False
        self.capture = _Capture()
        self.logger.handlers = [self.capture]
        self.logger.setLevel(logging.WARNING)


# Gateway field -> TokenSpeed SamplingParams key (same name when absent).
SAMPLING_NAMES = {
    "max_tokens": "max_new_tokens",
    "min_tokens": "min_new_tokens",
    "include_stop_str_in_output": "no_stop_trim",
}
SAMPLING_SAME = [
    "temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty",
    "repetition_penalty", "seed", "n", "ignore_eos", "skip_special_tokens",
    "spaces_between_special_tokens", "logprobs", "allowed_token_ids",
]
CONSTRAINT_NAMES = {
    "json": "json_schema",
    "regex": "regex",
    "grammar": "ebnf",
    "structural_tag": "structural_tag",
    # No TokenSpeed field: passed under their own names, TokenSpeed refuses.
    "choice": "choice",
    "json_object": "json_object",
}


def to_generate_req_input(io, req: dict, stream: bool):
    """The gateway's field mapping onto TokenSpeed's request API."""
    sp: dict[str, Any] = {}
    for k in SAMPLING_SAME:
        if k in req:
            sp[k] = req[k]
    for k, v in SAMPLING_NAMES.items():
        if k in req:
            sp[v] = req[k]
    if req.get("stop"):
        sp["stop"] = list(req["stop"])
    if req.get("stop_token_ids"):
        sp["stop_token_ids"] = list(req["stop_token_ids"])
    if "logit_bias" in req:
        sp["logit_bias"] = {str(k): float(v) for k, v in req["logit_bias"].items()}
    for k, v in (req.get("structured_outputs") or {}).items():
        if v is None:
            continue
        if k == "json" and not isinstance(v, str):
            v = json.dumps(v, separators=(",", ":"), ensure_ascii=False)
        sp[CONSTRAINT_NAMES[k]] = v
    kw: dict[str, Any] = {}
    if req.get("prompt_logprobs") is not None:
        # The only way to ask TokenSpeed for prompt logprobs.
        kw.update(return_logprob=True, logprob_start_len=0)
    obj = io.GenerateReqInput(input_ids=list(req["prompt_token_ids"]), sampling_params=sp, stream=stream, **kw)
    obj.rid = req.get("request_id", "t")
    return obj


# (name, doc, request, engine overrides)
def cases() -> list[tuple[str, str, dict, dict]]:
    P = [320, 313, 18]
    out: list[tuple[str, str, dict, dict]] = []

    def add(name, doc, req, **engine):
        r = {"request_id": f"ts-{name}", "prompt_token_ids": P}
        r.update(req)
        out.append((name, doc, r, engine))

    add("default", "no sampling options: max_new_tokens is the room left in the context, top_k 1<<30, seed crc32(rid)", {})
    add("max_tokens", "an explicit max_tokens within the room", {"max_tokens": 4})
    add("max_tokens_zero", "max_tokens 0 is accepted", {"max_tokens": 0})
    add("max_tokens_exact_room", "max_tokens equal to the room left", {"max_tokens": 61})
    add("max_tokens_over_room", "max_tokens past the context is cut to the room left (the handler warns)", {"max_tokens": 500})
    add("max_tokens_negative", "a negative max_tokens is refused by verify", {"max_tokens": -1})
    add("prompt_longest", "a prompt of max_model_len - 1 tokens fits, with one token of room",
        {"prompt_token_ids": list(range(5, 68))})
    add("prompt_too_long", "a prompt of max_model_len tokens exceeds the input limit (context_len - 1)",
        {"prompt_token_ids": list(range(5, 69))})
    add("prompt_out_of_vocab", "a prompt id past the vocabulary: TokenSpeed's handler does not check it",
        {"prompt_token_ids": [1, 600]})
    add("large_context", "a 4096-token context", {}, max_model_len=4096)
    add("temperature_zero", "temperature 0 collapses to greedy: temperature 1.0, top_k 1, seed 0", {"temperature": 0.0})
    add("temperature_zero_with_seed", "greedy pins the seed to 0 even when the client sets one",
        {"temperature": 0.0, "seed": 7})
    add("temperature_below_threshold", "a temperature below 1e-6 is greedy", {"temperature": 5e-7})
    add("temperature_negative", "a negative temperature collapses to greedy before verify sees it",
        {"temperature": -0.5})
    add("top_k_one", "top_k 1 is greedy: seed 0", {"top_k": 1, "temperature": 0.8})
    add("sampling_mix", "temperature, top_p, top_k, min_p as f64", {"temperature": 0.7, "top_p": 0.9, "top_k": 40, "min_p": 0.05})
    add("top_k_127", "top_k 127 is below the fused kernel limit", {"top_k": 127})
    add("top_k_128", "top_k 128 reaches the fused kernel limit: refused", {"top_k": 128})
    add("top_k_zero", "top_k 0 is refused", {"top_k": 0})
    add("top_k_minus_one", "top_k -1 becomes 1<<30", {"top_k": -1})
    add("top_k_sentinel", "top_k 1<<30 is the sentinel itself: accepted", {"top_k": 1 << 30})
    add("top_p_zero", "top_p 0 is refused", {"top_p": 0.0})
    add("top_p_over_one", "top_p above 1 is refused", {"top_p": 1.5})
    add("min_p_over_one", "min_p above 1 is refused", {"min_p": 1.5})
    add("penalties", "penalties in range", {"presence_penalty": 0.5, "frequency_penalty": -1.0, "repetition_penalty": 1.2})
    add("presence_penalty_out_of_range", "presence_penalty above 2 is refused", {"presence_penalty": 2.5})
    add("frequency_penalty_out_of_range", "frequency_penalty below -2 is refused", {"frequency_penalty": -3.0})
    add("repetition_penalty_out_of_range", "repetition_penalty above 2 is refused", {"repetition_penalty": 2.5})
    add("repetition_penalty_zero", "repetition_penalty 0 is accepted", {"repetition_penalty": 0.0})
    add("min_tokens", "min_tokens within max_tokens", {"min_tokens": 3, "max_tokens": 4})
    add("min_tokens_over_max", "min_tokens above max_tokens is refused", {"min_tokens": 5, "max_tokens": 4})
    add("min_tokens_negative", "a negative min_tokens is refused", {"min_tokens": -1})
    add("seed", "an explicit seed is kept", {"seed": 42, "temperature": 0.9})
    add("stop_strings", "stop strings: TokenSpeed's frontend sends them (stop, stop_strs, stop_str_max_len in characters)",
        {"stop": ["\n", "END", "é!"]})
    add("stop_token_ids", "stop_token_ids travel as a set", {"stop_token_ids": [9, 3, 3]})
    add("flags", "ignore_eos, skip_special_tokens, spaces_between_special_tokens, include_stop_str_in_output",
        {"ignore_eos": True, "skip_special_tokens": False, "spaces_between_special_tokens": False,
         "include_stop_str_in_output": True})
    add("logit_bias", "logit_bias keys as decimal strings", {"logit_bias": {"5": 1.5, "7": -100.0}})
    add("logit_bias_out_of_vocab", "a logit_bias key past the vocabulary is refused", {"logit_bias": {"512": 1.0}})
    add("logit_bias_negative_key", "a negative logit_bias key is refused", {"logit_bias": {"-1": 1.0}})
    add("logprobs_zero", "logprobs 0: the sampled token's logprob (return_logprob true)", {"logprobs": 0})
    add("logprobs_one", "logprobs 1 (a top-1 list) is refused", {"logprobs": 1})
    add("logprobs_five", "top-5 logprobs are refused", {"logprobs": 5})
    add("logprobs_minus_one", "full-vocabulary logprobs are refused", {"logprobs": -1})
    add("logprobs_disabled", "logprobs asked of an engine without --enable-output-logprobs", {"logprobs": 0},
        enable_output_logprobs=False)
    add("logprobs_disabled_not_asked", "an engine without --enable-output-logprobs takes requests that ask for none",
        {"max_tokens": 3}, enable_output_logprobs=False)
    add("prompt_logprobs_disabled", "prompt logprobs asked of an engine without --enable-output-logprobs",
        {"prompt_logprobs": 0}, enable_output_logprobs=False)
    add("prompt_logprobs", "prompt logprobs are refused", {"prompt_logprobs": 0})
    add("prompt_logprobs_top", "prompt top-k logprobs are refused", {"prompt_logprobs": 5})
    add("allowed_token_ids", "TokenSpeed has no allowed_token_ids", {"allowed_token_ids": [5, 6]})
    add("json_schema_text", "a JSON schema given as text", {"structured_outputs": {"json": "{\"type\":\"object\"}"}})
    add("json_schema_object", "a JSON schema given as an object (the gateway serialises it compactly)",
        {"structured_outputs": {"json": {"type": "object", "properties": {"a": {"type": "integer"}}}}})
    add("regex", "a regex constraint", {"structured_outputs": {"regex": "[a-z]+"}})
    add("grammar", "a grammar travels as ebnf", {"structured_outputs": {"grammar": "root ::= \"a\" | \"b\""}})
    add("structural_tag", "a structural tag", {"structured_outputs": {"structural_tag": "{\"type\":\"structural_tag\"}"}})
    add("json_and_regex", "two exclusive constraints are refused", {"structured_outputs": {"json": "{}", "regex": "a"}})
    add("regex_and_grammar", "two exclusive constraints are refused", {"structured_outputs": {"regex": "a", "grammar": "root ::= \"a\""}})
    add("choice", "TokenSpeed has no choice constraint", {"structured_outputs": {"choice": ["a", "b"]}})
    add("json_object", "TokenSpeed has no json_object constraint", {"structured_outputs": {"json_object": True}})
    add("temperature_high", "TokenSpeed sets no upper bound on temperature", {"temperature": 2.5})
    add("seed_large", "a seed past 32 bits is kept", {"seed": 1 << 40, "temperature": 0.9})
    add("greedy_logprobs", "greedy sampling with the sampled token's logprob", {"temperature": 0.0, "logprobs": 0})
    add("logit_bias_many", "several logit_bias entries keep their order", {"logit_bias": {"9": 0.5, "3": -1.0, "511": 2.0}})
    add("min_tokens_equal_max", "min_tokens equal to max_tokens", {"min_tokens": 4, "max_tokens": 4})
    add("prompt_one_token", "a one-token prompt: logprob_start_len 0", {"prompt_token_ids": [7], "logprobs": 0})
    add("stop_strings_and_ids", "stop strings and stop ids together", {"stop": ["x"], "stop_token_ids": [5], "min_tokens": 1})
    add("n_one", "n 1 is one request", {"n": 1})
    add("not_streamed", "stream false", {"max_tokens": 2}, stream=False)
    return out


def plain(v):
    if isinstance(v, msgspec.Struct):
        return {f: plain(getattr(v, f)) for f in v.__struct_fields__}
    if isinstance(v, (set, frozenset)):
        return sorted(plain(x) for x in v)
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    return v


def run_case(io, ipm, name, doc, req, engine_kw, info) -> dict:
    max_model_len = engine_kw.get("max_model_len", 64)
    enable = engine_kw.get("enable_output_logprobs", True)
    stream = engine_kw.get("stream", True)
    eng = StubEngine(max_model_len, enable)
    proc = ipm.InputProcessor(eng)
    expected: dict[str, Any]
    try:
        obj = to_generate_req_input(io, req, stream)
        proc.validate_request(obj)
        obj.normalize_batch_and_arguments()
        if not obj.is_single:
            raise RuntimeError(f"{name}: not a single request")
        tok = asyncio.run(proc.tokenize_one_request(obj))
        frames = [bytes(f) for f in io.MsgpackEncoder().encode(tok)]
        if len(frames) != 1:
            raise RuntimeError(f"{name}: the request has aux frames")
        expected = {"payload": frames[0].hex(), "value": plain(tok)}
        if eng.capture.records:
            expected["warnings"] = list(eng.capture.records)
    except (ValueError, TypeError) as e:
        expected = {"error": {"type": type(e).__name__, "message": str(e)}}
    ts_shim.assert_untouched()
    return {
        "case": f"translation/{name}",
        "dialect": "tokenspeed",
        "version": info["tokenspeed"],
        "kind": "tokenspeed_translation",
        "doc": doc,
        "provenance": {
            "source": "tokenspeed-frontend",
            **info,
            "pythonhashseed": os.environ.get("PYTHONHASHSEED", ""),
            "generator": GENERATOR,
            "handler": "tokenspeed.runtime.engine.input_processor.InputProcessor.tokenize_one_request",
        },
        "input": {
            "tokenizer": "tiny",
            "max_model_len": max_model_len,
            "vocab_size": VOCAB,
            "enable_output_logprobs": enable,
            "stream": stream,
            "created_time": CREATED_TIME,
            "request": req,
        },
        "expected": expected,
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--check", action="store_true", help="fail unless the tree on disk equals what is generated")
    a = ap.parse_args()
    logging.getLogger("tokenspeed").setLevel(logging.CRITICAL)
    import tokenspeed.runtime.engine.input_processor as ipm
    import tokenspeed.runtime.engine.io_struct as io
    from tokenspeed.version import __version__

    # The handler stamps created_time with time.time(); pinned per case.
    ipm.time = types.SimpleNamespace(time=lambda: CREATED_TIME)
    info = {
        "tokenspeed": __version__,
        "msgspec": msgspec.__version__,
        "python": platform.python_version(),
    }
    files = {}
    for name, doc, req, eng in cases():
        files[f"{name}.json"] = json.dumps(run_case(io, ipm, name, doc, req, eng, info), indent=1, ensure_ascii=False) + "\n"
    if a.check:
        bad = []
        for f, text in files.items():
            p = os.path.join(a.out, f)
            if not os.path.exists(p) or open(p, encoding="utf-8").read() != text:
                bad.append(f)
        extra = sorted(set(os.listdir(a.out)) - set(files)) if os.path.isdir(a.out) else []
        if bad or extra:
            print(f"translation goldens differ: {bad} extra: {extra}", file=sys.stderr)
            return 1
        print(f"{len(files)} tokenspeed_translation cases reproduce")
        return 0
    os.makedirs(a.out, exist_ok=True)
    for f in os.listdir(a.out):
        if f.endswith(".json") and f not in files:
            os.remove(os.path.join(a.out, f))
    for f, text in files.items():
        with open(os.path.join(a.out, f), "w", encoding="utf-8") as fh:
            fh.write(text)
    print(f"wrote {len(files)} tokenspeed_translation cases to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
