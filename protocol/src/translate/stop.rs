//! Streaming stop-string detection over incremental detokenization, and the
//! per-request output state a gateway keeps while an engine streams tokens
//! (finish-reason synthesis for local stops, see [`super::finish`]).
//!
//! Reference semantics ([`StopSemantics::Vllm`], the default) are vLLM's
//! frontend (`BaseIncrementalDetokenizer.update`, `check_stop_strings`,
//! `get_next_output_text`, `OutputProcessor.process_outputs`), checked by
//! the `stop_detection` goldens:
//!
//! * text grows by the incremental decoder's deltas (nothing is emitted
//!   while a multi-byte character is unfinished);
//! * a stop-terminated engine output (finish STOP from a stop token id or
//!   EOS) does not detokenize its last token unless
//!   `include_stop_str_in_output`;
//! * stop strings are checked only once more than `min_tokens` tokens were
//!   generated, and only over text that the tokens after the first
//!   `min_tokens` produced (plus a `len(stop) - 1` overlap);
//! * when several stop strings match, the one whose match **ends earliest**
//!   wins; on equal ends, the earlier in the request's list wins;
//! * hidden stops (`include_stop_str_in_output = false`) truncate the text
//!   before the match, visible ones after it; tokens after the one that
//!   completed the match are dropped from the output ids;
//! * while streaming, the last `max(len(stop)) - 1` **characters** (code
//!   points) are held back (none when `include_stop_str_in_output`), and
//!   released when the request finishes.
//!
//! [`StopSemantics::Smg`] reproduces the SMG router decoder
//! (docs/translation.md "Stop detection"): ties on the end go to the
//! longer stop, the hold-back is the longest stop's length in **bytes**
//! (whether or not the stop is visible), and `min_tokens` is ignored.
#![warn(missing_docs)]

use std::collections::HashMap;

use super::tokenizer::{DecodeStream, DecodeStreamError, GatewayTokenizer};
use crate::typed::{FinishReason, StopReason};

/// Which frontend's stop semantics to follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum StopSemantics {
    /// vLLM's frontend (the reference; goldens `stop/*`).
    #[default]
    Vllm,
    /// SMG's router `StopSequenceDecoder`: earliest end then longest match,
    /// fixed byte hold-back of the longest stop, `min_tokens` ignored.
    Smg,
}

/// The request fields the detector reads.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StopParams {
    /// Stop strings.
    pub stop: Vec<String>,
    /// Keep a matched stop string in the output.
    pub include_stop_str_in_output: bool,
    /// Output tokens before which no stop applies.
    pub min_tokens: usize,
    /// Special tokens decode to nothing.
    pub skip_special_tokens: bool,
    /// Spaces between added tokens when they are not skipped.
    pub spaces_between_special_tokens: bool,
    /// Stop strings that the translation sent to the engine as single
    /// token ids ([`super::request::Translated::stop_string_token_ids`]):
    /// an engine stop on one of these ids is re-checked as text, so the
    /// result is exactly what the string check alone would give.
    pub stop_string_token_ids: HashMap<u32, String>,
    /// Which frontend's semantics to follow.
    pub semantics: StopSemantics,
}

impl StopParams {
    /// These stop strings, everything else at vLLM's defaults.
    pub fn new(stop: Vec<String>) -> Self {
        StopParams { stop, skip_special_tokens: true, spaces_between_special_tokens: true, ..Default::default() }
    }
}

/// Python's `len(s)`: code points.
fn chars(s: &str) -> usize {
    s.chars().count()
}

/// Byte offset of code point `i` (or the end).
fn byte_at(s: &str, i: usize) -> usize {
    s.char_indices().nth(i).map_or(s.len(), |(b, _)| b)
}

/// The incremental detokenizer with stop-string checking.
#[derive(Debug, Clone)]
pub struct StopDetector {
    prompt: Vec<u32>,
    stream: DecodeStream,
    params: StopParams,
    /// Added token ids -> content, when spaces between special tokens are
    /// suppressed.
    added: Option<HashMap<u32, String>>,
    last_special: bool,
    token_ids: Vec<u32>,
    output_text: String,
    /// Code points of `output_text`.
    output_chars: usize,
    /// Hold-back while streaming: code points (vLLM) or bytes (SMG).
    buffer_length: usize,
    last_output_offset: usize,
    max_stop_bytes: usize,
}

