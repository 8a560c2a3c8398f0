//! `conformance bench`: times the codec on any corpus. For every accepted
//! message case, the best-of-repeats time per call to decode its frames and
//! to encode its decoded value, in nanoseconds. Timing is for comparison on
//! one machine; the criterion benches in `protocol/benches/` are the
//! statistically careful measurement.

use std::hint::black_box;
use std::time::{Duration, Instant};

use engine_protocol::{decode_message, encode_message, release, Limits};

use crate::corpus::{Body, Case, Expect};

pub struct BenchLine {
    pub id: String,
    pub decode_ns: u64,
    pub encode_ns: u64,
}

/// Best per-call time of `f` over `repeats` batches of at least `batch` wall
/// time each.
fn best_ns(repeats: usize, batch: Duration, mut f: impl FnMut()) -> u64 {
    // Calibrate the iteration count so one batch takes about `batch`.
    let mut iters: u64 = 1;
    loop {
        let t = Instant::now();
        for _ in 0..iters {
            f();
        }
        if t.elapsed() >= batch || iters >= 1 << 24 {
            break;
        }
        iters *= 2;
    }
    let mut best = u64::MAX;
    for _ in 0..repeats {
        let t = Instant::now();
        for _ in 0..iters {
            f();
        }
        let per = (t.elapsed().as_nanos() / iters as u128) as u64;
        best = best.min(per);
    }
    best
}

/// Times every accepted message case with a schema table; the rest are
/// listed in the second vector with the reason.
pub fn run(cases: &[Case], repeats: usize, batch: Duration) -> (Vec<BenchLine>, Vec<(String, String)>) {
    let limits = Limits::default();
    let mut lines = Vec::new();
    let mut skipped = Vec::new();
    for case in cases {
        let Body::Message { message, frames, expect: Expect::Accept, .. } = &case.body else {
            continue;
        };
        let Some(rel) = release(&case.dialect, &case.version) else {
            skipped.push((case.id.clone(), format!("no schema table for {} {}", case.dialect, case.version)));
            continue;
        };
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        let decoded = match decode_message(rel, *message, &refs, &limits) {
            Ok(d) => d,
            Err(e) => {
                skipped.push((case.id.clone(), format!("does not decode: {e}")));
                continue;
            }
        };
        let decode_ns = best_ns(repeats, batch, || {
            black_box(decode_message(rel, *message, black_box(&refs), &limits).ok());
        });
        let encode_ns = best_ns(repeats, batch, || {
            black_box(encode_message(rel, *message, black_box(&decoded.value)).ok());
        });
        lines.push(BenchLine { id: format!("{}/{}/{}", case.dialect, case.version, case.id), decode_ns, encode_ns });
    }
    (lines, skipped)
}
