//! The mocks' "model": tokens as a fixed function of the prompt, the
//! position and (when sampling) the seed, so greedy and seeded runs are
//! reproducible; both dialects' mocks share it (docs/runner/mock.md "The mock
//! engine": ids 5..vocab, never a special token nor the tiny model's
//! second EOS 4).

use engine_protocol::Value;

/// The mock's "model": a fixed function of the prompt and the position,
/// never a special token nor the tiny model's second EOS (ids 0-4).
pub fn generated_token(prompt: &[i64], position: usize, vocab_size: i64) -> i64 {
    sampled_token(prompt, position, None, vocab_size)
}

/// [`generated_token`] for a sampled request: the seed is mixed in.
pub fn sampled_token(prompt: &[i64], position: usize, seed: Option<i64>, vocab_size: i64) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    if let Some(s) = seed {
        h ^= (s as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    for t in prompt {
        h ^= *t as u64;
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h ^= position as u64;
    h = h.wrapping_mul(0x100_0000_01b3);
    5 + (h % (vocab_size.max(6) - 5) as u64) as i64
}

/// Integers of a token-id value: a list (`IntArray` or an array of ints)
/// or an integer ndarray (vLLM 0.34.0's prompt); empty for anything else.
pub fn ints(v: Option<&Value>) -> Vec<i64> {
    v.and_then(Value::token_ids).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use engine_protocol::internal::{engine_core_request_value, sampling_params_value};
    use engine_protocol::{decode_message, encode_message, release, Dialect, Limits, MessageKind, Value};

    use super::ints;

    /// The prompt of an ADD of `version` with `n` ids, as the mock reads it
    /// after the ADD went through the wire, and how many frames it took.
    fn prompt_through_the_wire(version: &str, n: i64) -> (Vec<i64>, usize) {
        let r = release(Dialect::Vllm, version).unwrap();
        let ids: Vec<i64> = (5..5 + n).collect();
        let v = engine_core_request_value(r, "r", ids, sampling_params_value(r), 0.0);
        let frames = encode_message(r, MessageKind::EngineCoreRequest, &v).unwrap();
        let d = decode_message(r, MessageKind::EngineCoreRequest, &frames, &Limits::default()).unwrap();
        let Value::Struct(s) = &d.value else { panic!("{:?}", d.value) };
        (ints(s.get("prompt_token_ids")), frames.len())
    }

    #[test]
    fn a_0_34_prompt_reads_the_same_inline_and_in_an_aux_frame_as_a_0_33_list() {
        let want = |n: i64| (5..5 + n).collect::<Vec<i64>>();
        let (short, short_frames) = prompt_through_the_wire("0.34.0", 10);
        let (long, long_frames) = prompt_through_the_wire("0.34.0", 100);
        assert_eq!(short, want(10));
        assert_eq!(long, want(100));
        assert_eq!(long_frames, short_frames + 1, "100 int32 ids (400 bytes) travel in an aux frame, 10 inline");
        assert_eq!(prompt_through_the_wire("0.33.0", 100).0, want(100));
    }
}
