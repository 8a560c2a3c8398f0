//! TokenSpeed schema tables (the `--zmq-msgpack` wire that SMG's direct ZMQ
//! backend speaks to TokenSpeed's scheduler), two versions:
//! - [`V0_1_1`], release 0.1.1: TokenSpeed's own classes as installed from
//!   PyPI (the pure-Python `tokenspeed==0.1.1` wheel), dumped with
//!   `msgspec.inspect` to `golden/generate/schema/tokenspeed-0.1.1.json`;
//! - [`GIT_57B49061`], TokenSpeed's repository at commit `57b49061`
//!   (2026-08-03, the first msgpack wire, never released as a wheel; SMG's
//!   pinned test vectors come from it), dumped the same way to
//!   `golden/generate/schema/tokenspeed-git-57b49061.json`.
//!
//! Both are cross-checked against their dumps by the
//! `tokenspeed_schema_tables` test; the wire facts they rely on are
//! docs/tokenspeed-wire.md §2-§6, and §12 lists what changed between the
//! two: fields were only appended (`data_parallel_rank` to the request; the
//! `engine_index` and load columns to the output batch), so the 08-03
//! structs are prefixes of 0.1.1's and share their field tables, except the
//! ready response, whose `block_size` became `prefix_granularity`.
//!
//! Wire facts these tables encode:
//! - the data-plane structs are msgspec `array_like` structs; the ADD payload
//!   (`TokenizedGenerateReqInput`) and the output batch
//!   (`BatchTokenIDOutSlim`) are also *tagged*: element 0 of the array is the
//!   class name, the fields follow from element 1 (docs/tokenspeed-wire.md
//!   §3). The tag is not a field: it is the table entry's
//!   [`super::StructSchema::tag`];
//! - fields declared `kw_only` with defaults may precede required ones, so the
//!   shortest array a receiver takes ends at the last required field
//!   ([`super::StructSchema::min_len`]): six elements for the request (tag,
//!   four defaulted fields, `sampling_params`), nine for the output batch;
//! - `SamplingParams` (29 fields) is untagged and has no required field: any
//!   prefix, `[]` included, decodes;
//! - the handshake messages and the ready response are map structs with
//!   every field written; none of the ready response's keys is required, and
//!   `block_size` (vLLM's key) is unknown to 0.1.1 (docs/tokenspeed-wire.md §4);
//! - the ABORT payload is a plain array of request ids (the same as vLLM's);
//! - only the request types `00` (ADD) and `01` (ABORT) exist.
//!
//! TokenSpeed has no utility, wave or structured-output-params messages; the
//! [`ReleaseSchema`] roles for them point at [`NOT_IN_DIALECT`], and
//! `crate::message` refuses those message kinds for this dialect before any
//! table is consulted.

use super::Default as D;
use super::{Dialect, EnumSchema, Field, Layout, ReleaseSchema, Rules, StructSchema, TensorKind, Ty};

use super::common::{f, ANY, BOOL, FLOAT, INT, LIST_INT, LIST_STR, OPT_BOOL, OPT_FLOAT, OPT_INT, OPT_STR, STR};

// ===== shared types =====

