//! Every integer field kind of the wire takes what msgspec takes for a
//! Python `int`: any MessagePack integer, -2^63 ..= 2^64-1
//! (docs/wire-protocol.md §5.6, §6.4). Whatever a field holds, the decode paths
//! agree: the value path (`decode_message`), the typed path
//! (`typed::decode_typed`, and `decode_typed_via_value`), and the hot
//! decoders (`hot::decode_request` and its direct path, `hot::decode_outputs`,
//! TokenSpeed's `hot::tokenspeed::decode_batch`) give the same verdict (on a
//! reject: the same class, path and text), and on accept hold the same
//! integers.
//!
//! The messages are built with the typed structs (whose `int` fields are
//! `i128` and `list[int]` fields [`IntList`]) and written by their direct
//! encoder, which writes each integer in its smallest form; the kinds cover
//! token ids in lists, ids, counts, seeds, indices and call ids, in vLLM's
//! request, output batch, utility messages and TokenSpeed's batch.

mod common;

use common::*;
use engine_protocol::hot::tokenspeed::decode_batch;
use engine_protocol::hot::{decode_outputs, decode_request, Outputs};
use engine_protocol::internal::{decode_batch_direct, decode_request_direct};
use engine_protocol::typed::tokenspeed::BatchTokenIDOutSlim;
use engine_protocol::typed::{
    decode_typed, decode_typed_via_value, EngineCoreOutput, EngineCoreOutputs, EngineCoreRequest, IntList, LoRARequest,
    Message, SamplingParams, StartDpWave, StopReason, TokenIds, UtilityOutput, UtilityRequest, WIRE_INT_MAX,
    WIRE_INT_MIN,
};
use engine_protocol::{decode_message, release, Error, Limits, MessageKind, ReleaseSchema, StructValue, Value};
use proptest::prelude::*;

const I64_MIN: i128 = i64::MIN as i128;
const I64_MAX: i128 = i64::MAX as i128;

/// The boundaries: i64::MIN, -1, 0, i64::MAX, i64::MAX + 1, u64::MAX.
const BOUNDS: [i128; 6] = [I64_MIN, -1, 0, I64_MAX, I64_MAX + 1, WIRE_INT_MAX];

/// What a decode path made of a message: the integers of the field under
/// test, or the error.
type Seen = Result<Vec<i128>, Error>;

/// The integers a decoded value holds: an integer, a list of them, the
/// keys of a map, nothing for nil.
fn ints_of(v: &Value) -> Vec<i128> {
    match v {
        Value::Int(i) => vec![i128::from(*i)],
        Value::UInt(u) => vec![i128::from(*u)],
        Value::IntArray(xs) => xs.iter().map(|&x| i128::from(x)).collect(),
        Value::Array(xs) => xs.iter().flat_map(ints_of).collect(),
        Value::Map(m) => m.iter().flat_map(|(k, _)| ints_of(k)).collect(),
        _ => Vec::new(),
    }
}

/// The value at `path` (field names) of a decoded struct.
fn at<'a>(v: &'a Value, path: &[&str]) -> &'a Value {
    let mut cur = v;
    for name in path {
        cur = match cur {
            Value::Struct(s) => s.get(name).unwrap_or(&Value::Nil),
            Value::Array(xs) => name.parse::<usize>().ok().and_then(|i| xs.get(i)).unwrap_or(&Value::Nil),
            _ => &Value::Nil,
        };
    }
    cur
}

fn value_path(rel: &'static ReleaseSchema, kind: MessageKind, frames: &[&[u8]], path: &[&str]) -> Seen {
    decode_message(rel, kind, frames, &Limits::default()).map(|d| ints_of(at(&d.value, path)))
}

