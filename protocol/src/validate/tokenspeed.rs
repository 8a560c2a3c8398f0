//! TokenSpeed's receive path for the ADD payload and its handshake rule:
//! what the engine does to a request after msgspec decoded it, and which
//! requests it then refuses (docs/tokenspeed-wire.md §5). Where versions
//! differ, a [`ReceiveRules`] says
//! how (`schema::tokenspeed::receive_rules`); the steps below are 0.1.1's,
//! and 08-03 (`git-57b49061`) has no greedy seed pin and gates only
//! `return_logprob` in step 5.
//!
//! The engine (its msgpack receive socket) runs, in order:
//! 1. `SamplingParams.__post_init__` ([`post_init`]), which re-derives fields
//!    only when `is_normalized` is false: `stop_strs` from `stop`, an empty
//!    `stop_token_ids` to nil, a temperature below [`GREEDY_BELOW`] to
//!    greedy (temperature 1.0, `top_k` 1), greedy pinned to seed 0, and
//!    `top_k` -1 to [`TOP_K_ALL`];
//! 2. `resolve_seed(rid)` ([`resolve_seed`]): a nil seed becomes the CRC-32
//!    of the UTF-8 rid; a nil or list rid then has no `encode` and the
//!    engine drops the message (a `validation` verdict here);
//! 3. `normalize(None)` ([`normalize`]): `stop_strs` a list, its longest
//!    length in characters, `is_normalized` true;
//! 4. `n != 1` is refused (the frontend fans out itself);
//! 5. the socket's gate ([`logprob_gate`]): logprobs need
//!    `--enable-output-logprobs`, only the sampled token's logprob is
//!    carried, and `logprob_start_len` is resolved against the prompt;
//! 6. `SamplingParams.verify(vocab_size)` ([`verify`]).
//!
//! A failure in steps 4-6 (or a `validation_error` that arrived on the wire)
//! makes the engine admit the request already finished and publish one
//! terminal `"abort"` row; this codec reports it as a `validation`
//! rejection. The engine facts these rules need (vocabulary size, whether
//! output logprobs are enabled) are an [`EngineConfig`], never read from the
//! message.
use crate::error::Violation;
use crate::schema::tokenspeed::{LogprobGates, ReceiveRules};
use crate::value::{StructValue, Value};

/// `top_k` meaning "all tokens" after normalisation (`1 << 30`).
pub const TOP_K_ALL: i64 = 1 << 30;
/// A temperature below this is greedy sampling.
pub const GREEDY_BELOW: f64 = 1e-6;
/// `verify` refuses a `top_k` of this or more (the fused top-k kernel's
/// limit) unless it is [`TOP_K_ALL`].
pub const TOP_K_KERNEL_LIMIT: i64 = 128;

/// What the receive path needs to know about the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineConfig {
    /// The model's vocabulary size: `logit_bias` keys must lie in
    /// `0..vocab_size`. `None` checks only that the keys are integers.
    pub vocab_size: Option<u32>,
    /// `--enable-output-logprobs`: without it a request asking for
    /// logprobs is refused.
    pub enable_output_logprobs: bool,
}

impl EngineConfig {
    /// The engine the TokenSpeed goldens were judged by
    /// (`golden/generate/README.md`): the `golden/tiny` vocabulary of
    /// 512 tokens, output logprobs enabled.
    pub const CONFORMANCE: EngineConfig = EngineConfig { vocab_size: Some(512), enable_output_logprobs: true };
}

impl Default for EngineConfig {
    /// [`EngineConfig::CONFORMANCE`]: `crate::message::decode_message`
    /// judges TokenSpeed requests by it; a gateway that knows its
    /// engine passes its own to `decode_message_with`.
    fn default() -> Self {
        EngineConfig::CONFORMANCE
    }
}

/// The engine's handshake rule on INIT: at least one input and one
/// output address (it uses the first of each).
pub fn handshake_init(v: &StructValue) -> Result<(), Violation> {
    let Some(addresses) = v.struct_field("addresses") else { return Ok(()) };
    let empty = |name: &str| match addresses.get(name) {
        Some(Value::Array(xs)) => xs.is_empty(),
        _ => true,
    };
    if empty("inputs") || empty("outputs") {
        return Err(Violation::new("addresses", "INIT must carry at least one input and one output address"));
    }
    Ok(())
}

