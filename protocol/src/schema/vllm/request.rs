//! The structs of a request (client → engine; docs/wire-protocol.md
//! §7.1-§7.12): `EngineCoreRequest` (a positional array of every field), the
//! `SamplingParams` map of the fields that differ from their defaults, the
//! dataclasses it nests (`StructuredOutputsParams`, repetition detection),
//! LoRA, pooling and multimodal parts, KV hints, and the UTILITY and
//! START_DP_WAVE requests. 0.33.0 added `PoolingParams.late_chunking_params`.

use super::*;

/// `PlaceholderRange`: a dataclass.
pub static PLACEHOLDER_RANGE: StructSchema = StructSchema {
    name: "PlaceholderRange",
    layout: Layout::FullMap,
    fields: &[f("offset", &INT, D::Required), f("length", &INT, D::Required), f("is_embed", &OPT_TORCH, D::Nil)],
    validate: None,
    tag: None,
};

/// One element of a `MultiModalKwargsItem` as vLLM's encoder hook writes
/// it: `{"data": NestedTensors | nil, "field": [factory_name, kwargs]}`.
pub static MULTI_MODAL_FIELD_ELEM: StructSchema = StructSchema {
    name: "MultiModalFieldElem",
    layout: Layout::OpenMap,
    fields: &[f("data", &Ty::Optional(&Ty::NestedTensors), D::Required), f("field", &ANY, D::Required)],
    validate: None,
    tag: None,
};
static MM_KWARGS_ITEM: Ty = Ty::Dict(&STR, &Ty::Struct(&MULTI_MODAL_FIELD_ELEM));
static OPT_MM_KWARGS_ITEM: Ty = Ty::Optional(&MM_KWARGS_ITEM);

/// `MultiModalFeatureSpec`: a dataclass. `data` is a `MultiModalKwargsItem`,
/// which vLLM's encoder hook writes as a map of kwarg name to
/// `{data, field}` (nil when the engine's cache already holds the item).
pub static MULTI_MODAL_FEATURE_SPEC: StructSchema = StructSchema {
    name: "MultiModalFeatureSpec",
    layout: Layout::FullMap,
    fields: &[
        f("data", &OPT_MM_KWARGS_ITEM, D::Required),
        f("modality", &STR, D::Required),
        f("identifier", &STR, D::Required),
        f("mm_position", &Ty::Struct(&PLACEHOLDER_RANGE), D::Required),
        f("mm_hash", &OPT_STR, D::Nil),
    ],
    validate: None,
    tag: None,
};
static OPT_LIST_MM_FEATURES: Ty = Ty::Optional(&Ty::List(&Ty::Struct(&MULTI_MODAL_FEATURE_SPEC)));

/// `LateInteractionParams`: array_like.
pub static LATE_INTERACTION_PARAMS: StructSchema = StructSchema {
    name: "LateInteractionParams",
    layout: Layout::Positional,
    fields: &[f("mode", &STR, D::Required), f("query_key", &STR, D::Required), f("query_uses", &OPT_INT, D::Nil)],
    validate: None,
    tag: None,
};

/// `LateChunkingParams` (0.33): array_like.
pub static LATE_CHUNKING_PARAMS: StructSchema = StructSchema {
    name: "LateChunkingParams",
    layout: Layout::Positional,
    fields: &[f("chunk_size", &INT, D::Required)],
    validate: None,
    tag: None,
};

static POOLING_TASK: Ty =
    Ty::StrLiteral(&["classify", "embed", "embed&token_classify", "plugin", "token_classify", "token_embed"]);
static OPT_POOLING_TASK: Ty = Ty::Optional(&POOLING_TASK);
static OPT_LATE_INTERACTION: Ty = Ty::Optional(&Ty::Struct(&LATE_INTERACTION_PARAMS));
static OPT_LATE_CHUNKING: Ty = Ty::Optional(&Ty::Struct(&LATE_CHUNKING_PARAMS));

