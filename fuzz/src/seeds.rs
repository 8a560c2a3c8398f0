//! The seed corpus and the dictionary, written from the goldens and the
//! schema tables by `write-seeds` (never by hand).
//!
//! Every vLLM golden case of kind `message` gives:
//! - `frames`: its frames, in the convention of [`crate::split`];
//! - the target of its message kind: `engine_core_request` and
//!   `hot_request`, `engine_core_outputs` and `hot_outputs`,
//!   `utility_output` (frames in the convention),
//!   `handshake` (HELLO, INIT, READY) and `ready_response` (the payload);
//! - `sampling_params` and `structured_outputs_params`: the raw wire bytes
//!   of those fields of a request payload, cut out token by token (so
//!   mutant cases give their mutated sub-payloads too); `utility_output`
//!   also gets the `utility_output` field of output batches.
//!
//! Every TokenSpeed golden case of kind `message` seeds only the
//! `tokenspeed_*` targets: `tokenspeed_request` (ADD frames in the
//! convention) and `tokenspeed_sampling_params` (the request payload's
//! element 5, cut out token by token), `tokenspeed_abort`,
//! `tokenspeed_outputs` (frames in the convention), `tokenspeed_handshake`
//! (HELLO, READY, and INIT's last frame) and `tokenspeed_ready_response`.
//!
//! Seeds are deduplicated by content per target and named after the first
//! case that gave them (`0.33.0-request-add_stop_logprobs`). `roundtrip`
//! gets a few fixed pseudo-random inputs (its input drives a generator, not
//! a decoder).

use engine_protocol::Dialect;
use engine_testkit::fuzz_dict::{self, ident};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use engine_protocol::internal::msgpack::{Reader, Token};
use engine_protocol::schema::{Ty, ALL_RELEASES};
use engine_protocol::MessageKind;
use serde_json::Value as Json;

use crate::oracle::TARGETS;
use crate::split::join;

