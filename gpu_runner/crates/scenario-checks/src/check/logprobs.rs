//! Logprob checks of vLLM replay (`sample_logprobs`, `prompt_logprobs`):
//! the engine's `LogprobsLists` / `LogprobsTensors` read as rows, and
//! shaped to the client's `k` by `engine_protocol::translate::LogprobShaper`
//! as vLLM's frontend shapes them (docs/runner/scenarios.md "Scenarios": `<i4`/`int32`
//! ids, `<f4` logprobs, `<i8` ranks; `k + 1` columns, the sampled token
//! first; prompt logprobs in the first output only, `P − 1` rows).

use std::collections::BTreeSet;

use engine_protocol::translate::{self, EngineRow, LogprobShaper};
use engine_protocol::Numbers;
use engine_protocol::{StructValue, Value};

use super::error::CheckFailure;
use super::observation::Observation;

/// The shape of `t` with an inferred dimension (`-1`, as vLLM accepts it)
/// resolved from its data, as vLLM's decoder resolves it.
pub fn resolved_shape(t: &engine_protocol::Tensor) -> Option<Vec<i64>> {
    let size = t.parsed_dtype()?.elem.size();
    let dims = engine_protocol::internal::resolve_shape(&t.shape, t.data.len() / size)?;
    dims.into_iter().map(|d| i64::try_from(d).ok()).collect()
}

/// A `[rows, cols]` tensor as rows of numbers.
fn matrix(t: &Value, what: &str) -> Result<(Vec<i64>, Numbers), String> {
    let Value::Tensor(t) = t else { return Err(format!("{what} is not a tensor")) };
    let n = t.numbers().ok_or_else(|| format!("{what}: dtype {} does not read", t.dtype))?;
    let shape = resolved_shape(t).ok_or_else(|| format!("{what}: shape {:?} does not fit its data", t.shape))?;
    Ok((shape, n))
}

fn ints_of(n: Numbers, what: &str) -> Result<Vec<i64>, String> {
    match n {
        Numbers::Ints(v) => Ok(v),
        _ => Err(format!("{what} are not integers")),
    }
}

fn floats_of(n: Numbers, what: &str) -> Result<Vec<f64>, String> {
    match n {
        Numbers::Floats(v) => Ok(v),
        _ => Err(format!("{what} are not floats")),
    }
}

/// Rows of a `LogprobsLists` / `LogprobsTensors` struct: `(ids, logprobs,
/// ranks)` field names differ between the two.
fn engine_rows(s: &StructValue, ranks_field: &str) -> Result<Vec<EngineRow>, String> {
    let get = |k: &str| s.get(k).ok_or_else(|| format!("no {k}"));
    let (ids_shape, ids) = matrix(get("logprob_token_ids")?, "logprob_token_ids")?;
    let (lp_shape, lps) = matrix(get("logprobs")?, "logprobs")?;
    let (rank_shape, ranks) = matrix(get(ranks_field)?, ranks_field)?;
    let (ids, lps, ranks) = (ints_of(ids, "token ids")?, floats_of(lps, "logprobs")?, ints_of(ranks, "ranks")?);
    let [rows, cols] = ids_shape.as_slice() else { return Err(format!("token ids of shape {ids_shape:?}")) };
    if lp_shape != ids_shape || rank_shape != [*rows] {
        return Err(format!("shapes disagree: ids {ids_shape:?}, logprobs {lp_shape:?}, ranks {rank_shape:?}"));
    }
    let (Ok(rows), Ok(cols)) = (usize::try_from(*rows), usize::try_from(*cols)) else {
        return Err(format!("token ids of shape {ids_shape:?}"));
    };
    if cols == 0 || ids.len() != rows * cols || lps.len() != rows * cols || ranks.len() != rows {
        return Err(format!(
            "{} ids, {} logprobs and {} ranks for shape {ids_shape:?}",
            ids.len(),
            lps.len(),
            ranks.len()
        ));
    }
    Ok((0..rows)
        .map(|i| EngineRow {
            token_ids: ids[i * cols..(i + 1) * cols].iter().map(|&t| u32::try_from(t).unwrap_or(u32::MAX)).collect(),
            logprobs: lps[i * cols..(i + 1) * cols].to_vec(),
            rank: ranks[i],
        })
        .collect())
}

/// One engine row shaped to the client's `k`: vLLM keeps the sampled
/// token and the first `k` top columns, the top columns ranked `1..=k`,
/// the sampled token with its own rank, one entry per token (the default
/// container), so the ranks seen are `{1..=k} ∪ {rank}`.
fn check_shaped(pos: usize, row: &EngineRow, entries: &[translate::LogprobEntry], k: i64) -> Result<(), String> {
    let top = (row.token_ids.len() as i64 - 1).min(k).max(0);
    let mut want: BTreeSet<i64> = (1..=top).collect();
    want.insert(row.rank);
    let got: BTreeSet<i64> = entries.iter().map(|e| e.rank).collect();
    if got != want || entries.len() != want.len() {
        return Err(format!("position {pos}: shaped ranks {got:?} ({} entries), expected {want:?}", entries.len()));
    }
    let sampled = row.token_ids.first().copied().unwrap_or(u32::MAX);
    match entries.iter().find(|e| e.token_id == sampled) {
        Some(e) if e.rank == row.rank => Ok(()),
        Some(e) => Err(format!(
            "position {pos}: the sampled token {sampled} has rank {} after shaping, engine said {}",
            e.rank, row.rank
        )),
        None => Err(format!("position {pos}: the sampled token {sampled} is not among the shaped entries")),
    }
}

