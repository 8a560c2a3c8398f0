//! The seed corpus and the dictionary, written from committed files by
//! `write-seeds` (never by hand):
//!
//! - `testee_frames`: for the first accepted golden `message` case of
//!   each message type of vLLM 0.33.0 and TokenSpeed 0.1.1, the requests
//!   the runner writes for it (handshake, `decode` of its frames, `encode`
//!   of its view; `<case>.requests`) and the reference testee's answers to
//!   them (`<case>.answers`);
//! - `scenario_file`: the committed scenario files (`golden/replay/`, its
//!   `dp/` and `tokenspeed/`, `golden/gateway/` and its `e2e/`, in that
//!   order), each that uses an object key, or a check, action, probe or
//!   endpoint, that no file before it used;
//! - `expectations_file`: every committed expectations file
//!   (`golden/replay/expectations/`, `golden/gateway/expectations/`) and
//!   differential findings file (`golden/gateway/differential/`);
//! - each target also gets the hostile inputs of [`hostile`] (named
//!   `hostile-*`): lengths past every limit, cut-off messages, nesting past
//!   the limits, names with `..`, separators and control characters.
//!
//! The dictionary holds the testee protocol's keys, the object keys and
//! short strings of the committed scenario files, the endpoints of the
//! findings files and the length prefixes at the limits.

use engine_testkit::fuzz_dict::{self, ident};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use conformance::codec::Target;
use conformance::testee::serve::serve;
use conformance::testee::{decode_request, encode_request, framed, hello_request, MAX_ANSWER, MAX_MESSAGE};
use engine_protocol::MessageKind;
use serde_json::Value as Json;

/// Why the seeds or the dictionary could not be built or written: the
/// file, seed or case.
#[derive(Debug, thiserror::Error)]
pub enum SeedsError {
    /// A golden tree could not be walked.
    #[error(transparent)]
    Corpus(#[from] engine_testkit::corpus::CorpusError),
    /// A file or directory could not be read or written.
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    /// A seed file could not be removed or written.
    #[error("{target}/{name}: {source}")]
    Seed { target: &'static str, name: String, source: std::io::Error },
    /// A committed file is not UTF-8.
    #[error("{}: {source}", path.display())]
    NotUtf8 { path: PathBuf, source: std::str::Utf8Error },
    /// A committed file is not JSON.
    #[error("{}: {source}", path.display())]
    Json { path: PathBuf, source: engine_protocol::view::JsonError },
    /// A golden message case whose `frames` are not hex strings.
    #[error("{}: frames are not hex strings", path.display())]
    FramesNotHex { path: PathBuf },
    /// The reference testee failed on a golden case's requests.
    #[error("{case}: the reference testee: {source}")]
    Testee { case: String, source: conformance::testee::serve::ServeError },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SeedsError + '_ {
    move |source| SeedsError::Io { path: path.to_path_buf(), source }
}

fn seed_error(target: &'static str, name: &str, source: std::io::Error) -> SeedsError {
    SeedsError::Seed { target, name: name.to_string(), source }
}

/// Seeds by target, then by file name.
pub type Corpus = BTreeMap<&'static str, BTreeMap<String, Vec<u8>>>;

/// The golden cases the testee seeds come from: a tree and its name.
const TESTEE_TREES: [&str; 2] = ["vllm/0.33.0", "tokenspeed/0.1.1"];

/// Where the scenario files are, under `golden/`.
const SCENARIO_DIRS: [&str; 5] = ["replay", "replay/dp", "replay/tokenspeed", "gateway", "gateway/e2e"];

/// Where the expectations and findings files are, under `golden/`.
const EXPECTATION_DIRS: [&str; 3] = ["replay/expectations", "gateway/expectations", "gateway/differential"];

/// The files of `dir` ending in `ext`, sorted (not recursive).
fn files(dir: &Path, ext: &str) -> Result<Vec<PathBuf>, SeedsError> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io(dir))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == ext))
        .collect();
    out.sort();
    Ok(out)
}

fn read(path: &Path) -> Result<Vec<u8>, SeedsError> {
    std::fs::read(path).map_err(io(path))
}

/// `replay/dp/dp_waves.json` as a seed name: `replay-dp-dp_waves.json`.
fn seed_name(rel: &str) -> String {
    rel.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-' { c } else { '-' }).collect()
}

