//! Stop detection: SMG's semantics as an option (hand-written cases from
//! docs/translation.md "Stop detection"), vLLM's semantics on the same
//! inputs, finish-reason synthesis, and property tests over random token
//! streams of the tiny tokenizer (vLLM's semantics are pinned by the
//! `stop_detection` goldens, checked by `conformance verify`).

mod common;

use std::sync::OnceLock;

use engine_protocol::translate::stop::stream_in_steps;
use engine_protocol::translate::{
    ClientEvent, EngineStep, GatewayTokenizer, RequestStream, StepOutput, StopParams, StopSemantics, Tracker,
};
use engine_protocol::typed::{FinishReason, StopReason};
use proptest::prelude::*;

fn tok() -> &'static GatewayTokenizer {
    static T: OnceLock<GatewayTokenizer> = OnceLock::new();
    T.get_or_init(|| common::tiny_tokenizer().expect("golden/tiny loads"))
}

fn params(stop: &[&str], sem: StopSemantics) -> StopParams {
    let mut p = StopParams::new(stop.iter().map(|s| s.to_string()).collect());
    p.semantics = sem;
    p
}

fn step(ids: Vec<u32>) -> EngineStep {
    EngineStep { new_token_ids: ids, finish_reason: None, stop_reason: None }
}

/// Feeds text pieces (each tokenized on its own, so each engine output
/// decodes to exactly that piece), then a final empty LENGTH output unless
/// stopped. Returns the text of every output.
fn run_pieces(pieces: &[&str], p: StopParams) -> (Vec<String>, Vec<StepOutput>) {
    let t = tok();
    let prompt = t.encode("Say:");
    let mut rs = RequestStream::new(t, &prompt, p);
    let mut outs = Vec::new();
    for piece in pieces {
        if let Some(o) = rs.step(t, &step(t.encode(piece))) {
            outs.push(o);
        }
    }
    if !rs.is_finished() {
        let fin = EngineStep { finish_reason: Some(FinishReason::Length), ..Default::default() };
        outs.push(rs.step(t, &fin).expect("final output"));
    }
    (outs.iter().map(|o| o.text.clone()).collect(), outs)
}

fn stop_of(outs: &[StepOutput]) -> Option<String> {
    outs.iter().find_map(|o| match &o.stop_reason {
        Some(StopReason::Text(s)) => Some(s.clone()),
        _ => None,
    })
}

// ---- SMG semantics (docs/translation.md "Stop detection")

#[test]
fn smg_jail_drain_holds_back_longest_stop_in_bytes() {
    // T-DEC-JAIL-DRAIN: stop "STOP", pieces "ab","cdef","g" -> Held, "ab", "c", flush "defg"
    let (texts, _) = run_pieces(&["ab", "cdef", "g"], params(&["STOP"], StopSemantics::Smg));
    assert_eq!(texts, ["", "ab", "c", "defg"]);
}

#[test]
fn vllm_holds_back_len_minus_one_chars_on_the_same_input() {
    let (texts, _) = run_pieces(&["ab", "cdef", "g"], params(&["STOP"], StopSemantics::Vllm));
    assert_eq!(texts, ["", "abc", "d", "efg"]);
}

#[test]
fn smg_utf8_hold_moves_the_cut_back_to_a_char_boundary() {
    // T-DEC-UTF8-HOLD: stop "ab", pieces "中","x","y" -> Held, Held, "中", flush "xy"
    let (texts, _) = run_pieces(&["中", "x", "y"], params(&["ab"], StopSemantics::Smg));
    assert_eq!(texts, ["", "", "中", "xy"]);
    // vLLM holds one code point
    let (texts, _) = run_pieces(&["中", "x", "y"], params(&["ab"], StopSemantics::Vllm));
    assert_eq!(texts, ["", "中", "x", "y"]);
}

#[test]
fn smg_end_example_from_the_reference() {
    let (texts, outs) = run_pieces(&["hello ", "there E", "ND more"], params(&["END"], StopSemantics::Smg));
    assert_eq!(texts, ["hel", "lo ther", "e "]);
    assert_eq!(stop_of(&outs).as_deref(), Some("END"));
    assert_eq!(outs.last().unwrap().finish_reason, Some(FinishReason::Stop));
    assert!(outs.last().unwrap().abort_engine, "a local stop aborts the engine request");
}

#[test]
fn overlapping_stops_earliest_end_wins_in_both() {
    // T-DEC-OVERLAP-EARLIEST-END: stops ["abcd","bc"], piece "abcd" -> hidden "a", matched "bc"
    for sem in [StopSemantics::Smg, StopSemantics::Vllm] {
        let (texts, outs) = run_pieces(&["abcd"], params(&["abcd", "bc"], sem));
        assert_eq!(texts.concat(), "a", "{sem:?}");
        assert_eq!(stop_of(&outs).as_deref(), Some("bc"), "{sem:?}");
    }
}

