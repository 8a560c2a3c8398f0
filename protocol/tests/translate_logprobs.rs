//! Top-k logprob shaping: unit cases from docs/translation.md ("Logprob shaping") with
//! vLLM's semantics, and property tests against an independent model of
//! vLLM's rules. vLLM's own outputs are pinned by the `logprob_shaping`
//! goldens (`conformance verify`).

mod common;

use engine_protocol::translate::logprobs::expected_len;
use engine_protocol::translate::{shape_row, EngineRow, LogprobEntry, LogprobShaper};
use proptest::prelude::*;

fn row(ids: &[u32], lps: &[f64], rank: i64) -> EngineRow {
    EngineRow { token_ids: ids.to_vec(), logprobs: lps.to_vec(), rank }
}

fn ids_ranks(v: &[LogprobEntry]) -> Vec<(u32, i64)> {
    v.iter().map(|e| (e.token_id, e.rank)).collect()
}

#[test]
fn k2_keeps_the_sampled_token_and_two_top_entries() {
    // T-LP-K2 (vLLM semantics: sampled + top 2)
    let r = row(&[10, 20, 30], &[-0.5, -0.1, -0.3], 5);
    assert_eq!(ids_ranks(&shape_row(&r, 2, false, None)), [(10, 5), (20, 1), (30, 2)]);
}

#[test]
fn batch_k_larger_than_the_clients_k_is_truncated() {
    let r = row(&[10, 20, 30, 40, 50], &[-3.0, -0.1, -0.3, -0.5, -0.9], 9);
    assert_eq!(ids_ranks(&shape_row(&r, 1, false, None)), [(10, 9), (20, 1)]);
}

#[test]
fn k0_is_the_sampled_token_only() {
    let r = row(&[10, 20, 30], &[-0.5, -0.1, -0.3], 5);
    assert_eq!(ids_ranks(&shape_row(&r, 0, false, None)), [(10, 5)]);
}

#[test]
fn minus_one_is_every_column() {
    let r = row(&[10, 20, 30], &[-0.5, -0.1, -0.3], 5);
    assert_eq!(shape_row(&r, -1, false, None).len(), 3);
}

#[test]
fn greedy_duplicate_merges_at_the_sampled_position_with_the_top_rank() {
    // T-LP-DUP: vLLM's dict merges; SMG would list 20 twice
    let r = row(&[20, 20, 30], &[-0.1, -0.1, -0.3], 1);
    assert_eq!(ids_ranks(&shape_row(&r, 2, false, None)), [(20, 1), (30, 2)]);
    // flat_logprobs keeps both
    assert_eq!(ids_ranks(&shape_row(&r, 2, true, None)), [(20, 1), (20, 1), (30, 2)]);
}

#[test]
fn nan_sampled_logprob_keeps_rank_zero() {
    let r = row(&[7, 20, 30], &[f64::NAN, -0.1, -0.3], 0);
    let s = shape_row(&r, 2, false, None);
    assert_eq!(s[0].rank, 0);
    assert!(s[0].logprob.is_nan());
}

#[test]
fn prompt_logprobs_have_a_null_first_position() {
    // T-LP-PROMPT: prompt [1, 2], prompt_logprobs 1
    let mut sh = LogprobShaper::new(None, Some(1), false);
    sh.add_prompt_rows(None, &[row(&[2, 20], &[-0.5, -0.1], 3)]);
    let p = sh.prompt.unwrap();
    assert_eq!(p.len(), 2);
    assert!(p[0].is_none());
    assert_eq!(ids_ranks(p[1].as_ref().unwrap()), [(2, 3), (20, 1)]);
    // flat container: an empty first position
    let sh = LogprobShaper::new(None, Some(1), true);
    assert_eq!(sh.prompt.unwrap(), vec![Some(vec![])]);
}

#[test]
fn cumulative_logprob_sums_the_sampled_column() {
    let mut sh = LogprobShaper::new(Some(1), None, false);
    sh.add_sample_rows(None, &[row(&[1, 2], &[-0.5, -0.25], 2), row(&[3, 3], &[-0.25, -0.25], 1)]);
    assert_eq!(sh.cumulative_logprob, Some(-0.75));
    assert_eq!(sh.sample.unwrap().len(), 2);
}

