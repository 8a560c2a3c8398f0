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
