//! The typed TokenSpeed API (`typed::tokenspeed`) against TokenSpeed's own
//! bytes: the goldens of both wire versions (golden/tokenspeed/0.1.1 and
//! golden/tokenspeed/git-57b49061) decode with the verdicts and drift of
//! the value decoder and re-encode byte for byte; a field one version lacks
//! is refused when encoding for it; the output batch converts to
//! per-request rows and back, and a ragged batch is refused naming its
//! column (docs/tokenspeed-wire.md §3, §7, §8, §12).

use engine_protocol::hot::tokenspeed::decode_batch;
use engine_protocol::internal::decode_batch_direct;
use engine_protocol::typed::tokenspeed::{
    decode_abort, decode_typed, encode_abort, BatchRow, BatchTokenIDOutSlim, Finish, LoadTail, RaggedBatch,
    TokenSpeedMessage, TokenizedGenerateReqInput, WireEngineCoreReadyResponse, WireHandshakeInitMessage,
    WireReadyMessage,
};
use engine_protocol::typed::IntList;
use engine_protocol::Dialect;
use engine_protocol::{decode_message, release, Error, Limits, MessageKind, RejectClass, ReleaseSchema};
use engine_testkit::corpus::{golden_dir, message_cases, Body, EncodeMode, Expect};
use proptest::prelude::*;

fn ts() -> &'static ReleaseSchema {
    release(Dialect::TokenSpeed, "0.1.1").expect("TokenSpeed 0.1.1 is a release")
}

/// The 08-03 wire.
fn git() -> &'static ReleaseSchema {
    release(Dialect::TokenSpeed, "git-57b49061").expect("TokenSpeed git-57b49061 is a release")
}

