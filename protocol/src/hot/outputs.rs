//! The borrowing decoder of `EngineCoreOutputs` ([`decode_outputs`]):
//! reads the common fields itself, with the checks the schema-driven
//! decoder applies to them, hands every other non-nil field to that
//! decoder on its own bytes, and hands whatever it does not accept, whole,
//! to [`decode_message`] for its verdict (module docs of `hot`).
//!
//! Wire facts (docs/wire-protocol.md §8): `EngineCoreOutputs` is a positional
//! array of 9 fields (`engine_index, outputs, scheduler_stats, timestamp,
//! utility_output, finished_requests, wave_complete, start_wave,
//! weight_version`) in both tables; `EngineCoreOutput` is a positional array
//! of 18 fields in 0.32 and 19 in 0.33 (`error` appended), its first two
//! (`request_id`, `new_token_ids`) required; `LogprobsLists` is a named tuple
//! of three numpy tensors `[dtype, shape, data]` and an optional list.

use std::ops::Range;

use crate::decode::{check_tensor_shape, decode_sub, Limits};
use crate::error::{Error, RejectClass};
use crate::message::{decode_message, MessageKind};
use crate::msgpack::{Reader, Token};
use crate::schema::{vllm, ReleaseSchema, StructSchema, TensorKind, Ty};
use crate::typed::FinishReason;
use crate::value::{numpy_dtype, StructValue, Value};

use super::owned;
use super::{IntRun, LogprobsRef, Output, Outputs, StopRef, TensorRef};

/// The batch fields, by position (both tables).
const BATCH_FIELDS: [&str; 9] = [
    "engine_index",
    "outputs",
    "scheduler_stats",
    "timestamp",
    "utility_output",
    "finished_requests",
    "wave_complete",
    "start_wave",
    "weight_version",
];

/// The output fields read here, by position (both tables).
const OUTPUT_FIELDS: [(usize, &str); 5] =
    [(0, "request_id"), (1, "new_token_ids"), (2, "new_logprobs"), (5, "finish_reason"), (13, "num_nans_in_logits")];
const STOP_REASON: (usize, &str) = (6, "stop_reason");
/// Decodes the frames (`[payload, aux...]`) of one `EngineCoreOutputs` of
/// `release`, with the verdict of [`decode_message`] (module docs). For a
/// release whose tables do not have vLLM's layout (another dialect), a
/// message `decode_message` rejects gets its error and any other an error
/// saying so.
pub fn decode_outputs<'a>(
    release: &'static ReleaseSchema,
    frames: &'a [impl AsRef<[u8]>],
    limits: &Limits,
) -> Result<Outputs<'a>, Error> {
    crate::frames::with_frame_refs(frames, |frames| decode_outputs_refs(release, frames, limits))
}

/// [`decode_outputs`] on frames viewed as slices.
fn decode_outputs_refs<'a>(
    release: &'static ReleaseSchema,
    frames: &[&'a [u8]],
    limits: &Limits,
) -> Result<Outputs<'a>, Error> {
    let full = || decode_message(release, MessageKind::EngineCoreOutputs, frames, limits);
    let Some(batch) = tables(release) else {
        // A table of another shape: nothing here would be sure of it.
        full()?;
        return Err(Error::new(
            RejectClass::Type,
            "EngineCoreOutputs",
            "this release's EngineCoreOutputs table is not the one the fast decoder reads",
        ));
    };
    let mut p = Parser {
        r: Reader::new(frames.first().copied().unwrap_or_default()),
        base: 0,
        frames,
        limits,
        depth: 0,
        tensor_budget: 0,
        drift: false,
        batch,
        release,
    };
    match p.batch() {
        Ok(mut out) => {
            if p.drift {
                out.drift = full()?.drift;
            }
            Ok(out)
        }
        Err(Bail) => match full() {
            Err(e) => Err(e),
            // Never expected (the differential tests and the fuzz target
            // hold the two decoders to the same verdict); said plainly if it
            // happens.
            Ok(_) => Err(Error::new(
                RejectClass::Malformed,
                "EngineCoreOutputs",
                "the fast output decoder refused a batch the schema-driven decoder accepts (a bug)",
            )),
        },
    }
}