/// Two paths' results as one comparable form: the integers, or the error's
/// class, path and text.
fn same(what: &str, a: &Seen, b: &Seen) -> Result<(), String> {
    let form = |s: &Seen| match s {
        Ok(v) => Ok(v.clone()),
        Err(e) => Err((e.class, e.path.clone(), e.detail.clone())),
    };
    if form(a) == form(b) {
        Ok(())
    } else {
        Err(format!("{what}: value path {a:?}, other {b:?}"))
    }
}

/// One vLLM field kind: where it sits in the message and how the typed
/// struct holds it.
struct Kind<M> {
    name: &'static str,
    path: &'static [&'static str],
    set: fn(&mut M, i128),
    get: fn(&M) -> Vec<i128>,
}

fn base_request() -> EngineCoreRequest {
    EngineCoreRequest {
        request_id: "r".into(),
        prompt_token_ids: Some(IntList::from(vec![1, 2, 3]).into()),
        sampling_params: Some(SamplingParams { max_tokens: Some(8), ..SamplingParams::default() }),
        arrival_time: 1.5,
        ..EngineCoreRequest::default()
    }
}

fn sp(r: &mut EngineCoreRequest) -> &mut SamplingParams {
    r.sampling_params.get_or_insert_with(SamplingParams::default)
}

fn sp_of(r: &EngineCoreRequest) -> SamplingParams {
    r.sampling_params.clone().unwrap_or_default()
}

fn list(v: i128) -> IntList {
    IntList::try_from(vec![2, v]).expect("a wire integer")
}

fn opt(v: Option<i128>) -> Vec<i128> {
    v.into_iter().collect()
}

fn ids(l: &Option<IntList>) -> Vec<i128> {
    l.as_ref().map(IntList::to_vec).unwrap_or_default()
}

macro_rules! kind {
    ($name:expr, [$($p:expr),*], |$m:ident, $v:ident| $set:expr, |$g:ident| $get:expr) => {
        Kind { name: $name, path: &[$($p),*], set: |$m, $v| $set, get: |$g| $get }
    };
}

