//! The cross-release matrix: every vLLM release's own messages read with
//! every other release's table, the way a gateway built for one release
//! and an engine of another would read each other.
//!
//! A cell (gateway release G, engine release E) holds both directions of
//! one deployment:
//! - what the engine reads: G's gateway-side messages (ADD, ABORT, UTILITY,
//!   START_DP_WAVE and the handshake's INIT, as vLLM G's own client classes
//!   wrote them: G's golden corpus) decoded with E's table;
//! - what the gateway reads: E's engine-side messages (output batches,
//!   utility outputs, the ready response, HELLO and READY, from E's corpus)
//!   decoded with G's table.
//!
//! Only the messages each release's own code wrote and its own decoder
//! accepted take part (provenance `vllm-encoder` or `live-engine`, expect
//! `accept`); mutants and integer boundaries are about one decoder, not
//! about a pair. Each message ends as one [`Reading`]:
//! - `Same`: decoded, and every field both releases have holds the value
//!   the writer wrote (fields the reader alone has take their defaults);
//! - `Drift`: the same, with elements or keys the reader does not know
//!   passed over and reported (docs/wire-protocol.md §11);
//! - `Misread`: decoded, but a field both have holds another value than the
//!   writer's (the path names the first one): a positional field moved, or
//!   the writer omitted a field equal to its default and the reader filled
//!   in a different default;
//! - `Refused`: the reader's decoder refuses it (its reject class).
//!
//! The decoder and views are the reference implementation's
//! ([`crate::codec::InProcess`]): the typed verdict for the releases the
//! typed API covers, the value codec for the others. The Markdown is
//! written into `docs/reports/compatibility.md`; a test fails when it is stale.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use engine_protocol::{Dialect, MessageKind, RejectClass};
use serde_json::Value as Json;

use crate::codec::{Codec, DecodeAnswer, InProcess, NoAnswer, Target};
use crate::corpus::{Body, Case};
use engine_testkit::outcome::EngineVerdict;

/// Which side of a deployment reads a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReadingSide {
    /// The engine reads what the gateway sends.
    Engine,
    /// The gateway reads what the engine sends.
    Gateway,
}

impl ReadingSide {
    /// The side that reads `kind`.
    pub fn of(kind: MessageKind) -> ReadingSide {
        match kind {
            MessageKind::EngineCoreRequest
            | MessageKind::AbortRequest
            | MessageKind::UtilityRequest
            | MessageKind::StartDpWave
            | MessageKind::HandshakeInit => ReadingSide::Engine,
            _ => ReadingSide::Gateway,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            ReadingSide::Engine => "engine reads",
            ReadingSide::Gateway => "gateway reads",
        }
    }
}

/// How one message read on the other release.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reading {
    /// Every shared field holds the writer's value.
    Same,
    /// As `Same`, with these unknown elements or keys passed over.
    Drift(Vec<String>),
    /// A shared field holds another value: its path.
    Misread(String),
    /// Refused: the class and the decoder's detail.
    Refused(RejectClass, String),
}