/// Decodes the whole output at `raw` (from [`Output::raw`]) of an accepted
/// batch as the schema-driven decoder does: the `StructValue` that
/// [`decode_message`] holds at that place in the batch.
pub fn decode_output_value(
    release: &'static ReleaseSchema,
    frames: &[impl AsRef<[u8]>],
    raw: Range<usize>,
    limits: &Limits,
) -> Result<StructValue, Error> {
    crate::frames::with_frame_refs(frames, |frames| {
        let wrong = || Error::new(RejectClass::Malformed, "EngineCoreOutput", "not the bytes of one output");
        let ty = match tables(release).map(|b| b.fields[1].ty) {
            Some(Ty::List(inner)) => inner,
            _ => return Err(wrong()),
        };
        let budget = frames.iter().map(|f| f.len()).sum();
        let sub = decode_sub(ty, frames, raw.start, 2, budget, limits).map_err(|e| e.under("EngineCoreOutput"))?;
        match sub.value {
            Value::Struct(s) if sub.end == raw.end => Ok(s),
            _ => Err(wrong()),
        }
    })
}

/// The batch table, when it and the output table have the layout read
/// here (checked by name; the two vLLM tables are known to).
fn tables(release: &'static ReleaseSchema) -> Option<&'static StructSchema> {
    let batch = release.engine_core_outputs.as_struct()?;
    let known =
        std::ptr::eq(batch, &vllm::ENGINE_CORE_OUTPUTS_0_32) || std::ptr::eq(batch, &vllm::ENGINE_CORE_OUTPUTS_0_33);
    (known || layout_ok(batch, release.engine_core_output)).then_some(batch)
}

fn layout_ok(batch: &'static StructSchema, output: &'static StructSchema) -> bool {
    batch.fields.len() == BATCH_FIELDS.len()
        && batch.fields.iter().zip(BATCH_FIELDS).all(|(f, n)| f.name == n)
        && OUTPUT_FIELDS.iter().chain([&STOP_REASON]).all(|&(i, n)| output.fields.get(i).is_some_and(|f| f.name == n))
        && output.required() == 2
        // What `Parser::plain_tail` relies on.
        && output.fields.iter().enumerate().skip(2).all(|(i, f)| (i == 13) != matches!(f.ty, Ty::Optional(_)))
        && matches!(output.fields[13].ty, Ty::Int)
        && matches!(output.fields[5].ty, Ty::Optional(Ty::IntEnum(e)) if (0..=4).all(|v| e.contains(v)))
        && matches!(batch.fields[1].ty, Ty::List(Ty::Struct(s)) if std::ptr::eq(*s, output))
}

/// "Not read here": the message goes to the schema-driven decoder.
struct Bail;

type P<T> = Result<T, Bail>;

struct Parser<'a, 'f, 'l> {
    r: Reader<'a>,
    /// The payload position the reader started at.
    base: usize,
    frames: &'f [&'a [u8]],
    limits: &'l Limits,
    depth: usize,
    tensor_budget: usize,
    drift: bool,
    batch: &'static StructSchema,
    release: &'static ReleaseSchema,
}

#[inline]
fn utf8(b: &[u8]) -> P<&str> {
    if b.is_ascii() {
        // SAFETY: ASCII is valid UTF-8. (Request ids are short ASCII
        // strings, for which the general check costs more than the rest of
        // reading them.)
        return Ok(unsafe { std::str::from_utf8_unchecked(b) });
    }
    std::str::from_utf8(b).map_err(|_| Bail)
}