impl StopDetector {
    /// A detector for one request: its prompt primes the detokenizer.
    pub fn new(tok: &GatewayTokenizer, prompt: &[u32], params: StopParams) -> Self {
        let stop_nonempty = params.stop.iter().any(|s| !s.is_empty());
        let max_stop_bytes = params.stop.iter().map(String::len).max().unwrap_or(0);
        let buffer_length = match params.semantics {
            StopSemantics::Vllm if stop_nonempty && !params.include_stop_str_in_output => {
                params.stop.iter().map(|s| chars(s)).max().unwrap_or(1).saturating_sub(1)
            }
            StopSemantics::Vllm => 0,
            StopSemantics::Smg if stop_nonempty => max_stop_bytes,
            StopSemantics::Smg => 0,
        };
        let spaces = params.skip_special_tokens || params.spaces_between_special_tokens;
        let added = if spaces || tok.added_tokens.is_empty() { None } else { Some(tok.added_tokens.clone()) };
        StopDetector {
            prompt: prompt.to_vec(),
            stream: DecodeStream::new(prompt, params.skip_special_tokens),
            params,
            added,
            last_special: false,
            token_ids: Vec::new(),
            output_text: String::new(),
            output_chars: 0,
            buffer_length,
            last_output_offset: 0,
            max_stop_bytes,
        }
    }

    /// The request's stop parameters.
    pub fn params(&self) -> &StopParams {
        &self.params
    }

    /// Output token ids kept so far (tokens after a stop match dropped).
    pub fn output_token_ids(&self) -> &[u32] {
        &self.token_ids
    }

    /// How many output tokens were kept.
    pub fn num_output_tokens(&self) -> usize {
        self.token_ids.len()
    }

    /// The whole text detokenized so far (after any stop truncation).
    pub fn output_text(&self) -> &str {
        &self.output_text
    }

    /// The documented bound on text held back while streaming: code points
    /// for vLLM (`max len(stop) - 1`, 0 with include_stop_str_in_output),
    /// bytes for SMG (longest stop in bytes, plus up to 3 bytes to stay on a
    /// character boundary).
    pub fn hold_back_bound(&self) -> usize {
        match self.params.semantics {
            StopSemantics::Vllm => self.buffer_length,
            StopSemantics::Smg => self.buffer_length + 3,
        }
    }

    fn decode_next(&mut self, tok: &GatewayTokenizer, id: u32) -> String {
        let text = match self.stream.step(tok, id) {
            Ok(t) => t,
            Err(DecodeStreamError::InvalidPrefix { .. }) => {
                // vLLM restarts the stream without the prompt.
                self.stream = DecodeStream::new(&[], self.params.skip_special_tokens);
                self.stream.step(tok, id).ok().flatten()
            }
            Err(_) => None,
        };
        let mut text = text.unwrap_or_default();
        if let Some(added) = &self.added {
            let special = added.get(&id);
            if let Some(content) = special {
                if self.last_special {
                    text = content.clone();
                }
            }
            self.last_special = special.is_some();
        }
        text
    }

    fn push_text(&mut self, s: &str) {
        self.output_chars += chars(s);
        self.output_text.push_str(s);
    }

    /// Detokenizes `new_ids` and checks the stop strings (vLLM's
    /// `update`). Returns the matched stop string.
    pub fn update(&mut self, tok: &GatewayTokenizer, new_ids: &[u32], stop_terminated: bool) -> Option<String> {
        if new_ids.is_empty() {
            return None;
        }
        let (ids, skipped) = if stop_terminated && !self.params.include_stop_str_in_output {
            (&new_ids[..new_ids.len() - 1], Some(new_ids[new_ids.len() - 1]))
        } else {
            (new_ids, None)
        };
        let num_prev = self.token_ids.len();
        let first_new = self.token_ids.len();
        let has_stop = !self.params.stop.is_empty();
        // token_offsets in code points of output_text
        let mut offsets = vec![self.output_chars];
        for &id in ids {
            self.token_ids.push(id);
            let t = self.decode_next(tok, id);
            self.push_text(&t);
            offsets.push(self.output_chars);
        }
        if let Some(id) = skipped {
            self.token_ids.push(id);
            offsets.push(self.output_chars);
        }
        if !has_stop {
            return None;
        }
        let min_tokens = match self.params.semantics {
            StopSemantics::Vllm => self.params.min_tokens,
            StopSemantics::Smg => 0,
        };
        if self.token_ids.len() <= min_tokens {
            return None;
        }
        let check_from = offsets[min_tokens.saturating_sub(num_prev)];
        let new_char_count = self.output_chars - check_from;
        let (stop, truncate_to) = self.check_stop_strings(new_char_count)?;
        let mut stop_end = truncate_to.unwrap_or(self.output_chars);
        if !self.params.include_stop_str_in_output {
            stop_end += chars(&stop);
        }
        // bisect_left(offsets, stop_end, lo=1)
        let num_kept = 1 + offsets[1..].partition_point(|&o| o < stop_end);
        self.token_ids.truncate(first_new + num_kept);
        if let Some(t) = truncate_to {
            let b = byte_at(&self.output_text, t);
            self.output_text.truncate(b);
            self.output_chars = t;
        }
        Some(stop)
    }

