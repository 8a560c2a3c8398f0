//! Steps on the structured-output constraint: exactly one constraint
//! field set (`json_object: false` counts), and vLLM's frontend checks on
//! each (a JSON schema nested deeper than 64 levels of containers, a
//! structural tag deeper than 64 + 16 for its wrapper, are refused; a
//! `choice` list is sent as the EBNF grammar `root ::= "a" | "b"`).

use super::{
    err, err_class, so_fields, ConstraintFields, JsonObjectFalse, TranslateError, TranslateErrorClass, TranslateOptions,
};
use crate::typed::{Constraint, JsonSchema, StructuredOutputsParams};
use crate::validate::{self, ConstraintCount};

const MAX_JSON_NESTING: usize = 64;
const STRUCTURAL_TAG_WRAPPER_NESTING: usize = 16;

/// vLLM's `check_json_nesting` on a constraint given as text or as a
/// value (a text is measured on the text: it is refused for its nesting
/// even past serde_json's recursion limit, as vLLM refuses it; one that is
/// not JSON and nests too deeply is refused here, by vLLM's backend as
/// malformed otherwise).
fn nesting_too_deep(spec: &serde_json::Value, limit: usize) -> bool {
    match spec {
        serde_json::Value::String(s) => validate::json_text_past_depth(s, limit).is_some(),
        other => validate::json_value_nests_deeper_than(other, limit),
    }
}

/// Step: `StructuredOutputsParams`' construction-time rule, exactly one
/// constraint field set (`json_object: false` counts as set), as
/// [`validate::exactly_one_constraint`] states it for the decoder.
pub fn check_constraint_shape(c: &ConstraintFields) -> Result<(), TranslateError> {
    match validate::exactly_one_constraint(&c.set_fields()) {
        Ok(_) => Ok(()),
        Err(ConstraintCount::Many(set)) => err_class(
            TranslateErrorClass::Conflict,
            &so_fields(&set),
            format!("exactly one structured-output constraint is allowed, got {}", set.join(", ")),
        ),
        Err(_) => {
            err("structured_outputs", "a structured-output constraint is required when structured_outputs is given")
        }
    }
}

/// Step: the structured-output backend's checks on the one constraint
/// (after [`check_constraint_shape`]) and the constraint the engine
/// receives (`None` for `json_object: false` under
/// [`JsonObjectFalse::NoConstraint`]).
pub fn check_constraints(
    c: &ConstraintFields,
    opts: &TranslateOptions,
) -> Result<Option<StructuredOutputsParams>, TranslateError> {
    check_constraint_shape(c)?;
    if let Some(choice) = &c.choice {
        if choice.is_empty() {
            return err("structured_outputs.choice", "choice cannot be an empty list");
        }
    }
    if let Some(g) = &c.grammar {
        if g.trim().is_empty() {
            return err("structured_outputs.grammar", "grammar cannot be an empty string");
        }
    }
    if let Some(j) = &c.json {
        match j {
            serde_json::Value::String(s) if s.trim().is_empty() => {
                return err("structured_outputs.json", "json cannot be an empty string");
            }
            serde_json::Value::String(_) | serde_json::Value::Object(_) => {}
            other => {
                return Err(TranslateError::malformed(
                    "structured_outputs.json",
                    format!("expected a JSON schema as text or an object, got {other}"),
                ))
            }
        }
        if nesting_too_deep(j, MAX_JSON_NESTING) {
            return err("structured_outputs.json", "the JSON schema is nested too deeply");
        }
    }
    if let Some(t) = &c.structural_tag {
        if nesting_too_deep(&serde_json::Value::String(t.clone()), MAX_JSON_NESTING + STRUCTURAL_TAG_WRAPPER_NESTING) {
            return err("structured_outputs.structural_tag", "the structural tag is nested too deeply");
        }
    }
    if c.json_object == Some(false) {
        return match opts.json_object_false {
            JsonObjectFalse::NoConstraint => Ok(None),
            JsonObjectFalse::Reject => err(
                "structured_outputs.json_object",
                "json_object must be true if set; omit structured_outputs to disable structured outputs",
            ),
        };
    }
    if let Some(r) = &c.regex {
        if r.contains('\0') {
            return err("structured_outputs.regex", "regex must not contain a NUL character");
        }
    }
    if let Some(t) = &c.structural_tag {
        if t.trim().is_empty() {
            return err("structured_outputs.structural_tag", "structural_tag cannot be an empty string");
        }
    }
    let constraint = if let Some(j) = &c.json {
        // Text or an object: checked above.
        Constraint::Json(JsonSchema::from_json(j).ok_or_else(|| {
            TranslateError::malformed("structured_outputs.json", "expected a JSON schema as text or an object")
        })?)
    } else if let Some(r) = &c.regex {
        Constraint::Regex(r.clone())
    } else if let Some(ch) = &c.choice {
        Constraint::Choice(ch.clone())
    } else if let Some(g) = &c.grammar {
        Constraint::Grammar(g.clone())
    } else if let Some(b) = c.json_object {
        Constraint::JsonObject(b)
    } else if let Some(t) = &c.structural_tag {
        Constraint::StructuralTag(t.clone())
    } else {
        unreachable!("check_constraint_shape: one field is set")
    };
    // vLLM's xgrammar validation rewrites a choice list into an EBNF
    // grammar, which is what the engine then receives.
    let constraint = match constraint {
        Constraint::Choice(c) if opts.structured_outputs_backend.starts_with("xgrammar") => {
            Constraint::Grammar(choice_as_grammar(&c))
        }
        other => other,
    };
    Ok(Some(StructuredOutputsParams::new(constraint, opts.structured_outputs_backend.clone())))
}

/// `root ::= "a" | "b"` with EBNF string escapes (`\\`, `\"`, `\n`,
/// `\r`, `\t`, other C0 controls and DEL as `\uXXXX`).
pub fn choice_as_grammar(choices: &[String]) -> String {
    let esc = |s: &str| {
        let mut o = String::with_capacity(s.len());
        for ch in s.chars() {
            match ch {
                '\\' => o.push_str("\\\\"),
                '"' => o.push_str("\\\""),
                '\n' => o.push_str("\\n"),
                '\r' => o.push_str("\\r"),
                '\t' => o.push_str("\\t"),
                c if (c as u32) < 0x20 || c as u32 == 0x7f => o.push_str(&format!("\\u{:04x}", c as u32)),
                c => o.push(c),
            }
        }
        o
    };
    let alts: Vec<String> = choices.iter().map(|c| format!("\"{}\"", esc(c))).collect();
    format!("root ::= {}", alts.join(" | "))
}
