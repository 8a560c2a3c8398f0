//! The fast path's fields by name, typed: the rare fields of a borrowed
//! [`Output`] / [`Outputs`] (decoded by the schema-driven decoder, held as
//! values by their table position) converted to the typed structs on
//! request, and the whole batch converted to the owned
//! [`EngineCoreOutputs`].
//!
//! Wire facts: the fields are found by name in the release's tables
//! (`EngineCoreOutput.error` exists since 0.33.0: an older table answers
//! `None`), and converted with the typed API's conversions, so a value the
//! typed struct cannot hold (an integer above `i64::MAX` in a field the
//! typed struct holds as `i64`) is a typed error naming the path, never a
//! panic.

use super::{LogprobsRef, Output, Outputs, StopRef, TensorRef};
use crate::error::Error;
use crate::schema::{ReleaseSchema, StructSchema, Ty};
use crate::typed::wire::{Rel, WireType};
use crate::typed::{
    EngineCoreEvent, EngineCoreOutput, EngineCoreOutputs, LogprobsTensors, PrefillStats, RequestError, SchedulerStats,
    UtilityOutput,
};
use crate::value::{StructValue, Tensor, Value};

/// The release a batch was decoded with (compared by dialect and version).
#[derive(Clone, Copy)]
pub(crate) struct Table(pub(crate) &'static ReleaseSchema);

impl PartialEq for Table {
    fn eq(&self, other: &Table) -> bool {
        std::ptr::eq(self.0, other.0) || (self.0.dialect == other.0.dialect && self.0.version == other.0.version)
    }
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.0.dialect, self.0.version)
    }
}

/// The rare fields of a batch or an output, `(field position, value)` in
/// wire order: boxed, so that the common output, which has none, carries
/// one word for them.
#[derive(Debug, Clone, PartialEq, Default)]
#[expect(clippy::box_collection, reason = "one word (a `Vec` is three) in every output: the box is the point")]
pub(crate) struct Rare(Option<Box<Vec<(usize, Value)>>>);

impl Rare {
    pub(crate) fn push(&mut self, field: (usize, Value)) {
        self.0.get_or_insert_with(Box::default).push(field);
    }

    pub(crate) fn iter(&self) -> std::slice::Iter<'_, (usize, Value)> {
        self.0.as_deref().map_or(&[][..], Vec::as_slice).iter()
    }
}

impl Drop for Rare {
    /// The common output has none: one test inline, the freeing out of line.
    #[inline]
    fn drop(&mut self) {
        if self.0.is_some() {
            drop_rare(self.0.take());
        }
    }
}

#[cold]
#[inline(never)]
#[expect(clippy::box_collection, reason = "takes the boxed field as it is")]
fn drop_rare(r: Option<Box<Vec<(usize, Value)>>>) {
    drop(r);
}

impl<'r> IntoIterator for &'r Rare {
    type Item = &'r (usize, Value);
    type IntoIter = std::slice::Iter<'r, (usize, Value)>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// Field `name` of `schema` among `rare` (position, value), converted to
/// `T`; `None` when nil or when the release has no such field. Errors are
/// rooted at `root`.
fn rare<T: WireType>(
    table: Table,
    schema: &StructSchema,
    rare: &Rare,
    root: &str,
    name: &str,
) -> Result<Option<T>, Error> {
    let Some(pos) = schema.index_of(name) else { return Ok(None) };
    let Some((_, v)) = rare.iter().find(|(i, _)| *i == pos) else { return Ok(None) };
    let rel = Rel::of(table.0)?;
    Option::<T>::from_value(v, None, rel).map_err(|e| e.under(&format!("{root}.{name}")))
}

/// The batch table (the fast decoder reads only vLLM's, structs both).
fn batch_schema(table: Table) -> &'static StructSchema {
    table.0.engine_core_outputs.as_struct().expect("a vLLM batch table is a struct")
}

/// The rare fields over `s`, by their table positions.
fn set_rare(s: &mut StructValue, rare: &Rare) {
    let schema = s.schema;
    for (pos, v) in rare {
        if let Some(f) = schema.fields.get(*pos) {
            s.set(f.name, v.clone());
        }
    }
}

fn tensor(t: &TensorRef<'_>) -> Value {
    Value::Tensor(Box::new(Tensor { dtype: t.dtype.to_string(), shape: t.shape.to_vec(), data: t.data.to_vec() }))
}

fn logprobs_value(l: &LogprobsRef<'_>, ty: &'static Ty) -> Value {
    let schema = match ty {
        Ty::Optional(Ty::Struct(s)) | Ty::Struct(s) => *s,
        _ => return Value::Nil,
    };
    let cu = l.cu_num_generated_tokens.map_or(Value::Nil, |c| Value::IntArray(c.to_vec()));
    let fields = vec![tensor(&l.logprob_token_ids), tensor(&l.logprobs), tensor(&l.sampled_token_ranks), cu];
    Value::Struct(StructValue::new(schema, fields))
}