/// Why the seeds could not be built or written: the file or seed.
#[derive(Debug, thiserror::Error)]
pub enum SeedsError {
    /// The golden tree could not be walked.
    #[error(transparent)]
    Corpus(#[from] engine_testkit::corpus::CorpusError),
    /// A file or directory could not be read or written.
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    /// An entry of a seed directory could not be read.
    #[error("{source}")]
    DirEntry { dir: PathBuf, source: std::io::Error },
    /// A seed file could not be removed or written.
    #[error("{name}: {source}")]
    Seed { name: String, source: std::io::Error },
    /// A golden file is not JSON.
    #[error("{}: not JSON: {source}", file.display())]
    Json { file: PathBuf, source: engine_protocol::view::JsonError },
    /// A message case without `frames`.
    #[error("{}: no frames", file.display())]
    NoFrames { file: PathBuf },
    /// A message case whose `frames` are not hex strings.
    #[error("{}: frames are not hex strings", file.display())]
    FramesNotHex { file: PathBuf },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SeedsError + '_ {
    move |source| SeedsError::Io { path: path.to_path_buf(), source }
}

/// Seeds by target, then by file name.
pub type Corpus = BTreeMap<&'static str, BTreeMap<String, Vec<u8>>>;

/// The seed corpus of every golden case under `golden`.
pub fn from_goldens(golden: &Path) -> Result<Corpus, SeedsError> {
    let files = engine_testkit::corpus::json_files(golden)?;
    let mut corpus: Corpus = TARGETS.iter().chain(&["stop_detector"]).map(|t| (*t, BTreeMap::new())).collect();
    let mut seen: HashSet<(&'static str, Vec<u8>)> = HashSet::new();
    let mut add = |target: &'static str, name: &str, bytes: Vec<u8>| {
        if seen.insert((target, bytes.clone())) {
            corpus.get_mut(target).expect("known target").insert(name.to_string(), bytes);
        }
    };
    for file in &files {
        let text = std::fs::read_to_string(file).map_err(io(file))?;
        let json: Json = engine_protocol::view::parse_json(&text)
            .map_err(|source| SeedsError::Json { file: file.clone(), source })?;
        let Some(case) = json.get("case").and_then(Json::as_str) else { continue };
        if json.get("kind").and_then(Json::as_str) == Some("stop_detection") {
            // Same input in every release's tree: one seed per case id.
            if let Some(bytes) = stop_seed(&json) {
                add("stop_detector", &seed_name(case), bytes);
            }
            continue;
        }
        if json.get("kind").and_then(Json::as_str) != Some("message") {
            continue;
        }
        let version = json.get("version").and_then(Json::as_str).unwrap_or("");
        let dialect_name = json.get("dialect").and_then(Json::as_str).unwrap_or("");
        let Ok(dialect) = dialect_name.parse::<Dialect>() else { continue };
        let Some(kind) = json.get("message").and_then(Json::as_str).and_then(MessageKind::parse) else {
            continue; // a message kind without a decoder yet
        };
        let frames: Vec<Vec<u8>> = json
            .get("frames")
            .and_then(Json::as_array)
            .ok_or_else(|| SeedsError::NoFrames { file: file.clone() })?
            .iter()
            .map(|f| f.as_str().and_then(|s| hex::decode(s).ok()))
            .collect::<Option<_>>()
            .ok_or_else(|| SeedsError::FramesNotHex { file: file.clone() })?;
        let name = seed_name(&format!("{dialect_name}-{version}-{case}"));
        let Some(joined) = join(&frames) else { continue };
        if dialect == Dialect::TokenSpeed {
            // Only the `tokenspeed_*` targets: the others decode vLLM's
            // dialect, and TokenSpeed's bytes (whose HELLO, INIT, READY,
            // ready response and ABORT share vLLM's message names) would
            // only seed them with wrong-dialect input.
            tokenspeed_seeds(kind, &name, &frames, joined, &mut add);
            continue;
        }
        add("frames", &name, joined.clone());
        match kind {
            MessageKind::EngineCoreRequest => {
                add("hot_request", &name, joined.clone());
                add("engine_core_request", &name, joined);
                if let Some(sp) = frames.get(1).and_then(|p| array_element(p, 3)).filter(|b| b != &[0xc0]) {
                    add("sampling_params", &name, sp.to_vec());
                    if let Some(so) = map_value(sp, "structured_outputs").filter(|b| b != &[0xc0]) {
                        add("structured_outputs_params", &name, so.to_vec());
                    }
                }
            }
            MessageKind::EngineCoreOutputs => {
                add("hot_outputs", &name, joined.clone());
                add("engine_core_outputs", &name, joined);
                if let Some(uo) = frames.first().and_then(|p| array_element(p, 4)).filter(|b| b != &[0xc0]) {
                    let mut uo_frames = vec![uo.to_vec()];
                    uo_frames.extend(frames[1..].iter().cloned());
                    if let Some(j) = join(&uo_frames) {
                        add("utility_output", &name, j);
                    }
                }
            }
            MessageKind::UtilityOutput => add("utility_output", &name, joined),
            MessageKind::HandshakeHello | MessageKind::HandshakeInit | MessageKind::HandshakeReady => {
                if let Some(p) = frames.first() {
                    add("handshake", &name, p.clone());
                }
            }
            MessageKind::EngineCoreReadyResponse => {
                if let Some(p) = frames.first() {
                    add("ready_response", &name, p.clone());
                }
            }
            _ => {}
        }
    }
    for i in 0..8u64 {
        corpus.get_mut("roundtrip").expect("roundtrip").insert(format!("xorshift-{i}"), xorshift(i, 64 << i));
    }
    Ok(corpus)
}

/// The seeds of the `tokenspeed_*` targets from one TokenSpeed message case.
fn tokenspeed_seeds(
    kind: MessageKind,
    name: &str,
    frames: &[Vec<u8>],
    joined: Vec<u8>,
    add: &mut impl FnMut(&'static str, &str, Vec<u8>),
) {
    match kind {
        MessageKind::EngineCoreRequest => {
            // `[tag, rid, http_worker_ipc, input_text, input_ids,
            // sampling_params, ...]`: element 5 (docs/tokenspeed-wire.md §3).
            if let Some(sp) = frames.get(1).and_then(|p| array_element(p, 5)).filter(|b| b != &[0xc0]) {
                add("tokenspeed_sampling_params", name, sp.to_vec());
            }
            add("tokenspeed_request", name, joined);
        }
        MessageKind::AbortRequest => add("tokenspeed_abort", name, joined),
        MessageKind::EngineCoreOutputs => add("tokenspeed_outputs", name, joined),
        // The engine reads INIT from the last frame; the target takes one.
        MessageKind::HandshakeInit => {
            if let Some(p) = frames.last() {
                add("tokenspeed_handshake", name, p.clone());
            }
        }
        MessageKind::HandshakeHello | MessageKind::HandshakeReady => {
            if let Some(p) = frames.first() {
                add("tokenspeed_handshake", name, p.clone());
            }
        }
        MessageKind::EngineCoreReadyResponse => {
            if let Some(p) = frames.first() {
                add("tokenspeed_ready_response", name, p.clone());
            }
        }
        _ => {}
    }
}

/// A `stop_detector` input (`crate::stop`) from a `stop_detection` golden:
/// its stop strings and flags, its engine steps' sizes and token ids.
fn stop_seed(json: &Json) -> Option<Vec<u8>> {
    let input = json.get("input")?;
    let p = input.get("params")?;
    let flag = |k: &str| p.get(k).and_then(Json::as_bool).unwrap_or(false);
    let mut params = engine_protocol::translate::StopParams::new(
        p.get("stop")?.as_array()?.iter().filter_map(|s| s.as_str().map(str::to_string)).collect(),
    );
    params.include_stop_str_in_output = flag("include_stop_str_in_output");
    params.min_tokens = p.get("min_tokens").and_then(Json::as_u64).unwrap_or(0) as usize;
    params.skip_special_tokens = p.get("skip_special_tokens").and_then(Json::as_bool).unwrap_or(true);
    let steps = input.get("steps")?.as_array()?;
    let mut sizes = Vec::new();
    let mut ids = Vec::new();
    for step in steps {
        let new: Vec<u32> =
            step.get("new_token_ids")?.as_array()?.iter().filter_map(|x| x.as_u64()).map(|x| x as u32).collect();
        sizes.push(new.len().max(1));
        ids.extend(new);
    }
    Some(crate::stop::unparse(&crate::stop::StopInput { params, sizes, ids }))
}

/// A file name from a case id: `[A-Za-z0-9._-]`, other bytes as `_`.
fn seed_name(id: &str) -> String {
    id.chars()
        .map(|c| match c {
            '/' => '-',
            c if c.is_ascii_alphanumeric() || matches!(c, '.' | '-') => c,
            _ => '_',
        })
        .collect()
}

/// The raw bytes of element `index` of the array `buf` starts with.
pub fn array_element(buf: &[u8], index: usize) -> Option<&[u8]> {
    let mut r = Reader::new(buf);
    let Token::Array(n) = r.token().ok()? else { return None };
    if index >= n as usize {
        return None;
    }
    for _ in 0..index {
        r.skip_value().ok()?;
    }
    let start = r.position();
    r.skip_value().ok()?;
    Some(&buf[start..r.position()])
}

/// The raw bytes of the value under string key `key` of the map `buf`
/// starts with.
pub fn map_value<'a>(buf: &'a [u8], key: &str) -> Option<&'a [u8]> {
    let mut r = Reader::new(buf);
    let Token::Map(n) = r.token().ok()? else { return None };
    for _ in 0..n {
        let k = r.token().ok()?;
        if matches!(k, Token::Array(_) | Token::Map(_)) {
            return None;
        }
        let start = r.position();
        r.skip_value().ok()?;
        if k == Token::Str(key.as_bytes()) {
            return Some(&buf[start..r.position()]);
        }
    }
    None
}