macro_rules! pooling_params_fields {
    ($($extra:expr),*) => {
        &[
            f("use_activation", &OPT_BOOL, D::Nil),
            f("dimensions", &OPT_INT, D::Nil),
            f("step_tag_id", &OPT_INT, D::Nil),
            f("returned_token_ids", &OPT_LIST_INT, D::Nil),
            f("task", &OPT_POOLING_TASK, D::Nil),
            f("requires_token_ids", &BOOL, D::Bool(false)),
            f("skip_reading_prefix_cache", &OPT_BOOL, D::Nil),
            f("late_interaction_params", &OPT_LATE_INTERACTION, D::Nil),
            f("extra_kwargs", &OPT_DICT_STR_ANY, D::Nil),
            f("output_kind", &REQUEST_OUTPUT_KIND_TY, D::Int(2)),
            $($extra),*
        ]
    };
}

/// `PoolingParams` 0.32: array_like, 10 elements.
pub static POOLING_PARAMS_0_32: StructSchema = StructSchema {
    name: "PoolingParams",
    layout: Layout::Positional,
    fields: pooling_params_fields!(),
    validate: None,
    tag: None,
};

/// `PoolingParams` 0.33: array_like, 11 elements (`late_chunking_params`).
pub static POOLING_PARAMS_0_33: StructSchema = StructSchema {
    name: "PoolingParams",
    layout: Layout::Positional,
    fields: pooling_params_fields!(f("late_chunking_params", &OPT_LATE_CHUNKING, D::Nil)),
    validate: None,
    tag: None,
};

/// `KvHintAction`: a map Struct.
pub static KV_HINT_ACTION: StructSchema = StructSchema {
    name: "KvHintAction",
    layout: Layout::FullMap,
    fields: &[
        f("action_id", &STR, D::Required),
        f("action_type", &STR, D::Required),
        f("action_version", &STR, D::Required),
        f("payload", &DICT_STR_ANY, D::Required),
    ],
    validate: None,
    tag: None,
};

/// `KvHintsEnvelope` (0.31+): a map Struct.
pub static KV_HINTS_ENVELOPE: StructSchema = StructSchema {
    name: "KvHintsEnvelope",
    layout: Layout::FullMap,
    fields: &[
        f("protocol_version", &STR, D::Required),
        f("message_id", &STR, D::Required),
        f("actions", &Ty::List(&Ty::Struct(&KV_HINT_ACTION)), D::Required),
    ],
    validate: None,
    tag: None,
};
static OPT_KV_HINTS: Ty = Ty::Optional(&Ty::Struct(&KV_HINTS_ENVELOPE));
/// `StructuredOutputsParams`: a dataclass, sent as a map of all 11 fields.
pub static STRUCTURED_OUTPUTS_PARAMS: StructSchema = StructSchema {
    name: "StructuredOutputsParams",
    layout: Layout::FullMap,
    fields: &[
        f("json", &OPT_STR_OR_DICT, D::Nil),
        f("regex", &OPT_STR, D::Nil),
        f("choice", &OPT_LIST_STR, D::Nil),
        f("grammar", &OPT_STR, D::Nil),
        f("json_object", &OPT_BOOL, D::Nil),
        f("disable_any_whitespace", &BOOL, D::Bool(false)),
        f("disable_additional_properties", &BOOL, D::Bool(false)),
        f("whitespace_pattern", &OPT_STR, D::Nil),
        f("structural_tag", &OPT_STR, D::Nil),
        f("_backend", &OPT_STR, D::Nil),
        f("_backend_was_auto", &BOOL, D::Bool(false)),
    ],
    validate: Some(Rules::StructuredOutputsParams),
    tag: None,
};
static OPT_STRUCTURED_OUTPUTS: Ty = Ty::Optional(&Ty::Struct(&STRUCTURED_OUTPUTS_PARAMS));