/// Why the compatibility matrix could not be built: the case, release or
/// directory.
#[derive(Debug, thiserror::Error)]
pub enum CompatError {
    /// A case of a writer's corpus is not a message case.
    #[error("{case}: not a message case")]
    NotAMessage { case: String },
    /// The in-process codec gave no answer for a case (skipped or failed).
    #[error("{0}")]
    NoAnswer(String),
    /// The release root could not be listed.
    #[error("{}: {source}", root.display())]
    ReadRoot { root: PathBuf, source: std::io::Error },
    /// A release directory that has no schema table in this build.
    #[error("{}/{version}: {error}", root.display())]
    NoTable {
        root: PathBuf,
        version: String,
        #[source]
        error: engine_protocol::schema::UnknownRelease,
    },
    /// A release's corpus did not load.
    #[error(transparent)]
    Corpus(#[from] engine_testkit::corpus::CorpusError),
}

/// One message of the writer's corpus read with the reader's table.
pub fn read(writer_case: &Case, reader_version: &str) -> Result<Reading, CompatError> {
    let Body::Message { message, frames, value, .. } = &writer_case.body else {
        return Err(CompatError::NotAMessage { case: writer_case.report_id() });
    };
    let target = Target { case: &writer_case.id, dialect: "vllm", version: reader_version, message: *message };
    let answer = InProcess::default().decode(&target, frames).map_err(|e| match e {
        NoAnswer::Skipped(s) | NoAnswer::Failed(s) => CompatError::NoAnswer(s),
    })?;
    Ok(match answer {
        DecodeAnswer::Reject { class, detail } => Reading::Refused(class, detail),
        DecodeAnswer::Accept { view, drift } => match (value, first_difference(value.as_ref(), &view, "")) {
            (Some(_), Some(path)) => Reading::Misread(format!("{}{path}", message.name())),
            _ if drift.is_empty() => Reading::Same,
            _ => Reading::Drift(drift),
        },
    })
}

/// The first path where `read` holds another value than `written`, over
/// the keys both objects have (arrays element by element).
fn first_difference(written: Option<&Json>, read: &Json, at: &str) -> Option<String> {
    let written = written?;
    match (written, read) {
        (Json::Object(w), Json::Object(r)) => {
            w.iter().find_map(|(k, wv)| first_difference(Some(wv), r.get(k)?, &format!("{at}.{k}")))
        }
        (Json::Array(w), Json::Array(r)) if w.len() == r.len() => {
            w.iter().zip(r).enumerate().find_map(|(i, (wv, rv))| first_difference(Some(wv), rv, &format!("{at}[{i}]")))
        }
        _ if written == read => None,
        _ => Some(at.to_string()),
    }
}

/// A release's messages that take part: its own code wrote them and its
/// own decoder accepted them.
pub fn participating(cases: Vec<Case>) -> Vec<Case> {
    cases
        .into_iter()
        .filter(|c| {
            let source = c.provenance.get("source").and_then(Json::as_str).unwrap_or("");
            matches!(&c.body, Body::Message { expect: EngineVerdict::Accept, .. })
                && matches!(source, "vllm-encoder" | "live-engine")
        })
        .collect()
}

/// One cell: counts by reading, and each distinct finding with its count.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cell {
    pub messages: usize,
    pub same: usize,
    pub drift: usize,
    pub misread: usize,
    pub refused: usize,
    /// (reader, message, what) -> how many messages.
    pub findings: BTreeMap<(ReadingSide, &'static str, String), usize>,
}

impl Cell {
    fn add(&mut self, reader: ReadingSide, message: MessageKind, reading: Reading) {
        self.messages += 1;
        let what = match reading {
            Reading::Same => {
                self.same += 1;
                return;
            }
            Reading::Drift(paths) => {
                self.drift += 1;
                format!("drift: {}", generic_paths(&paths).join(", "))
            }
            Reading::Misread(path) => {
                self.misread += 1;
                format!("misread: {}", generic_paths(&[path]).join(", "))
            }
            Reading::Refused(class, detail) => {
                self.refused += 1;
                format!("refused ({}): {}", class.as_str(), generic_paths(&[detail]).join(", "))
            }
        };
        *self.findings.entry((reader, message.name(), what)).or_default() += 1;
    }

    /// The cell as the matrix prints it.
    pub fn summary(&self) -> String {
        if self.messages == 0 {
            return "–".into();
        }
        let mut parts = Vec::new();
        for (n, tag) in [(self.refused, "refused"), (self.misread, "misread"), (self.drift, "drift")] {
            if n > 0 {
                parts.push(format!("{n} {tag}"));
            }
        }
        if parts.is_empty() {
            format!("✓ {}", self.messages)
        } else {
            format!("{} / {}", parts.join(", "), self.messages)
        }
    }
}

/// Paths with their list indices of batch entries folded (`outputs[3]` and
/// `outputs[0]` are one finding), deduplicated in order.
fn generic_paths(paths: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for p in paths {
        let g = fold_indices(p);
        if !out.contains(&g) {
            out.push(g);
        }
    }
    out
}

/// `outputs[12][3]` -> `outputs[*][3]`, `outputs[12].x` -> `outputs[*].x`:
/// an index with more path after it is an element of a list (a last index,
/// `EngineCoreRequest[22]`, is a position in a positional struct and stays).
fn fold_indices(p: &str) -> String {
    let mut out = String::with_capacity(p.len());
    let mut rest = p;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find(']').map(|c| open + c) else { break };
        out.push_str(&rest[..open]);
        let index = &rest[open + 1..close];
        let numeric = !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit());
        rest = &rest[close + 1..];
        if numeric && (rest.starts_with('[') || rest.starts_with('.')) {
            out.push_str("[*]");
        } else {
            out.push_str(&format!("[{index}]"));
        }
    }
    out.push_str(rest);
    out
}