fn request_kinds() -> Vec<Kind<EngineCoreRequest>> {
    vec![
        kind!("prompt_token_ids", ["prompt_token_ids"], |r, v| r.prompt_token_ids = Some(list(v).into()), |r| r
            .prompt_token_ids
            .as_ref()
            .map(TokenIds::to_vec)
            .unwrap_or_default()),
        kind!("data_parallel_rank", ["data_parallel_rank"], |r, v| r.data_parallel_rank = Some(v), |r| opt(
            r.data_parallel_rank
        )),
        kind!("client_index", ["client_index"], |r, v| r.client_index = v, |r| vec![r.client_index]),
        kind!("current_wave", ["current_wave"], |r, v| r.current_wave = v, |r| vec![r.current_wave]),
        kind!("priority", ["priority"], |r, v| r.priority = v, |r| vec![r.priority]),
        kind!(
            "lora_int_id",
            ["lora_request", "lora_int_id"],
            |r, v| r.lora_request = Some(LoRARequest {
                lora_name: "a".into(),
                lora_int_id: v,
                lora_path: "/a".into(),
                ..LoRARequest::default()
            }),
            |r| r.lora_request.iter().map(|l| l.lora_int_id).collect()
        ),
        kind!("n", ["sampling_params", "n"], |r, v| sp(r).n = v, |r| vec![sp_of(r).n]),
        kind!("top_k", ["sampling_params", "top_k"], |r, v| sp(r).top_k = v, |r| vec![sp_of(r).top_k]),
        kind!("seed", ["sampling_params", "seed"], |r, v| sp(r).seed = Some(v), |r| opt(sp_of(r).seed)),
        kind!("max_tokens", ["sampling_params", "max_tokens"], |r, v| sp(r).max_tokens = Some(v), |r| opt(
            sp_of(r).max_tokens
        )),
        kind!("min_tokens", ["sampling_params", "min_tokens"], |r, v| sp(r).min_tokens = v, |r| vec![
            sp_of(r).min_tokens
        ]),
        kind!("logprobs", ["sampling_params", "logprobs"], |r, v| sp(r).logprobs = Some(v), |r| opt(sp_of(r).logprobs)),
        kind!("prompt_logprobs", ["sampling_params", "prompt_logprobs"], |r, v| sp(r).prompt_logprobs = Some(v), |r| {
            opt(sp_of(r).prompt_logprobs)
        }),
        kind!("stream_interval", ["sampling_params", "stream_interval"], |r, v| sp(r).stream_interval = Some(v), |r| {
            opt(sp_of(r).stream_interval)
        }),
        kind!(
            "thinking_token_budget",
            ["sampling_params", "thinking_token_budget"],
            |r, v| sp(r).thinking_token_budget = Some(v),
            |r| opt(sp_of(r).thinking_token_budget)
        ),
        kind!("eos_token_id", ["sampling_params", "_eos_token_id"], |r, v| sp(r).eos_token_id = Some(v), |r| opt(
            sp_of(r).eos_token_id
        )),
        kind!(
            "output_text_buffer_length",
            ["sampling_params", "output_text_buffer_length"],
            |r, v| sp(r).output_text_buffer_length = v,
            |r| vec![sp_of(r).output_text_buffer_length]
        ),
        kind!(
            "stop_token_ids",
            ["sampling_params", "stop_token_ids"],
            |r, v| sp(r).stop_token_ids = Some(list(v)),
            |r| ids(&sp_of(r).stop_token_ids)
        ),
        kind!(
            "allowed_token_ids",
            ["sampling_params", "allowed_token_ids"],
            |r, v| sp(r).allowed_token_ids = Some(list(v)),
            |r| ids(&sp_of(r).allowed_token_ids)
        ),
        kind!(
            "all_stop_token_ids",
            ["sampling_params", "_all_stop_token_ids"],
            |r, v| sp(r).all_stop_token_ids = list(v),
            |r| sp_of(r).all_stop_token_ids.to_vec()
        ),
        kind!(
            "logit_bias key",
            ["sampling_params", "logit_bias"],
            |r, v| sp(r).logit_bias = Some(vec![(v, 1.5)]),
            |r| sp_of(r).logit_bias.unwrap_or_default().iter().map(|(k, _)| *k).collect()
        ),
    ]
}

fn base_outputs() -> EngineCoreOutputs {
    let out = EngineCoreOutput {
        request_id: "r1".into(),
        new_token_ids: IntList::from(vec![42]),
        ..EngineCoreOutput::default()
    };
    EngineCoreOutputs { outputs: vec![out], timestamp: 12345.5, ..EngineCoreOutputs::default() }
}

fn first(o: &EngineCoreOutputs) -> EngineCoreOutput {
    o.outputs.first().cloned().unwrap_or_default()
}

fn first_mut(o: &mut EngineCoreOutputs) -> &mut EngineCoreOutput {
    &mut o.outputs[0]
}

fn output_kinds() -> Vec<Kind<EngineCoreOutputs>> {
    vec![
        kind!("engine_index", ["engine_index"], |o, v| o.engine_index = v, |o| vec![o.engine_index]),
        kind!("new_token_ids", ["outputs", "0", "new_token_ids"], |o, v| first_mut(o).new_token_ids = list(v), |o| {
            first(o).new_token_ids.to_vec()
        }),
        kind!(
            "stop_reason",
            ["outputs", "0", "stop_reason"],
            |o, v| first_mut(o).stop_reason = Some(StopReason::TokenId(v)),
            |o| match first(o).stop_reason {
                Some(StopReason::TokenId(t)) => vec![t],
                _ => Vec::new(),
            }
        ),
        kind!(
            "num_nans_in_logits",
            ["outputs", "0", "num_nans_in_logits"],
            |o, v| first_mut(o).num_nans_in_logits = v,
            |o| vec![first(o).num_nans_in_logits]
        ),
        kind!("wave_complete", ["wave_complete"], |o, v| o.wave_complete = Some(v), |o| opt(o.wave_complete)),
        kind!("start_wave", ["start_wave"], |o, v| o.start_wave = Some(v), |o| opt(o.start_wave)),
        kind!(
            "utility call_id",
            ["utility_output", "call_id"],
            |o, v| o.utility_output = Some(UtilityOutput { call_id: v, ..UtilityOutput::default() }),
            |o| o.utility_output.iter().map(|u| u.call_id).collect()
        ),
    ]
}