/// `RepetitionDetectionParams`: a dataclass (map).
pub static REPETITION_DETECTION_PARAMS: StructSchema = StructSchema {
    name: "RepetitionDetectionParams",
    layout: Layout::FullMap,
    fields: &[
        f("max_pattern_size", &INT, D::Int(0)),
        f("min_pattern_size", &INT, D::Int(0)),
        f("min_count", &INT, D::Int(0)),
    ],
    validate: Some(Rules::RepetitionDetectionParams),
    tag: None,
};
static OPT_REPETITION_DETECTION: Ty = Ty::Optional(&Ty::Struct(&REPETITION_DETECTION_PARAMS));

/// `SamplingParams`: msgspec Struct, `omit_defaults=True`, 43 fields, so a
/// sparse map with a `map16` header.
pub static SAMPLING_PARAMS: StructSchema = StructSchema {
    name: "SamplingParams",
    layout: Layout::SparseMap,
    fields: &[
        f("n", &INT, D::Int(1)),
        f("presence_penalty", &FLOAT, D::Float(0.0)),
        f("frequency_penalty", &FLOAT, D::Float(0.0)),
        f("repetition_penalty", &FLOAT, D::Float(1.0)),
        f("temperature", &FLOAT, D::Float(1.0)),
        f("watermarking", &OPT_BOOL, D::Nil),
        f("top_p", &FLOAT, D::Float(1.0)),
        f("top_k", &INT, D::Int(0)),
        f("min_p", &FLOAT, D::Float(0.0)),
        f("seed", &OPT_INT, D::Nil),
        f("stop", &OPT_STR_OR_LIST_STR, D::Nil),
        f("stop_token_ids", &OPT_LIST_INT, D::Nil),
        f("ignore_eos", &BOOL, D::Bool(false)),
        f("max_tokens", &OPT_INT, D::Int(16)),
        f("min_tokens", &INT, D::Int(0)),
        f("logprobs", &OPT_INT, D::Nil),
        f("prompt_logprobs", &OPT_INT, D::Nil),
        f("prompt_logprob_token_ids", &OPT_NP, D::Nil),
        f("prompt_logprob_start", &OPT_INT, D::Nil),
        f("logprob_token_ids", &OPT_LIST_INT, D::Nil),
        f("flat_logprobs", &BOOL, D::Bool(false)),
        f("detokenize", &BOOL, D::Bool(true)),
        f("skip_special_tokens", &BOOL, D::Bool(true)),
        f("spaces_between_special_tokens", &BOOL, D::Bool(true)),
        f("include_stop_str_in_output", &BOOL, D::Bool(false)),
        f("output_kind", &REQUEST_OUTPUT_KIND_TY, D::Int(0)),
        f("stream_interval", &OPT_INT, D::Nil),
        f("skip_clone", &BOOL, D::Bool(false)),
        f("output_text_buffer_length", &INT, D::Int(0)),
        f("_eos_token_id", &OPT_INT, D::Nil),
        f("_all_stop_token_ids", &SET_INT, D::EmptySet),
        f("_watermarking_skipped", &BOOL, D::Bool(false)),
        f("structured_outputs", &OPT_STRUCTURED_OUTPUTS, D::Nil),
        f("logit_bias", &OPT_DICT_INT_FLOAT, D::Nil),
        f("allowed_token_ids", &OPT_LIST_INT, D::Nil),
        f("extra_args", &OPT_DICT_STR_ANY, D::Nil),
        f("bad_words", &OPT_LIST_STR, D::Nil),
        f("_bad_words_token_ids", &OPT_LIST_LIST_INT, D::Nil),
        f("skip_reading_prefix_cache", &OPT_BOOL, D::Nil),
        f("thinking_token_budget", &OPT_INT, D::Nil),
        f("repetition_detection", &OPT_REPETITION_DETECTION, D::Nil),
        f("routed_experts_prompt_start", &INT, D::Int(0)),
        f("trace_decode_token_ids", &OPT_LIST_INT, D::Nil),
    ],
    validate: Some(Rules::SamplingParams),
    tag: None,
};
static OPT_SAMPLING_PARAMS: Ty = Ty::Optional(&Ty::Struct(&SAMPLING_PARAMS));