/// Both wire versions, with the fewest `exact` accepted goldens each must
/// re-encode (their request, output, ready, abort and handshake goldens
/// but the stop-token-id sets: 115 and 114 today).
fn versions() -> [(&'static ReleaseSchema, usize); 2] {
    [(ts(), 100), (git(), 100)]
}

fn refs(frames: &[Vec<u8>]) -> Vec<&[u8]> {
    frames.iter().map(Vec::as_slice).collect()
}

/// The drift a decode reported and the frames the typed encoder wrote back.
type Roundtrip = Result<(Vec<String>, Vec<Vec<u8>>), Error>;

/// Decodes as `M` of `rel` and re-encodes for `rel`: the drift and the new
/// frames.
fn typed_roundtrip<M: TokenSpeedMessage>(
    rel: &'static ReleaseSchema,
    frames: &[Vec<u8>],
    encode: impl Fn(&M, &'static ReleaseSchema) -> Result<Vec<Vec<u8>>, Error>,
) -> Roundtrip {
    let (m, drift) = decode_typed::<M>(rel, &refs(frames), &Limits::default())?;
    Ok((drift, encode(&m, rel)?))
}

/// The typed decode and re-encode of one message of `rel`; `None` for a
/// kind the typed API has no struct for.
fn roundtrip(rel: &'static ReleaseSchema, kind: MessageKind, frames: &[Vec<u8>]) -> Option<Roundtrip> {
    Some(match kind {
        MessageKind::EngineCoreRequest => typed_roundtrip(rel, frames, TokenizedGenerateReqInput::encode),
        MessageKind::EngineCoreOutputs => typed_roundtrip(rel, frames, BatchTokenIDOutSlim::encode),
        MessageKind::EngineCoreReadyResponse => typed_roundtrip(rel, frames, WireEngineCoreReadyResponse::encode),
        MessageKind::HandshakeHello | MessageKind::HandshakeReady => {
            typed_roundtrip(rel, frames, WireReadyMessage::encode)
        }
        MessageKind::HandshakeInit => typed_roundtrip(rel, frames, WireHandshakeInitMessage::encode),
        MessageKind::AbortRequest => {
            decode_abort(rel, &refs(frames), &Limits::default()).map(|rids| (Vec::new(), encode_abort(&rids)))
        }
        _ => return None,
    })
}

#[test]
fn every_accepted_golden_reencodes_byte_for_byte_from_the_typed_struct() {
    for (rel, at_least) in versions() {
        let (mut exact, mut equivalent) = (0, 0);
        for dir in ["request", "output", "ready", "abort", "handshake"] {
            let cases = message_cases(&golden_dir().join("tokenspeed").join(rel.version).join(dir)).expect("goldens");
            for case in cases {
                let Body::Message { message, frames, expect: Expect::Accept, encode, .. } = &case.body else {
                    continue;
                };
                let r = roundtrip(rel, *message, frames).unwrap_or_else(|| panic!("{}: no typed struct", case.id));
                let (_, again) =
                    r.unwrap_or_else(|e| panic!("{}: typed decode refused an accepted message: {e}", case.id));
                match encode {
                    EncodeMode::Exact => {
                        assert_eq!(again, *frames, "{}: the typed encoder differs from TokenSpeed's", case.id);
                        exact += 1;
                    }
                    EncodeMode::Equivalent => {
                        // A set in hash order: the re-encoded frames decode
                        // to the same message.
                        let a = decode_message(rel, *message, &refs(frames), &Limits::default()).expect("accepted");
                        let b = decode_message(rel, *message, &refs(&again), &Limits::default()).expect("re-encoded");
                        assert_eq!(a.value, b.value, "{}", case.id);
                        equivalent += 1;
                    }
                }
            }
        }
        assert!(exact >= at_least, "{}: only {exact} exact cases", rel.version);
        assert!(equivalent >= 1, "{}: no equivalent case seen", rel.version);
    }
}

#[test]
fn typed_decoding_has_the_value_decoders_verdict_and_drift_on_every_golden() {
    for (rel, _) in versions() {
        let cases = message_cases(&golden_dir().join("tokenspeed").join(rel.version)).expect("goldens load");
        let mut seen = 0;
        for case in cases {
            let Body::Message { message, frames, .. } = &case.body else { continue };
            let Some(typed) = roundtrip(rel, *message, frames) else { continue };
            seen += 1;
            let reference = decode_message(rel, *message, &refs(frames), &Limits::default());
            match (reference, typed) {
                (Ok(d), Ok((drift, _))) => assert_eq!(d.drift, drift, "{}", case.id),
                (Err(a), Err(b)) => assert_eq!((a.class, &a.path), (b.class, &b.path), "{}", case.id),
                (a, b) => panic!("{}: value decoder {:?}, typed {:?}", case.id, a.map(|d| d.drift), b.map(|d| d.0)),
            }
        }
        assert!(seen > 300, "{}: only {seen} cases compared", rel.version);
    }
}

#[test]
fn the_direct_batch_decoder_gives_the_typed_decoders_result_on_every_golden() {
    for (rel, _) in versions() {
        let cases = message_cases(&golden_dir().join("tokenspeed").join(rel.version)).expect("goldens load");
        let (mut seen, mut direct) = (0, 0);
        for case in cases {
            let Body::Message { message: MessageKind::EngineCoreOutputs, frames, .. } = &case.body else { continue };
            seen += 1;
            let refs = refs(frames);
            let reference = decode_typed::<BatchTokenIDOutSlim>(rel, &refs, &Limits::default());
            let got = decode_batch(rel, &refs, &Limits::default());
            // Debug text: floats compared by what they print (NaN included).
            match (&reference, &got) {
                (Ok(a), Ok(b)) => assert_eq!(format!("{a:?}"), format!("{b:?}"), "{}", case.id),
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{}", case.id),
                _ => panic!("{}: typed {:?}, direct {:?}", case.id, reference.map(|r| r.1), got.map(|r| r.1)),
            }
            if let Some(b) = decode_batch_direct(rel, &refs, &Limits::default()) {
                assert_eq!(format!("{:?}", reference.as_ref().map(|r| &r.0)), format!("{:?}", Ok::<_, ()>(&b)));
                direct += 1;
            }
        }
        // Every plain batch is read directly: the 8 columns (0.1.1: and the
        // tail), float64 logprobs, nothing after the batch.
        assert!(seen >= 40, "{}: only {seen} output cases", rel.version);
        assert!(direct >= 25, "{}: only {direct} of {seen} batches read directly", rel.version);
    }
}

#[test]
fn the_08_03_ready_response_has_block_size_where_0_1_1_has_prefix_granularity() {
    let case = engine_testkit::corpus::golden_json("tokenspeed", "git-57b49061", "ready/default_bf16");
    let frames = engine_testkit::hex::decode_frames(&case["frames"]).expect("hex");
    let (r, drift) =
        decode_typed::<WireEngineCoreReadyResponse>(git(), &refs(&frames), &Limits::default()).expect("accepted");
    assert!(drift.is_empty(), "{drift:?}");
    assert_eq!(r.block_size, Some(i128::from(case["value"]["block_size"].as_i64().expect("block_size in the golden"))));
    assert_eq!(r.prefix_granularity, None);
    // The 0.1.1 release has no block_size: a set one is refused by name,
    // an unset one encodes as 0.1.1's map.
    let e = r.encode(ts()).unwrap_err();
    assert!(e.to_string().contains("block_size"), "{e}");
    let as_0_1_1 = WireEngineCoreReadyResponse { block_size: None, prefix_granularity: Some(16), ..r.clone() };
    let frames_0_1_1 = as_0_1_1.encode(ts()).expect("encodes for 0.1.1");
    let d = decode_message(ts(), MessageKind::EngineCoreReadyResponse, &refs(&frames_0_1_1), &Limits::default())
        .expect("0.1.1 reads it");
    assert!(d.drift.is_empty(), "{:?}", d.drift);
    let e = as_0_1_1.encode(git()).unwrap_err();
    assert!(e.to_string().contains("prefix_granularity"), "{e}");
}

#[test]
fn an_08_03_batch_has_no_engine_index_or_load_tail_and_refuses_one_when_encoding() {
    let case = engine_testkit::corpus::golden_json("tokenspeed", "git-57b49061", "output/three_rows_all_finishes");
    let frames = engine_testkit::hex::decode_frames(&case["frames"]).expect("hex");
    let (b, _) = decode_typed::<BatchTokenIDOutSlim>(git(), &refs(&frames), &Limits::default()).expect("accepted");
    assert_eq!((b.engine_index, b.load()), (None, None));
    let rows = b.rows().expect("not ragged");
    assert_eq!(BatchTokenIDOutSlim::from_rows_08_03(&rows).encode(git()).expect("encodes"), frames);
    let tailed = BatchTokenIDOutSlim::from_rows(&rows, 3, LoadTail { num_running: 2, ..LoadTail::default() });
    let e = tailed.encode(git()).unwrap_err();
    assert!(e.to_string().contains("engine_index"), "{e}");
}

#[test]
fn unknown_trailing_elements_are_kept_and_written_back_after_the_known_fields() {
    let case = engine_testkit::corpus::golden_json("tokenspeed", "0.1.1", "mutant/req_extra_trailing");
    let frames = engine_testkit::hex::decode_frames(&case["frames"]).expect("hex");
    let (req, drift) =
        decode_typed::<TokenizedGenerateReqInput>(ts(), &refs(&frames), &Limits::default()).expect("accepted");
    assert!(drift.iter().any(|d| d.starts_with("TokenizedGenerateReqInput[25]")), "{drift:?}");
    assert!(!req.unknown.is_empty());
    assert_eq!(req.encode(ts()).expect("encodes"), frames);
}

#[test]
fn the_typed_request_converts_to_the_decoders_value_and_back() {
    let cases = message_cases(&golden_dir().join("tokenspeed/0.1.1/request")).expect("goldens load");
    for case in cases {
        let Body::Message { frames, expect: Expect::Accept, .. } = &case.body else { continue };
        let d = decode_message(ts(), MessageKind::EngineCoreRequest, &refs(frames), &Limits::default()).expect("ok");
        let req = TokenizedGenerateReqInput::from_value(ts(), &d.value).expect("converts");
        assert_eq!(req.to_value(ts()).expect("to value"), d.value, "{}", case.id);
    }
}

#[test]
fn a_vllm_release_is_refused_by_the_typed_tokenspeed_api() {
    let vllm = release(Dialect::Vllm, "0.33.0").expect("vLLM 0.33.0");
    let e = BatchTokenIDOutSlim::default().encode(vllm).unwrap_err();
    assert_eq!(e.class, RejectClass::Validation);
    assert!(e.detail.contains("no typed TokenSpeed API"), "{e}");
}

// ===== rows =====

#[test]
fn the_goldens_batch_reads_as_rows_with_named_finish_reasons() {
    let case = engine_testkit::corpus::golden_json("tokenspeed", "0.1.1", "output/three_rows_all_finishes");
    let frames = engine_testkit::hex::decode_frames(&case["frames"]).expect("hex");
    let (b, _) = decode_typed::<BatchTokenIDOutSlim>(ts(), &refs(&frames), &Limits::default()).expect("accepted");
    let rows = b.rows().expect("not ragged");
    let got: Vec<(&str, &Finish)> = rows.iter().map(|r| (r.rid.as_str(), &r.finish)).collect();
    assert_eq!(got, [("a", &Finish::Length), ("b", &Finish::Abort), ("c", &Finish::Stop)]);
    assert!(rows.iter().all(|r| r.finish.is_terminal()));
    let engine_index = i64::try_from(b.engine_index.expect("0.1.1")).expect("a small index");
    let again = BatchTokenIDOutSlim::from_rows(&rows, engine_index, b.load().expect("0.1.1"));
    assert_eq!(again.encode(ts()).expect("encodes"), frames);
}

#[test]
fn finish_strings_map_to_the_enum_and_back() {
    for (s, f) in [
        ("", Finish::Running),
        ("stop", Finish::Stop),
        ("length", Finish::Length),
        ("abort", Finish::Abort),
        ("repetition", Finish::Other("repetition".into())),
    ] {
        assert_eq!(Finish::from_wire(s), f);
        assert_eq!(f.as_str(), s);
        assert_eq!(f.is_terminal(), !s.is_empty());
    }
}

fn two_rows() -> BatchTokenIDOutSlim {
    let row = |rid: &str| BatchRow {
        rid: rid.into(),
        output_ids: vec![7, 8].into(),
        finish: Finish::Running,
        prompt_tokens: 3,
        completion_tokens: 2,
        cached_tokens: 0,
        logprob_vals: vec![-0.5, -1.5],
        logprob_ids: vec![7, 8].into(),
    };
    BatchTokenIDOutSlim::from_rows(&[row("a"), row("b")], 0, LoadTail::default())
}

#[test]
fn a_ragged_batch_is_refused_naming_every_column_that_can_be_ragged() {
    type Grow = fn(&mut BatchTokenIDOutSlim);
    let columns: [(&str, Grow); 7] = [
        ("output_ids", |b| b.output_ids.push(vec![1].into())),
        ("finished_reasons", |b| b.finished_reasons.push(String::new())),
        ("prompt_tokens", |b| b.prompt_tokens.push(1)),
        ("completion_tokens", |b| b.completion_tokens.push(1)),
        ("cached_tokens", |b| b.cached_tokens.push(1)),
        ("output_token_logprobs_val", |b| b.output_token_logprobs_val.push(vec![])),
        ("output_token_logprobs_idx", |b| b.output_token_logprobs_idx.push(IntList::new())),
    ];
    for (column, grow) in columns {
        let mut b = two_rows();
        grow(&mut b);
        let e = b.rows().unwrap_err();
        assert_eq!(e, RaggedBatch { column: column.into(), entries: 3, rows: 2 });
        assert_eq!(e.to_string(), format!("BatchTokenIDOutSlim.{column}: 3 entries for 2 rids"));
        let err: Error = e.into();
        assert_eq!(err.path, format!("BatchTokenIDOutSlim.{column}"));
        // Short columns too.
        let mut b = two_rows();
        grow(&mut b);
        b.rids.as_mut().expect("rids").extend(["c".to_string(), "d".to_string()]);
        let entries = if column == "output_ids" { 3 } else { 2 };
        assert_eq!(b.rows().unwrap_err(), RaggedBatch { column: "output_ids".into(), entries, rows: 4 });
    }
}

#[test]
fn a_row_with_more_logprob_values_than_ids_is_refused() {
    let mut b = two_rows();
    b.output_token_logprobs_val[1].push(-2.0);
    let e = b.rows().unwrap_err();
    assert_eq!(e.to_string(), "BatchTokenIDOutSlim.output_token_logprobs_val[1]: 3 values for 2 ids");
}

#[test]
fn nil_rids_count_as_no_rows() {
    let mut b = two_rows();
    b.rids = None;
    assert_eq!(b.rows().unwrap_err().to_string(), "BatchTokenIDOutSlim.output_ids: 2 entries for 0 rids");
    assert_eq!(BatchTokenIDOutSlim { rids: None, ..Default::default() }.rows().expect("empty"), Vec::new());
}

fn finish() -> impl Strategy<Value = Finish> {
    prop_oneof![
        Just(Finish::Running),
        Just(Finish::Stop),
        Just(Finish::Length),
        Just(Finish::Abort),
        "[a-z_]{1,12}".prop_map(|s| Finish::from_wire(&s)),
        any::<String>().prop_map(|s| Finish::from_wire(&s)),
    ]
}

fn row() -> impl Strategy<Value = BatchRow> {
    (
        any::<String>(),
        prop::collection::vec(any::<i64>(), 0..8),
        finish(),
        (any::<i64>(), any::<i64>(), any::<i64>()),
        prop::collection::vec((any::<f64>(), any::<i64>()), 0..6),
    )
        .prop_map(|(rid, output_ids, finish, (prompt_tokens, completion_tokens, cached_tokens), lp)| BatchRow {
            rid,
            output_ids: output_ids.into(),
            finish,
            prompt_tokens: prompt_tokens.into(),
            completion_tokens: completion_tokens.into(),
            cached_tokens: cached_tokens.into(),
            logprob_vals: lp.iter().map(|p| p.0).collect(),
            logprob_ids: lp.iter().map(|p| p.1).collect(),
        })
}

/// Rows equal, floats by their bits (NaN payloads survive float64).
fn same_rows(a: &[BatchRow], b: &[BatchRow]) -> bool {
    let bits = |r: &BatchRow| r.logprob_vals.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            bits(x) == bits(y)
                && BatchRow { logprob_vals: Vec::new(), ..x.clone() }
                    == BatchRow { logprob_vals: Vec::new(), ..y.clone() }
        })
}