fn xorshift(seed: u64, n: usize) -> Vec<u8> {
    engine_testkit::rng::pseudo_random_bytes(seed, n)
}

/// Dtype strings of the tensor decoder (numpy strings and torch names).
const DTYPES: &[&str] = &[
    "<i4", "<f4", "<i8", "<u8", "|u1", "|i1", "|b1", "<f2", "<f8", ">i4", ">f4", "=i8", "<u2", "<i2", "<u4", "int32",
    "float32", "int64", "uint8", "bool", "float16", "bfloat16", "int8", "int16", "uint16", "uint32", "uint64",
    "float64", "int", "long", "half", "float", "double", "short",
];

/// The libFuzzer dictionary (`fuzz/engine.dict`): MessagePack markers and
/// headers, ext type 3 forms, tensor prefixes, dtype strings, and every
/// field name and string literal of the schema tables, each as the
/// MessagePack str that carries it.
pub fn dictionary() -> String {
    let mut entries: Vec<(String, Vec<u8>)> = Vec::new();
    let mut seen = HashSet::new();
    let mut add = |name: String, bytes: Vec<u8>| {
        if seen.insert(bytes.clone()) {
            entries.push((name, bytes));
        }
    };
    for (name, bytes) in [
        ("nil", &b"\xc0"[..]),
        ("false", b"\xc2"),
        ("true", b"\xc3"),
        ("reserved", b"\xc1"),
        ("f32", b"\xca"),
        ("f64", b"\xcb"),
        ("f64_nan", b"\xcb\x7f\xf8\x00\x00\x00\x00\x00\x00"),
        ("u8", b"\xcc"),
        ("u16", b"\xcd"),
        ("u32", b"\xce"),
        ("u64", b"\xcf"),
        ("u64_max", b"\xcf\xff\xff\xff\xff\xff\xff\xff\xff"),
        ("i8", b"\xd0"),
        ("i16", b"\xd1"),
        ("i32", b"\xd2"),
        ("i64", b"\xd3"),
        ("i64_min", b"\xd3\x80\x00\x00\x00\x00\x00\x00\x00"),
        ("str8", b"\xd9"),
        ("str16", b"\xda"),
        ("str32", b"\xdb"),
        ("bin8", b"\xc4"),
        ("bin16", b"\xc5"),
        ("bin32", b"\xc6"),
        ("array16", b"\xdc"),
        ("array32", b"\xdd"),
        ("map16", b"\xde"),
        ("map32", b"\xdf"),
        ("array32_huge", b"\xdd\xff\xff\xff\xff"),
        ("array32_4096", b"\xdd\x00\x00\x10\x00"),
        ("map32_huge", b"\xdf\xff\xff\xff\xff"),
        ("array16_ffff", b"\xdc\xff\xff"),
        ("map16_43", b"\xde\x00\x2b"),
        ("str32_huge", b"\xdb\xff\xff\xff\xff"),
        ("fixext1_3", b"\xd4\x03"),
        ("fixext2_3", b"\xd5\x03"),
        ("fixext4_3", b"\xd6\x03"),
        ("fixext8_3", b"\xd7\x03"),
        ("fixext16_3", b"\xd8\x03"),
        ("ext8_3", b"\xc7\x0c\x03"),
        ("ext16_3", b"\xc8\x01\x00\x03"),
        ("ext32_3", b"\xc9\x00\x01\x00\x00\x03"),
        ("ext8_pickle", b"\xc7\x01\x01"),
        ("tensor", b"\x93"),
        ("utility_result", b"\x92\xc0"),
        ("dead", b"ENGINE_CORE_DEAD"),
        ("fill_desc", b"\x00\x80"),
    ] {
        add(name.to_string(), bytes.to_vec());
    }
    for d in DTYPES {
        add(format!("dtype_{}", ident(d)), str_token(d));
    }
    let mut names: Vec<&'static str> = Vec::new();
    // vLLM's releases first (their entries keep their place), then
    // TokenSpeed's, with its struct tags.
    for r in ALL_RELEASES {
        for s in r.structs() {
            names.extend(s.fields.iter().map(|f| f.name));
            for f in s.fields {
                literals(f.ty, &mut names, 0);
            }
        }
    }
    for r in ALL_RELEASES {
        names.extend(r.structs().iter().filter_map(|s| s.tag()));
    }
    for n in names {
        add(format!("str_{}", ident(n)), str_token(n));
    }
    fuzz_dict::write(
        "# libFuzzer dictionary for the engine-protocol fuzz targets.\n\
         # Written by `cargo run --manifest-path fuzz/Cargo.toml --example write-seeds`; do not edit.\n",
        &entries,
    )
}

