//! The validations vLLM's typed decoder runs on decode (msgspec calls
//! `__post_init__` on Structs and dataclasses), so a conformant gateway never
//! sends what they reject: on a real engine such a payload raises inside the
//! input thread and the engine stops reading input (docs/wire-protocol.md §10.1).
//!
//! Sources: docs/wire-protocol.md §10.2-§10.4; verdicts of vLLM 0.32/0.33's
//! own decoder on the `mutant` goldens.

use crate::error::Violation;
use crate::value::{StructValue, Value};

/// The constraint fields of `StructuredOutputsParams`, of which exactly one
/// must be non-nil (`json_object: false` counts as set).
pub const CONSTRAINT_FIELDS: [&str; 6] = ["json", "regex", "choice", "grammar", "json_object", "structural_tag"];

/// `StructuredOutputsParams.__post_init__`: exactly one constraint.
pub fn structured_outputs_params(v: &StructValue) -> Result<(), Violation> {
    let set: Vec<&str> = CONSTRAINT_FIELDS.iter().copied().filter(|f| !v.is_nil(f)).collect();
    if set.len() == 1 {
        return Ok(());
    }
    if set.is_empty() {
        Err(Violation::new(
            "",
            format!(
                "exactly one structured-output constraint must be set ({}), got none",
                CONSTRAINT_FIELDS.join(", ")
            ),
        ))
    } else {
        Err(Violation::new(
            set.join(","),
            format!("exactly one structured-output constraint must be set, got {}: {}", set.len(), set.join(", ")),
        ))
    }
}

/// `LoRARequest.__post_init__`: a positive id and a non-empty path.
pub fn lora_request(v: &StructValue) -> Result<(), Violation> {
    match v.get("lora_int_id") {
        Some(Value::Int(id)) if *id < 1 => {
            return Err(Violation::new("lora_int_id", format!("must be at least 1, got {id}")));
        }
        _ => {}
    }
    if v.str_field("lora_path") == Some("") {
        return Err(Violation::new("lora_path", "must not be empty"));
    }
    Ok(())
}

/// `RepetitionDetectionParams.__post_init__`.
pub fn repetition_detection_params(v: &StructValue) -> Result<(), Violation> {
    let max = v.int_field("max_pattern_size").unwrap_or(0);
    let min = v.int_field("min_pattern_size").unwrap_or(0);
    let count = v.int_field("min_count").unwrap_or(0);
    if max < 0 || min < 0 || count < 0 {
        return Err(Violation::new("", "pattern sizes and min_count must be non-negative"));
    }
    if max > 0 {
        if count < 2 {
            return Err(Violation::new(
                "min_count",
                format!("must be at least 2 when detection is enabled, got {count}"),
            ));
        }
        if min > max {
            return Err(Violation::new(
                "min_pattern_size",
                format!("must not exceed max_pattern_size ({max}), got {min}"),
            ));
        }
    }
    Ok(())
}

fn num(v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Float(f) => Some(*f),
        Value::Int(i) => Some(*i as f64),
        Value::UInt(u) => Some(*u as f64),
        _ => None,
    }
}

fn int(v: Option<&Value>) -> Option<i64> {
    match v? {
        Value::Int(i) => Some(*i),
        _ => None,
    }
}