    /// `(stop, truncate_to)`: truncate_to in code points, `None` for no
    /// truncation.
    fn check_stop_strings(&self, new_char_count: usize) -> Option<(String, Option<usize>)> {
        if new_char_count == 0 {
            return None;
        }
        let text: Vec<char> = self.output_text.chars().collect();
        let n = text.len();
        // (end, start, list index)
        let mut best: Option<(usize, usize, usize)> = None;
        for (li, s) in self.params.stop.iter().enumerate() {
            let pat: Vec<char> = s.chars().collect();
            if pat.is_empty() {
                continue;
            }
            let back = new_char_count + pat.len() - 1;
            let from = n.saturating_sub(back);
            let Some(start) = find(&text, &pat, from) else { continue };
            let end = start + pat.len();
            let better = match (best, self.params.semantics) {
                (None, _) => true,
                (Some((be, _, _)), StopSemantics::Vllm) => end < be,
                // The earliest end, then the earliest start (the longest
                // match). Two matches of one span are one text, whichever
                // list entry names it.
                (Some((be, bs, _)), StopSemantics::Smg) => (end, start).cmp(&(be, bs)).is_lt(),
            };
            if better {
                best = Some((end, start, li));
            }
        }
        let (end, start, li) = best?;
        let stop = self.params.stop[li].clone();
        if self.params.include_stop_str_in_output {
            if end >= n {
                return Some((stop, None));
            }
            return Some((stop, Some(end)));
        }
        Some((stop, Some(start)))
    }

    /// The text to emit now (vLLM's `get_next_output_text(finished,
    /// delta=True)`): everything new except the hold-back, unless finished.
    pub fn next_output_text(&mut self, finished: bool) -> String {
        let hold = if finished { 0 } else { self.buffer_length };
        match self.params.semantics {
            // The cut never moves back: what was emitted stays emitted
            // (nothing new when the hold-back covers every new character).
            StopSemantics::Vllm => {
                let length = self.output_chars.saturating_sub(hold).max(self.last_output_offset);
                let a = byte_at(&self.output_text, self.last_output_offset);
                let b = byte_at(&self.output_text, length);
                self.last_output_offset = length;
                self.output_text[a..b].to_string()
            }
            StopSemantics::Smg => {
                // offsets in bytes; cut moved back to a char boundary
                let mut length = self.output_text.len().saturating_sub(hold);
                while !self.output_text.is_char_boundary(length) {
                    length -= 1;
                }
                let from = self.last_output_offset.min(self.output_text.len());
                let length = length.max(from);
                self.last_output_offset = length;
                self.output_text[from..length].to_string()
            }
        }
    }

    /// Text not emitted yet.
    pub fn held_back(&self) -> &str {
        let at = match self.params.semantics {
            StopSemantics::Vllm => byte_at(&self.output_text, self.last_output_offset),
            StopSemantics::Smg => self.last_output_offset.min(self.output_text.len()),
        };
        &self.output_text[at..]
    }

    /// The prompt the detokenizer was primed with.
    pub fn prompt(&self) -> &[u32] {
        &self.prompt
    }

    /// The longest stop string, in bytes.
    pub fn max_stop_bytes(&self) -> usize {
        self.max_stop_bytes
    }
}

fn find(hay: &[char], pat: &[char], from: usize) -> Option<usize> {
    if pat.len() > hay.len() {
        return None;
    }
    (from..=hay.len() - pat.len()).find(|&i| hay[i..i + pat.len()] == *pat)
}

/// One engine output for a request, as the gateway received it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EngineStep {
    /// The step's new token ids.
    pub new_token_ids: Vec<u32>,
    /// Set when the engine finished the request.
    pub finish_reason: Option<FinishReason>,
    /// The engine's stop reason (a stop token id, or a string).
    pub stop_reason: Option<StopReason>,
}

/// What the gateway emits to its client for one engine output (DELTA).
#[derive(Debug, Clone, PartialEq)]
pub struct StepOutput {
    /// The new text (a delta).
    pub text: String,
    /// The new token ids kept.
    pub token_ids: Vec<u32>,
    /// Set on the request's last output.
    pub finish_reason: Option<FinishReason>,
    /// The matched stop string or token, when it stopped on one.
    pub stop_reason: Option<StopReason>,
    /// The engine still runs this request (a local stop): send ABORT.
    pub abort_engine: bool,
}

/// The per-request output state: detokenizer + stop detector + finish
/// synthesis (vLLM's `RequestState` / `process_outputs` for one request).
#[derive(Debug, Clone)]
pub struct RequestStream {
    /// The detokenizer and stop detector.
    pub detector: StopDetector,
    finished: bool,
}

