//! Playing a vLLM release without the typed API (docs/runner/releases.md "Engine
//! releases"): the mock builds its outputs as it does for 0.32.0 (the
//! `engine_protocol::typed` structs) and this module re-targets them to
//! the release's table by field name, then writes them with the value
//! encoder of that table; the registration is built from the release's
//! table the same way.
//!
//! Re-targeting a value to a table's type ([`retarget`]): a struct becomes
//! a struct of the target table holding its defaults, with every
//! same-named field carried over (recursively, through lists, sets,
//! optionals and dicts); fields the target lacks are dropped, fields only
//! the target has keep its defaults. Anything else is carried as it is.
//! An output struct the target requires a field of that the source lacks
//! fails at the encoder, naming the field.

use engine_protocol::schema::{Default as FieldDefault, Layout, StructSchema, Ty};
use engine_protocol::typed::EngineCoreOutputs;
use engine_protocol::{
    decode_message, encode_message, Error, Limits, MessageKind, ReleaseSchema, StructValue, Value, VLLM_0_32_0,
};

use engine_client::dialect::vllm::has_typed_api;
use engine_client::transport::handshake::{self, Announce};

/// The release whose typed shapes the mock builds before re-targeting.
pub const SOURCE: &ReleaseSchema = VLLM_0_32_0;

/// `v` as a value of the target type `to`, by field name (module docs).
pub fn retarget(v: &Value, to: &'static Ty) -> Value {
    match (v, to) {
        (Value::Nil, _) => Value::Nil,
        (_, Ty::Optional(inner)) => retarget(v, inner),
        (Value::Struct(s), Ty::Struct(target)) => Value::Struct(retarget_struct(s, target)),
        (Value::Array(xs), Ty::List(t) | Ty::Set(t)) => Value::Array(xs.iter().map(|x| retarget(x, t)).collect()),
        (Value::Map(kv), Ty::Dict(k, t)) => {
            Value::Map(kv.iter().map(|(key, x)| (retarget(key, k), retarget(x, t))).collect())
        }
        _ => v.clone(),
    }
}

/// A struct of `target` with `s`'s same-named fields (re-targeted).
fn retarget_struct(s: &StructValue, target: &'static StructSchema) -> StructValue {
    let mut out = StructValue::with_defaults(target);
    if target.layout == Layout::OpenMap {
        out.open_entries_mut().extend(s.open_entries().iter().cloned());
        return out;
    }
    for (i, f) in target.fields.iter().enumerate() {
        if let Some(v) = s.schema.index_of(f.name).map(|j| s.field(j)) {
            *out.field_mut(i) = retarget(v, f.ty);
        }
    }
    out
}

/// The frames of an output batch for `release`: the typed encoder for a
/// release with the typed API, else the batch as a 0.32.0 value
/// re-targeted to `release`'s `EngineCoreOutputs` and written by the
/// value encoder.
pub fn encode_outputs(batch: &EngineCoreOutputs, release: &'static ReleaseSchema) -> Result<Vec<Vec<u8>>, Error> {
    if has_typed_api(release) {
        return batch.encode(release);
    }
    let v = batch.to_value(SOURCE)?;
    encode_message(release, MessageKind::EngineCoreOutputs, &retarget(&v, release.engine_core_outputs))
}

/// The registration fields the mock states (those
/// [`handshake::encode_registration`] sets); a table's required fields are
/// stated too. Every other field is left at the table's default.
pub const FACTS: &[&str] = &[
    "max_model_len",
    "num_gpu_blocks",
    "block_size",
    "dp_stats_address",
    "dtype",
    "vllm_version",
    "world_size",
    "data_parallel_size",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "decode_context_parallel_size",
    "data_parallel_rank",
    "max_num_seqs",
    "max_num_batched_tokens",
    "instance_id",
    "supports_lora",
    "max_loras",
];