/// `SamplingParams.__post_init__` / `_verify_args` as run on decode.
///
/// One pass over the fields held away from their defaults (defaults are
/// valid by construction), then the rules that relate two fields, reading
/// the other field's default from the schema when it is not held.
pub fn sampling_params(v: &StructValue) -> Result<(), Violation> {
    let default = |name: &str| v.schema.index_of(name).map(|i| &v.schema.default_values()[i]);
    let (mut n, mut temperature, mut max_tokens, mut min_tokens) = (None, None, None, None);
    let (mut stops_present, mut detokenize_false) = (false, false);
    for (i, x) in v.entries() {
        let name = v.schema.fields[*i as usize].name;
        match name {
            "n" => {
                n = int(Some(x));
                if let Some(n) = n {
                    if n < 1 {
                        return Err(Violation::new("n", format!("must be at least 1, got {n}")));
                    }
                }
            }
            "presence_penalty" | "frequency_penalty" => {
                if let Some(p) = num(Some(x)) {
                    if !(-2.0..=2.0).contains(&p) {
                        return Err(Violation::new(name, format!("must be in [-2, 2], got {p}")));
                    }
                }
            }
            "repetition_penalty" => {
                if let Some(p) = num(Some(x)) {
                    if !(p > 0.0 && p.is_finite()) {
                        return Err(Violation::new(
                            name,
                            format!("must be a finite number greater than zero, got {p}"),
                        ));
                    }
                }
            }
            "temperature" => {
                temperature = num(Some(x));
                if let Some(t) = temperature {
                    if !(0.0..=2.0).contains(&t) {
                        return Err(Violation::new(name, format!("must be in [0, 2], got {t}")));
                    }
                }
            }
            "top_p" => {
                if let Some(p) = num(Some(x)) {
                    if !(p > 0.0 && p <= 1.0) {
                        return Err(Violation::new(name, format!("must be in (0, 1], got {p}")));
                    }
                }
            }
            "top_k" => {
                if let Some(k) = int(Some(x)) {
                    if k < -1 {
                        return Err(Violation::new(name, format!("must be -1 (disabled), 0 or positive, got {k}")));
                    }
                }
            }
            "min_p" => {
                if let Some(p) = num(Some(x)) {
                    if !(0.0..=1.0).contains(&p) {
                        return Err(Violation::new(name, format!("must be in [0, 1], got {p}")));
                    }
                }
            }
            "max_tokens" => {
                max_tokens = Some(int(Some(x)));
                if let Some(Some(m)) = max_tokens {
                    if m < 1 {
                        return Err(Violation::new(name, format!("must be at least 1, got {m}")));
                    }
                }
            }
            "min_tokens" => {
                min_tokens = int(Some(x));
                if let Some(m) = min_tokens {
                    if m < 0 {
                        return Err(Violation::new(name, format!("must be at least 0, got {m}")));
                    }
                }
            }
            "logprobs" | "prompt_logprobs" => {
                if let Some(l) = int(Some(x)) {
                    if l < -1 {
                        return Err(Violation::new(
                            name,
                            format!("must be -1 (whole vocabulary) or non-negative, got {l}"),
                        ));
                    }
                }
            }
            "stop" => {
                let empty = match x {
                    Value::Str(s) => s.is_empty(),
                    Value::Array(xs) => xs.iter().any(|x| matches!(x, Value::Str(s) if s.is_empty())),
                    _ => false,
                };
                if empty {
                    return Err(Violation::new("stop", "stop strings must not be empty"));
                }
                stops_present = match x {
                    Value::Str(_) => true,
                    Value::Array(xs) => !xs.is_empty(),
                    _ => false,
                };
            }
            "detokenize" => detokenize_false = matches!(x, Value::Bool(false)),
            "bad_words" => {
                if let Value::Array(words) = x {
                    if words.iter().any(|w| matches!(w, Value::Str(s) if s.is_empty())) {
                        return Err(Violation::new("bad_words", "bad_words cannot contain an empty string"));
                    }
                }
            }
            "stream_interval" => {
                if let Some(i) = int(Some(x)) {
                    if i < 1 {
                        return Err(Violation::new(name, format!("must be at least 1, got {i}")));
                    }
                }
            }
            "thinking_token_budget" => {
                if let Some(b) = int(Some(x)) {
                    if b < -1 {
                        return Err(Violation::new(
                            name,
                            format!("must be a non-negative integer or -1 for unlimited, got {b}"),
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    if let Some(m) = min_tokens {
        let max = max_tokens.unwrap_or_else(|| int(default("max_tokens")));
        if let Some(max) = max {
            if m > max {
                return Err(Violation::new("min_tokens", format!("must not exceed max_tokens ({max}), got {m}")));
            }
        }
    }
    if stops_present && detokenize_false {
        return Err(Violation::new("stop", "stop strings need detokenize=True"));
    }
    // Greedy sampling (temperature below vLLM's _SAMPLING_EPS, 1e-5) admits
    // only one sequence.
    if let Some(n) = n {
        let t = temperature.or_else(|| num(default("temperature")));
        if let Some(t) = t {
            if n > 1 && t < 1e-5 {
                return Err(Violation::new("n", format!("n must be 1 when using greedy sampling, got {n}")));
            }
        }
    }
    Ok(())
}