proptest! {
    #[test]
    fn rows_survive_batch_encode_and_decode(
        rows in prop::collection::vec(row(), 0..6),
        engine_index in any::<i64>(),
        load in (any::<i64>(), any::<i64>(), any::<i64>(), any::<i64>()),
    ) {
        let load = LoadTail {
            num_running: load.0.into(),
            num_waiting: load.1.into(),
            kv_active_pages: load.2.into(),
            kv_total_pages: load.3.into(),
        };
        let batch = BatchTokenIDOutSlim::from_rows(&rows, engine_index, load);
        let frames = batch.encode(ts()).expect("encodes");
        let (back, drift) =
            decode_typed::<BatchTokenIDOutSlim>(ts(), &refs(&frames), &Limits::default()).expect("decodes");
        prop_assert!(drift.is_empty());
        prop_assert_eq!(back.engine_index, Some(i128::from(engine_index)));
        prop_assert_eq!(back.load(), Some(load));
        let again = back.rows().expect("not ragged");
        prop_assert!(same_rows(&rows, &again), "{:?} != {:?}", rows, again);
        let moved = back.into_rows().expect("not ragged");
        prop_assert!(same_rows(&rows, &moved), "{:?} != {:?}", rows, moved);
    }

    #[test]
    fn a_batch_with_any_column_cut_or_grown_is_refused(
        rows in prop::collection::vec(row(), 1..5),
        column in 0usize..7,
        grow in any::<bool>(),
    ) {
        let mut b = BatchTokenIDOutSlim::from_rows(&rows, 0, LoadTail::default());
        let name = match column {
            0 => { if grow { b.output_ids.push(IntList::new()) } else { b.output_ids.pop(); } "output_ids" }
            1 => { if grow { b.finished_reasons.push(String::new()) } else { b.finished_reasons.pop(); } "finished_reasons" }
            2 => { if grow { b.prompt_tokens.push(0) } else { b.prompt_tokens.pop(); } "prompt_tokens" }
            3 => { if grow { b.completion_tokens.push(0) } else { b.completion_tokens.pop(); } "completion_tokens" }
            4 => { if grow { b.cached_tokens.push(0) } else { b.cached_tokens.pop(); } "cached_tokens" }
            5 => { if grow { b.output_token_logprobs_val.push(vec![]) } else { b.output_token_logprobs_val.pop(); } "output_token_logprobs_val" }
            _ => { if grow { b.output_token_logprobs_idx.push(IntList::new()) } else { b.output_token_logprobs_idx.pop(); } "output_token_logprobs_idx" }
        };
        // Encoded and decoded first: msgspec (and so the decoder) takes a
        // ragged batch; only the rows refuse it.
        let frames = b.encode(ts()).expect("encodes");
        let (back, _) = decode_typed::<BatchTokenIDOutSlim>(ts(), &refs(&frames), &Limits::default()).expect("decodes");
        let e = back.rows().unwrap_err();
        prop_assert_eq!(back.into_rows().unwrap_err(), e.clone());
        let n = rows.len();
        prop_assert_eq!(e, RaggedBatch { column: name.into(), entries: if grow { n + 1 } else { n - 1 }, rows: n });
    }
}
