//! Drawing a crate's house: which of its top-level modules use which, read
//! from the sources, and the check that the drawing has no cycle (a module
//! that, through others, uses itself has no floor to stand on).
//!
//! A top-level module is a file `src/<name>.rs` or a directory
//! `src/<name>/` (all its files). Module `a` uses module `b` when code of
//! `a` names `crate::b` (also inside `use crate::{b::X, ...}`), or names an
//! item the crate root re-exports from `b` (`crate::Error`, with
//! `pub use error::Error` in `lib.rs`). Comments are not code, nor are a
//! file's unit tests (everything from `#[cfg(test)]` followed by `mod`,
//! which by this workspace's convention closes a file, and a module's
//! `tests.rs`, the file such a `mod tests;` names).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The modules of a crate and, per module, the modules it uses (with the
/// files that do, for the failure message).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Graph {
    /// `module -> (used module -> files of the module that use it)`.
    pub edges: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
}

/// Why a crate's sources could not be read.
#[derive(Debug)]
pub struct SourceReadError {
    /// The file or directory.
    pub path: PathBuf,
    /// What reading it said.
    pub error: std::io::Error,
}

impl std::fmt::Display for SourceReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.error)
    }
}

impl std::error::Error for SourceReadError {}

/// The graph of the crate at `manifest_dir` (its `src/`), after checking
/// it has no cycle: the body of each crate's architecture test, which
/// then states its own floors. Panics naming the files of every step of a
/// cycle, or the directory that does not read.
pub fn acyclic_crate(manifest_dir: &str) -> Graph {
    let g = Graph::of_crate(&Path::new(manifest_dir).join("src")).unwrap_or_else(|e| panic!("{e}"));
    if let Some(c) = g.cycle() {
        panic!("{manifest_dir}: {}", g.explain(&c));
    }
    g
}