/// The integers of the field at `path` in what the hot output decoder
/// read, through its owned typed batch (`Outputs::to_owned`), which holds
/// what the borrowed fields cannot (above `i64::MAX`).
fn hot_output_ints(o: &Outputs<'_>, path: &[&str]) -> Vec<i128> {
    let b = o.to_owned().expect("an accepted batch converts");
    match path {
        ["engine_index"] => vec![b.engine_index],
        ["wave_complete"] => b.wave_complete.into_iter().collect(),
        ["start_wave"] => b.start_wave.into_iter().collect(),
        ["utility_output", "call_id"] => b.utility_output.map(|u| u.call_id).into_iter().collect(),
        ["outputs", "0", field] => {
            let Some(out) = b.outputs.first() else { return Vec::new() };
            match *field {
                "new_token_ids" => out.new_token_ids.iter().collect(),
                "stop_reason" => match &out.stop_reason {
                    Some(StopReason::TokenId(t)) => vec![*t],
                    _ => Vec::new(),
                },
                "num_nans_in_logits" => vec![out.num_nans_in_logits],
                other => panic!("no hot field {other}"),
            }
        }
        other => panic!("no hot field {other:?}"),
    }
}

fn frames_of(frames: &[Vec<u8>]) -> Vec<&[u8]> {
    frames.iter().map(Vec::as_slice).collect()
}

/// Every path on a request whose field `k` holds `v`.
fn check_request(rel: &'static ReleaseSchema, k: &Kind<EngineCoreRequest>, v: i128) -> Result<(), String> {
    let mut r = base_request();
    (k.set)(&mut r, v);
    let frames = r.encode(rel).map_err(|e| format!("{}: encode: {e}", k.name))?;
    let refs = frames_of(&frames);
    let limits = Limits::default();
    let want = value_path(rel, MessageKind::EngineCoreRequest, &refs, k.path);
    let typed = decode_typed::<EngineCoreRequest>(rel, &refs, &limits).map(|(m, _)| (k.get)(&m));
    let via = decode_typed_via_value::<EngineCoreRequest>(rel, &refs, &limits).map(|(m, _)| (k.get)(&m));
    let hot = decode_request(rel, &refs, &limits).map(|(m, _)| (k.get)(&m));
    same(&format!("{} = {v}: decode_typed", k.name), &want, &typed)?;
    same(&format!("{} = {v}: decode_typed_via_value", k.name), &want, &via)?;
    same(&format!("{} = {v}: hot::decode_request", k.name), &want, &hot)?;
    if let Some(m) = decode_request_direct(rel, &refs, &limits) {
        same(&format!("{} = {v}: the direct path", k.name), &want, &Ok((k.get)(&m)))?;
    }
    if let Ok(ints) = &want {
        // The value is the one written.
        if !ints.contains(&v) {
            return Err(format!("{} = {v}: decoded as {ints:?}", k.name));
        }
    }
    Ok(())
}