static LIST_FLOAT: Ty = Ty::List(&FLOAT);
static LIST_ANY: Ty = Ty::List(&ANY);
static OPT_LIST_INT: Ty = Ty::Optional(&LIST_INT);
static OPT_LIST_STR: Ty = Ty::Optional(&LIST_STR);
static OPT_LIST_ANY: Ty = Ty::Optional(&LIST_ANY);
static LIST_LIST_INT: Ty = Ty::List(&LIST_INT);
static LIST_LIST_FLOAT: Ty = Ty::List(&LIST_FLOAT);
static OPT_LIST_LIST_INT: Ty = Ty::Optional(&LIST_LIST_INT);
static SET_INT: Ty = Ty::Set(&INT);
static OPT_SET_INT: Ty = Ty::Optional(&SET_INT);
static STR_OR_LIST_STR: Ty = Ty::Union(&[Ty::Str, Ty::List(&STR)]);
static OPT_STR_OR_LIST_STR: Ty = Ty::Optional(&STR_OR_LIST_STR);
static DICT_ANY_ANY: Ty = Ty::Dict(&ANY, &ANY);
static OPT_DICT_ANY_ANY: Ty = Ty::Optional(&DICT_ANY_ANY);
static LIST_DICT_ANY_ANY: Ty = Ty::List(&DICT_ANY_ANY);
static OPT_LIST_DICT_ANY_ANY: Ty = Ty::Optional(&LIST_DICT_ANY_ANY);
static DICT_STR_ANY: Ty = Ty::Dict(&STR, &ANY);
static OPT_DICT_STR_ANY: Ty = Ty::Optional(&DICT_STR_ANY);
static DICT_STR_FLOAT: Ty = Ty::Dict(&STR, &FLOAT);
static OPT_DICT_STR_FLOAT: Ty = Ty::Optional(&DICT_STR_FLOAT);
static TORCH: Ty = Ty::Tensor(TensorKind::Torch);
static OPT_TORCH: Ty = Ty::Optional(&TORCH);
static DICT_STR_TORCH: Ty = Ty::Dict(&STR, &TORCH);

// ===== the ADD payload =====

/// `SamplingParams` (untagged, array_like, 29 fields; every field has a
/// default). `__post_init__`, `resolve_seed` and `normalize` run on the
/// engine's receive path, not as decode validations: see
/// `crate::validate::tokenspeed`.
pub static SAMPLING_PARAMS: StructSchema = StructSchema {
    name: "SamplingParams",
    layout: Layout::Positional,
    fields: &[
        f("max_new_tokens", &OPT_INT, D::Nil),
        f("stop", &OPT_STR_OR_LIST_STR, D::Nil),
        f("stop_token_ids", &OPT_SET_INT, D::Nil),
        f("temperature", &FLOAT, D::Float(1.0)),
        f("top_p", &FLOAT, D::Float(1.0)),
        f("top_k", &INT, D::Int(-1)),
        f("min_p", &FLOAT, D::Float(0.0)),
        f("frequency_penalty", &FLOAT, D::Float(0.0)),
        f("presence_penalty", &FLOAT, D::Float(0.0)),
        f("repetition_penalty", &FLOAT, D::Float(1.0)),
        f("min_new_tokens", &INT, D::Int(0)),
        f("json_schema", &OPT_STR, D::Nil),
        f("regex", &OPT_STR, D::Nil),
        f("ebnf", &OPT_STR, D::Nil),
        f("structural_tag", &OPT_STR, D::Nil),
        f("ignore_eos", &BOOL, D::Bool(false)),
        f("skip_special_tokens", &BOOL, D::Bool(true)),
        f("spaces_between_special_tokens", &BOOL, D::Bool(true)),
        f("no_stop_trim", &BOOL, D::Bool(false)),
        f("thinking_budget", &OPT_INT, D::Nil),
        f("custom_params", &OPT_DICT_STR_ANY, D::Nil),
        f("stream_interval", &OPT_INT, D::Nil),
        f("logit_bias", &OPT_DICT_STR_FLOAT, D::Nil),
        f("seed", &OPT_INT, D::Nil),
        f("logprobs", &OPT_INT, D::Nil),
        f("n", &INT, D::Int(1)),
        f("stop_strs", &OPT_STR_OR_LIST_STR, D::Nil),
        f("stop_str_max_len", &INT, D::Int(0)),
        f("is_normalized", &BOOL, D::Bool(false)),
    ],
    validate: None,
    tag: None,
};