impl Graph {
    /// A graph from `(module, used module)` pairs (tests of the checker).
    pub fn from_edges<'a>(edges: impl IntoIterator<Item = (&'a str, &'a str)>) -> Graph {
        let mut g = Graph::default();
        for (a, b) in edges {
            g.edges.entry(b.to_string()).or_default();
            g.edges.entry(a.to_string()).or_default().entry(b.to_string()).or_default();
        }
        g
    }

    /// The graph of the crate whose sources are in `src` (the directory
    /// holding `lib.rs` or `main.rs`).
    pub fn of_crate(src: &Path) -> Result<Graph, SourceReadError> {
        let read =
            |p: &Path| std::fs::read_to_string(p).map_err(|error| SourceReadError { path: p.to_path_buf(), error });
        let mut files: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
        let entries = std::fs::read_dir(src).map_err(|error| SourceReadError { path: src.to_path_buf(), error })?;
        for e in entries {
            let e = e.map_err(|error| SourceReadError { path: src.to_path_buf(), error })?;
            let path = e.path();
            let name = path.file_stem().and_then(|n| n.to_str()).unwrap_or_default().to_string();
            if path.is_dir() {
                let mut fs = Vec::new();
                rs_files(&path, &mut fs).map_err(|error| SourceReadError { path: path.clone(), error })?;
                files.insert(name, fs);
            } else if path.extension().is_some_and(|x| x == "rs") && name != "lib" && name != "main" {
                files.insert(name, vec![path]);
            }
        }
        let reexports = match read(&src.join("lib.rs")) {
            Ok(lib) => root_reexports(&lib),
            Err(_) => BTreeMap::new(),
        };
        let mut g = Graph::default();
        for (module, paths) in &files {
            let uses = g.edges.entry(module.clone()).or_default();
            for p in paths {
                let code = code_of(&read(p)?);
                let rel = p.strip_prefix(src).unwrap_or(p).display().to_string();
                for name in crate_paths(&code) {
                    let target = if files.contains_key(&name) { Some(&name) } else { reexports.get(&name) };
                    if let Some(t) = target.filter(|t| *t != module) {
                        uses.entry(t.clone()).or_default().insert(rel.clone());
                    }
                }
            }
        }
        Ok(g)
    }

    /// A cycle of modules (`[a, b, ..., a]`), if there is one.
    pub fn cycle(&self) -> Option<Vec<String>> {
        #[derive(Clone, Copy, PartialEq)]
        enum Mark {
            New,
            Open,
            Done,
        }
        let mut mark: BTreeMap<&str, Mark> = self.edges.keys().map(|k| (k.as_str(), Mark::New)).collect();
        fn visit<'a>(
            g: &'a Graph,
            m: &'a str,
            mark: &mut BTreeMap<&'a str, Mark>,
            stack: &mut Vec<&'a str>,
        ) -> Option<Vec<String>> {
            mark.insert(m, Mark::Open);
            stack.push(m);
            for next in g.edges.get(m).into_iter().flat_map(|u| u.keys()) {
                match mark.get(next.as_str()).copied().unwrap_or(Mark::New) {
                    Mark::Open => {
                        let at = stack.iter().position(|s| *s == next).unwrap_or(0);
                        let mut c: Vec<String> = stack[at..].iter().map(|s| s.to_string()).collect();
                        c.push(next.clone());
                        return Some(c);
                    }
                    Mark::New => {
                        if let Some(c) = visit(g, next, mark, stack) {
                            return Some(c);
                        }
                    }
                    Mark::Done => {}
                }
            }
            stack.pop();
            mark.insert(m, Mark::Done);
            None
        }
        let modules: Vec<&str> = self.edges.keys().map(String::as_str).collect();
        for m in modules {
            if mark[m] == Mark::New {
                if let Some(c) = visit(self, m, &mut mark, &mut Vec::new()) {
                    return Some(c);
                }
            }
        }
        None
    }

    /// A cycle as a failure message: each step with the files that make it.
    pub fn explain(&self, cycle: &[String]) -> String {
        let mut out = format!("import cycle: {}\n", cycle.join(" -> "));
        for w in cycle.windows(2) {
            let files = self.edges.get(&w[0]).and_then(|u| u.get(&w[1]));
            let files: Vec<&str> = files.into_iter().flatten().map(String::as_str).collect();
            out.push_str(&format!("  {} -> {}: {}\n", w[0], w[1], files.join(", ")));
        }
        out
    }

    /// The modules in an order where each comes after every module it uses
    /// (`None` when there is a cycle): the floors of the house, bottom up.
    pub fn floors(&self) -> Option<Vec<String>> {
        if self.cycle().is_some() {
            return None;
        }
        let mut placed: Vec<String> = Vec::new();
        while placed.len() < self.edges.len() {
            let next = self
                .edges
                .iter()
                .find(|(m, uses)| {
                    !placed.contains(m) && uses.keys().all(|u| placed.contains(u) || !self.edges.contains_key(u))
                })
                .map(|(m, _)| m.clone())?;
            placed.push(next);
        }
        Some(placed)
    }
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?;
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rs_files(&p, out)?;
        } else if p.extension().is_some_and(|x| x == "rs") && !p.ends_with("tests.rs") {
            out.push(p);
        }
    }
    Ok(())
}

/// The source without comments and without the unit tests that close it.
fn code_of(src: &str) -> String {
    let src = match src.find("#[cfg(test)]\nmod ") {
        Some(at) => &src[..at],
        None => src,
    };
    let mut out = String::with_capacity(src.len());
    for line in src.lines() {
        let code = match line.find("//") {
            // A `//` inside a string literal is rare in these sources and
            // only hides the rest of its line.
            Some(at) => &line[..at],
            None => line,
        };
        out.push_str(code);
        out.push('\n');
    }
    out
}