#[test]
fn a_later_listed_stop_that_starts_earlier_but_ends_later_loses_in_both() {
    for sem in [StopSemantics::Smg, StopSemantics::Vllm] {
        let (texts, outs) = run_pieces(&["abcd"], params(&["bc", "abcd"], sem));
        assert_eq!(texts.concat(), "a", "{sem:?}");
        assert_eq!(stop_of(&outs).as_deref(), Some("bc"), "{sem:?}");
    }
}

#[test]
fn equal_end_tie_list_order_for_vllm_longest_for_smg() {
    let (t, outs) = run_pieces(&["Hello world"], params(&["world", "o world"], StopSemantics::Vllm));
    assert_eq!((t.concat().as_str(), stop_of(&outs).as_deref()), ("Hello ", Some("world")));
    let (t, outs) = run_pieces(&["Hello world"], params(&["world", "o world"], StopSemantics::Smg));
    assert_eq!((t.concat().as_str(), stop_of(&outs).as_deref()), ("Hell", Some("o world")));
    // Listed the other way round: list order for vLLM, still the longest for SMG.
    let (t, outs) = run_pieces(&["Hello world"], params(&["o world", "world"], StopSemantics::Vllm));
    assert_eq!((t.concat().as_str(), stop_of(&outs).as_deref()), ("Hell", Some("o world")));
    let (t, outs) = run_pieces(&["Hello world"], params(&["o world", "world"], StopSemantics::Smg));
    assert_eq!((t.concat().as_str(), stop_of(&outs).as_deref()), ("Hell", Some("o world")));
}

#[test]
fn prefix_of_other_stops_as_soon_as_it_is_complete() {
    // T-DEC-PREFIX-OF-OTHER
    for sem in [StopSemantics::Smg, StopSemantics::Vllm] {
        let (texts, outs) = run_pieces(&["Hello", " world"], params(&["Hello world", "Hello"], sem));
        assert_eq!(texts.concat(), "");
        assert_eq!(stop_of(&outs).as_deref(), Some("Hello"));
        assert_eq!(outs.len(), 1, "stopped on the first piece");
    }
}

#[test]
fn visible_stop_is_kept_and_nothing_after_it() {
    let mut p = params(&["bc"], StopSemantics::Vllm);
    p.include_stop_str_in_output = true;
    let (texts, outs) = run_pieces(&["abcd"], p);
    assert_eq!(texts.concat(), "abc");
    assert_eq!(stop_of(&outs).as_deref(), Some("bc"));
}

#[test]
fn utf8_stop_in_a_piece() {
    // T-DEC-UTF8-STOP: stop "é", piece "aé" -> "a"
    for sem in [StopSemantics::Smg, StopSemantics::Vllm] {
        let (texts, _) = run_pieces(&["aé"], params(&["é"], sem));
        assert_eq!(texts.concat(), "a");
    }
}

#[test]
fn min_tokens_delays_stop_checks_in_vllm_only() {
    let mut p = params(&["a"], StopSemantics::Vllm);
    p.min_tokens = 2;
    let (texts, outs) = run_pieces(&["a", "b", "a", "c"], p.clone());
    assert_eq!(texts.concat(), "ab");
    assert_eq!(stop_of(&outs).as_deref(), Some("a"));
    p.semantics = StopSemantics::Smg;
    let (texts, _) = run_pieces(&["a", "b", "a", "c"], p);
    assert_eq!(texts.concat(), "");
}

/// Pins what `logprobs::correct_decoded_token` relies on to need no branch
/// for an empty clean prefix.
#[test]
fn decoding_no_tokens_gives_the_empty_string() {
    assert_eq!(tok().decode(&[], false), "");
    assert_eq!(tok().decode(&[], true), "");
}

// ---- finish-reason synthesis

#[test]
fn local_stop_overrides_a_later_engine_length_and_aborts() {
    let t = tok();
    let mut tr = Tracker::new();
    tr.add(t, "r", &t.encode("Say:"), params(&["world"], StopSemantics::Vllm));
    let ev = tr.on_output(t, "r", &step(t.encode("Hello world and more"))).expect("output");
    let ClientEvent::Output(o) = ev else { panic!("{ev:?}") };
    assert_eq!(o.text, "Hello ");
    assert_eq!(o.finish_reason, Some(FinishReason::Stop));
    assert_eq!(o.stop_reason, Some(StopReason::Text("world".into())));
    assert_eq!(o.token_ids, t.encode("Hello world"), "tokens after the stop are dropped");
    assert_eq!(tr.take_aborts(), ["r"]);
    let late = EngineStep { new_token_ids: vec![5], finish_reason: Some(FinishReason::Length), stop_reason: None };
    assert_eq!(tr.on_output(t, "r", &late), None, "the engine's later length is ignored");
}