/// `SessionParams` (untagged, array_like).
pub static SESSION_PARAMS: StructSchema = StructSchema {
    name: "SessionParams",
    layout: Layout::Positional,
    fields: &[
        f("id", &OPT_STR, D::Nil),
        f("rid", &OPT_STR, D::Nil),
        f("offset", &OPT_INT, D::Nil),
        f("replace", &OPT_BOOL, D::Nil),
    ],
    validate: None,
    tag: None,
};
static OPT_SESSION_PARAMS: Ty = Ty::Optional(&Ty::Struct(&SESSION_PARAMS));

/// `tokenspeed.runtime.multimodal.inputs.Modality` (Enum of ints).
pub static MODALITY: EnumSchema = EnumSchema { name: "Modality", values: &[(1, "IMAGE"), (2, "VIDEO"), (3, "AUDIO")] };
static MODALITY_TY: Ty = Ty::IntEnum(&MODALITY);

/// `tuple[int, int]`: a fixed pair (an `offsets` entry).
pub static INT_PAIR: StructSchema = StructSchema {
    name: "tuple[int, int]",
    layout: Layout::Tuple,
    fields: &[f("0", &INT, D::Required), f("1", &INT, D::Required)],
    validate: None,
    tag: None,
};
static OPT_LIST_INT_PAIR: Ty = Ty::Optional(&Ty::List(&Ty::Struct(&INT_PAIR)));

/// `ShmTensorHandle` (a map struct; never sent by SMG).
pub static SHM_TENSOR_HANDLE: StructSchema = StructSchema {
    name: "ShmTensorHandle",
    layout: Layout::FullMap,
    fields: &[f("shm_name", &STR, D::Required), f("shape", &LIST_INT, D::Required), f("dtype", &TORCH, D::Required)],
    validate: None,
    tag: None,
};
static OPT_SHM_TENSOR_HANDLE: Ty = Ty::Optional(&Ty::Struct(&SHM_TENSOR_HANDLE));

/// `MultimodalDataItem` (untagged, array_like).
pub static MULTIMODAL_DATA_ITEM: StructSchema = StructSchema {
    name: "MultimodalDataItem",
    layout: Layout::Positional,
    fields: &[
        f("modality", &MODALITY_TY, D::Required),
        f("hash", &OPT_INT, D::Nil),
        f("pad_value", &OPT_INT, D::Nil),
        f("offsets", &OPT_LIST_INT_PAIR, D::Nil),
        f("feature", &OPT_TORCH, D::Nil),
        f("feature_shm", &OPT_SHM_TENSOR_HANDLE, D::Nil),
        f("model_specific_data", &DICT_STR_TORCH, D::EmptyDict),
        f("encoded", &OPT_TORCH, D::Nil),
        f("encoded_deepstack", &OPT_TORCH, D::Nil),
        f("encode_handshake", &OPT_DICT_ANY_ANY, D::Nil),
    ],
    validate: None,
    tag: None,
};

/// `MultimodalInputs` (untagged, array_like).
pub static MULTIMODAL_INPUTS: StructSchema = StructSchema {
    name: "MultimodalInputs",
    layout: Layout::Positional,
    fields: &[
        f("mm_items", &Ty::List(&Ty::Struct(&MULTIMODAL_DATA_ITEM)), D::Required),
        f("im_token_id", &OPT_INT, D::Nil),
        f("video_token_id", &OPT_INT, D::Nil),
        f("mrope_positions", &OPT_TORCH, D::Nil),
        f("mrope_position_delta", &OPT_TORCH, D::Nil),
        f("mrope_position_delta_scalar", &OPT_INT, D::Nil),
        f("mrope_position_delta_repeated_cache", &OPT_TORCH, D::Nil),
    ],
    validate: None,
    tag: None,
};
static OPT_MULTIMODAL_INPUTS: Ty = Ty::Optional(&Ty::Struct(&MULTIMODAL_INPUTS));