impl RequestStream {
    /// The state of one request before any output.
    pub fn new(tok: &GatewayTokenizer, prompt: &[u32], params: StopParams) -> Self {
        RequestStream { detector: StopDetector::new(tok, prompt, params), finished: false }
    }

    /// Whether the request has finished (no output follows).
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Processes one engine output. `None` once the request has finished
    /// (outputs for a finished request are ignored, as vLLM does).
    pub fn step(&mut self, tok: &GatewayTokenizer, step: &EngineStep) -> Option<StepOutput> {
        if self.finished {
            return None;
        }
        let mut finish = step.finish_reason;
        let mut stop_reason = step.stop_reason.clone();
        let mut new_ids = step.new_token_ids.clone();
        let num_prev = self.detector.num_output_tokens();
        // An engine stop on a stop string sent as a token id: check it as text.
        let converted = match (&finish, &stop_reason) {
            (Some(FinishReason::Stop), Some(StopReason::TokenId(id))) => u32::try_from(*id)
                .ok()
                .filter(|id| new_ids.last() == Some(id))
                .and_then(|id| self.detector.params.stop_string_token_ids.get(&id).cloned()),
            _ => None,
        };
        let stop_terminated = finish == Some(FinishReason::Stop) && converted.is_none();
        let matched = self.detector.update(tok, &new_ids, stop_terminated);
        if let Some(s) = matched {
            finish = Some(FinishReason::Stop);
            stop_reason = Some(StopReason::Text(s));
            let kept = self.detector.num_output_tokens() - num_prev;
            new_ids.truncate(kept);
        } else if let Some(s) = converted {
            stop_reason = Some(StopReason::Text(s));
        }
        let finished = finish.is_some();
        let text = self.detector.next_output_text(finished);
        if finished {
            self.finished = true;
        }
        Some(StepOutput {
            text,
            token_ids: new_ids,
            finish_reason: finish,
            stop_reason: if finished { stop_reason } else { None },
            abort_engine: finished && step.finish_reason.is_none(),
        })
    }
}

/// A token stream delivered to one request in engine steps
/// ([`stream_in_steps`]): what the client saw, and how much text the detector
/// held back at most between steps.
#[derive(Debug, Clone)]
pub struct StreamRun {
    /// Every output, in order.
    pub outputs: Vec<StepOutput>,
    /// The deltas, concatenated.
    pub text: String,
    /// The token ids, concatenated.
    pub token_ids: Vec<u32>,
    /// The longest held-back text between outputs, in the unit of the
    /// semantics' bound (code points for vLLM's, bytes for SMG's).
    pub max_held_back: usize,
    /// [`StopDetector::hold_back_bound`].
    pub hold_back_bound: usize,
}

impl StreamRun {
    /// The stop string that finished the stream, if any.
    pub fn stop_string(&self) -> Option<&str> {
        self.outputs.iter().find_map(|o| match &o.stop_reason {
            Some(StopReason::Text(s)) => Some(s.as_str()),
            _ => None,
        })
    }
}

/// Delivers `ids` to a new request stream in engine steps of `sizes`
/// tokens (round-robin, each at least 1), the last step finishing with
/// LENGTH, as an engine would; stops early when the request finishes. The
/// streamed-against-one-shot checks of the property tests and of the
/// `stop_detector` fuzz target compare two such runs.
pub fn stream_in_steps(
    tok: &GatewayTokenizer,
    prompt: &[u32],
    params: &StopParams,
    ids: &[u32],
    sizes: &[usize],
) -> StreamRun {
    let mut rs = RequestStream::new(tok, prompt, params.clone());
    let hold_back_bound = rs.detector.hold_back_bound();
    let (mut outputs, mut i, mut k, mut max_held_back) = (Vec::new(), 0, 0, 0);
    while i < ids.len() && !rs.is_finished() {
        let n = sizes.get(k % sizes.len().max(1)).copied().unwrap_or(1).max(1);
        k += 1;
        let chunk = ids[i..(i + n).min(ids.len())].to_vec();
        i += n;
        let last = i >= ids.len();
        let step =
            EngineStep { new_token_ids: chunk, finish_reason: last.then_some(FinishReason::Length), stop_reason: None };
        if let Some(o) = rs.step(tok, &step) {
            if o.finish_reason.is_none() {
                let held = match params.semantics {
                    StopSemantics::Vllm => rs.detector.held_back().chars().count(),
                    StopSemantics::Smg => rs.detector.held_back().len(),
                };
                max_held_back = max_held_back.max(held);
            }
            outputs.push(o);
        }
    }
    let text = outputs.iter().map(|o| o.text.as_str()).collect();
    let token_ids = outputs.iter().flat_map(|o| o.token_ids.iter().copied()).collect();
    StreamRun { outputs, text, token_ids, max_held_back, hold_back_bound }
}
