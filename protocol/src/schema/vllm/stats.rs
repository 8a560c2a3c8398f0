//! The scheduler statistics an output batch may carry: dataclasses, all
//! sent as maps of every field (`SchedulerStats` and what it nests: prefix
//! cache, KV-cache eviction, spec decoding, CUDA graph and perf stats), and
//! the KV events config the ready response carries.

use super::*;

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
pub(super) static OPT_SCHEDULER_STATS: Ty = Ty::Optional(&Ty::Struct(&SCHEDULER_STATS));

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
pub(super) static OPT_KV_EVENTS_CONFIG: Ty = Ty::Optional(&Ty::Struct(&KV_EVENTS_CONFIG));
