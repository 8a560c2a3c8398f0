//! Top-k logprob shaping: from the engine's `K_batch + 1` columns per
//! position (sampled token first, then the batch-wide top `K_batch`, see
//! docs/wire-protocol.md §9.3) to what the client asked for, as vLLM's frontend
//! does it (`LogprobsProcessor`, `append_logprobs_for_next_position`):
//!
//! * the client's own `k` (`-1` = every column): the sampled token plus the
//!   first `k` top columns, i.e. the first `k + 1` columns;
//! * ranks: the engine's rank for the sampled token (1-based, ties counted
//!   against it; **0 when its logprob is NaN**), `1..=k` for the top columns;
//! * the sampled token's duplicate in the top list (always the case for
//!   greedy sampling): with the default (dict) container the two entries
//!   merge into one **at the sampled token's position** carrying the top
//!   entry's logprob and rank, so the position has `k` entries instead of
//!   `k + 1`; with `flat_logprobs` both entries are kept;
//! * prompt logprobs: `P - 1` engine rows; the client sees `P` positions,
//!   the first `None` (an empty position with `flat_logprobs`);
//! * decoded tokens: each id decoded alone; a text ending in U+FFFD (an
//!   unfinished UTF-8 sequence) is re-decoded with up to 4 preceding
//!   sampled (or prompt) tokens as context, keeping only what this token
//!   adds, or `""` when still unfinished;
//! * a request with `detokenize = false`: no decoding at all, every
//!   `decoded_token` is `None` (vLLM's `OutputProcessor` then hands
//!   `LogprobsProcessor` no tokenizer).
#![warn(missing_docs)]

use super::tokenizer::GatewayTokenizer;

/// One `(token, logprob, rank, decoded)` entry of a position.
#[derive(Debug, Clone, PartialEq)]
pub struct LogprobEntry {
    /// The token.
    pub token_id: u32,
    /// Its logprob.
    pub logprob: f64,
    /// Its rank in the vocabulary (1 = most likely).
    pub rank: i64,
    /// Its text, when the request detokenizes.
    pub decoded_token: Option<String>,
}

/// One engine row: columns of ids and logprobs (sampled first) and the
/// sampled token's rank.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineRow {
    /// Token ids, the sampled one first.
    pub token_ids: Vec<u32>,
    /// Their logprobs, in the same order.
    pub logprobs: Vec<f64>,
    /// The sampled token's rank.
    pub rank: i64,
}

/// How many entries a client requested: `Some(k)` with `k >= -1`.
fn wanted(num_logprobs: i64, columns: usize) -> usize {
    if num_logprobs < 0 {
        columns
    } else {
        usize::try_from(num_logprobs).unwrap_or(usize::MAX)
    }
}

/// Shapes one row to the client's `num_logprobs` (vLLM order and ranks).
/// `decoded` gives the decoded text per column (or `None`).
pub fn shape_row(row: &EngineRow, num_logprobs: i64, flat: bool, decoded: Option<&[String]>) -> Vec<LogprobEntry> {
    let cols = row.token_ids.len().min(row.logprobs.len());
    let k = wanted(num_logprobs, cols);
    let take = cols.min(k.saturating_add(1));
    let mut out: Vec<LogprobEntry> = Vec::with_capacity(take);
    for c in 0..take {
        let e = LogprobEntry {
            token_id: row.token_ids[c],
            logprob: row.logprobs[c],
            rank: if c == 0 { row.rank } else { c as i64 },
            decoded_token: decoded.and_then(|d| d.get(c).cloned()),
        };
        if !flat {
            if let Some(prev) = out.iter_mut().find(|p| p.token_id == e.token_id) {
                *prev = e;
                continue;
            }
        }
        out.push(e);
    }
    out
}

/// The number of entries the client sees at one position (default
/// container): `min(k, K_batch) + 1`, minus one when the sampled token is
/// among the kept top columns (assuming distinct top ids).
pub fn expected_len(row: &EngineRow, num_logprobs: i64, flat: bool) -> usize {
    let cols = row.token_ids.len().min(row.logprobs.len());
    let take = cols.min(wanted(num_logprobs, cols).saturating_add(1));
    if flat || take == 0 {
        return take;
    }
    let dup = row.token_ids[1..take].contains(&row.token_ids[0]);
    take - usize::from(dup)
}

/// A request's logprob state (vLLM's `LogprobsProcessor` without the
/// Python containers).
#[derive(Debug, Clone)]
pub struct LogprobShaper {
    /// The request's `logprobs` (top-k per output token; -1 = vocabulary).
    pub num_logprobs: Option<i64>,
    /// The request's `prompt_logprobs`.
    pub num_prompt_logprobs: Option<i64>,
    /// The request's `flat_logprobs`.
    pub flat: bool,
    /// The request's `detokenize` (`SamplingParams.detokenize`, default
    /// true). When false no token is decoded, whatever tokenizer the add
    /// methods are given: every `decoded_token` is `None`.
    pub detokenize: bool,
    /// One entry list per generated position.
    pub sample: Option<Vec<Vec<LogprobEntry>>>,
    /// `None` first, then one entry list per scored prompt position.
    pub prompt: Option<Vec<Option<Vec<LogprobEntry>>>>,
    /// The sum of the sampled tokens' logprobs (with logprobs asked for).
    pub cumulative_logprob: Option<f64>,
}