use super::{first_violation, range, rule, Check, FieldRef, Rule};

fn num(v: Option<&Value>) -> Option<f64> {
    v.map(FieldRef::of).and_then(FieldRef::num)
}

/// An integer field as i128 (TokenSpeed's ints are Python ints: -2^63
/// to 2^64-1 on the wire).
fn int(v: Option<&Value>) -> Option<i128> {
    v.map(FieldRef::of).and_then(FieldRef::int)
}

fn flag(v: &StructValue, name: &str) -> bool {
    matches!(v.get(name), Some(Value::Bool(true)))
}

/// `SamplingParams.__post_init__`: nothing when `is_normalized`;
/// otherwise the re-derivations listed in the module docs (the greedy
/// seed pin only where `rules` has it).
pub fn post_init(sp: &mut StructValue, rules: &ReceiveRules) {
    if flag(sp, "is_normalized") {
        return;
    }
    let stop = sp.get("stop").cloned().unwrap_or(Value::Nil);
    sp.set("stop_strs", stop);
    let empty_ids = match sp.get("stop_token_ids") {
        Some(Value::Array(xs)) => xs.is_empty(),
        Some(Value::IntArray(xs)) => xs.is_empty(),
        _ => false,
    };
    if empty_ids {
        sp.set("stop_token_ids", Value::Nil);
    }
    if num(sp.get("temperature")).is_some_and(|t| t < GREEDY_BELOW) {
        sp.set("temperature", Value::Float(1.0));
        sp.set("top_k", Value::Int(1));
    }
    match int(sp.get("top_k")) {
        // Greedy ties break the same way whatever the rid.
        Some(1) if rules.pin_greedy_seed => {
            sp.set("seed", Value::Int(0));
        }
        Some(-1) => {
            sp.set("top_k", Value::Int(TOP_K_ALL));
        }
        _ => {}
    }
}

/// `SamplingParams.resolve_seed(rid)`: a nil seed becomes
/// `crc32(rid.encode("utf-8"))`. A rid that is not a string has no
/// `encode`: the engine drops the message.
pub fn resolve_seed(sp: &mut StructValue, rid: &Value) -> Result<(), Violation> {
    if !sp.is_nil("seed") {
        return Ok(());
    }
    match rid {
        Value::Str(r) => {
            sp.set("seed", Value::Int(i64::from(crc32(r.as_bytes()))));
            Ok(())
        }
        _ => Err(Violation::new("rid", "a nil seed is derived from the rid, which must then be a string")),
    }
}

/// `SamplingParams.normalize(tokenizer=None)`: `stop_strs` as a list
/// (`[]` for nil), `stop_str_max_len` its longest entry in characters,
/// `is_normalized` true. Nothing when already normalised.
pub fn normalize(sp: &mut StructValue) {
    if flag(sp, "is_normalized") {
        return;
    }
    let stops = match sp.get("stop_strs") {
        Some(Value::Str(s)) => vec![Value::Str(s.clone())],
        Some(Value::Array(xs)) => xs.clone(),
        _ => Vec::new(),
    };
    let longest = stops.iter().filter_map(|s| if let Value::Str(s) = s { Some(s.chars().count()) } else { None });
    let max_len = longest.max().unwrap_or(0);
    sp.set("stop_strs", Value::Array(stops));
    sp.set("stop_str_max_len", Value::Int(max_len as i64));
    sp.set("is_normalized", Value::Bool(true));
}

