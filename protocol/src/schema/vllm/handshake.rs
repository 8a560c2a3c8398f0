//! The handshake (docs/wire-protocol.md §4.2-§4.4): HELLO and READY as plain
//! dicts `{status, local, headless, ...}`, the engine's ZMQ addresses, the
//! init metadata (a parallel-config value is an int, a string or a list of
//! ints) and the ready response (0.33.0 added `coord_store_port`,
//! `coordinator_input_address` and `coordinator_output_address`).

use super::*;

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