impl<'a> Parser<'a, '_, '_> {
    #[inline]
    fn token(&mut self) -> P<Token<'a>> {
        self.r.token().map_err(|_| Bail)
    }

    /// An array header (fixarray read in place).
    #[inline]
    fn array_len(&mut self) -> P<u32> {
        match self.r.peek_byte() {
            Some(b @ 0x90..=0x9f) => {
                self.r.bump();
                Ok((b & 0x0f) as u32)
            }
            _ => match self.token()? {
                Token::Array(n) => Ok(n),
                _ => Err(Bail),
            },
        }
    }

    /// A `str` (fixstr read in place).
    #[inline]
    fn str(&mut self) -> P<&'a str> {
        let bytes = match self.r.peek_byte() {
            Some(b @ 0xa0..=0xbf) => {
                let at = self.pos() + 1;
                let end = at + (b & 0x1f) as usize;
                let payload: &'a [u8] = self.frames[0];
                let s = payload.get(at..end).ok_or(Bail)?;
                self.seek(end)?;
                s
            }
            _ => match self.token()? {
                Token::Str(s) => s,
                _ => return Err(Bail),
            },
        };
        utf8(bytes)
    }

    #[inline]
    fn enter(&mut self) -> P<()> {
        self.depth += 1;
        if self.depth > self.limits.max_depth {
            return Err(Bail);
        }
        Ok(())
    }

    #[inline]
    fn nil_next(&mut self) -> bool {
        if self.r.peek_byte() == Some(0xc0) {
            self.r.bump();
            true
        } else {
            false
        }
    }

    /// A declared element count the remaining input can hold (one byte
    /// each at least).
    #[inline]
    fn count(&self, n: u32) -> P<usize> {
        let n = n as usize;
        if n > self.r.remaining() {
            return Err(Bail);
        }
        Ok(n)
    }

    /// The payload position of the reader.
    #[inline]
    fn pos(&self) -> usize {
        self.base + self.r.position()
    }

    /// Moves the reader to payload position `pos`.
    fn seek(&mut self, pos: usize) -> P<()> {
        let payload: &'a [u8] = self.frames[0];
        self.r = Reader::new(payload.get(pos..).ok_or(Bail)?);
        self.base = pos;
        Ok(())
    }

    /// The value of `ty` at the reader through the schema-driven decoder.
    fn sub(&mut self, ty: &'static Ty) -> P<Value> {
        let sub =
            decode_sub(ty, self.frames, self.pos(), self.depth, self.tensor_budget, self.limits).map_err(|_| Bail)?;
        self.drift |= sub.drift;
        self.tensor_budget = sub.tensor_budget;
        self.seek(sub.end)?;
        Ok(sub.value)
    }

    fn batch(&mut self) -> P<Outputs<'a>> {
        let frames = self.frames;
        if frames.is_empty() || frames.len() > self.limits.max_frames {
            return Err(Bail);
        }
        if frames.iter().any(|f| f.len() > self.limits.max_frame_bytes) {
            return Err(Bail);
        }
        self.tensor_budget = frames.iter().map(|f| f.len()).sum();
        let schema = self.batch;
        let Token::Array(n) = self.token()? else { return Err(Bail) };
        self.enter()?;
        let n = self.count(n)?;
        let mut out = Outputs {
            engine_index: 0,
            outputs: Vec::new(),
            timestamp: 0.0,
            wave_complete: None,
            start_wave: None,
            weight_version: None,
            other: owned::Rare::default(),
            drift: Vec::new(),
            table: owned::Table(self.release),
        };
        let nf = schema.fields.len();
        for i in 0..n.min(nf) {
            let field = &schema.fields[i];
            if matches!(field.ty, Ty::Optional(_)) && self.nil_next() {
                continue;
            }
            match i {
                0 => match self.token()? {
                    Token::Int(v) => out.engine_index = v,
                    Token::UInt(v) => out.other.push((i, Value::UInt(v))),
                    _ => return Err(Bail),
                },
                1 => {
                    let Token::Array(k) = self.token()? else { return Err(Bail) };
                    let k = self.count(k)?;
                    self.enter()?;
                    // Every output takes 3 bytes at least (array header,
                    // request id, token list): no input reserves more than
                    // it could hold.
                    out.outputs.reserve_exact(k.min(self.r.remaining() / 3));
                    for _ in 0..k {
                        self.output(&mut out.outputs)?;
                    }
                    self.depth -= 1;
                }
                3 => {
                    out.timestamp = match self.token()? {
                        Token::F64(v) => v,
                        Token::F32(v) => v as f64,
                        Token::Int(v) => v as f64,
                        Token::UInt(v) => v as f64,
                        _ => return Err(Bail),
                    }
                }
                6 | 7 => {
                    let v = match self.token()? {
                        Token::Int(v) => Some(v),
                        Token::UInt(v) => {
                            out.other.push((i, Value::UInt(v)));
                            None
                        }
                        _ => return Err(Bail),
                    };
                    if i == 6 {
                        out.wave_complete = v;
                    } else {
                        out.start_wave = v;
                    }
                }
                8 => match self.token()? {
                    Token::Str(b) => out.weight_version = Some(utf8(b)?),
                    _ => return Err(Bail),
                },
                _ => {
                    let v = self.sub(field.ty)?;
                    out.other.push((i, v));
                }
            }
        }
        for _ in nf..n {
            self.r.skip_value().map_err(|_| Bail)?;
            self.drift = true;
        }
        if !self.r.is_empty() {
            return Err(Bail);
        }
        Ok(out)
    }

    /// Reads one output into a new last element of `outs` (built in place:
    /// an output is a dozen words, and moving it costs as much as reading
    /// it).
    fn output(&mut self, outs: &mut Vec<Output<'a>>) -> P<()> {
        let start = self.pos();
        let n = self.array_len()?;
        self.enter()?;
        let n = self.count(n)?;
        if n < 2 {
            return Err(Bail);
        }
        let schema = self.batch_output_schema();
        let nf = schema.fields.len();
        outs.push(Output {
            request_id: "",
            new_token_ids: IntRun::default(),
            new_logprobs: None,
            finish_reason: None,
            stop_reason: None,
            num_nans_in_logits: 0,
            other: owned::Rare::default(),
            raw: 0..0,
            table: owned::Table(self.release),
        });
        let Some(o) = outs.last_mut() else { return Err(Bail) };
        let m = n.min(nf);
        let mut i = 0;
        while i < m {
            if i == 2 && self.plain_tail(o, m)? {
                break;
            }
            let k = i;
            let field = &schema.fields[k];
            i += 1;
            if matches!(field.ty, Ty::Optional(_)) && self.nil_next() {
                continue;
            }
            match k {
                0 => o.request_id = self.str()?,
                1 => {
                    let at = self.pos();
                    match self.int_run()? {
                        Some(run) => o.new_token_ids = run,
                        None => {
                            self.seek(at)?;
                            let v = self.sub(field.ty)?;
                            o.other.push((k, v));
                        }
                    }
                }
                2 => {
                    let at = self.pos();
                    let (budget, depth) = (self.tensor_budget, self.depth);
                    match self.logprobs()? {
                        Some(l) => o.new_logprobs = Some(Box::new(l)),
                        None => {
                            self.seek(at)?;
                            self.depth = depth;
                            self.tensor_budget = budget;
                            let v = self.sub(field.ty)?;
                            o.other.push((k, v));
                        }
                    }
                }
                5 => match self.token()? {
                    Token::Int(v) => {
                        let allowed = matches!(field.ty, Ty::Optional(Ty::IntEnum(e)) if e.contains(v));
                        match FinishReason::from_wire(v) {
                            Some(r) if allowed => o.finish_reason = Some(r),
                            _ => return Err(Bail),
                        }
                    }
                    _ => return Err(Bail),
                },
                6 => match self.token()? {
                    Token::Int(v) => o.stop_reason = Some(StopRef::TokenId(v)),
                    Token::UInt(v) => o.other.push((k, Value::UInt(v))),
                    Token::Str(b) => o.stop_reason = Some(StopRef::Text(utf8(b)?)),
                    _ => return Err(Bail),
                },
                13 => match self.token()? {
                    Token::Int(v) => o.num_nans_in_logits = v,
                    Token::UInt(v) => o.other.push((k, Value::UInt(v))),
                    _ => return Err(Bail),
                },
                _ => {
                    let v = self.sub(field.ty)?;
                    o.other.push((k, v));
                }
            }
        }
        for _ in nf..n {
            self.r.skip_value().map_err(|_| Bail)?;
            self.drift = true;
        }
        self.depth -= 1;
        o.raw = start..self.pos();
        Ok(())
    }

    /// The common rest of an output, fields 2 to `m`: every one nil but
    /// `finish_reason` (nil or a `FinishReason` value) and
    /// `num_nans_in_logits` (a small non-negative integer), read in one
    /// pass over the bytes (`tables` checked that exactly those two are not
    /// optional or take these values). `false`: not that form, the field
    /// loop reads it.
    #[inline]
    fn plain_tail(&mut self, o: &mut Output<'a>, m: usize) -> P<bool> {
        let at = self.pos();
        let Some(rest) = self.frames[0].get(at..at + (m - 2)) else { return Ok(false) };
        let (mut finish, mut nans) = (None, 0);
        for (j, &b) in rest.iter().enumerate() {
            match (j + 2, b) {
                (13, 0x00..=0x7f) => nans = b as i64,
                (13, _) => return Ok(false),
                (_, 0xc0) => {}
                (5, 0..=4) => finish = FinishReason::from_wire(b as i64),
                _ => return Ok(false),
            }
        }
        o.finish_reason = finish;
        o.num_nans_in_logits = nans;
        self.seek(at + (m - 2))?;
        Ok(true)
    }

    #[inline]
    fn batch_output_schema(&self) -> &'static StructSchema {
        match self.batch.fields[1].ty {
            Ty::List(Ty::Struct(s)) => s,
            // `tables` checked the layout.
            _ => self.batch,
        }
    }

    /// A `list[int]`: the run, or `None` when an element is above
    /// `i64::MAX` (the caller then takes the schema-driven decoder's value).
    fn int_run(&mut self) -> P<Option<IntRun<'a>>> {
        let n = self.array_len()?;
        let n = self.count(n)?;
        self.enter()?;
        let start = self.pos();
        let mut wide = false;
        for _ in 0..n {
            if self.r.small_int().is_some() {
                continue;
            }
            match self.token()? {
                Token::Int(_) => {}
                Token::UInt(_) => wide = true,
                _ => return Err(Bail),
            }
        }
        self.depth -= 1;
        if wide {
            return Ok(None);
        }
        let bytes = &self.frames[0][start..self.pos()];
        Ok(Some(IntRun { bytes, len: n }))
    }

    /// `LogprobsLists`, or `None` for a form read by the schema-driven
    /// decoder instead (more than 8 dimensions, an integer above
    /// `i64::MAX`).
    fn logprobs(&mut self) -> P<Option<LogprobsRef<'a>>> {
        let Token::Array(n) = self.token()? else { return Err(Bail) };
        self.enter()?;
        let n = self.count(n)?;
        if !(3..=4).contains(&n) {
            return Err(Bail);
        }
        let Some(logprob_token_ids) = self.tensor()? else { return Ok(None) };
        let Some(logprobs) = self.tensor()? else { return Ok(None) };
        let Some(sampled_token_ranks) = self.tensor()? else { return Ok(None) };
        let mut cu_num_generated_tokens = None;
        if n == 4 && !self.nil_next() {
            match self.int_run()? {
                Some(run) => cu_num_generated_tokens = Some(run),
                None => return Ok(None),
            }
        }
        self.depth -= 1;
        Ok(Some(LogprobsRef { logprob_token_ids, logprobs, sampled_token_ranks, cu_num_generated_tokens }))
    }

    /// A numpy tensor, or `None` for more than 8 dimensions.
    fn tensor(&mut self) -> P<Option<TensorRef<'a>>> {
        if self.token()? != Token::Array(3) {
            return Err(Bail);
        }
        self.enter()?;
        let Token::Str(d) = self.token()? else { return Err(Bail) };
        let dtype = utf8(d)?;
        let Some(parsed) = numpy_dtype(dtype) else { return Err(Bail) };
        let Token::Array(dims) = self.token()? else { return Err(Bail) };
        let dims = self.count(dims)?;
        let start = self.pos();
        let mut shape = [0i64; 8];
        for i in 0..dims {
            let Token::Int(x) = self.token()? else { return Err(Bail) };
            if i < shape.len() {
                shape[i] = x;
            }
        }
        if dims > shape.len() {
            return Ok(None);
        }
        let shape_run = IntRun { bytes: &self.frames[0][start..self.pos()], len: dims };
        let (data, frame) = match self.token()? {
            Token::Ext(3, b) | Token::Bin(b) => (b, None),
            Token::Int(i) if i >= 0 && (i as usize) < self.frames.len() => (self.frames[i as usize], Some(i as usize)),
            _ => return Err(Bail),
        };
        if check_tensor_shape(TensorKind::Numpy, &shape[..dims], data.len(), parsed.elem.size()).is_err() {
            return Err(Bail);
        }
        if data.len() > self.tensor_budget {
            return Err(Bail);
        }
        self.tensor_budget -= data.len();
        self.depth -= 1;
        Ok(Some(TensorRef { dtype, shape: shape_run, data, frame }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_typed_vllm_table_has_the_layout_the_fast_decoder_reads() {
        for v in ["0.32.0", "0.33.0", "0.34.0"] {
            let rel = crate::release(crate::schema::Dialect::Vllm, v).expect("table");
            let batch = rel.engine_core_outputs.as_struct().expect("struct");
            assert!(layout_ok(batch, rel.engine_core_output), "{v}");
        }
    }
}