/// The first segment after every `crate::` (and every member of a
/// `crate::{...}` group).
fn crate_paths(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let ident = |s: &str| s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        // `engine_protocol::crate::` does not occur; `$crate::` is a macro's
        // own crate, the same as `crate::`.
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for member in group[..end].split(',') {
                let name = ident(member.trim());
                if !name.is_empty() {
                    out.insert(name);
                }
            }
        } else {
            let name = ident(rest);
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

/// `name -> module` for the items `lib.rs` re-exports (`pub use m::X;`,
/// `pub use m::{X, Y as Z};`).
fn root_reexports(lib: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let code = code_of(lib);
    let mut rest = code.as_str();
    while let Some(at) = rest.find("pub use ") {
        rest = &rest[at + "pub use ".len()..];
        let end = rest.find(';').unwrap_or(rest.len());
        let stmt: String = rest[..end].split_whitespace().collect::<Vec<_>>().join(" ");
        rest = &rest[end..];
        let stmt = stmt.strip_prefix("crate::").unwrap_or(&stmt);
        let Some((module, items)) = stmt.split_once("::") else { continue };
        let items = items.trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',') {
            let item = item.trim();
            let name = match item.split_once(" as ") {
                Some((_, alias)) => alias.trim(),
                None => item.rsplit("::").next().unwrap_or(item),
            };
            if !name.is_empty() && name != "*" && name != "self" {
                out.insert(name.to_string(), module.to_string());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_graph_without_a_cycle_has_floors_bottom_up() {
        let g = Graph::from_edges([("decode", "schema"), ("encode", "schema"), ("typed", "decode"), ("hot", "typed")]);
        assert_eq!(g.cycle(), None);
        assert_eq!(g.floors().unwrap(), ["schema", "decode", "encode", "typed", "hot"]);
    }

    #[test]
    fn a_planted_cycle_is_found_and_named_step_by_step() {
        let g = Graph::from_edges([("schema", "value"), ("value", "encode"), ("encode", "schema"), ("view", "value")]);
        let c = g.cycle().expect("the planted cycle");
        assert_eq!(c.first(), c.last());
        assert_eq!(c.len(), 4, "{c:?}");
        for m in ["schema", "value", "encode"] {
            assert!(c.contains(&m.to_string()), "{c:?}");
        }
        assert!(g.explain(&c).starts_with("import cycle: "));
        assert_eq!(g.floors(), None);
    }

    #[test]
    fn a_module_using_itself_is_no_cycle_but_two_using_each_other_are() {
        assert_eq!(Graph::from_edges([("a", "b")]).cycle(), None);
        assert!(Graph::from_edges([("a", "b"), ("b", "a")]).cycle().is_some());
    }

    #[test]
    fn crate_paths_read_groups_and_skip_comments_and_unit_tests() {
        let src = "use crate::{decode::Limits, error::Error};\n\
                   // crate::hidden in a comment\n\
                   fn f() { crate::value::x(); } // crate::trailing\n\
                   #[cfg(test)]\nmod tests { use crate::tested; }\n";
        let names = crate_paths(&code_of(src));
        assert_eq!(names.into_iter().collect::<Vec<_>>(), ["decode", "error", "value"]);
    }

    #[test]
    fn a_cycle_planted_in_a_crates_sources_is_drawn() {
        let src = std::env::temp_dir().join(format!("testkit-house-{}", std::process::id()));
        std::fs::create_dir_all(src.join("typed")).unwrap();
        std::fs::write(src.join("lib.rs"), "mod schema;\nmod typed;\npub use schema::Table;\n").unwrap();
        std::fs::write(src.join("schema.rs"), "pub struct Table;\n").unwrap();
        std::fs::write(src.join("typed/mod.rs"), "use crate::schema::Table;\nmod more;\n").unwrap();
        std::fs::write(src.join("typed/more.rs"), "// crate::nothing\n").unwrap();
        let g = Graph::of_crate(&src).unwrap();
        assert_eq!(g.cycle(), None);
        assert_eq!(g.floors().unwrap(), ["schema", "typed"]);
        // The plant: the schema uses the typed layer, through a root
        // re-export.
        std::fs::write(src.join("lib.rs"), "mod schema;\nmod typed;\npub use typed::Struct;\n").unwrap();
        std::fs::write(src.join("schema.rs"), "pub fn f(_: crate::Struct) {}\n").unwrap();
        let g = Graph::of_crate(&src).unwrap();
        let c = g.cycle().expect("the planted cycle");
        let text = g.explain(&c);
        assert!(text.contains("schema -> typed: schema.rs"), "{text}");
        assert!(text.contains("typed -> schema: typed/mod.rs"), "{text}");
        std::fs::remove_dir_all(&src).unwrap();
    }

    #[test]
    fn root_reexports_map_names_to_their_module() {
        let lib =
            "pub use decode::{Decoded, Limits};\npub use error::{Error as E, Outcome};\npub use schema::release;\n";
        let m = root_reexports(lib);
        assert_eq!(m["Limits"], "decode");
        assert_eq!(m["E"], "error");
        assert_eq!(m["release"], "schema");
        assert!(!m.contains_key("Error"));
    }
}
