//! Finish-reason synthesis across a gateway's in-flight requests:
//!
//! * a local stop-string match finishes the request with `stop` and the
//!   matched string as `stop_reason`, whatever the engine says later, and
//!   asks the gateway to ABORT the engine request ([`StepOutput::abort_engine`]);
//!   later engine outputs for it are ignored;
//! * an ABORT is finished locally (the engine sends nothing back for it);
//! * an engine output with finish reason ERROR, or `ENGINE_CORE_DEAD`,
//!   finishes every affected request with an error.
#![warn(missing_docs)]

use std::collections::HashMap;

use super::stop::{EngineStep, RequestStream, StepOutput, StopParams};
use super::tokenizer::GatewayTokenizer;
use crate::typed::FinishReason;

/// What the gateway tells its client about one request.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ClientEvent {
    /// A delta (possibly final).
    Output(StepOutput),
    /// The request failed (engine ERROR output, dead engine).
    Error(String),
}

/// The in-flight requests of one engine connection.
#[derive(Debug, Default)]
pub struct Tracker {
    streams: HashMap<String, RequestStream>,
    /// Engine request ids the gateway must send ABORT for.
    pending_aborts: Vec<String>,
}

impl Tracker {
    /// No request in flight.
    pub fn new() -> Self {
        Tracker::default()
    }

    /// Starts tracking `request_id` (an engine request id) with its prompt
    /// and stop parameters.
    pub fn add(&mut self, tok: &GatewayTokenizer, request_id: &str, prompt: &[u32], params: StopParams) {
        self.streams.insert(request_id.to_string(), RequestStream::new(tok, prompt, params));
    }

    /// How many requests are in flight.
    pub fn in_flight(&self) -> usize {
        self.streams.len()
    }

    /// Whether `request_id` is in flight.
    pub fn contains(&self, request_id: &str) -> bool {
        self.streams.contains_key(request_id)
    }

    /// Engine request ids to ABORT (drained).
    pub fn take_aborts(&mut self) -> Vec<String> {
        std::mem::take(&mut self.pending_aborts)
    }

    /// One engine output. `None` for an unknown or already finished request.
    pub fn on_output(&mut self, tok: &GatewayTokenizer, request_id: &str, step: &EngineStep) -> Option<ClientEvent> {
        let stream = self.streams.get_mut(request_id)?;
        if step.finish_reason == Some(FinishReason::Error) {
            self.streams.remove(request_id);
            return Some(ClientEvent::Error("engine finished the request with an error".into()));
        }
        let out = stream.step(tok, step)?;
        if out.finish_reason.is_some() {
            self.streams.remove(request_id);
            if out.abort_engine {
                self.pending_aborts.push(request_id.to_string());
            }
        }
        Some(ClientEvent::Output(out))
    }

    /// The client went away or cancelled: finish locally with `abort`
    /// (flushing held-back text) and queue the ABORT for the engine.
    pub fn abort(&mut self, request_id: &str) -> Option<ClientEvent> {
        let mut stream = self.streams.remove(request_id)?;
        self.pending_aborts.push(request_id.to_string());
        let text = stream.detector.next_output_text(true);
        Some(ClientEvent::Output(StepOutput {
            text,
            token_ids: Vec::new(),
            finish_reason: Some(FinishReason::Abort),
            stop_reason: None,
            abort_engine: true,
        }))
    }

    /// `ENGINE_CORE_DEAD`: every in-flight request fails, sorted by id.
    pub fn engine_dead(&mut self) -> Vec<(String, ClientEvent)> {
        let mut ids: Vec<String> = self.streams.drain().map(|(k, _)| k).collect();
        ids.sort();
        ids.into_iter().map(|id| (id, ClientEvent::Error("engine core died".into()))).collect()
    }
}