/// Every path on an output batch whose field `k` holds `v`.
fn check_outputs(rel: &'static ReleaseSchema, k: &Kind<EngineCoreOutputs>, v: i128) -> Result<(), String> {
    let mut o = base_outputs();
    (k.set)(&mut o, v);
    let frames = o.encode(rel).map_err(|e| format!("{}: encode: {e}", k.name))?;
    let refs = frames_of(&frames);
    let limits = Limits::default();
    let want = value_path(rel, MessageKind::EngineCoreOutputs, &refs, k.path);
    let typed = decode_typed::<EngineCoreOutputs>(rel, &refs, &limits).map(|(m, _)| (k.get)(&m));
    let hot = decode_outputs(rel, &refs, &limits).map(|o| hot_output_ints(&o, k.path));
    same(&format!("{} = {v}: decode_typed", k.name), &want, &typed)?;
    same(&format!("{} = {v}: hot::decode_outputs", k.name), &want, &hot)?;
    match &want {
        Ok(ints) if ints.contains(&v) => Ok(()),
        Ok(ints) => Err(format!("{} = {v}: decoded as {ints:?}", k.name)),
        Err(e) => Err(format!("{} = {v}: an output batch refused: {e}", k.name)),
    }
}

/// A typed message's direct encoder (an inherent method of each struct).
type Encode<M> = fn(&M, &'static ReleaseSchema) -> Result<Vec<Vec<u8>>, Error>;

/// A message of another kind whose one integer field holds `v`, on the
/// value and typed paths.
fn check_message<M: Message + Default>(
    rel: &'static ReleaseSchema,
    name: &str,
    path: &[&str],
    set: fn(&mut M, i128),
    get: fn(&M) -> i128,
    encode: Encode<M>,
    v: i128,
) -> Result<(), String> {
    let mut m = M::default();
    set(&mut m, v);
    let frames = encode(&m, rel).map_err(|e| format!("{name}: encode: {e}"))?;
    let refs = frames_of(&frames);
    let want = decode_message(rel, M::KIND, &refs, &Limits::default()).map(|d| ints_of(at(&d.value, path)));
    let typed = decode_typed::<M>(rel, &refs, &Limits::default()).map(|(m, _)| vec![get(&m)]);
    same(&format!("{name} = {v}: decode_typed"), &want, &typed)
}

fn other_messages(rel: &'static ReleaseSchema, v: i128) -> Result<(), String> {
    let utility: Encode<UtilityRequest> = |m, r| m.encode(r);
    let wave: Encode<StartDpWave> = |m, r| m.encode(r);
    let output: Encode<UtilityOutput> = |m, r| m.encode(r);
    check_message(
        rel,
        "UTILITY client_index",
        &["client_index"],
        |m, v| m.client_index = v,
        |m| m.client_index,
        utility,
        v,
    )?;
    check_message(rel, "UTILITY call_id", &["call_id"], |m, v| m.call_id = v, |m| m.call_id, utility, v)?;
    check_message(rel, "START_DP_WAVE wave", &["wave"], |m, v| m.wave = v, |m| m.wave, wave, v)?;
    check_message(rel, "UtilityOutput call_id", &["call_id"], |m, v| m.call_id = v, |m| m.call_id, output, v)
}

fn tokenspeed() -> &'static ReleaseSchema {
    release(engine_protocol::Dialect::TokenSpeed, "0.1.1").expect("TokenSpeed 0.1.1")
}