impl Output<'_> {
    fn rare<T: WireType>(&self, name: &str) -> Result<Option<T>, Error> {
        rare(self.table, self.table.0.engine_core_output, &self.other, "EngineCoreOutput", name)
    }

    /// `stop_reason` as the owned typed enum (a token id above
    /// `i64::MAX`, which the borrowed field cannot hold, included).
    pub fn stop_reason_owned(&self) -> Option<crate::typed::StopReason> {
        match self.stop_reason {
            Some(s) => Some(s.to_owned()),
            None => self.rare("stop_reason").ok().flatten(),
        }
    }

    /// `error` (since 0.33.0): why the engine failed this request.
    pub fn error(&self) -> Result<Option<RequestError>, Error> {
        self.rare("error")
    }

    /// `events` (queued, scheduled, preempted; with `log_stats`).
    pub fn events(&self) -> Result<Option<Vec<EngineCoreEvent>>, Error> {
        self.rare("events")
    }

    /// `kv_transfer_params` (disaggregated prefill).
    pub fn kv_transfer_params(&self) -> Result<Option<Vec<(String, Value)>>, Error> {
        self.rare("kv_transfer_params")
    }

    /// `trace_headers`.
    pub fn trace_headers(&self) -> Result<Option<Vec<(String, String)>>, Error> {
        self.rare("trace_headers")
    }

    /// `prefill_stats`.
    pub fn prefill_stats(&self) -> Result<Option<PrefillStats>, Error> {
        self.rare("prefill_stats")
    }

    /// `new_prompt_logprobs_tensors` (first output of a request with
    /// `prompt_logprobs`).
    pub fn new_prompt_logprobs_tensors(&self) -> Result<Option<LogprobsTensors>, Error> {
        self.rare("new_prompt_logprobs_tensors")
    }

    /// `pooling_output` (a pooling request's result).
    pub fn pooling_output(&self) -> Result<Option<Tensor>, Error> {
        self.rare("pooling_output")
    }

    /// The output as the owned typed struct, every field (what
    /// [`crate::typed::decode_typed`] gives for it, but for the unknown
    /// fields of a newer engine, which a value cannot carry: decode with
    /// `decode_typed` to keep them).
    pub fn to_owned(&self) -> Result<EngineCoreOutput, Error> {
        let rel = Rel::of(self.table.0)?;
        EngineCoreOutput::from_value(&self.value(), None, rel).map_err(|e| e.under("EngineCoreOutput"))
    }

    /// The output as the schema-driven decoder's value.
    fn value(&self) -> Value {
        let schema = self.table.0.engine_core_output;
        let mut s = StructValue::with_defaults(schema);
        // The borrowed fields, then the rare ones over them (a field the
        // borrowed form cannot hold is among the rare ones).
        let mut set = |name: &str, v: Value| {
            if schema.index_of(name).is_some() {
                s.set(name, v);
            }
        };
        set("request_id", Value::Str(self.request_id.to_string()));
        set("new_token_ids", Value::IntArray(self.new_token_ids.to_vec()));
        if let (Some(l), Some(pos)) = (&self.new_logprobs, schema.index_of("new_logprobs")) {
            set("new_logprobs", logprobs_value(l, schema.fields[pos].ty));
        }
        if let Some(f) = self.finish_reason {
            set("finish_reason", Value::Int(f.wire()));
        }
        match self.stop_reason {
            Some(StopRef::TokenId(t)) => set("stop_reason", Value::Int(t)),
            Some(StopRef::Text(t)) => set("stop_reason", Value::Str(t.to_string())),
            None => {}
        }
        set("num_nans_in_logits", Value::Int(self.num_nans_in_logits));
        set_rare(&mut s, &self.other);
        Value::Struct(s)
    }
}

impl Outputs<'_> {
    fn rare<T: WireType>(&self, name: &str) -> Result<Option<T>, Error> {
        rare(self.table, batch_schema(self.table), &self.other, "EngineCoreOutputs", name)
    }

    /// `utility_output`: the answer to a UTILITY call.
    pub fn utility_output(&self) -> Result<Option<UtilityOutput>, Error> {
        self.rare("utility_output")
    }

    /// `finished_requests`: requests the engine finished without an output
    /// (aborted ones, with `log_stats`).
    pub fn finished_requests(&self) -> Result<Option<Vec<String>>, Error> {
        self.rare("finished_requests")
    }

    /// `scheduler_stats` (with `log_stats`).
    pub fn scheduler_stats(&self) -> Result<Option<SchedulerStats>, Error> {
        self.rare("scheduler_stats")
    }

    /// The batch as the owned typed struct (what
    /// [`crate::typed::decode_typed`] gives, but for the unknown fields of
    /// a newer engine: see [`Output::to_owned`]).
    pub fn to_owned(&self) -> Result<EngineCoreOutputs, Error> {
        let mut s = StructValue::with_defaults(batch_schema(self.table));
        s.set("engine_index", Value::Int(self.engine_index));
        s.set("outputs", Value::Array(self.outputs.iter().map(Output::value).collect()));
        s.set("timestamp", Value::Float(self.timestamp));
        s.set("wave_complete", self.wave_complete.map_or(Value::Nil, Value::Int));
        s.set("start_wave", self.start_wave.map_or(Value::Nil, Value::Int));
        s.set("weight_version", self.weight_version.map_or(Value::Nil, |w| Value::Str(w.to_string())));
        set_rare(&mut s, &self.other);
        EngineCoreOutputs::from_value(self.table.0, &Value::Struct(s))
    }
}