#[test]
fn abort_is_finished_locally_and_flushes_held_text() {
    let t = tok();
    let mut tr = Tracker::new();
    tr.add(t, "r", &t.encode("Say:"), params(&["STOP"], StopSemantics::Vllm));
    let ClientEvent::Output(o) = tr.on_output(t, "r", &step(t.encode("abcd"))).unwrap() else { panic!() };
    assert_eq!(o.text, "a");
    let ClientEvent::Output(o) = tr.abort("r").unwrap() else { panic!() };
    assert_eq!((o.text.as_str(), o.finish_reason), ("bcd", Some(FinishReason::Abort)));
    assert_eq!(tr.take_aborts(), ["r"]);
    assert!(tr.abort("r").is_none());
    assert_eq!(tr.in_flight(), 0);
}

#[test]
fn engine_error_and_dead_engine_fail_requests() {
    let t = tok();
    let mut tr = Tracker::new();
    for r in ["a", "b", "c"] {
        tr.add(t, r, &[5], StopParams::new(vec![]));
    }
    let err = EngineStep { finish_reason: Some(FinishReason::Error), ..Default::default() };
    assert!(matches!(tr.on_output(t, "b", &err), Some(ClientEvent::Error(_))));
    let dead = tr.engine_dead();
    assert_eq!(dead.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(), ["a", "c"]);
    assert!(dead.iter().all(|(_, e)| matches!(e, ClientEvent::Error(_))));
    assert_eq!(tr.in_flight(), 0);
}

/// Pins `Tracker::in_flight` and `contains` (a mutant returning 0 from
/// `in_flight` survived every other test: docs/mutation.md).
#[test]
fn the_tracker_counts_each_request_in_flight_until_it_finishes() {
    let t = tok();
    let mut tr = Tracker::new();
    for r in ["a", "b", "c"] {
        tr.add(t, r, &[5], StopParams::new(vec![]));
    }
    assert_eq!(tr.in_flight(), 3);
    let length = EngineStep { new_token_ids: vec![5], finish_reason: Some(FinishReason::Length), stop_reason: None };
    assert!(tr.on_output(t, "a", &length).is_some());
    assert_eq!(tr.in_flight(), 2, "a finished request is no longer in flight");
    assert!(!tr.contains("a") && tr.contains("b"));
    let running = EngineStep { new_token_ids: vec![5], finish_reason: None, stop_reason: None };
    assert!(tr.on_output(t, "b", &running).is_some());
    assert_eq!(tr.in_flight(), 2, "an output that does not finish leaves it in flight");
    assert!(tr.abort("c").is_some());
    assert_eq!(tr.in_flight(), 1);
}

#[test]
fn engine_stop_on_a_single_token_stop_string_reports_the_string() {
    let t = tok();
    let dot = t.encode(".")[0];
    let mut p = params(&["."], StopSemantics::Vllm);
    p.stop_string_token_ids.insert(dot, ".".into());
    let mut rs = RequestStream::new(t, &t.encode("Say:"), p);
    let mut ids = t.encode("Hello world");
    ids.push(dot);
    let o = rs
        .step(
            t,
            &EngineStep {
                new_token_ids: ids,
                finish_reason: Some(FinishReason::Stop),
                stop_reason: Some(StopReason::TokenId(dot.into())),
            },
        )
        .unwrap();
    assert_eq!(o.text, "Hello world");
    assert_eq!(o.stop_reason, Some(StopReason::Text(".".into())));
    assert!(!o.abort_engine, "the engine already finished");
}

// ---- properties

const ALPHABET: &[&str] = &["a", "b", "c", " ", ".", "é", "中", "文", "🚀", "\n", "Hello", " world", "ü", "Δ"];