/// TokenSpeed's batch with one row: field `which` (0: an output id, 1:
/// `prompt_tokens`, 2: `engine_index`) holding `v`.
fn check_tokenspeed_batch(which: usize, v: i128) -> Result<(), String> {
    let rel = tokenspeed();
    let mut b = BatchTokenIDOutSlim {
        rids: Some(vec!["r".into()]),
        output_ids: vec![IntList::from(vec![5])],
        finished_reasons: vec![String::new()],
        prompt_tokens: IntList::from(vec![3]),
        completion_tokens: IntList::from(vec![1]),
        cached_tokens: IntList::from(vec![0]),
        output_token_logprobs_val: vec![Vec::new()],
        output_token_logprobs_idx: vec![IntList::new()],
        engine_index: Some(0),
        num_running: Some(1),
        num_waiting: Some(0),
        kv_active_pages: Some(1),
        kv_total_pages: Some(8),
        ..BatchTokenIDOutSlim::default()
    };
    let (name, path): (&str, &[&str]) = match which {
        0 => {
            b.output_ids = vec![list(v)];
            ("output_ids", &["output_ids"])
        }
        1 => {
            b.prompt_tokens = IntList::try_from(vec![v]).expect("a wire integer");
            ("prompt_tokens", &["prompt_tokens"])
        }
        _ => {
            b.engine_index = Some(v);
            ("engine_index", &["engine_index"])
        }
    };
    let get = |b: &BatchTokenIDOutSlim| -> Vec<i128> {
        match which {
            0 => b.output_ids.iter().flat_map(IntList::to_vec).collect(),
            1 => b.prompt_tokens.to_vec(),
            _ => b.engine_index.into_iter().collect(),
        }
    };
    let frames = b.encode(rel).map_err(|e| format!("{name}: encode: {e}"))?;
    let refs = frames_of(&frames);
    let limits = Limits::default();
    let want = decode_message(rel, MessageKind::EngineCoreOutputs, &refs, &limits).map(|d| ints_of(at(&d.value, path)));
    let typed = engine_protocol::typed::tokenspeed::decode_typed::<BatchTokenIDOutSlim>(rel, &refs, &limits)
        .map(|(m, _)| get(&m));
    let hot = decode_batch(rel, &refs, &limits).map(|(m, _)| get(&m));
    same(&format!("TokenSpeed {name} = {v}: decode_typed"), &want, &typed)?;
    same(&format!("TokenSpeed {name} = {v}: decode_batch"), &want, &hot)?;
    if let Some(m) = decode_batch_direct(rel, &refs, &limits) {
        same(&format!("TokenSpeed {name} = {v}: the direct path"), &want, &Ok(get(&m)))?;
    }
    match &want {
        Ok(ints) if ints.contains(&v) => Ok(()),
        other => Err(format!("TokenSpeed {name} = {v}: {other:?}")),
    }
}

/// Every field kind holding `v`, on both vLLM releases and TokenSpeed.
fn check_everywhere(v: i128) -> Result<(), String> {
    for rel in [v032(), v033()] {
        for k in &request_kinds() {
            check_request(rel, k, v)?;
        }
        for k in &output_kinds() {
            check_outputs(rel, k, v)?;
        }
        other_messages(rel, v)?;
    }
    for which in 0..3 {
        check_tokenspeed_batch(which, v)?;
    }
    Ok(())
}