/// `TokenizedGenerateReqInput` (tagged, array_like; 24 fields after the
/// tag, the base class's `rid` and `http_worker_ipc` first).
pub static TOKENIZED_GENERATE_REQ_INPUT: StructSchema = StructSchema {
    name: "TokenizedGenerateReqInput",
    layout: Layout::Positional,
    fields: &REQUEST_FIELDS,
    validate: None,
    tag: Some("TokenizedGenerateReqInput"),
};

/// The 08-03 `TokenizedGenerateReqInput`: 0.1.1's without
/// `data_parallel_rank` (23 fields after the tag).
pub static TOKENIZED_GENERATE_REQ_INPUT_08_03: StructSchema = StructSchema {
    name: "TokenizedGenerateReqInput",
    layout: Layout::Positional,
    fields: REQUEST_FIELDS.split_at(23).0,
    validate: None,
    tag: Some("TokenizedGenerateReqInput"),
};

/// The request's fields in declaration order (0.1.1; every earlier version
/// has a prefix of them).
static REQUEST_FIELDS: [Field; 24] = [
    f("rid", &OPT_STR_OR_LIST_STR, D::Nil),
    f("http_worker_ipc", &OPT_STR, D::Nil),
    f("input_text", &OPT_STR, D::Nil),
    f("input_ids", &OPT_LIST_INT, D::Nil),
    f("sampling_params", &Ty::Struct(&SAMPLING_PARAMS), D::Required),
    f("return_logprob", &BOOL, D::Bool(false)),
    f("logprob_start_len", &INT, D::Int(-1)),
    f("top_logprobs_num", &INT, D::Int(0)),
    f("token_ids_logprob", &OPT_LIST_INT, D::Nil),
    f("stream", &BOOL, D::Bool(false)),
    f("input_embeds", &OPT_LIST_ANY, D::Nil),
    f("session_params", &OPT_SESSION_PARAMS, D::Nil),
    f("custom_logit_processor", &OPT_STR, D::Nil),
    f("return_hidden_states", &BOOL, D::Bool(false)),
    f("created_time", &FLOAT, D::Float(0.0)),
    f("bootstrap_host", &OPT_STR, D::Nil),
    f("bootstrap_port", &OPT_INT, D::Nil),
    f("bootstrap_room", &OPT_INT, D::Nil),
    f("input_multi_ids", &OPT_LIST_LIST_INT, D::Nil),
    f("input_extra_infos", &OPT_LIST_DICT_ANY_ANY, D::Nil),
    f("input_ids_unpadded", &OPT_LIST_INT, D::Nil),
    f("multimodal_inputs", &OPT_MULTIMODAL_INPUTS, D::Nil),
    f("validation_error", &OPT_STR, D::Nil),
    f("data_parallel_rank", &OPT_INT, D::Nil),
];

// ===== outputs =====

/// `BatchTokenIDOutSlim` (tagged, array_like, columnar: one entry per row in
/// every column). The columns are not checked against each other: msgspec
/// does not, and neither does this decoder (a ragged batch decodes).
pub static BATCH_TOKEN_ID_OUT_SLIM: StructSchema = StructSchema {
    name: "BatchTokenIDOutSlim",
    layout: Layout::Positional,
    fields: &OUTPUT_FIELDS,
    validate: None,
    tag: Some("BatchTokenIDOutSlim"),
};

/// The 08-03 `BatchTokenIDOutSlim`: `rids` and the seven required columns,
/// nothing after them (9 elements with the tag).
pub static BATCH_TOKEN_ID_OUT_SLIM_08_03: StructSchema = StructSchema {
    name: "BatchTokenIDOutSlim",
    layout: Layout::Positional,
    fields: OUTPUT_FIELDS.split_at(8).0,
    validate: None,
    tag: Some("BatchTokenIDOutSlim"),
};