impl LogprobShaper {
    /// The state of a request with these options, before any output.
    pub fn new(num_logprobs: Option<i64>, num_prompt_logprobs: Option<i64>, flat: bool) -> Self {
        LogprobShaper {
            num_logprobs,
            num_prompt_logprobs,
            flat,
            detokenize: true,
            sample: num_logprobs.map(|_| Vec::new()),
            // vLLM: the first prompt position is None; a flat container
            // stores it as an empty position.
            prompt: num_prompt_logprobs.map(|_| vec![if flat { Some(Vec::new()) } else { None }]),
            cumulative_logprob: num_logprobs.map(|_| 0.0),
        }
    }

    /// Sets the request's `detokenize` (see [`LogprobShaper::detokenize`]).
    pub fn with_detokenize(mut self, detokenize: bool) -> Self {
        self.detokenize = detokenize;
        self
    }

    fn decoded(tok: &GatewayTokenizer, ids: &[u32], context: &[u32]) -> Vec<String> {
        ids.iter()
            .map(|&id| {
                let t = tok.decode(&[id], false);
                if t.ends_with('\u{FFFD}') {
                    correct_decoded_token(tok, id, context)
                } else {
                    t
                }
            })
            .collect()
    }

    /// Sample rows of one engine output.
    pub fn add_sample_rows(&mut self, tok: Option<&GatewayTokenizer>, rows: &[EngineRow]) {
        let (Some(k), Some(sample)) = (self.num_logprobs, self.sample.as_mut()) else { return };
        let tok = tok.filter(|_| self.detokenize);
        for row in rows {
            let decoded = tok.map(|t| {
                let ctx = last_context(sample.iter().map(|p| p.first().map(|e| e.token_id)));
                Self::decoded(t, &row.token_ids, &ctx)
            });
            if let Some(c) = self.cumulative_logprob.as_mut() {
                *c += row.logprobs.first().copied().unwrap_or(0.0);
            }
            sample.push(shape_row(row, k, self.flat, decoded.as_deref()));
        }
    }

    /// Prompt rows (`P - 1` over one or more prefill chunks).
    pub fn add_prompt_rows(&mut self, tok: Option<&GatewayTokenizer>, rows: &[EngineRow]) {
        let (Some(k), Some(prompt)) = (self.num_prompt_logprobs, self.prompt.as_mut()) else { return };
        let tok = tok.filter(|_| self.detokenize);
        for row in rows {
            let decoded = tok.map(|t| {
                let ctx = last_context(prompt.iter().map(|p| p.as_ref().and_then(|p| p.first().map(|e| e.token_id))));
                Self::decoded(t, &row.token_ids, &ctx)
            });
            prompt.push(Some(shape_row(row, k, self.flat, decoded.as_deref())));
        }
    }
}

/// The first token of each of the last 4 positions that have one.
fn last_context(firsts: impl Iterator<Item = Option<u32>>) -> Vec<u32> {
    let all: Vec<Option<u32>> = firsts.collect();
    let start = all.len().saturating_sub(4);
    all[start..].iter().flatten().copied().collect()
}

/// vLLM's `_correct_decoded_token`: what `id` adds to up to 4 tokens of
/// context, or `""` while the byte sequence is unfinished.
pub fn correct_decoded_token(tok: &GatewayTokenizer, id: u32, context_ids: &[u32]) -> String {
    let max_ctx = context_ids.len().min(4);
    for num_ctx in 1..=max_ctx {
        let context = &context_ids[context_ids.len() - num_ctx..];
        let mut ids = context.to_vec();
        ids.push(id);
        let full = tok.decode(&ids, false);
        if full.ends_with('\u{FFFD}') {
            continue;
        }
        let mut clean_end = context.len();
        for j in (0..context.len()).rev() {
            if tok.decode(&context[j..=j], false).ends_with('\u{FFFD}') {
                clean_end = j;
            } else {
                break;
            }
        }
        // No tokens decode to "" (`GatewayTokenizer::decode`), so no branch
        // for `clean_end == 0` (mutation testing showed one doing nothing).
        let clean_prefix = tok.decode(&context[..clean_end], false);
        if let Some(rest) = full.strip_prefix(clean_prefix.as_str()) {
            return rest.to_string();
        }
        let common = full.chars().zip(clean_prefix.chars()).take_while(|(a, b)| a == b).count();
        return full.chars().skip(common).collect();
    }
    String::new()
}