#[test]
fn every_integer_field_kind_gets_the_same_verdict_and_value_from_every_path_at_the_boundaries() {
    let failures: Vec<String> = BOUNDS.iter().filter_map(|&v| check_everywhere(v).err()).collect();
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn a_token_id_above_i64_max_is_accepted_and_kept_by_the_typed_request_decoder() {
    for rel in [v032(), v033()] {
        let mut r = base_request();
        r.prompt_token_ids = Some(IntList::try_from(vec![1, WIRE_INT_MAX, I64_MAX + 1]).expect("wire integers").into());
        let frames = r.encode(rel).expect("encodes");
        let (back, drift) = decode_typed::<EngineCoreRequest>(rel, &frames_of(&frames), &Limits::default())
            .expect("msgspec takes any uint 64 for list[int]");
        assert!(drift.is_empty());
        assert_eq!(back.prompt_token_ids.map(|l| l.to_vec()), Some(vec![1, WIRE_INT_MAX, I64_MAX + 1]));
    }
}

#[test]
fn u64_max_in_an_int_field_of_the_sampling_params_is_kept_where_vllm_takes_it() {
    for rel in [v032(), v033()] {
        let mut r = base_request();
        sp(&mut r).seed = Some(WIRE_INT_MAX);
        sp(&mut r).max_tokens = Some(WIRE_INT_MAX);
        let frames = r.encode(rel).expect("encodes");
        let (back, _) =
            decode_typed::<EngineCoreRequest>(rel, &frames_of(&frames), &Limits::default()).expect("accepted");
        assert_eq!((sp_of(&back).seed, sp_of(&back).max_tokens), (Some(WIRE_INT_MAX), Some(WIRE_INT_MAX)));
    }
}

#[test]
fn min_tokens_above_i64_max_is_refused_against_a_smaller_max_tokens_by_every_path() {
    // vLLM's `_verify_args` compares the two Python ints: 2^64-1 > 8.
    let rel = v033();
    let mut r = base_request();
    sp(&mut r).min_tokens = WIRE_INT_MAX;
    let frames = r.encode(rel).expect("encodes");
    let refs = frames_of(&frames);
    let value = decode_message(rel, MessageKind::EngineCoreRequest, &refs, &Limits::default()).expect_err("refused");
    let typed = decode_typed::<EngineCoreRequest>(rel, &refs, &Limits::default()).expect_err("refused");
    assert_eq!(value, typed);
    assert!(value.path.ends_with("min_tokens"), "{value}");
}

#[test]
fn i64_min_in_a_count_is_refused_by_vllms_rule_on_every_path() {
    let rel = v032();
    let mut r = base_request();
    sp(&mut r).n = I64_MIN;
    let frames = r.encode(rel).expect("encodes");
    let refs = frames_of(&frames);
    let value = decode_message(rel, MessageKind::EngineCoreRequest, &refs, &Limits::default()).expect_err("n < 1");
    assert_eq!(decode_typed::<EngineCoreRequest>(rel, &refs, &Limits::default()).expect_err("n < 1"), value);
}

#[test]
fn integers_past_the_wire_range_cannot_be_encoded() {
    let rel = v033();
    for bad in [WIRE_INT_MAX + 1, WIRE_INT_MIN - 1] {
        let mut r = base_request();
        r.priority = bad;
        assert!(r.encode(rel).is_err(), "{bad} has no MessagePack form");
    }
    assert!(IntList::try_from(vec![WIRE_INT_MAX + 1]).is_err());
}

#[test]
fn a_check_of_the_paths_fails_when_one_path_narrows_an_integer() {
    // The comparison itself: a path that read u64::MAX as something else,
    // or refused it, is reported.
    let want: Seen = Ok(vec![WIRE_INT_MAX]);
    assert!(same("narrowed", &want, &Ok(vec![-1])).is_err());
    let refused = Err(Error::new(engine_protocol::RejectClass::Type, "x", "out of range"));
    assert!(same("refused", &want, &refused).is_err());
    assert!(same("agree", &want, &Ok(vec![WIRE_INT_MAX])).is_ok());
}

/// Any wire integer, with the boundaries and the small forms drawn often.
fn wire_int() -> impl Strategy<Value = i128> {
    prop_oneof![
        any::<i64>().prop_map(i128::from),
        any::<u64>().prop_map(i128::from),
        (0usize..BOUNDS.len()).prop_map(|i| BOUNDS[i]),
        (-40i128..300),
        (0u32..64).prop_map(|k| (1i128 << k) - 1),
        (0u32..64).prop_map(|k| -(1i128 << k)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn every_integer_field_kind_gets_the_same_verdict_and_value_from_every_path(v in wire_int()) {
        if let Err(e) = check_everywhere(v) {
            prop_assert!(false, "{}", e);
        }
    }
}

/// The typed struct a decoded value converts to holds the same value again
/// (`to_value` of the struct is the decoder's value at the field).
#[test]
fn the_typed_structs_write_back_the_values_they_read_at_the_boundaries() {
    for rel in [v032(), v033()] {
        for v in BOUNDS {
            let mut r = base_request();
            r.prompt_token_ids = Some(list(v).into());
            r.client_index = v;
            let frames = r.encode(rel).expect("encodes");
            let d = decode_message(rel, MessageKind::EngineCoreRequest, &frames_of(&frames), &Limits::default())
                .expect("accepted");
            let back = EngineCoreRequest::from_value(rel, &d.value).expect("converts");
            let again = back.to_value(rel).expect("to a value");
            let s = |x: &Value| -> StructValue {
                match x {
                    Value::Struct(s) => s.clone(),
                    other => panic!("{other:?}"),
                }
            };
            assert_eq!(s(&again).get("prompt_token_ids"), s(&d.value).get("prompt_token_ids"), "{v}");
            assert_eq!(s(&again).get("client_index"), s(&d.value).get("client_index"), "{v}");
        }
    }
}

/// The typed decode of one message kind: its verdict only.
fn typed_verdict(rel: &'static ReleaseSchema, kind: MessageKind, frames: &[&[u8]]) -> Option<Result<(), Error>> {
    let limits = Limits::default();
    Some(match kind {
        MessageKind::EngineCoreRequest => decode_typed::<EngineCoreRequest>(rel, frames, &limits).map(|_| ()),
        MessageKind::EngineCoreOutputs => decode_typed::<EngineCoreOutputs>(rel, frames, &limits).map(|_| ()),
        MessageKind::UtilityOutput => decode_typed::<UtilityOutput>(rel, frames, &limits).map(|_| ()),
        MessageKind::UtilityRequest => decode_typed::<UtilityRequest>(rel, frames, &limits).map(|_| ()),
        MessageKind::StartDpWave => decode_typed::<StartDpWave>(rel, frames, &limits).map(|_| ()),
        MessageKind::EngineCoreReadyResponse => {
            decode_typed::<engine_protocol::typed::EngineCoreReadyResponse>(rel, frames, &limits).map(|_| ())
        }
        _ => return None,
    })
}

#[test]
fn the_intrange_goldens_get_vllms_verdict_from_the_value_typed_and_hot_paths() {
    use engine_testkit::corpus::{golden_dir, message_cases, Expect};
    let mut seen = 0;
    let mut failures = Vec::new();
    for version in ["0.32.0", "0.33.0", "0.34.0"] {
        let dir = golden_dir().join("vllm").join(version).join("intrange");
        let cases = engine_testkit::on_large_stack(move || message_cases(&dir).expect("intrange goldens load"));
        let mut here = 0;
        for case in &cases {
            let (Some((kind, frames, expect)), Some(rel)) = (case.message(), case.release()) else { continue };
            here += 1;
            let refs = frames_of(frames);
            let limits = Limits::default();
            let value = decode_message(rel, kind, &refs, &limits).map(|_| ());
            let verdict = |r: &Result<(), Error>| match r {
                Ok(()) => Expect::Accept,
                Err(e) => Expect::Reject(e.class),
            };
            if verdict(&value) != *expect {
                failures.push(format!("{}: value path {value:?}, vLLM {expect:?}", case.report_id()));
            }
            let mut others = vec![("decode_typed", typed_verdict(rel, kind, &refs))];
            match kind {
                MessageKind::EngineCoreRequest => {
                    others.push(("hot::decode_request", Some(decode_request(rel, &refs, &limits).map(|_| ()))))
                }
                MessageKind::EngineCoreOutputs => {
                    others.push(("hot::decode_outputs", Some(decode_outputs(rel, &refs, &limits).map(|_| ()))))
                }
                _ => {}
            }
            for (name, got) in others {
                if let Some(got) = got {
                    if got != value {
                        failures.push(format!("{}: {name} {got:?}, value path {value:?}", case.report_id()));
                    }
                }
            }
        }
        assert!(here >= 224, "only {here} intrange cases for {version}");
        seen += here;
    }
    assert!(failures.is_empty(), "{} of {seen}: {failures:#?}", failures.len());
}