/// Why a registration could not be built for a release.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistrationError {
    /// The release's table requires a field the mock has no fact for.
    #[error("vLLM {release}'s EngineCoreReadyResponse requires `{field}`, which the mock has no value for")]
    NoFact { release: &'static str, field: &'static str },
    /// The release's ready response is not a struct.
    #[error("vLLM {0}'s ready response is not a struct")]
    NotAStruct(&'static str),
    /// The facts' registration does not decode, or the result does not encode.
    #[error("registration for vLLM {release}: {source}")]
    Codec { release: &'static str, source: Error },
    /// The handshake's registration encoder refused the facts.
    #[error(transparent)]
    Handshake(#[from] handshake::HandshakeError),
}

/// An `EngineCoreReadyResponse` of `release` from the facts of `source`
/// (a registration of any table, e.g. the recorded bytes of a live 0.32.0
/// engine decoded): every field `release`'s table has, the facts
/// ([`FACTS`]) and required fields from `source`'s same-named fields,
/// `vllm_version` the release, the rest at the table's defaults; never a
/// field the table lacks.
pub fn registration_from(release: &'static ReleaseSchema, source: &StructValue) -> Result<Vec<u8>, RegistrationError> {
    let target = release.ready_response.as_struct().ok_or(RegistrationError::NotAStruct(release.version))?;
    let mut out = StructValue::with_defaults(target);
    for (i, f) in target.fields.iter().enumerate() {
        let value = if f.name == "vllm_version" {
            Value::Str(release.version.to_string())
        } else if f.default == FieldDefault::Required || FACTS.contains(&f.name) {
            match source.schema.index_of(f.name) {
                Some(j) => retarget(source.field(j), f.ty),
                None if f.default == FieldDefault::Required => {
                    return Err(RegistrationError::NoFact { release: release.version, field: f.name })
                }
                None => continue,
            }
        } else {
            continue;
        };
        *out.field_mut(i) = value;
    }
    let mut frames = encode_message(release, MessageKind::EngineCoreReadyResponse, &Value::Struct(out))
        .map_err(|source| RegistrationError::Codec { release: release.version, source })?;
    Ok(frames.swap_remove(0))
}

/// The registration the mock builds itself (no recorded bytes given):
/// [`handshake::encode_registration`]'s for a release with the typed API,
/// else its 0.32.0 registration re-targeted ([`registration_from`]).
pub fn registration(release: &'static ReleaseSchema, a: &Announce) -> Result<Vec<u8>, RegistrationError> {
    if has_typed_api(release) {
        return Ok(handshake::encode_registration(release, a)?);
    }
    let facts = Announce { vllm_version: SOURCE.version.to_string(), ..a.clone() };
    let bytes = handshake::encode_registration(SOURCE, &facts)?;
    let source = decode_registration_value(SOURCE, &bytes)?;
    registration_from(release, &source)
}

/// A registration payload decoded as a struct of `release`'s table.
pub fn decode_registration_value(
    release: &'static ReleaseSchema,
    frame: &[u8],
) -> Result<StructValue, RegistrationError> {
    let codec = |source| RegistrationError::Codec { release: release.version, source };
    match decode_message(release, MessageKind::EngineCoreReadyResponse, &[frame], &Limits::default())
        .map_err(codec)?
        .value
    {
        Value::Struct(s) => Ok(s),
        _ => Err(RegistrationError::NotAStruct(release.version)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine_protocol::internal::msgpack::{Reader, Token};
    use engine_protocol::typed::{EngineCoreOutput, FinishReason};
    use engine_protocol::{release, Dialect};

    fn vllm(v: &str) -> &'static ReleaseSchema {
        release(Dialect::Vllm, v).unwrap()
    }

    fn batch() -> EngineCoreOutputs {
        EngineCoreOutputs {
            engine_index: 0,
            outputs: vec![EngineCoreOutput {
                request_id: "r1".into(),
                new_token_ids: [363, 5].as_slice().into(),
                finish_reason: Some(FinishReason::Length),
                ..EngineCoreOutput::default()
            }],
            timestamp: 1.5,
            weight_version: Some("default".into()),
            ..EngineCoreOutputs::default()
        }
    }

    /// The element count of `EngineCoreOutputs.outputs[0]` as written.
    fn first_output_len(payload: &[u8]) -> u32 {
        let mut r = Reader::new(payload);
        assert!(matches!(r.token().unwrap(), Token::Array(_)), "EngineCoreOutputs is an array");
        r.skip_value().unwrap(); // engine_index
        assert_eq!(r.token().unwrap(), Token::Array(1), "one output");
        match r.token().unwrap() {
            Token::Array(n) => n,
            t => panic!("outputs[0] is {t:?}"),
        }
    }

    #[test]
    fn a_0_32_output_retargeted_to_0_25_1_has_its_13_elements_and_decodes_with_its_table() {
        let old = vllm("0.25.1");
        assert!(!has_typed_api(old));
        let frames = encode_outputs(&batch(), old).unwrap();
        assert_eq!(old.engine_core_output.fields.len(), 13);
        assert_eq!(first_output_len(&frames[0]), 13);
        // 0.32.0's own bytes carry its 18.
        assert_eq!(VLLM_0_32_0.engine_core_output.fields.len(), 18);
        assert_eq!(first_output_len(&batch().encode(VLLM_0_32_0).unwrap()[0]), 18);
        let d = decode_message(old, MessageKind::EngineCoreOutputs, &frames, &Limits::default()).unwrap();
        assert!(d.drift.is_empty(), "{:?}", d.drift);
        let Value::Struct(b) = &d.value else { panic!() };
        assert!(std::ptr::eq(b.schema, old.engine_core_outputs.as_struct().unwrap()));
        let Some(Value::Array(outs)) = b.get("outputs") else { panic!("{b:?}") };
        let Value::Struct(o) = &outs[0] else { panic!() };
        assert_eq!(o.str_field("request_id"), Some("r1"));
        assert_eq!(o.int_field("finish_reason"), Some(1));
        assert_eq!(crate::tokens::ints(o.get("new_token_ids")), vec![363, 5]);
        assert_eq!(b.float_field("timestamp"), Some(1.5));
    }

    #[test]
    fn the_typed_releases_are_encoded_straight() {
        for r in engine_protocol::schema::VLLM_RELEASES {
            assert_eq!(encode_outputs(&batch(), r).unwrap(), batch().encode(r).unwrap());
        }
    }

    #[test]
    fn every_release_encodes_outputs_that_its_table_decodes_without_drift() {
        for r in engine_protocol::schema::VLLM_TABLES {
            let frames = encode_outputs(&batch(), r).unwrap_or_else(|e| panic!("{}: {e}", r.version));
            let d = decode_message(r, MessageKind::EngineCoreOutputs, &frames, &Limits::default())
                .unwrap_or_else(|e| panic!("{}: {e}", r.version));
            assert!(d.drift.is_empty(), "{}: {:?}", r.version, d.drift);
            assert_eq!(first_output_len(&frames[0]) as usize, r.engine_core_output.fields.len(), "{}", r.version);
        }
    }

    /// A batch with every kind of field the mock sends: sample and prompt
    /// logprobs (tensors, one in an aux frame), a text stop reason,
    /// prefill stats, finished requests; and a utility reply.
    fn rich_batches() -> Vec<EngineCoreOutputs> {
        use engine_protocol::typed::{
            LogprobsLists, LogprobsTensors, PrefillStats, StopReason, UtilityOutput, UtilityResult,
        };
        use engine_protocol::Tensor;
        let t = |dtype: &str, shape: Vec<i64>, n: usize| Tensor { dtype: dtype.into(), shape, data: vec![0; n] };
        let out = EngineCoreOutput {
            request_id: "r2".into(),
            new_token_ids: [7].as_slice().into(),
            finish_reason: Some(FinishReason::Stop),
            stop_reason: Some(StopReason::Text("fox".into())),
            new_logprobs: Some(LogprobsLists {
                logprob_token_ids: t("<i4", vec![1, 3], 12),
                logprobs: t("<f4", vec![1, 3], 12),
                sampled_token_ranks: t("<i8", vec![1], 8),
                ..LogprobsLists::default()
            }),
            new_prompt_logprobs_tensors: Some(LogprobsTensors {
                logprob_token_ids: t("int32", vec![40, 2], 320),
                logprobs: t("float32", vec![40, 2], 320),
                selected_token_ranks: t("int32", vec![40], 160),
                ..LogprobsTensors::default()
            }),
            prefill_stats: Some(PrefillStats {
                num_prompt_tokens: 41,
                num_computed_tokens: 41,
                ..PrefillStats::default()
            }),
            ..EngineCoreOutput::default()
        };
        let mut b = batch();
        b.outputs.push(out);
        b.finished_requests = Some(vec!["r2".into()]);
        let utility = UtilityOutput {
            call_id: 3,
            result: Some(UtilityResult { type_info: Value::Nil, value: Value::Bool(true) }),
            ..UtilityOutput::default()
        };
        let u =
            EngineCoreOutputs { utility_output: Some(utility), weight_version: None, ..EngineCoreOutputs::default() };
        vec![b, u]
    }

    #[test]
    fn logprobs_stats_and_utility_replies_reach_every_table_by_name() {
        for r in engine_protocol::schema::VLLM_TABLES {
            for b in rich_batches() {
                let frames = encode_outputs(&b, r).unwrap_or_else(|e| panic!("{}: {e}", r.version));
                let d = decode_message(r, MessageKind::EngineCoreOutputs, &frames, &Limits::default())
                    .unwrap_or_else(|e| panic!("{}: {e}", r.version));
                assert!(d.drift.is_empty(), "{}: {:?}", r.version, d.drift);
                let Value::Struct(got) = &d.value else { panic!() };
                let Value::Struct(want) = b.to_value(SOURCE).unwrap() else { panic!() };
                // What both tables have reads back the same, by name.
                assert_eq!(
                    engine_protocol::view::struct_view(got)["outputs"],
                    engine_protocol::view::struct_view(&retarget_struct(&want, got.schema))["outputs"],
                    "{}",
                    r.version
                );
                if let Some(Value::Array(outs)) = got.get("outputs") {
                    if let Some(Value::Struct(o)) = outs.get(1) {
                        let stats = o.struct_field("prefill_stats").expect("prefill_stats");
                        assert_eq!(stats.int_field("num_prompt_tokens"), Some(41), "{}", r.version);
                        let lp = o.struct_field("new_logprobs").expect("new_logprobs");
                        assert!(matches!(lp.get("logprobs"), Some(Value::Tensor(_))), "{}", r.version);
                    }
                }
                if b.utility_output.is_some() {
                    let u = got.struct_field("utility_output").expect("utility_output");
                    assert_eq!(u.int_field("call_id"), Some(3), "{}", r.version);
                }
            }
        }
    }

    /// The keys of a map payload, as written.
    fn map_keys(payload: &[u8]) -> Vec<String> {
        let mut r = Reader::new(payload);
        let Token::Map(n) = r.token().unwrap() else { panic!("not a map") };
        (0..n)
            .map(|_| {
                let Token::Str(k) = r.token().unwrap() else { panic!("a key that is not a string") };
                r.skip_value().unwrap();
                String::from_utf8(k.to_vec()).unwrap()
            })
            .collect()
    }

    fn recorded_0_32_registration() -> StructValue {
        let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..");
        let bytes =
            crate::registration::registration_from_case(&repo.join(crate::registration::READY_RESPONSE_CASE)).unwrap();
        decode_registration_value(VLLM_0_32_0, &bytes).unwrap()
    }

    #[test]
    fn a_0_29_registration_has_no_field_0_29_lacks_and_every_field_it_requires() {
        let r = vllm("0.29.0");
        let source = recorded_0_32_registration();
        let bytes = registration_from(r, &source).unwrap();
        let table = r.ready_response.as_struct().unwrap();
        let keys = map_keys(&bytes);
        for k in &keys {
            assert!(table.index_of(k).is_some(), "0.29.0 has no field {k}");
        }
        for f in table.fields.iter().filter(|f| f.default == FieldDefault::Required) {
            assert!(keys.iter().any(|k| k == f.name), "required {} missing from {keys:?}", f.name);
        }
        let d = decode_message(r, MessageKind::EngineCoreReadyResponse, &[&bytes], &Limits::default()).unwrap();
        assert!(d.drift.is_empty(), "{:?}", d.drift);
        let Value::Struct(s) = d.value else { panic!() };
        assert_eq!(s.str_field("vllm_version"), Some("0.29.0"));
        assert_eq!(s.int_field("max_model_len"), source.int_field("max_model_len"));
        assert_eq!(s.int_field("num_gpu_blocks"), source.int_field("num_gpu_blocks"));
        assert_eq!(s.str_field("dtype"), source.str_field("dtype"));
    }

    #[test]
    fn every_release_gets_a_registration_its_table_reads_and_0_22_has_no_version_field() {
        let source = recorded_0_32_registration();
        for r in engine_protocol::schema::VLLM_TABLES {
            let bytes = registration_from(r, &source).unwrap_or_else(|e| panic!("{}: {e}", r.version));
            let s = decode_registration_value(r, &bytes).unwrap();
            assert_eq!(s.int_field("max_model_len"), Some(512), "{}", r.version);
            let table = r.ready_response.as_struct().unwrap();
            for k in map_keys(&bytes) {
                assert!(table.index_of(&k).is_some(), "{}: no field {k}", r.version);
            }
        }
        let keys = map_keys(&registration_from(vllm("0.22.0"), &source).unwrap());
        assert!(!keys.iter().any(|k| k == "vllm_version"), "{keys:?}");
        assert!(keys.iter().any(|k| k == "dtype"), "{keys:?}");
    }

    #[test]
    fn a_required_field_without_a_fact_is_named() {
        // A 0.22.0 registration has none of 0.33.0's required facts.
        let old = registration_from(vllm("0.22.0"), &recorded_0_32_registration()).unwrap();
        let source = decode_registration_value(vllm("0.22.0"), &old).unwrap();
        let e = registration_from(engine_protocol::VLLM_0_33_0, &source).unwrap_err();
        assert!(matches!(e, RegistrationError::NoFact { release: "0.33.0", field: "block_size" }), "{e}");
    }

    #[test]
    fn the_mock_builds_an_announced_registration_for_any_release() {
        let a = Announce {
            index: 0,
            max_model_len: 256,
            vllm_version: "ignored".into(),
            max_num_seqs: 8,
            data_parallel_size: 1,
        };
        for r in engine_protocol::schema::VLLM_TABLES {
            let bytes = registration(r, &a).unwrap_or_else(|e| panic!("{}: {e}", r.version));
            let s = decode_registration_value(r, &bytes).unwrap();
            assert_eq!(s.int_field("max_model_len"), Some(256), "{}", r.version);
        }
    }
}