/// The output batch's fields in declaration order (0.1.1; 08-03 has the
/// first 8, 08-12 the first 9).
static OUTPUT_FIELDS: [Field; 13] = [
    f("rids", &OPT_LIST_STR, D::Nil),
    f("output_ids", &LIST_LIST_INT, D::Required),
    f("finished_reasons", &LIST_STR, D::Required),
    f("prompt_tokens", &LIST_INT, D::Required),
    f("completion_tokens", &LIST_INT, D::Required),
    f("cached_tokens", &LIST_INT, D::Required),
    f("output_token_logprobs_val", &LIST_LIST_FLOAT, D::Required),
    f("output_token_logprobs_idx", &LIST_LIST_INT, D::Required),
    f("engine_index", &INT, D::Int(0)),
    f("num_running", &INT, D::Int(0)),
    f("num_waiting", &INT, D::Int(0)),
    f("kv_active_pages", &INT, D::Int(0)),
    f("kv_total_pages", &INT, D::Int(0)),
];

// ===== handshake =====

/// HELLO / READY: `WireReadyMessage`, a map struct of four optional fields
/// (unknown keys are drift, unlike vLLM's plain dicts).
pub static WIRE_READY_MESSAGE: StructSchema = StructSchema {
    name: "WireReadyMessage",
    layout: Layout::FullMap,
    fields: &[
        f("status", &OPT_STR, D::Nil),
        f("local", &OPT_BOOL, D::Nil),
        f("headless", &OPT_BOOL, D::Nil),
        f("parallel_config_hash", &OPT_STR, D::Nil),
    ],
    validate: None,
    tag: None,
};

/// `WireHandshakeAddresses`: every field defaulted.
pub static WIRE_HANDSHAKE_ADDRESSES: StructSchema = StructSchema {
    name: "WireHandshakeAddresses",
    layout: Layout::FullMap,
    fields: &[
        f("inputs", &LIST_STR, D::EmptyList),
        f("outputs", &LIST_STR, D::EmptyList),
        f("coordinator_input", &OPT_STR, D::Nil),
        f("coordinator_output", &OPT_STR, D::Nil),
        f("frontend_stats_publish_address", &OPT_STR, D::Nil),
    ],
    validate: None,
    tag: None,
};

/// INIT: `WireHandshakeInitMessage`. The engine then needs at least one
/// input and one output address (`crate::validate::tokenspeed::handshake_init`).
pub static WIRE_HANDSHAKE_INIT_MESSAGE: StructSchema = StructSchema {
    name: "WireHandshakeInitMessage",
    layout: Layout::FullMap,
    fields: &[
        f("addresses", &Ty::Struct(&WIRE_HANDSHAKE_ADDRESSES), D::Required),
        f("parallel_config", &DICT_ANY_ANY, D::EmptyDict),
    ],
    validate: Some(Rules::TokenSpeedHandshakeInit),
    tag: None,
};

/// The ready response: `WireEngineCoreReadyResponse`, 19 fields, all
/// defaulted (`dtype` is a plain string: the engine maps torch dtypes before
/// sending).
pub static WIRE_ENGINE_CORE_READY_RESPONSE: StructSchema = StructSchema {
    name: "WireEngineCoreReadyResponse",
    layout: Layout::FullMap,
    fields: &READY_FIELDS_0_1_1,
    validate: None,
    tag: None,
};

/// The 08-03 ready response: 18 fields, the page size as `block_size` where
/// 0.1.1 has `prefix_granularity`, and no `multimodal_encoder_dtype`.
pub static WIRE_ENGINE_CORE_READY_RESPONSE_08_03: StructSchema = StructSchema {
    name: "WireEngineCoreReadyResponse",
    layout: Layout::FullMap,
    fields: &READY_FIELDS_08_03,
    validate: None,
    tag: None,
};

static READY_FIELDS_0_1_1: [Field; 19] = ready_fields([
    f("max_model_len", &INT, D::Int(0)),
    f("num_gpu_blocks", &INT, D::Int(0)),
    f("prefix_granularity", &INT, D::Int(0)),
    f("dp_stats_address", &OPT_STR, D::Nil),
    f("dtype", &STR, D::Str("bfloat16")),
    f("multimodal_encoder_dtype", &OPT_STR, D::Nil),
]);