/// The matrix over every release with a corpus under `root`.
#[derive(Debug, Clone)]
pub struct Matrix {
    /// Releases, oldest first.
    pub releases: Vec<String>,
    /// `cells[g][e]`: gateway release `releases[g]`, engine `releases[e]`.
    pub cells: Vec<Vec<Cell>>,
    /// Messages taking part, per release.
    pub corpus_sizes: Vec<usize>,
}

/// Reads every release directory under `root` (`golden/vllm`) that has a
/// table; a directory without one is an error naming it.
pub fn build(root: &Path) -> Result<Matrix, CompatError> {
    let mut releases: Vec<String> = std::fs::read_dir(root)
        .map_err(|source| CompatError::ReadRoot { root: root.to_path_buf(), source })?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    releases.sort_by_key(|v| v.split('.').map(|p| p.parse::<u32>().unwrap_or(0)).collect::<Vec<_>>());
    let mut corpora = Vec::new();
    for v in &releases {
        engine_protocol::release(Dialect::Vllm, v).map_err(|error| CompatError::NoTable {
            root: root.to_path_buf(),
            version: v.clone(),
            error,
        })?;
        corpora.push(participating(engine_testkit::corpus::message_cases(&root.join(v))?));
    }
    let mut cells = vec![vec![Cell::default(); releases.len()]; releases.len()];
    for (g, gateway) in releases.iter().enumerate() {
        for (e, engine) in releases.iter().enumerate() {
            let cell = &mut cells[g][e];
            // The engine reads the gateway's messages; the gateway the engine's.
            for (writer, reader_version, side) in
                [(&corpora[g], engine, ReadingSide::Engine), (&corpora[e], gateway, ReadingSide::Gateway)]
            {
                for case in writer {
                    let Some((message, ..)) = case.message() else { continue };
                    if ReadingSide::of(message) != side {
                        continue;
                    }
                    cell.add(side, message, read(case, reader_version)?);
                }
            }
        }
    }
    let corpus_sizes = corpora.iter().map(Vec::len).collect();
    Ok(Matrix { releases, cells, corpus_sizes })
}

impl Matrix {
    /// `docs/reports/compatibility.md`.
    pub fn markdown(&self) -> String {
        let mut o = String::from(
            "# Compatibility across vLLM releases\n\n\
             Generated by `conformance compat --corpus golden/vllm --output docs/reports/compatibility.md` \
             from each release's own messages (`golden/vllm/<release>/`: what its own classes wrote \
             and its own decoder accepted, live captures included); \
             `cargo test -p conformance --test compat` fails when this file is stale. \
             Do not edit by hand.\n\n\
             A row is a gateway built for one release, a column an engine of another. \
             A cell holds both directions of that deployment: the gateway's messages (ADD, ABORT, \
             UTILITY, START_DP_WAVE, INIT) read by the engine's table, and the engine's (output \
             batches, utility outputs, the ready response, HELLO, READY) read by the gateway's.\n\n\
             - `✓ n`: all n messages read as written (fields only the reader has take their defaults);\n\
             - `drift`: read as written, with elements or keys the reader does not know passed over;\n\
             - `misread`: decoded, but a field both releases have holds another value than the \
             writer's (a positional field moved, or the writer omitted a field equal to its default \
             and the reader filled in a different default): silent corruption;\n\
             - `refused`: the reader's decoder refuses the message.\n\n\
             Why two releases differ on the wire: `conformance schema-diff A B` (docs/schema-diff.md).\n\n",
        );
        o.push_str("| gateway \\ engine |");
        for r in &self.releases {
            o.push_str(&format!(" {r} |"));
        }
        o.push_str("\n|---|");
        o.push_str(&"---|".repeat(self.releases.len()));
        o.push('\n');
        for (g, gateway) in self.releases.iter().enumerate() {
            o.push_str(&format!("| **{gateway}** |"));
            for cell in &self.cells[g] {
                o.push_str(&format!(" {} |", cell.summary()));
            }
            o.push('\n');
        }
        o.push_str("\nMessages per release (its own, accepted): ");
        let sizes: Vec<String> =
            self.releases.iter().zip(&self.corpus_sizes).map(|(r, n)| format!("{r}: {n}")).collect();
        o.push_str(&sizes.join(", "));
        o.push_str(".\n\n## Findings\n\nEvery cell that is not all `✓`, with each distinct finding and how many messages show it.\n");
        for (g, gateway) in self.releases.iter().enumerate() {
            for (e, engine) in self.releases.iter().enumerate() {
                let cell = &self.cells[g][e];
                if cell.findings.is_empty() {
                    continue;
                }
                o.push_str(&format!("\n### gateway {gateway}, engine {engine}: {}\n\n", cell.summary()));
                for ((reader, message, what), n) in &cell.findings {
                    o.push_str(&format!("- {} {message}, {what} ({n})\n", reader.as_str()));
                }
            }
        }
        o
    }