fn str_token(s: &str) -> Vec<u8> {
    let mut out = Vec::new();
    engine_protocol::internal::msgpack::write::str(&mut out, s);
    out
}

#[allow(unreachable_patterns)]
fn literals(ty: &'static Ty, out: &mut Vec<&'static str>, depth: usize) {
    if depth > 8 {
        return;
    }
    match ty {
        Ty::StrLiteral(xs) => out.extend(xs.iter().copied()),
        Ty::Optional(t) | Ty::List(t) | Ty::Set(t) => literals(t, out, depth + 1),
        Ty::Dict(k, v) => {
            literals(k, out, depth + 1);
            literals(v, out, depth + 1);
        }
        Ty::Union(ms) => ms.iter().for_each(|m| literals(m, out, depth + 1)),
        _ => {}
    }
}

/// Writes `corpus` under `dir` (one folder per target, replacing what the
/// folder held), or with `check` only compares; returns the differences.
pub fn write(dir: &Path, corpus: &Corpus, check: bool) -> Result<Vec<String>, SeedsError> {
    let mut diffs = Vec::new();
    for (target, seeds) in corpus {
        let tdir = dir.join(target);
        let mut existing: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        if tdir.is_dir() {
            for entry in std::fs::read_dir(&tdir).map_err(io(&tdir))? {
                let path = entry.map_err(|source| SeedsError::DirEntry { dir: tdir.clone(), source })?.path();
                if path.is_file() {
                    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("").to_string();
                    existing.insert(name, std::fs::read(&path).map_err(io(&path))?);
                }
            }
        }
        for (name, bytes) in seeds {
            match existing.get(name) {
                Some(old) if old == bytes => {}
                Some(_) => diffs.push(format!("{target}/{name}: changed")),
                None => diffs.push(format!("{target}/{name}: missing")),
            }
        }
        for name in existing.keys().filter(|n| !seeds.contains_key(*n)) {
            diffs.push(format!("{target}/{name}: not written by write-seeds"));
        }
        if !check {
            std::fs::create_dir_all(&tdir).map_err(io(&tdir))?;
            for name in existing.keys().filter(|n| !seeds.contains_key(*n)) {
                std::fs::remove_file(tdir.join(name))
                    .map_err(|source| SeedsError::Seed { name: name.clone(), source })?;
            }
            for (name, bytes) in seeds {
                if existing.get(name) != Some(bytes) {
                    std::fs::write(tdir.join(name), bytes)
                        .map_err(|source| SeedsError::Seed { name: name.clone(), source })?;
                }
            }
        }
    }
    Ok(diffs)
}