#[test]
fn without_detokenize_no_token_is_decoded() {
    // SamplingParams.detokenize = false: vLLM's OutputProcessor gives
    // LogprobsProcessor no tokenizer, so every decoded_token is None.
    let tok = common::tiny_tokenizer().expect("golden/tiny tokenizer");
    let rows = [row(&[40, 41, 42], &[-0.5, -0.25, -1.0], 2)];
    let mut on = LogprobShaper::new(Some(2), Some(1), false);
    on.add_sample_rows(Some(&tok), &rows);
    on.add_prompt_rows(Some(&tok), &rows);
    assert!(on.sample.unwrap()[0].iter().all(|e| e.decoded_token.is_some()));
    let mut off = LogprobShaper::new(Some(2), Some(1), false).with_detokenize(false);
    off.add_sample_rows(Some(&tok), &rows);
    off.add_prompt_rows(Some(&tok), &rows);
    let sample = off.sample.unwrap();
    assert_eq!(ids_ranks(&sample[0]), [(40, 2), (41, 1), (42, 2)]);
    assert!(sample[0].iter().all(|e| e.decoded_token.is_none()));
    let prompt = off.prompt.unwrap();
    assert!(prompt[1].as_ref().unwrap().iter().all(|e| e.decoded_token.is_none()));
    assert_eq!(off.cumulative_logprob, Some(-0.5));
}

/// A row as an engine makes it: distinct descending top-K, a sampled token
/// that is greedy, inside the top-K, or outside it.
fn engine_row() -> impl Strategy<Value = (EngineRow, i64)> {
    (1usize..10, 0usize..3, prop::collection::hash_set(5u32..512, 12), any::<u8>(), -1i64..10).prop_map(
        |(kb, mode, ids, pick, k)| {
            let ids: Vec<u32> = ids.into_iter().collect();
            let top: Vec<u32> = ids[..kb].to_vec();
            let lps: Vec<f64> = (0..kb).map(|i| -0.25 * (i as f64 + 1.0)).collect();
            let (s, slp, rank) = match mode {
                0 => (top[0], lps[0], 1),
                1 => {
                    let j = pick as usize % kb;
                    (top[j], lps[j], j as i64 + 1)
                }
                _ => (ids[kb], -9.0, kb as i64 + 1 + i64::from(pick)),
            };
            let k = if k < 0 { -1 } else { k.min(kb as i64) };
            let mut t = vec![s];
            t.extend(&top);
            let mut l = vec![slp];
            l.extend(&lps);
            (EngineRow { token_ids: t, logprobs: l, rank }, k)
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::Direct("proptest-regressions/translate_logprobs.txt"))), ..ProptestConfig::default() })]

    /// For any K_batch >= k: the sampled token first, then exactly the
    /// client's k top entries in engine order with ranks 1..=k; the
    /// sampled token's duplicate merged into the first position.
    #[test]
    fn shaping_matches_vllms_rules((r, k) in engine_row(), flat in any::<bool>()) {
        let out = shape_row(&r, k, flat, None);
        prop_assert_eq!(out.len(), expected_len(&r, k, flat));
        let kk = if k < 0 { r.token_ids.len() - 1 } else { k as usize };
        // independent model
        let mut model: Vec<(u32, i64)> = vec![(r.token_ids[0], r.rank)];
        for (j, &t) in r.token_ids[1..=kk].iter().enumerate() {
            let rank = j as i64 + 1;
            match model.iter_mut().find(|(id, _)| *id == t) {
                Some(e) if !flat => e.1 = rank,
                _ => model.push((t, rank)),
            }
        }
        prop_assert_eq!(ids_ranks(&out), model);
        prop_assert_eq!(out[0].token_id, r.token_ids[0]);
        // the client's own k top tokens are all present
        for &t in &r.token_ids[1..=kk] {
            prop_assert!(out.iter().any(|e| e.token_id == t));
        }
    }
}