static READY_FIELDS_08_03: [Field; 18] = ready_fields([
    f("max_model_len", &INT, D::Int(0)),
    f("num_gpu_blocks", &INT, D::Int(0)),
    f("block_size", &INT, D::Int(0)),
    f("dp_stats_address", &OPT_STR, D::Nil),
    f("dtype", &STR, D::Str("bfloat16")),
]);

/// A version's ready-response fields: its own first fields, then
/// [`READY_TAIL`] (`T` must be their total, checked at compile time).
const fn ready_fields<const H: usize, const T: usize>(head: [Field; H]) -> [Field; T] {
    assert!(H + READY_TAIL.len() == T, "T is the head and the tail together");
    let mut out = [READY_TAIL[0]; T];
    let mut i = 0;
    while i < H {
        out[i] = head[i];
        i += 1;
    }
    let mut j = 0;
    while j < READY_TAIL.len() {
        out[H + j] = READY_TAIL[j];
        j += 1;
    }
    out
}

/// The ready response's fields from `vllm_version` on, the same in both
/// versions.
const READY_TAIL: [Field; 13] = [
    f("vllm_version", &STR, D::Str("")),
    f("world_size", &INT, D::Int(1)),
    f("data_parallel_size", &INT, D::Int(1)),
    f("tensor_parallel_size", &INT, D::Int(1)),
    f("pipeline_parallel_size", &INT, D::Int(1)),
    f("decode_context_parallel_size", &INT, D::Int(1)),
    f("data_parallel_rank", &INT, D::Int(0)),
    f("max_num_seqs", &INT, D::Int(0)),
    f("max_num_batched_tokens", &INT, D::Int(0)),
    f("instance_id", &STR, D::Str("")),
    f("kv_cache_size_tokens", &OPT_INT, D::Nil),
    f("kv_cache_max_concurrency", &OPT_FLOAT, D::Nil),
    f("kv_events_config", &OPT_DICT_ANY_ANY, D::Nil),
];

// ===== roles TokenSpeed does not have =====

/// Stands for the roles of [`ReleaseSchema`] this dialect has no message
/// for (utility and wave messages, structured-output params, a per-request
/// output struct): a struct with no fields that `crate::message` never
/// decodes or encodes for this dialect.
pub static NOT_IN_DIALECT: StructSchema =
    StructSchema { name: "NotInTokenSpeed", layout: Layout::Positional, fields: &[], validate: None, tag: None };

// ===== release =====

static ROOT_REQUEST: Ty = Ty::Struct(&TOKENIZED_GENERATE_REQ_INPUT);
static ROOT_OUTPUTS: Ty = Ty::Struct(&BATCH_TOKEN_ID_OUT_SLIM);
static ROOT_READY: Ty = Ty::Struct(&WIRE_ENGINE_CORE_READY_RESPONSE);
static ROOT_HANDSHAKE_INIT: Ty = Ty::Struct(&WIRE_HANDSHAKE_INIT_MESSAGE);
static ROOT_HANDSHAKE_STATUS: Ty = Ty::Struct(&WIRE_READY_MESSAGE);
static ROOT_NONE: Ty = Ty::Struct(&NOT_IN_DIALECT);

static ROOT_REQUEST_08_03: Ty = Ty::Struct(&TOKENIZED_GENERATE_REQ_INPUT_08_03);
static ROOT_OUTPUTS_08_03: Ty = Ty::Struct(&BATCH_TOKEN_ID_OUT_SLIM_08_03);
static ROOT_READY_08_03: Ty = Ty::Struct(&WIRE_ENGINE_CORE_READY_RESPONSE_08_03);