    /// The matrix as JSON: releases, and per cell its counts and findings.
    pub fn json(&self) -> Json {
        let cells: Vec<Json> = self
            .releases
            .iter()
            .enumerate()
            .flat_map(|(g, gateway)| {
                self.releases.iter().enumerate().map(move |(e, engine)| {
                    let c = &self.cells[g][e];
                    let findings: Vec<Json> = c
                        .findings
                        .iter()
                        .map(|((reader, message, what), n)| {
                            serde_json::json!({"reader": reader.as_str(), "message": message, "finding": what, "messages": n})
                        })
                        .collect();
                    serde_json::json!({
                        "gateway": gateway, "engine": engine, "messages": c.messages, "same": c.same,
                        "drift": c.drift, "misread": c.misread, "refused": c.refused, "findings": findings,
                    })
                })
            })
            .collect();
        serde_json::json!({"releases": self.releases, "cells": cells})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_elements_fold_but_positions_inside_an_element_stay() {
        assert_eq!(fold_indices("EngineCoreOutputs.outputs[12][18]"), "EngineCoreOutputs.outputs[*][18]");
        assert_eq!(fold_indices("EngineCoreRequest[22]"), "EngineCoreRequest[22]");
        assert_eq!(
            fold_indices("EngineCoreOutputs.outputs[0].num_nans_in_logits"),
            "EngineCoreOutputs.outputs[*].num_nans_in_logits"
        );
        assert_eq!(fold_indices("a.b"), "a.b");
    }

    #[test]
    fn a_shared_field_with_another_value_is_the_first_difference() {
        let w = serde_json::json!({"a": 1, "b": {"c": [1, 2]}, "only_writer": 3});
        let r = serde_json::json!({"a": 1, "b": {"c": [1, 5]}, "only_reader": 4});
        assert_eq!(first_difference(Some(&w), &r, ""), Some(".b.c[1]".into()));
        let same = serde_json::json!({"a": 1, "b": {"c": [1, 2]}, "only_reader": 4});
        assert_eq!(first_difference(Some(&w), &same, ""), None);
    }

    #[test]
    fn a_cell_with_a_refusal_says_so_before_its_drift() {
        let mut c = Cell::default();
        c.add(ReadingSide::Gateway, MessageKind::EngineCoreOutputs, Reading::Same);
        c.add(ReadingSide::Gateway, MessageKind::EngineCoreOutputs, Reading::Drift(vec!["x[1]".into()]));
        c.add(ReadingSide::Engine, MessageKind::EngineCoreRequest, Reading::Refused(RejectClass::Type, "p: d".into()));
        assert_eq!(c.summary(), "1 refused, 1 drift / 3");
        assert_eq!(Cell::default().summary(), "–");
    }
}
