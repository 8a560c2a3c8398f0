//! The schema drift across vLLM releases, from engine-protocol's tables
//! (one per release, oldest first: `engine_protocol::schema::VLLM_TABLES`):
//! per release, the wire fields it added, removed and retyped against the
//! release before it. A field is a struct's attribute (`SamplingParams.
//! thinking_token_budget`) among the structs reachable from the release's
//! message roots (`ReleaseSchema::structs`); its type as the schema dumps
//! write it (`engine_protocol::schema::python_type`).

use std::collections::BTreeMap;

use engine_protocol::schema::{python_type, ReleaseSchema};

/// One release's changes against the one before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseDrift {
    pub version: &'static str,
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub retyped: Vec<String>,
}

fn fields(r: &ReleaseSchema) -> BTreeMap<String, String> {
    r.structs()
        .into_iter()
        .flat_map(|s| s.fields.iter().map(move |f| (format!("{}.{}", s.name, f.name), python_type(f.ty))))
        .collect()
}

/// The drift of each release after the first of `releases`.
pub fn drift(releases: &[&ReleaseSchema]) -> Vec<ReleaseDrift> {
    releases
        .windows(2)
        .map(|w| {
            let (old, new) = (fields(w[0]), fields(w[1]));
            ReleaseDrift {
                version: w[1].version,
                added: new.keys().filter(|k| !old.contains_key(*k)).cloned().collect(),
                removed: old.keys().filter(|k| !new.contains_key(*k)).cloned().collect(),
                retyped: new
                    .iter()
                    .filter(|(k, t)| old.get(*k).is_some_and(|o| o != *t))
                    .map(|(k, _)| k.clone())
                    .collect(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_retyped_to_an_array_in_0_34_0_shows_as_drift() {
        let d = drift(&[engine_protocol::VLLM_0_33_0, engine_protocol::VLLM_0_34_0]);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].version, "0.34.0");
        assert!(d[0].retyped.iter().any(|f| f == "EngineCoreRequest.prompt_token_ids"), "{d:?}");
    }

    #[test]
    fn a_release_against_itself_has_no_drift() {
        let d = drift(&[engine_protocol::VLLM_0_33_0, engine_protocol::VLLM_0_33_0]);
        assert!(d[0].added.is_empty() && d[0].removed.is_empty() && d[0].retyped.is_empty());
    }
}