#[test]
fn a_detector_shows_its_parameters_the_tokens_it_kept_and_their_text() {
    use engine_protocol::translate::stop::StopDetector;
    let t = tok();
    let prompt = t.encode("Say:");
    let mut d = StopDetector::new(t, &prompt, params(&["zebra"], StopSemantics::Vllm));
    assert_eq!(d.params().stop, vec!["zebra".to_string()]);
    assert_eq!(d.max_stop_bytes(), 5);
    let wide = StopDetector::new(t, &prompt, params(&["ab", "中"], StopSemantics::Smg));
    assert_eq!(wide.max_stop_bytes(), 3, "in bytes, not characters");
    assert!(d.output_token_ids().is_empty() && d.output_text().is_empty());
    let ids = t.encode(" hello there");
    assert_eq!(d.update(t, &ids, false), None);
    assert_eq!(d.output_token_ids(), ids.as_slice());
    assert_eq!(d.num_output_tokens(), ids.len());
    assert_eq!(d.output_text(), " hello there");
    assert_eq!(d.prompt(), prompt.as_slice());
    // A stop of 5 characters holds the last 4 back until the end.
    assert_eq!(d.held_back(), " hello there", "nothing emitted yet");
    assert_eq!(d.next_output_text(false), " hello t");
    assert_eq!(d.held_back(), "here");
    assert_eq!(d.next_output_text(true), "here");
    assert_eq!(d.held_back(), "");
}

#[test]
fn a_stream_in_steps_names_the_stop_string_that_ended_it_and_no_ids_give_no_outputs() {
    let t = tok();
    let prompt = t.encode("Say:");
    let ids = t.encode(" hello there friend");
    let stopped = stream_in_steps(t, &prompt, &params(&["there"], StopSemantics::Vllm), &ids, &[1, 2]);
    assert_eq!(stopped.stop_string(), Some("there"));
    assert_eq!(stopped.text, " hello ");
    let plain = stream_in_steps(t, &prompt, &params(&[], StopSemantics::Vllm), &ids, &[1, 2]);
    assert_eq!(plain.stop_string(), None);
    assert_eq!(plain.text, " hello there friend");
    // The step sizes are used in turn: 2, then 3.
    let five = &t.encode(" hello there my good friend")[..5];
    let steps = stream_in_steps(t, &prompt, &params(&[], StopSemantics::Vllm), five, &[2, 3]);
    let sizes: Vec<usize> = steps.outputs.iter().map(|o| o.token_ids.len()).collect();
    assert_eq!(sizes, [2, 3]);
    let none = stream_in_steps(t, &prompt, &params(&["there"], StopSemantics::Vllm), &[], &[1]);
    assert!(none.outputs.is_empty() && none.text.is_empty(), "{:?}", none.outputs);
}

fn text_strategy() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(ALPHABET), 1..24).prop_map(|v| v.concat())
}

fn stops_strategy() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(prop::collection::vec(prop::sample::select(ALPHABET), 1..3).prop_map(|v| v.concat()), 0..3)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::Direct("proptest-regressions/translate_stop.txt"))), ..ProptestConfig::default() })]

    /// Any split of a token stream into engine outputs gives the same
    /// text, ids and stop as one output carrying everything; no emitted
    /// text holds a hidden stop; hold-back stays within its bound.
    #[test]
    fn streamed_deltas_concatenate_to_the_one_shot_result(
        text in text_strategy(),
        stops in stops_strategy(),
        include in any::<bool>(),
        min_tokens in prop::sample::select(vec![0usize, 0, 0, 1, 3]),
        sizes in prop::collection::vec(1usize..4, 1..6),
        smg in any::<bool>(),
    ) {
        let t = tok();
        let ids = t.encode(&text);
        let mut p = StopParams::new(stops.clone());
        p.include_stop_str_in_output = include;
        p.min_tokens = min_tokens;
        p.semantics = if smg { StopSemantics::Smg } else { StopSemantics::Vllm };
        let prompt = t.encode("x");
        let streamed = stream_in_steps(t, &prompt, &p, &ids, &sizes);
        let one_shot = stream_in_steps(t, &prompt, &p, &ids, &[ids.len().max(1)]);
        prop_assert_eq!(&streamed.text, &one_shot.text);
        prop_assert_eq!(&streamed.token_ids, &one_shot.token_ids);
        prop_assert_eq!(streamed.stop_string(), one_shot.stop_string());
        prop_assert!(
            streamed.max_held_back <= streamed.hold_back_bound,
            "held {} > bound {}",
            streamed.max_held_back,
            streamed.hold_back_bound
        );
        // every delta is valid UTF-8 and never a broken replacement of input text
        for o in &streamed.outputs {
            prop_assert!(std::str::from_utf8(o.text.as_bytes()).is_ok());
        }
        prop_assert!(text.starts_with(&streamed.text) || !include || streamed.stop_string().is_some());
        if !include && (min_tokens == 0 || p.semantics == StopSemantics::Smg) {
            for s in stops.iter().filter(|s| !s.is_empty()) {
                prop_assert!(!streamed.text.contains(s.as_str()), "emitted {:?} contains hidden stop {:?}", streamed.text, s);
            }
        }
        if streamed.stop_string().is_none() {
            prop_assert_eq!(&streamed.text, &t.decode(&ids, true));
        }
    }
}