/// The seed corpus from the golden tree `golden`.
pub fn from_golden(golden: &Path) -> Result<Corpus, SeedsError> {
    let mut corpus: Corpus = crate::TARGETS.iter().map(|t| (*t, BTreeMap::new())).collect();
    for (name, bytes) in testee_seeds(golden)? {
        corpus.get_mut("testee_frames").expect("a target").insert(name, bytes);
    }
    // A scenario file is a seed when it uses an object key or a check,
    // action, probe or endpoint no file before it used: all of them in a
    // few dozen files.
    let mut used = BTreeSet::new();
    for dir in SCENARIO_DIRS {
        for f in files(&golden.join(dir), "json")? {
            let bytes = read(&f)?;
            let mut w = BTreeSet::new();
            words(&json_of(&f, &bytes)?, &mut w, false);
            if w.is_subset(&used) {
                continue;
            }
            used.extend(w);
            let file = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
            corpus.get_mut("scenario_file").expect("a target").insert(seed_name(&format!("{dir}/{file}")), bytes);
        }
    }
    for dir in EXPECTATION_DIRS {
        for f in files(&golden.join(dir), "txt")? {
            let file = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
            corpus
                .get_mut("expectations_file")
                .expect("a target")
                .insert(seed_name(&format!("{dir}/{file}")), read(&f)?);
        }
    }
    for (target, name, bytes) in hostile() {
        corpus.get_mut(target).expect("a target").insert(format!("hostile-{name}"), bytes);
    }
    Ok(corpus)
}

/// The requests and answers of one case per message type of each tree
/// of [`TESTEE_TREES`].
fn testee_seeds(golden: &Path) -> Result<Vec<(String, Vec<u8>)>, SeedsError> {
    let mut out = Vec::new();
    for tree in TESTEE_TREES {
        let mut seen: Vec<MessageKind> = Vec::new();
        let mut cases = engine_testkit::corpus::json_files(&golden.join(tree))?;
        cases.sort();
        for path in cases {
            let bytes = read(&path)?;
            let case = json_of(&path, &bytes)?;
            let field = |k: &str| case.get(k).and_then(Json::as_str).unwrap_or("");
            if field("kind") != "message" || field("expect") != "accept" {
                continue;
            }
            let Some(message) = MessageKind::parse(field("message")) else { continue };
            let (Some(frames), Some(value)) = (case.get("frames").and_then(Json::as_array), case.get("value")) else {
                continue;
            };
            let frames: Vec<Vec<u8>> = frames
                .iter()
                .map(|f| f.as_str().and_then(|s| hex::decode(s).ok()))
                .collect::<Option<_>>()
                .ok_or_else(|| SeedsError::FramesNotHex { path: path.clone() })?;
            if frames.iter().map(Vec::len).sum::<usize>() > 1024 || seen.contains(&message) {
                continue;
            }
            seen.push(message);
            let id = format!("{tree}/{}", field("case"));
            let target = Target { case: &id, dialect: field("dialect"), version: field("version"), message };
            let mut requests = framed(&hello_request());
            requests.extend(framed(&decode_request(&target, &frames)));
            requests.extend(framed(&encode_request(&target, value)));
            let mut answers = Vec::new();
            serve(requests.as_slice(), &mut answers, None)
                .map_err(|source| SeedsError::Testee { case: id.clone(), source })?;
            out.push((seed_name(&format!("{id}.requests")), requests));
            out.push((seed_name(&format!("{id}.answers")), answers));
        }
    }
    Ok(out)
}