/// Sample logprobs: one row per generated token, `K + 1` columns (at
/// least the client's `k + 1`: the batch's largest k decides), the
/// sampled token first with a rank >= 1, the top columns in descending
/// order; shaped to `k` by `translate::LogprobShaper`.
pub fn check_sample(ch: &Observation, k: i64) -> Result<(), CheckFailure> {
    sample(ch, k).map_err(CheckFailure::Logprobs)
}

fn sample(ch: &Observation, k: i64) -> Result<(), String> {
    let mut rows = Vec::new();
    for (i, o) in ch.outputs.iter().enumerate() {
        let Some(l) = o.struct_field("new_logprobs") else { continue };
        let sampled = o.get("new_token_ids").and_then(Value::token_ids).unwrap_or_default();
        let step = engine_rows(l, "sampled_token_ranks").map_err(|e| format!("output {i}: {e}"))?;
        if step.len() != sampled.len() {
            return Err(format!("output {i}: {} logprob rows for {} tokens", step.len(), sampled.len()));
        }
        for (row, tok) in step.iter().zip(&sampled) {
            let cols = row.token_ids.len() as i64;
            if cols < k + 1 {
                return Err(format!("output {i}: {cols} columns, the client asked for k = {k}"));
            }
            if i64::from(row.token_ids[0]) != *tok {
                return Err(format!("output {i}: first column {} is not the sampled token {tok}", row.token_ids[0]));
            }
            if row.rank < 1 {
                return Err(format!("output {i}: sampled-token rank {}", row.rank));
            }
            if row.logprobs[1..].windows(2).any(|w| w[0] < w[1]) {
                return Err(format!("output {i}: top logprobs not in descending order: {:?}", row.logprobs));
            }
            if row.rank == 1 && row.logprobs.get(1).is_some_and(|top| row.logprobs[0] < *top) {
                return Err(format!("output {i}: rank 1 but logprob below the top one: {:?}", row.logprobs));
            }
        }
        rows.extend(step);
    }
    if rows.len() != ch.engine_tokens.len() {
        return Err(format!("{} logprob rows for {} tokens", rows.len(), ch.engine_tokens.len()));
    }
    let mut shaper = LogprobShaper::new(Some(k), None, false);
    shaper.add_sample_rows(None, &rows);
    let sample = shaper.sample.unwrap_or_default();
    if sample.len() != rows.len() {
        return Err(format!("{} shaped positions for {} rows", sample.len(), rows.len()));
    }
    for (pos, (row, entries)) in rows.iter().zip(&sample).enumerate() {
        check_shaped(pos, row, entries, k)?;
    }
    Ok(())
}

/// Prompt logprobs: `P - 1` rows of `k + 1` columns, in the first output
/// only, row `i` scoring prompt token `i + 1` (first column) with a rank
/// of at least 1; shaped by `translate::LogprobShaper` to `P` positions,
/// the first `None`.
pub fn check_prompt(ch: &Observation, prompt: &[i64], k: i64) -> Result<(), CheckFailure> {
    prompt_rows(ch, prompt, k).map_err(CheckFailure::Logprobs)
}

fn prompt_rows(ch: &Observation, prompt: &[i64], k: i64) -> Result<(), String> {
    let carrying: Vec<usize> = ch
        .outputs
        .iter()
        .enumerate()
        .filter(|(_, o)| !o.is_nil("new_prompt_logprobs_tensors"))
        .map(|(i, _)| i)
        .collect();
    if carrying != [0] {
        return Err(format!("prompt logprobs in outputs {carrying:?}, expected the first only"));
    }
    let t = ch.outputs[0].struct_field("new_prompt_logprobs_tensors").ok_or("prompt logprobs are not a struct")?;
    let rows = engine_rows(t, "selected_token_ranks")?;
    if rows.len() + 1 != prompt.len() {
        return Err(format!("{} rows for a prompt of {}", rows.len(), prompt.len()));
    }
    for (i, row) in rows.iter().enumerate() {
        if row.token_ids.len() as i64 != k + 1 {
            return Err(format!("row {i}: {} columns, expected {}", row.token_ids.len(), k + 1));
        }
        if i64::from(row.token_ids[0]) != prompt[i + 1] {
            return Err(format!("row {i}: first column {} is not prompt token {}", row.token_ids[0], prompt[i + 1]));
        }
        if row.rank < 1 {
            return Err(format!("row {i}: rank {}", row.rank));
        }
    }
    let mut shaper = LogprobShaper::new(None, Some(k), false);
    shaper.add_prompt_rows(None, &rows);
    let shaped = shaper.prompt.unwrap_or_default();
    if shaped.len() != prompt.len() || shaped.first().is_some_and(Option::is_some) {
        return Err(format!(
            "{} shaped prompt positions (first {:?}), expected {} with the first None",
            shaped.len(),
            shaped.first(),
            prompt.len()
        ));
    }
    for (pos, (row, entries)) in rows.iter().zip(&shaped[1..]).enumerate() {
        check_shaped(pos + 1, row, entries.as_deref().unwrap_or_default(), k)?;
    }
    Ok(())
}