/// `LoRARequest`: array_like msgspec Struct, 6 elements in 0.32/0.33
/// (`tensorizer_config_dict`, the 5th of 7 up to 0.31, removed: a
/// positional break from 0.31).
pub static LORA_REQUEST: StructSchema = StructSchema {
    name: "LoRARequest",
    layout: Layout::Positional,
    fields: &[
        f("lora_name", &STR, D::Required),
        f("lora_int_id", &INT, D::Required),
        f("lora_path", &STR, D::Str("")),
        f("base_model_name", &OPT_STR, D::Nil),
        f("load_inplace", &BOOL, D::Bool(false)),
        f("is_3d_lora_weight", &BOOL, D::Bool(false)),
    ],
    validate: Some(Rules::LoraRequest),
    tag: None,
};
static OPT_LORA_REQUEST: Ty = Ty::Optional(&Ty::Struct(&LORA_REQUEST));

macro_rules! engine_core_request {
    ($name:ident, $pooling:ident) => {
        /// `EngineCoreRequest`: array_like, 22 elements, the first 9 required.
        #[doc = "`EngineCoreRequest` of one release."]
        pub static $name: StructSchema = StructSchema {
            name: "EngineCoreRequest",
            layout: Layout::Positional,
            fields: &[
                f("request_id", &STR, D::Required),
                f("prompt_token_ids", &OPT_LIST_INT, D::Required),
                f("mm_features", &OPT_LIST_MM_FEATURES, D::Required),
                f("sampling_params", &OPT_SAMPLING_PARAMS, D::Required),
                f("pooling_params", &Ty::Optional(&Ty::Struct(&$pooling)), D::Required),
                f("arrival_time", &FLOAT, D::Required),
                f("lora_request", &OPT_LORA_REQUEST, D::Required),
                f("cache_salt", &OPT_STR, D::Required),
                f("data_parallel_rank", &OPT_INT, D::Required),
                f("prompt_embeds", &OPT_TORCH, D::Nil),
                f("prompt_is_token_ids", &OPT_LIST_BOOL, D::Nil),
                f("client_index", &INT, D::Int(0)),
                f("current_wave", &INT, D::Int(0)),
                f("priority", &INT, D::Int(0)),
                f("trace_headers", &OPT_DICT_STR_STR, D::Nil),
                f("resumable", &BOOL, D::Bool(false)),
                f("external_req_id", &OPT_STR, D::Nil),
                f("reasoning_ended", &OPT_BOOL, D::Nil),
                f("reasoning_parser_kwargs", &OPT_DICT_STR_ANY, D::Nil),
                f("abort_immediately", &BOOL, D::Bool(false)),
                f("session_id", &OPT_STR, D::Nil),
                f("kv_hints", &OPT_KV_HINTS, D::Nil),
            ],
            validate: None,
            tag: None,
        };
    };
}
engine_core_request!(ENGINE_CORE_REQUEST_0_32, POOLING_PARAMS_0_32);
engine_core_request!(ENGINE_CORE_REQUEST_0_33, POOLING_PARAMS_0_33);

/// UTILITY payload `[client_index, call_id, method_name, args]`. vLLM
/// unpacks exactly four elements from a generic decode.
pub static UTILITY_REQUEST: StructSchema = StructSchema {
    name: "UtilityRequest",
    layout: Layout::Tuple,
    fields: &[
        f("client_index", &INT, D::Required),
        f("call_id", &INT, D::Required),
        f("method_name", &STR, D::Required),
        f("args", &ANY, D::Required),
    ],
    validate: None,
    tag: None,
};

/// START_DP_WAVE payload `[wave, exclude_engine_index]`.
pub static START_DP_WAVE: StructSchema = StructSchema {
    name: "StartDpWave",
    layout: Layout::Tuple,
    fields: &[f("wave", &INT, D::Required), f("exclude_engine_index", &OPT_INT, D::Required)],
    validate: None,
    tag: None,
};