fn le(n: u64) -> Vec<u8> {
    (n as u32).to_le_bytes().to_vec()
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

fn deep(open: &str, close: &str, n: usize, inner: &str) -> String {
    format!("{}{inner}{}", open.repeat(n), close.repeat(n))
}

/// Inputs at and past every limit: (target, name, bytes).
pub fn hostile() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let t = "testee_frames";
    let s = "scenario_file";
    let e = "expectations_file";
    let gib = MAX_MESSAGE;
    let named = |name: &str| {
        format!(r#"{{"scenario": {}, "requests": [{{"id": "a", "request": {{"prompt": "x"}}}}]}}"#, Json::from(name))
    };
    // 300 requests, each after the next: the `after` levels resolve one per pass.
    let chain: Vec<String> =
        (0..300).map(|i| format!(r#"{{"id":"r{i}","after":"r{}","request":{{}}}}"#, i + 1)).collect();
    let chain = format!(r#"{{"scenario":"chain","requests":[{},{{"id":"r300","request":{{}}}}]}}"#, chain.join(","));
    vec![
        (t, "length-u32-max", cat(&[&le(u32::MAX as u64), b"{"])),
        (t, "length-gib-plus-one", cat(&[&le(gib + 1), b"{}"])),
        (t, "length-gib-flood", cat(&[&le(gib), &[b'x'; 256]])),
        (t, "length-answer-limit-plus-one", cat(&[&le(MAX_ANSWER + 1), b"{\"accept\":"])),
        (t, "length-answer-limit-cut-short", cat(&[&le(MAX_ANSWER), b"{\"accept\":{\"value\":"])),
        (t, "cut-in-length", vec![0x10, 0x00]),
        (t, "cut-in-body", cat(&[&le(100), b"{\"skipped\":"])),
        (t, "stdout-text", b"testee ready\n{\"hello\": {}}\n".to_vec()),
        (t, "deep-array", framed(deep("[", "]", 1200, "").as_bytes())),
        (
            t,
            "deep-accept-value",
            framed(format!(r#"{{"accept":{{"value":{}}}}}"#, deep("{\"a\":", "}", 1000, "1")).as_bytes()),
        ),
        (t, "not-utf8", framed(b"{\"error\": \"\xff\xfe\"}")),
        (t, "not-an-object", cat(&[&framed(b"[\"accept\"]"), &framed(b"\"reject\"")])),
        (t, "several-answer-keys", framed(br#"{"accept":{"value":[]},"reject":"type","frames":["zz"]}"#)),
        (t, "hello-other-protocol", framed(br#"{"hello":{"protocol":18446744073709551615,"supports":7}}"#)),
        (s, "deep-just-past-the-limit", deep("[", "]", 65, "").into_bytes()),
        (
            s,
            "deep-object",
            format!(r#"{{"scenario":"x","requests":{}}}"#, deep("{\"a\":", "}", 5000, "1")).into_bytes(),
        ),
        (
            s,
            "deep-in-strings-only",
            format!(r#"{{"scenario":"x","doc":"{}","requests":[]}}"#, "[".repeat(200)).into_bytes(),
        ),
        (s, "name-dot-dot", named("..").into_bytes()),
        (s, "name-climbs", named("../../etc/cron.d/x").into_bytes()),
        (s, "name-absolute", named("/tmp/x").into_bytes()),
        (s, "name-separator", named("a\\b").into_bytes()),
        (s, "name-control", named("bell\u{7}").into_bytes()),
        (s, "name-too-long", named(&"n".repeat(129)).into_bytes()),
        (
            s,
            "from-golden-climbs",
            br#"{"scenario":"x","requests":[{"from_golden":"../../../../etc/os-release"}]}"#.to_vec(),
        ),
        (s, "from-golden-absolute", br#"{"scenario":"x","requests":[{"from_golden":"/etc/os-release"}]}"#.to_vec()),
        (s, "after-chain", chain.into_bytes()),
        (
            s,
            "after-cycle",
            br#"{"scenario":"c","requests":[{"id":"a","after":"b","request":{}},{"id":"b","after":"a","request":{}}]}"#
                .to_vec(),
        ),
        (s, "not-utf8", b"{\"scenario\": \"\xc3\x28\"}".to_vec()),
        (e, "no-reason", b"# known\nstop_strings\n".to_vec()),
        (e, "crlf-and-tabs", b"a\treason one\r\nb  \t reason two \r\n\r\n#c\r\n".to_vec()),
        (e, "unicode-spaces", "x\u{a0}why\u{2003}\nseed\u{3000}*\u{85}because\n".as_bytes().to_vec()),
        (e, "differential-twice", b"seed * one\nseed completions two\nseed * three\n".to_vec()),
        (e, "differential-unknown-endpoint", b"seed ../.. why\n".to_vec()),
        (e, "not-utf8", b"name \xff\xfe reason\n".to_vec()),
    ]
}

/// Writes `corpus` under `dir` (one folder per target, replacing what the
/// folder held), or with `check` only compares; returns the differences.
pub fn write(dir: &Path, corpus: &Corpus, check: bool) -> Result<Vec<String>, SeedsError> {
    let mut diffs = Vec::new();
    for (target, seeds) in corpus {
        let tdir = dir.join(target);
        let mut there: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        if tdir.is_dir() {
            for f in std::fs::read_dir(&tdir).map_err(io(&tdir))? {
                let path = f.map_err(io(&tdir))?.path();
                if path.is_file() {
                    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("").to_string();
                    there.insert(name, read(&path)?);
                }
            }
        }
        for (name, bytes) in seeds {
            match there.get(name) {
                Some(old) if old == bytes => {}
                Some(_) => diffs.push(format!("{target}/{name}: changed")),
                None => diffs.push(format!("{target}/{name}: missing")),
            }
        }
        let stray: Vec<&String> = there.keys().filter(|n| !seeds.contains_key(*n)).collect();
        diffs.extend(stray.iter().map(|n| format!("{target}/{n}: not written by write-seeds")));
        if check {
            continue;
        }
        std::fs::create_dir_all(&tdir).map_err(io(&tdir))?;
        for name in stray {
            std::fs::remove_file(tdir.join(name)).map_err(|source| seed_error(target, name, source))?;
        }
        for (name, bytes) in seeds.iter().filter(|(n, b)| there.get(*n) != Some(*b)) {
            std::fs::write(tdir.join(name), bytes).map_err(|source| seed_error(target, name, source))?;
        }
    }
    Ok(diffs)
}

/// The keys whose string values name a kind of thing (a check, an
/// action, a probe, an endpoint), as new to a file as a new key.
const NAMING: [&str; 5] = ["check", "kind", "action", "probe", "endpoint"];

/// A committed JSON file, parsed.
fn json_of(path: &Path, bytes: &[u8]) -> Result<Json, SeedsError> {
    let text = std::str::from_utf8(bytes).map_err(|source| SeedsError::NotUtf8 { path: path.to_path_buf(), source })?;
    engine_protocol::view::parse_json(text).map_err(|source| SeedsError::Json { path: path.to_path_buf(), source })
}

/// Collects the object keys of a JSON value, and with `strings` its short
/// strings.
fn words(v: &Json, out: &mut BTreeSet<String>, strings: bool) {
    match v {
        Json::Object(m) => {
            for (k, x) in m {
                out.insert(k.clone());
                if let (false, true, Some(s)) = (strings, NAMING.contains(&k.as_str()), x.as_str()) {
                    out.insert(format!("{k}={s}"));
                }
                words(x, out, strings);
            }
        }
        Json::Array(xs) => xs.iter().for_each(|x| words(x, out, strings)),
        Json::String(s) if strings && s.len() <= 24 && !s.contains(char::is_whitespace) => {
            out.insert(s.clone());
        }
        _ => {}
    }
}

/// The libFuzzer dictionary, from the committed scenario files.
pub fn dictionary(golden: &Path) -> Result<String, SeedsError> {
    let mut entries: Vec<(String, Vec<u8>)> = Vec::new();
    for (name, n) in [
        ("len_u32_max", u32::MAX as u64),
        ("len_gib", MAX_MESSAGE),
        ("len_gib_plus_one", MAX_MESSAGE + 1),
        ("len_answer_limit", MAX_ANSWER),
        ("len_answer_limit_plus_one", MAX_ANSWER + 1),
    ] {
        entries.push((name.into(), le(n)));
    }
    for (name, text) in [("dot_dot", "../"), ("backslash", "\\\\"), ("bell", "\\u0007"), ("model", "$model.")] {
        entries.push((name.into(), text.as_bytes().to_vec()));
    }
    let mut keys: BTreeSet<String> = [
        "hello",
        "protocol",
        "implementation",
        "supports",
        "unsupported",
        "dialect",
        "version",
        "messages",
        "case",
        "decode",
        "encode",
        "frames",
        "value",
        "accept",
        "drift",
        "reject",
        "detail",
        "skipped",
        "error",
        "completions",
        "chat",
        "*",
        "malformed",
        "type",
        "missing-field",
        "enum",
        "validation",
        "limits",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for dir in SCENARIO_DIRS {
        for f in files(&golden.join(dir), "json")? {
            words(&json_of(&f, &read(&f)?)?, &mut keys, true);
        }
    }
    for k in keys {
        entries.push((format!("str_{}", ident(&k)), Json::from(k.as_str()).to_string().into_bytes()));
    }
    Ok(fuzz_dict::write(
        "# libFuzzer dictionary for the gpu-runner-fuzz targets.\n\
         # Written by `cargo run --manifest-path gpu_runner/fuzz/Cargo.toml --example write-seeds`; do not edit.\n",
        &entries,
    ))
}
