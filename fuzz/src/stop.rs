//! The stop-detector target (`stop_detector`): a token stream of the tiny
//! model's tokenizer (`golden/tiny/`, compiled in), streamed through
//! `engine_protocol::translate::RequestStream` in engine steps of fuzzed
//! sizes, against the same stream in one step.
//!
//! Input format (every byte string is some input):
//!
//! ```text
//! flags      1 byte: bit 0 include_stop_str_in_output, bit 1 SMG semantics,
//!            bits 2-3 min_tokens (0, 1, 3, 0), bit 4 skip_special_tokens off
//! stops      1 byte S (mod 4), then S times: 1 byte L (mod 8) + 1, then L
//!            bytes read as UTF-8 (lossy); empty strings are dropped
//! steps      1 byte K (mod 6) + 1, then K bytes, each (mod 4) + 1: the step
//!            sizes, used round-robin
//! tokens     the rest, u16 little-endian each, modulo the vocabulary size
//! ```
//!
//! Checked: no panic; the streamed text, token ids and stop equal the
//! one-shot run's; hold-back never exceeds the detector's documented bound;
//! with `include_stop_str_in_output` off and stops active (min_tokens 0, or
//! SMG semantics, which ignore it), no emitted text contains a stop string.

use std::sync::OnceLock;

use engine_protocol::translate::stop::stream_in_steps;
use engine_protocol::translate::{GatewayTokenizer, StopParams, StopSemantics};
use engine_testkit::model::ModelDir;

/// The tiny tokenizer, built once from the committed files.
pub fn tokenizer() -> &'static GatewayTokenizer {
    static T: OnceLock<GatewayTokenizer> = OnceLock::new();
    T.get_or_init(|| {
        // Embedded, so the fuzz binaries need no repository at run time.
        ModelDir::tiny_embedded().tokenizer().expect("golden/tiny tokenizer")
    })
}

/// A parsed input.
#[derive(Debug, Clone)]
pub struct StopInput {
    pub params: StopParams,
    pub sizes: Vec<usize>,
    pub ids: Vec<u32>,
}

struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }

    fn take(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }
}

/// Reads an input (see the module docs).
pub fn parse(data: &[u8]) -> StopInput {
    let vocab = tokenizer().vocab_size() as u32;
    let mut b = Bytes(data);
    let flags = b.byte();
    let mut params = StopParams::new(Vec::new());
    params.include_stop_str_in_output = flags & 1 != 0;
    params.semantics = if flags & 2 != 0 { StopSemantics::Smg } else { StopSemantics::Vllm };
    params.min_tokens = [0, 1, 3, 0][((flags >> 2) & 3) as usize];
    params.skip_special_tokens = flags & 16 == 0;
    for _ in 0..b.byte() % 4 {
        let len = (b.byte() % 8) as usize + 1;
        let s = String::from_utf8_lossy(b.take(len)).into_owned();
        if !s.is_empty() {
            params.stop.push(s);
        }
    }
    let k = (b.byte() % 6) as usize + 1;
    let sizes = (0..k).map(|_| (b.byte() % 4) as usize + 1).collect();
    let ids = b.0.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]]) as u32 % vocab).collect();
    StopInput { params, sizes, ids }
}

/// Writes an input in the format `parse` reads (for seeds).
pub fn unparse(input: &StopInput) -> Vec<u8> {
    let p = &input.params;
    let min = match p.min_tokens {
        0 => 0u8,
        1 => 1,
        _ => 2,
    };
    let mut out = vec![
        u8::from(p.include_stop_str_in_output)
            | (u8::from(p.semantics == StopSemantics::Smg) << 1)
            | (min << 2)
            | (u8::from(!p.skip_special_tokens) << 4),
    ];
    let stops: Vec<&String> = p.stop.iter().filter(|s| !s.is_empty() && s.len() <= 8).take(3).collect();
    out.push(stops.len() as u8);
    for s in stops {
        out.push(s.len() as u8 - 1);
        out.extend_from_slice(s.as_bytes());
    }
    let sizes: Vec<usize> = input.sizes.iter().copied().take(6).collect();
    out.push(sizes.len().max(1) as u8 - 1);
    for s in sizes.iter() {
        out.push((s.clamp(&1, &4) - 1) as u8);
    }
    if sizes.is_empty() {
        out.push(0);
    }
    for id in &input.ids {
        out.extend_from_slice(&(*id as u16).to_le_bytes());
    }
    out
}

/// The target: panics on any violated check.
pub fn check(data: &[u8]) {
    let input = parse(data);
    if input.ids.is_empty() {
        return;
    }
    let p = &input.params;
    let t = tokenizer();
    let prompt = t.encode("x");
    let streamed = stream_in_steps(t, &prompt, p, &input.ids, &input.sizes);
    let one_shot = stream_in_steps(t, &prompt, p, &input.ids, &[input.ids.len()]);
    assert_eq!(streamed.text, one_shot.text, "streamed text differs from one-shot ({input:?})");
    assert_eq!(streamed.token_ids, one_shot.token_ids, "streamed token ids differ from one-shot ({input:?})");
    assert_eq!(streamed.stop_string(), one_shot.stop_string(), "stop differs ({input:?})");
    assert!(
        streamed.max_held_back <= streamed.hold_back_bound,
        "held back {} > bound {} ({input:?})",
        streamed.max_held_back,
        streamed.hold_back_bound
    );
    if !p.include_stop_str_in_output && (p.min_tokens == 0 || p.semantics == StopSemantics::Smg) {
        for s in &p.stop {
            assert!(!streamed.text.contains(s.as_str()), "emitted {:?} holds stop {s:?} ({input:?})", streamed.text);
        }
    }
}
