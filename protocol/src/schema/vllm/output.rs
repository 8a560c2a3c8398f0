//! The structs of an output batch (engine → client; docs/wire-protocol.md
//! §8): `EngineCoreOutputs` and `EngineCoreOutput` (positional arrays;
//! 0.33.0 added a 19th field, `error: RequestError | None`),
//! `LogprobsLists` (a named tuple of numpy arrays: ids `<i4`, logprobs
//! `<f4`, ranks `<i8` as a real engine sends them) and `LogprobsTensors` (a
//! named tuple of torch tensors), the events, prefill and spec-decode
//! metrics, the sampling mask, and `UtilityOutput`.

use super::*;

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