/// TokenSpeed 0.1.1. The vLLM role names map onto TokenSpeed's messages:
/// `engine_core_request` is the ADD payload `TokenizedGenerateReqInput`,
/// `engine_core_outputs` the output batch `BatchTokenIDOutSlim`.
pub static V0_1_1: ReleaseSchema = ReleaseSchema {
    dialect: Dialect::TokenSpeed,
    version: "0.1.1",
    engine_core_request: &ROOT_REQUEST,
    sampling_params: &SAMPLING_PARAMS,
    structured_outputs_params: &NOT_IN_DIALECT,
    engine_core_outputs: &ROOT_OUTPUTS,
    engine_core_output: &NOT_IN_DIALECT,
    utility_output: &ROOT_NONE,
    utility_request: &ROOT_NONE,
    start_dp_wave: &ROOT_NONE,
    ready_response: &ROOT_READY,
    handshake_init: &ROOT_HANDSHAKE_INIT,
    handshake_status: &ROOT_HANDSHAKE_STATUS,
};

/// TokenSpeed at git commit `57b49061` (2026-08-03; its `version.py` says
/// 0.1.0, whose wheel has no msgpack wire): the 24-element request, the
/// 9-element output batch, `block_size` in the ready response. The other
/// structs (`SamplingParams`, the handshake, multimodal inputs) are 0.1.1's.
pub static GIT_57B49061: ReleaseSchema = ReleaseSchema {
    dialect: Dialect::TokenSpeed,
    version: "git-57b49061",
    engine_core_request: &ROOT_REQUEST_08_03,
    sampling_params: &SAMPLING_PARAMS,
    structured_outputs_params: &NOT_IN_DIALECT,
    engine_core_outputs: &ROOT_OUTPUTS_08_03,
    engine_core_output: &NOT_IN_DIALECT,
    utility_output: &ROOT_NONE,
    utility_request: &ROOT_NONE,
    start_dp_wave: &ROOT_NONE,
    ready_response: &ROOT_READY_08_03,
    handshake_init: &ROOT_HANDSHAKE_INIT,
    handshake_status: &ROOT_HANDSHAKE_STATUS,
};

// ===== the receive path, per version =====

/// What a TokenSpeed version's receive path does to an ADD after msgspec
/// decoded it, where versions differ (docs/tokenspeed-wire.md §5, §12.3).
/// Data: `crate::validate::tokenspeed::receive` interprets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReceiveRules {
    /// `SamplingParams.__post_init__` pins greedy sampling (`top_k` 1) to
    /// seed 0 (0.1.1; not 08-03).
    pub pin_greedy_seed: bool,
    /// Which logprob knobs the receive socket refuses.
    pub logprob_gates: LogprobGates,
}

/// The logprob gates of a TokenSpeed receive socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LogprobGates {
    /// 08-03: `return_logprob` needs `--enable-output-logprobs`; nothing
    /// else is looked at, and `logprob_start_len` is kept as sent.
    EnableFlagOnly,
    /// 0.1.1: also refuses top-k and token-id logprobs, a request without
    /// token inputs and a start asking for prompt logprobs, and resolves
    /// `logprob_start_len` -1 to the last prompt token.
    Full,
}

/// The receive rules of TokenSpeed 0.1.1.
pub static RECEIVE_0_1_1: ReceiveRules = ReceiveRules { pin_greedy_seed: true, logprob_gates: LogprobGates::Full };
/// The receive rules of TokenSpeed at `57b49061`.
pub static RECEIVE_GIT_57B49061: ReceiveRules =
    ReceiveRules { pin_greedy_seed: false, logprob_gates: LogprobGates::EnableFlagOnly };

/// The receive rules of a TokenSpeed release; `None` for a vLLM one.
pub fn receive_rules(release: &ReleaseSchema) -> Option<&'static ReceiveRules> {
    [(&V0_1_1, &RECEIVE_0_1_1), (&GIT_57B49061, &RECEIVE_GIT_57B49061)]
        .into_iter()
        .find(|(r, _)| std::ptr::eq(*r, release))
        .map(|(_, rules)| rules)
}
