//! Steps that build what is sent: EOS and stops
//! (`update_from_generation_config`: the tokenizer's EOS and the
//! generation config's extra EOS ids join the stop token ids; single-token
//! stop strings sent as ids when allowed), the final `SamplingParams`, and
//! one `EngineCoreRequest` per child (`n > 1`: vLLM's `ParentRequest`,
//! child ids and seeds `seed + i`).

use std::collections::{BTreeSet, HashMap};

use super::checks::request_value;
use super::{err, EngineRequest, GenerateRequest, TranslateError, TranslateOptions};
use crate::schema::ReleaseSchema;
use crate::translate::tokenizer::GatewayTokenizer;
use crate::typed::{
    EngineCoreRequest, IntList, RequestOutputKind, SamplingParams, StopIds, StructuredOutputsParams, TokenIds,
    WIRE_INT_MAX, WIRE_INT_MIN,
};
use crate::validate;

/// The stop facts of a translation ([`eos_and_stops`]).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Stops {
    /// `stop_token_ids` as sent.
    pub stop_token_ids: Vec<i64>,
    /// `_all_stop_token_ids`, ascending.
    pub all_stop_token_ids: BTreeSet<i64>,
    /// `_eos_token_id` as sent (nil with `ignore_eos`).
    pub eos_token_id: Option<i64>,
    /// Stop strings sent as token ids too (id -> string).
    pub stop_string_token_ids: HashMap<u32, String>,
    /// Stop strings left to the gateway's detector only.
    pub detector_only: Vec<String>,
}

/// Step: EOS and stops (`update_from_generation_config`): the tokenizer's
/// EOS and the generation config's extra EOS ids join the stop token ids,
/// and stop strings that are exactly one visible token are sent as ids too
/// when [`TranslateOptions::single_token_stops_to_ids`] allows.
pub fn eos_and_stops(req: &GenerateRequest, tok: &GatewayTokenizer, opts: &TranslateOptions) -> Stops {
    let StopIds { mut stop_token_ids, all_stop_token_ids: mut all_stop, eos_token_id } =
        tok.eos(req.ignore_eos).stop_ids(&req.stop_token_ids);
    let skip_special = req.skip_special_tokens.unwrap_or(true);
    let min_tokens = req.min_tokens.unwrap_or(0);
    let mut stop_string_token_ids = HashMap::new();
    let mut detector_only = Vec::new();
    for s in &req.stop {
        let ids = tok.encode(s);
        let visible = ids.len() == 1 && tok.decode(&ids, skip_special) == *s;
        if opts.single_token_stops_to_ids && min_tokens == 0 && visible {
            stop_string_token_ids.insert(ids[0], s.clone());
            let id = i64::from(ids[0]);
            if !stop_token_ids.contains(&id) {
                stop_token_ids.push(id);
            }
            all_stop.insert(id);
        } else {
            detector_only.push(s.clone());
        }
    }
    Stops { stop_token_ids, all_stop_token_ids: all_stop, eos_token_id, stop_string_token_ids, detector_only }
}