/// Python's `int(str)` on a `logit_bias` key: optional surrounding
/// whitespace and sign, ASCII digits, single underscores between digits.
fn python_int(key: &str) -> Option<i128> {
    let t = key.trim();
    let (neg, digits) = match t.as_bytes().first()? {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    if digits.is_empty() || digits.starts_with('_') || digits.ends_with('_') || digits.contains("__") {
        return None;
    }
    let mut v: i128 = 0;
    for c in digits.chars().filter(|c| *c != '_') {
        v = v.checked_mul(10)?.checked_add(i128::from(c.to_digit(10)?))?;
    }
    Some(if neg { -v } else { v })
}

/// `SamplingParams.verify(vocab_size)`'s range and relation checks
/// before the `logit_bias` keys, in the engine's order. The engine's
/// comparisons are kept: a NaN temperature passes its `x < 0` test
/// ([`Check::NotBelow`]) and fails the `0 < x <= 1` of `top_p`.
pub static VERIFY_RULES: &[Rule] = &[
    rule("temperature", Check::NotBelow(0.0), "must be non-negative"),
    rule("top_p", range(0.0, true, 1.0, false), "must be in (0, 1]"),
    rule("min_p", range(0.0, false, 1.0, false), "must be in [0, 1]"),
    rule("top_k", Check::IntAtLeastUnless { min: 1, except: -1 }, "must be -1 (disable) or at least 1"),
    rule(
        "top_k",
        Check::IntBelowUnless { max: TOP_K_KERNEL_LIMIT, except: TOP_K_ALL },
        "must be below 128 (fused kernel limit) or -1",
    ),
    rule("frequency_penalty", range(-2.0, false, 2.0, false), "must be in [-2, 2]"),
    rule("presence_penalty", range(-2.0, false, 2.0, false), "must be in [-2, 2]"),
    rule("repetition_penalty", range(0.0, false, 2.0, false), "must be in [0, 2]"),
    rule("min_new_tokens", Check::IntAtLeast(0), "must be at least 0"),
    rule("max_new_tokens", Check::IntAtLeast(0), "must be at least 0"),
    rule("min_new_tokens", Check::NotAbove("max_new_tokens"), "must not exceed max_new_tokens"),
];

/// `SamplingParams.verify`'s checks after the `logit_bias` keys (which
/// need the engine's vocabulary: [`verify`] checks them in between).
pub static VERIFY_RULES_AFTER_LOGIT_BIAS: &[Rule] = &[
    rule("logprobs", Check::IntIs(0), "only nil or 0 (the sampled token) is carried"),
    rule(
        "json_schema",
        Check::AtMostOneSet(&["json_schema", "regex", "ebnf"]),
        "at most one of regex, json_schema, ebnf may be set",
    ),
];

/// `SamplingParams.verify(vocab_size)` on the normalised parameters:
/// [`VERIFY_RULES`], the `logit_bias` keys, then
/// [`VERIFY_RULES_AFTER_LOGIT_BIAS`].
pub fn verify(sp: &StructValue, vocab_size: Option<u32>) -> Result<(), Violation> {
    first_violation(sp, VERIFY_RULES)?;
    logit_bias_keys(sp, vocab_size)?;
    first_violation(sp, VERIFY_RULES_AFTER_LOGIT_BIAS)
}

/// The `logit_bias` keys: Python ints (`int(key)`), inside the
/// vocabulary when its size is known.
fn logit_bias_keys(sp: &StructValue, vocab_size: Option<u32>) -> Result<(), Violation> {
    if let Some(Value::Map(bias)) = sp.get("logit_bias") {
        for (k, _) in bias {
            let Value::Str(k) = k else { continue };
            let Some(id) = python_int(k) else {
                return Err(Violation::new("logit_bias", format!("key {k:?} is not an integer")));
            };
            if let Some(vocab) = vocab_size {
                if id < 0 || id >= i128::from(vocab) {
                    return Err(Violation::new(
                        "logit_bias",
                        format!("keys must lie in [0, {}], got {id}", i128::from(vocab) - 1),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The socket's logprob gate; returns `logprob_start_len` as resolved
/// (with [`LogprobGates::Full`], -1 becomes the last prompt token when
/// logprobs are asked for).
pub fn logprob_gate(req: &StructValue, rules: &ReceiveRules, engine: &EngineConfig) -> Result<i128, Violation> {
    let start = int(req.get("logprob_start_len")).unwrap_or(-1);
    if !flag(req, "return_logprob") {
        return Ok(start);
    }
    if !engine.enable_output_logprobs {
        return Err(Violation::new("return_logprob", "the engine runs without --enable-output-logprobs"));
    }
    if rules.logprob_gates == LogprobGates::EnableFlagOnly {
        return Ok(start);
    }
    if int(req.get("top_logprobs_num")).unwrap_or(0) > 0 {
        return Err(Violation::new("top_logprobs_num", "top-k logprobs are not carried on the msgpack wire"));
    }
    if matches!(req.get("token_ids_logprob"), Some(Value::Array(xs)) if !xs.is_empty())
        || matches!(req.get("token_ids_logprob"), Some(Value::IntArray(xs)) if !xs.is_empty())
    {
        return Err(Violation::new("token_ids_logprob", "logprobs of chosen token ids are not carried"));
    }
    let prompt = match req.get("input_ids") {
        Some(Value::Array(xs)) => xs.len() as i128,
        Some(Value::IntArray(xs)) => xs.len() as i128,
        _ => return Err(Violation::new("input_ids", "logprobs need token inputs")),
    };
    if start < -1 {
        return Err(Violation::new("logprob_start_len", format!("must be -1 or at least 0, got {start}")));
    }
    if start >= 0 && start >= prompt {
        return Err(Violation::new(
            "logprob_start_len",
            format!("({start}) must be smaller than the prompt length ({prompt})"),
        ));
    }
    let last = (prompt - 1).max(0);
    if start >= 0 && start < last {
        return Err(Violation::new("logprob_start_len", "prompt logprobs are not carried on the msgpack wire"));
    }
    Ok(if start == -1 { last } else { start })
}

/// A request as the engine holds it after its receive path.
#[derive(Debug, Clone, PartialEq)]
pub struct Finalized {
    /// `SamplingParams` after `post_init`, `resolve_seed`, `normalize`.
    pub sampling_params: StructValue,
    /// `logprob_start_len` as the logprob gate resolved it.
    pub logprob_start_len: i128,
    /// Why the engine refuses the request (it then publishes one
    /// terminal `"abort"` row); `None` when it runs.
    pub validation_error: Option<String>,
}

/// Runs the receive path of the version `rules` describes on a decoded
/// `TokenizedGenerateReqInput`. `Err` when the engine drops the message
/// outright (a nil seed with a rid that is not a string); otherwise the
/// finalised request, refused when `validation_error` is set.
pub fn receive(req: &StructValue, rules: &ReceiveRules, engine: &EngineConfig) -> Result<Finalized, Violation> {
    let Some(sp) = req.struct_field("sampling_params") else {
        return Err(Violation::new("sampling_params", "missing"));
    };
    let mut sp = sp.clone();
    post_init(&mut sp, rules);
    resolve_seed(&mut sp, req.get("rid").unwrap_or(&Value::Nil)).map_err(|v| {
        let mut fields = vec!["sampling_params.seed"];
        fields.extend(v.fields);
        Violation::on_fields(fields, v.message)
    })?;
    normalize(&mut sp);
    let mut start = int(req.get("logprob_start_len")).unwrap_or(-1);
    let mut error = req.str_field("validation_error").map(|s| format!("sent on the wire: {s}"));
    if error.is_none() {
        let n = int(sp.get("n")).unwrap_or(1);
        if n != 1 {
            error = Some(format!("sampling_params.n: n={n} is not supported; the frontend fans out n > 1 itself"));
        }
    }
    if error.is_none() {
        match logprob_gate(req, rules, engine) {
            Ok(s) => start = s,
            Err(v) => error = Some(format!("{}: {}", v.path(), v.message)),
        }
    }
    if error.is_none() {
        if let Err(v) = verify(&sp, engine.vocab_size) {
            error = Some(format!("sampling_params.{}: {}", v.path(), v.message));
        }
    }
    Ok(Finalized { sampling_params: sp, logprob_start_len: start, validation_error: error })
}

/// CRC-32 (IEEE 802.3, reflected, as zlib's `crc32`).
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in bytes {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 { (c >> 1) ^ 0xEDB8_8320 } else { c >> 1 };
        }
    }
    !c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_of_a_rid_is_zlibs() {
        // docs/tokenspeed-wire.md §7: the seed of rid "r1" is 219023793.
        assert_eq!(crc32(b"r1"), 219_023_793);
        assert_eq!(crc32(b"g1"), 985_395_109);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn the_kernel_limit_rule_says_the_limit_it_checks() {
        let r = VERIFY_RULES.iter().find(|r| matches!(r.check, Check::IntBelowUnless { .. })).unwrap();
        assert!(r.message.contains(&TOP_K_KERNEL_LIMIT.to_string()), "{}", r.message);
    }

    #[test]
    fn logit_bias_keys_parse_as_python_ints() {
        assert_eq!(python_int(" 42 "), Some(42));
        assert_eq!(python_int("-1"), Some(-1));
        assert_eq!(python_int("1_0"), Some(10));
        assert_eq!(python_int("abc"), None);
        assert_eq!(python_int("1__0"), None);
        assert_eq!(python_int(""), None);
    }
}
