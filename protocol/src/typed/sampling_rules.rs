//! The rules of `SamplingParams.__post_init__`
//! ([`validate::SAMPLING_PARAMS_RULES`]) on the typed struct: its fields
//! as the rules read them ([`RuleFields`]), so that the one interpreter of
//! the rule tables ([`Rule::eval`], [`validate::first_violation`]) judges
//! the struct without building a value tree. The direct request decoder
//! (`crate::hot`), [`EngineCoreRequest::encode_checked`] and the
//! translation layer use it.
//!
//! [`EngineCoreRequest::encode_checked`]: super::EngineCoreRequest::encode_checked

use std::sync::OnceLock;

use super::{SamplingParams, StopStrings};
use crate::validate::{self, FieldRef, Rule, RuleFields};

/// A typed field read for the rules.
type Get = for<'a> fn(&'a SamplingParams) -> FieldRef<'a>;

fn stops(v: &Option<StopStrings>) -> FieldRef<'_> {
    match v {
        None => FieldRef::Nil,
        Some(StopStrings::One(s)) => FieldRef::Str(s),
        Some(StopStrings::Many(xs)) => FieldRef::strings(xs),
    }
}

/// The typed field a rule names; `None` for a field no rule reads (a rule
/// on it is then not run on the typed struct: see [`plainly_valid`]).
fn getter(name: &str) -> Option<Get> {
    Some(match name {
        "n" => |sp| FieldRef::Int(sp.n),
        "presence_penalty" => |sp| FieldRef::Float(sp.presence_penalty),
        "frequency_penalty" => |sp| FieldRef::Float(sp.frequency_penalty),
        "repetition_penalty" => |sp| FieldRef::Float(sp.repetition_penalty),
        "temperature" => |sp| FieldRef::Float(sp.temperature),
        "top_p" => |sp| FieldRef::Float(sp.top_p),
        "top_k" => |sp| FieldRef::Int(sp.top_k),
        "min_p" => |sp| FieldRef::Float(sp.min_p),
        "seed" => |sp| FieldRef::opt_int(sp.seed),
        "stop" => |sp| stops(&sp.stop),
        "ignore_eos" => |sp| FieldRef::Bool(sp.ignore_eos),
        "max_tokens" => |sp| FieldRef::opt_int(sp.max_tokens),
        "min_tokens" => |sp| FieldRef::Int(sp.min_tokens),
        "logprobs" => |sp| FieldRef::opt_int(sp.logprobs),
        "prompt_logprobs" => |sp| FieldRef::opt_int(sp.prompt_logprobs),
        "prompt_logprob_start" => |sp| FieldRef::opt_int(sp.prompt_logprob_start),
        "flat_logprobs" => |sp| FieldRef::Bool(sp.flat_logprobs),
        "detokenize" => |sp| FieldRef::Bool(sp.detokenize),
        "skip_special_tokens" => |sp| FieldRef::Bool(sp.skip_special_tokens),
        "spaces_between_special_tokens" => |sp| FieldRef::Bool(sp.spaces_between_special_tokens),
        "include_stop_str_in_output" => |sp| FieldRef::Bool(sp.include_stop_str_in_output),
        "stream_interval" => |sp| FieldRef::opt_int(sp.stream_interval),
        "skip_clone" => |sp| FieldRef::Bool(sp.skip_clone),
        "output_text_buffer_length" => |sp| FieldRef::Int(sp.output_text_buffer_length),
        "_eos_token_id" => |sp| FieldRef::opt_int(sp.eos_token_id),
        "bad_words" => |sp| sp.bad_words.as_deref().map_or(FieldRef::Nil, FieldRef::strings),
        "thinking_token_budget" => |sp| FieldRef::opt_int(sp.thinking_token_budget),
        "routed_experts_prompt_start" => |sp| FieldRef::Int(sp.routed_experts_prompt_start),
        _ => return None,
    })
}

