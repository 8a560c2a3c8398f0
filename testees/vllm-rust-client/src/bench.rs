//! `vllm-rust-client-testee bench CASE.json...`: times vLLM's Rust client
//! codec on accepted message cases, one line per case in the format of
//! `conformance bench` (`<dialect>/<version>/<case id> decode_ns=<n>
//! encode_ns=<n>`, docs/bench.md), best of `--repeats` batches (default 7)
//! of at least `--batch-ms` milliseconds (default 2) each.
//!
//! What is timed, on the case's own bytes:
//! - `EngineCoreRequest`: decode of the payload frame
//!   (`decode_msgpack::<EngineCoreRequest>` and `validate`, without the
//!   request-type frame, as the engine's input thread decodes), encode with
//!   `encode_msgpack` (tensors inline: the client's aux-frame split is
//!   crate-private);
//! - `EngineCoreOutputs`: `decode_engine_core_outputs` of the frames (held as
//!   `Bytes`, as the transport hands them over; aux frames resolved), encode
//!   with `encode_msgpack`.
//!
//! Other message types, rejected cases and cases the client refuses are not
//! timed (a line on stderr says why; the exit status is 1 when nothing was
//! timed).

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::Bytes;
use engine_protocol::view::parse_json;
use serde_json::Value as Json;
use vllm_engine_core_client::protocol::output::decode_engine_core_outputs;
use vllm_engine_core_client::protocol::request::EngineCoreRequest;
use vllm_engine_core_client::protocol::{decode_msgpack, encode_msgpack};

/// Best per-call time of `f` over `repeats` batches of at least `batch`.
fn best_ns(repeats: usize, batch: Duration, mut f: impl FnMut()) -> u64 {
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
    (0..repeats)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            (t.elapsed().as_nanos() / u128::from(iters)) as u64
        })
        .min()
        .unwrap_or(u64::MAX)
}

struct Case {
    id: String,
    message: String,
    frames: Vec<Vec<u8>>,
}

fn load(path: &str) -> Result<Case, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let j = parse_json(&text).map_err(|e| format!("{path}: {e}"))?;
    let s = |k: &str| j.get(k).and_then(Json::as_str).ok_or(format!("{path}: no string `{k}`"));
    if s("kind")? != "message" {
        return Err(format!("{path}: not a message case"));
    }
    if j.get("expect").and_then(Json::as_str) != Some("accept") {
        return Err(format!("{path}: not an accepted case"));
    }
    let frames = j
        .get("frames")
        .and_then(Json::as_array)
        .ok_or(format!("{path}: no `frames`"))?
        .iter()
        .map(|f| f.as_str().and_then(|h| hex::decode(h).ok()).ok_or(format!("{path}: a frame is not hex")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Case {
        id: format!("{}/{}/{}", s("dialect")?, s("version")?, s("case")?),
        message: s("message")?.into(),
        frames,
    })
}

/// Decode and encode times of one case, or why it is not timed.
fn time(case: &Case, repeats: usize, batch: Duration) -> Result<(u64, u64), String> {
    match case.message.as_str() {
        "EngineCoreRequest" => {
            let payload = case.frames.get(1).ok_or("no payload frame")?.as_slice();
            let decode = || -> Result<EngineCoreRequest, String> {
                let r: EngineCoreRequest = decode_msgpack(payload).map_err(|e| e.to_string())?;
                r.validate().map_err(|e| e.to_string())?;
                Ok(r)
            };
            let value = decode()?;
            encode_msgpack(&value).map_err(|e| e.to_string())?;
            let d = best_ns(repeats, batch, || {
                black_box(decode().ok());
            });
            let e = best_ns(repeats, batch, || {
                black_box(encode_msgpack(black_box(&value)).ok());
            });
            Ok((d, e))
        }
        "EngineCoreOutputs" => {
            let frames: Vec<Bytes> = case.frames.iter().map(|f| Bytes::copy_from_slice(f)).collect();
            let value = decode_engine_core_outputs(&frames).map_err(|e| e.to_string())?;
            encode_msgpack(&value).map_err(|e| e.to_string())?;
            let d = best_ns(repeats, batch, || {
                black_box(decode_engine_core_outputs(black_box(&frames)).ok());
            });
            let e = best_ns(repeats, batch, || {
                black_box(encode_msgpack(black_box(&value)).ok());
            });
            Ok((d, e))
        }
        other => Err(format!("{other} is not timed (EngineCoreRequest and EngineCoreOutputs are)")),
    }
}

pub fn main(args: &[String]) -> Result<(), String> {
    let mut repeats = 7usize;
    let mut batch_ms = 2u64;
    let mut files = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut number = |name: &str| -> Result<u64, String> {
            let v = it.next().ok_or(format!("{name} needs a value"))?;
            v.parse::<u64>().ok().filter(|&n| n > 0).ok_or(format!("{name}: `{v}` is not a positive integer"))
        };
        match a.as_str() {
            "--repeats" => repeats = number("--repeats")? as usize,
            "--batch-ms" => batch_ms = number("--batch-ms")?,
            _ => files.push(a.as_str()),
        }
    }
    if files.is_empty() {
        return Err("bench needs case files".into());
    }
    eprintln!("vllm-rust-client-testee bench: best of {repeats} batches of >= {batch_ms} ms");
    let mut timed = 0;
    for path in files {
        match load(path).and_then(|c| time(&c, repeats, Duration::from_millis(batch_ms)).map(|t| (c.id, t))) {
            Ok((id, (d, e))) => {
                println!("{id} decode_ns={d} encode_ns={e}");
                timed += 1;
            }
            Err(why) => eprintln!("not timed: {path}: {why}"),
        }
    }
    if timed == 0 {
        return Err("nothing was timed".into());
    }
    Ok(())
}