/// Step: the `SamplingParams` every child shares, from the checked draft,
/// the resolved `max_tokens`, the stops and the constraint (vLLM's
/// `__post_init__` derivations and its input processor's resolutions
/// included). The draft's stop strings go out as they are (vLLM's input
/// processor sends them on the wire too: the engine does not read them,
/// the frontend's detector does), and its seed, none: [`fan_out`] sets it
/// per child.
pub fn build_sampling_params(
    req: &GenerateRequest,
    draft: &SamplingParams,
    max_tokens: i64,
    stops: &Stops,
    structured: Option<&StructuredOutputsParams>,
) -> Result<SamplingParams, TranslateError> {
    let greedy = draft.temperature < validate::SAMPLING_EPS;
    let structured_outputs = structured.cloned();
    // Stop strings that are not part of the output hold back as many
    // characters as the longest one minus one (`__post_init__`; an empty
    // stop string was refused by the rules).
    let output_text_buffer_length = match req.stop.iter().map(|s| s.chars().count()).max() {
        Some(longest) if !req.include_stop_str_in_output => longest as i64 - 1,
        _ => 0,
    };
    Ok(SamplingParams {
        n: 1,
        // Greedy sampling resets the sampling filters (`__post_init__`).
        top_p: if greedy { 1.0 } else { draft.top_p },
        top_k: if greedy { 0 } else { draft.top_k },
        min_p: if greedy { 0.0 } else { draft.min_p },
        max_tokens: Some(i128::from(max_tokens)),
        stop_token_ids: Some(IntList::from(stops.stop_token_ids.clone())),
        ignore_eos: req.ignore_eos,
        skip_reading_prefix_cache: Some(req.prompt_logprobs.is_some()),
        skip_special_tokens: req.skip_special_tokens.unwrap_or(true),
        include_stop_str_in_output: req.include_stop_str_in_output,
        output_kind: RequestOutputKind::Delta,
        // The input processor resolves the unset watermarking option to
        // false before the request goes out (translation goldens).
        watermarking: Some(false),
        // `__post_init__`: `bad_words` None becomes [].
        bad_words: Some(Vec::new()),
        output_text_buffer_length: i128::from(output_text_buffer_length),
        eos_token_id: stops.eos_token_id.map(i128::from),
        all_stop_token_ids: stops.all_stop_token_ids.iter().copied().collect(),
        structured_outputs,
        logit_bias: req
            .logit_bias
            .as_ref()
            .filter(|lb| !lb.is_empty())
            .map(|lb| lb.iter().map(|&(k, b)| (i128::from(k), b)).collect()),
        allowed_token_ids: req.allowed_token_ids.clone().map(IntList::from),
        ..draft.clone()
    })
}

/// Step: one `EngineCoreRequest` per child: `n == 1` sends the request as
/// is (its seed as given); `n > 1` sends `n` children with ids from
/// [`TranslateOptions::child_id`] and seeds `seed + i` (vLLM's
/// `ParentRequest`).
pub fn fan_out(
    req: &GenerateRequest,
    sp: SamplingParams,
    rel: &'static ReleaseSchema,
    opts: &TranslateOptions,
) -> Result<Vec<EngineRequest>, TranslateError> {
    let n = req.n.unwrap_or(1);
    let seed = req.seed.filter(|&s| s != -1);
    // The int32 array vLLM's frontend packs (0.34.0 on; a list to older
    // releases): its bytes shared by every child.
    let prompt = TokenIds::from_u32(&req.prompt_token_ids);
    let child = |request_id: String, seed: Option<i128>, index: usize| -> Result<EngineRequest, TranslateError> {
        let typed = EngineCoreRequest {
            request_id: request_id.clone(),
            prompt_token_ids: Some(prompt.clone()),
            sampling_params: Some(SamplingParams { seed, ..sp.clone() }),
            arrival_time: opts.arrival_time,
            data_parallel_rank: req.data_parallel_rank.map(i128::from),
            ..EngineCoreRequest::default()
        };
        let request = request_value(rel, &typed)?;
        Ok(EngineRequest { request_id, typed, request, index })
    };
    if n == 1 {
        return Ok(vec![child(req.request_id.clone(), seed.map(i128::from), 0)?]);
    }
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    let mut requests = Vec::with_capacity(n.min(1024));
    for i in 0..n {
        let rid = (opts.child_id)(&req.request_id, i);
        let Some(s) = seed else {
            requests.push(child(rid, None, i)?);
            continue;
        };
        // Python ints do not wrap: seed + i up to u64 on the wire.
        let v = i128::from(s) + i as i128;
        if (WIRE_INT_MIN..=WIRE_INT_MAX).contains(&v) {
            requests.push(child(rid, Some(v), i)?);
        } else {
            return err("seed", format!("seed {s} + {i} does not fit the wire's 64-bit integers"));
        }
    }
    Ok(requests)
}