impl RuleFields for SamplingParams {
    /// The fields the rules read; any other field is `None` (no rule of
    /// the tables names one: `every_sampling_rule_is_read_from_the_typed_struct`).
    #[inline]
    fn field(&self, name: &str) -> Option<FieldRef<'_>> {
        getter(name).map(|g| g(self))
    }
}

/// One rule of [`validate::SAMPLING_PARAMS_RULES`] with its fields looked
/// up once.
struct BoundRule {
    rule: &'static Rule,
    field: Get,
    other: Option<Get>,
}

/// The sampling rules bound to the typed struct, once; `None` when a rule
/// names a field this struct does not read, or checks several fields.
fn sampling_rules() -> Option<&'static [BoundRule]> {
    static RULES: OnceLock<Option<Vec<BoundRule>>> = OnceLock::new();
    RULES
        .get_or_init(|| {
            validate::SAMPLING_PARAMS_RULES
                .iter()
                .map(|rule| {
                    if matches!(rule.check, validate::Check::AtMostOneSet(_)) {
                        return None;
                    }
                    let other = match rule.check.other() {
                        Some(o) => Some(getter(o)?),
                        None => None,
                    };
                    Some(BoundRule { rule, field: getter(rule.field)?, other })
                })
                .collect()
        })
        .as_deref()
}

/// Whether every rule of `SamplingParams.__post_init__`
/// ([`validate::SAMPLING_PARAMS_RULES`], the table
/// [`validate::sampling_params`] runs) holds for the struct, judged by the
/// same interpreter ([`Rule::holds`]) with each rule's fields looked up once
/// (the per-request path). A field absent from the wire holds its default
/// in the struct, and the defaults pass every rule, as on the Python side.
/// Conservative: `false` (a violation, or a rule this struct cannot be
/// judged by) sends the message to the reference path, which runs the
/// table itself and reports its error.
pub(crate) fn plainly_valid(sp: &SamplingParams) -> bool {
    let Some(rules) = sampling_rules() else { return false };
    rules.iter().all(|r| {
        let other = r.other.map_or(FieldRef::Nil, |g| g(sp));
        r.rule.holds((r.field)(sp), other)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sampling_rule_is_read_from_the_typed_struct() {
        // A rule naming a field or a check this reader does not know would
        // send every request to the reference path.
        assert_eq!(sampling_rules().map(<[_]>::len), Some(validate::SAMPLING_PARAMS_RULES.len()));
        assert!(plainly_valid(&SamplingParams::default()));
        let greedy_n2 = SamplingParams { n: 2, temperature: 0.0, ..Default::default() };
        assert!(!plainly_valid(&greedy_n2));
        let stop_no_detok =
            SamplingParams { stop: Some(StopStrings::Many(vec!["x".into()])), detokenize: false, ..Default::default() };
        assert!(!plainly_valid(&stop_no_detok));
        let nan = SamplingParams { top_p: f64::NAN, ..Default::default() };
        assert!(!plainly_valid(&nan));
    }

    #[test]
    fn the_typed_struct_and_its_value_get_the_same_first_violation() {
        let rel = crate::schema::VLLM_RELEASES[1];
        let cases = [
            SamplingParams::default(),
            SamplingParams { n: 2, temperature: 0.0, ..Default::default() },
            SamplingParams { min_tokens: 9, max_tokens: Some(3), ..Default::default() },
            SamplingParams { stop: Some(StopStrings::Many(vec![String::new()])), ..Default::default() },
            SamplingParams { top_p: f64::NAN, top_k: -5, ..Default::default() },
        ];
        for sp in cases {
            let request = super::super::EngineCoreRequest { sampling_params: Some(sp.clone()), ..Default::default() };
            let value = request.to_value(rel).expect("a value");
            let v = match &value {
                crate::value::Value::Struct(r) => r.struct_field("sampling_params").expect("sampling params"),
                other => panic!("{other:?}"),
            };
            let typed = validate::first_violation(&sp, validate::SAMPLING_PARAMS_RULES);
            assert_eq!(typed, validate::sampling_params(v), "{sp:?}");
            assert_eq!(typed.is_ok(), plainly_valid(&sp), "{sp:?}");
        }
    }
}
