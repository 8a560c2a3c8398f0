//! Files from elsewhere: scenario, expectations and corpus files are data
//! someone else wrote (another project's repository, a bug report), read
//! with limits, and the names they give never become paths outside the
//! directory the suite writes into (docs/limits.md "Files the suite
//! reads").
//!
//! - A file is read up to [`MAX_INPUT_FILE_BYTES`]; a longer one is
//!   refused before it is parsed.
//! - JSON is refused when nested deeper than [`MAX_JSON_DEPTH`] (scanned
//!   before parsing; serde_json's own recursion limit, 128, would refuse
//!   it too, later and with a less useful message).
//! - A name that becomes a file or directory name (a scenario's, under
//!   `--record`) is one plain path component: not empty, not `.` or `..`,
//!   no `/` or `\`, no control characters, at most [`MAX_NAME_BYTES`].

use std::io::Read;
use std::path::{Path, PathBuf};

/// The largest scenario, expectations or corpus file read.
pub const MAX_INPUT_FILE_BYTES: u64 = 16 * 1024 * 1024;
/// The deepest JSON nesting read (the committed files nest at most 8).
pub const MAX_JSON_DEPTH: usize = 64;
/// The longest name used as a path component.
pub const MAX_NAME_BYTES: usize = 128;

/// Why a file or a name from one was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Refused {
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file is longer than the limit.
    #[error("{}: longer than the limit of {limit} bytes", path.display())]
    TooLarge { path: PathBuf, limit: u64 },
    /// The file is not UTF-8.
    #[error("{}: not UTF-8 text", path.display())]
    NotText { path: PathBuf },
    /// JSON nested deeper than the limit.
    #[error("JSON nested deeper than {limit} levels (at byte {at})")]
    TooDeep { limit: usize, at: usize },
    /// A name that cannot be a path component.
    #[error("name {name:?} cannot be a file name: {why}")]
    Name { name: String, why: &'static str },
}

/// The text of `path`, refused when longer than `limit` bytes (read
/// through a `take`, so a huge or endless file costs at most `limit`).
pub fn read_text(path: &Path, limit: u64) -> Result<String, Refused> {
    let io = |source| Refused::Io { path: path.to_path_buf(), source };
    let f = std::fs::File::open(path).map_err(io)?;
    let mut buf = Vec::new();
    f.take(limit + 1).read_to_end(&mut buf).map_err(io)?;
    if buf.len() as u64 > limit {
        return Err(Refused::TooLarge { path: path.to_path_buf(), limit });
    }
    String::from_utf8(buf).map_err(|_| Refused::NotText { path: path.to_path_buf() })
}

/// Refuses JSON text nested deeper than `limit` (arrays and objects;
/// brackets inside strings do not count), at the byte that passes it
/// ([`engine_protocol::validate::json_text_past_depth`]).
pub fn check_json_depth(text: &str, limit: usize) -> Result<(), Refused> {
    match engine_protocol::validate::json_text_past_depth(text, limit) {
        Some(at) => Err(Refused::TooDeep { limit, at }),
        None => Ok(()),
    }
}

/// `name` when it can be one path component, else why not.
pub fn path_component(name: &str) -> Result<&str, Refused> {
    let why = if name.is_empty() {
        Some("empty")
    } else if name == "." || name == ".." {
        Some("a relative directory")
    } else if name.contains(['/', '\\']) {
        Some("contains a path separator")
    } else if name.chars().any(char::is_control) {
        Some("contains a control character")
    } else if name.len() > MAX_NAME_BYTES {
        Some("longer than 128 bytes")
    } else {
        None
    };
    match why {
        Some(why) => Err(Refused::Name { name: name.chars().take(MAX_NAME_BYTES).collect(), why }),
        None => Ok(name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_over_the_limit_is_refused_before_it_is_read_whole() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.json");
        std::fs::write(&p, vec![b' '; 1025]).unwrap();
        assert!(matches!(read_text(&p, 1024), Err(Refused::TooLarge { limit: 1024, .. })));
        assert_eq!(read_text(&p, 1025).unwrap().len(), 1025);
    }

    #[test]
    fn an_endless_file_costs_at_most_the_limit() {
        // /dev/zero never ends: the read stops one byte past the limit.
        let e = read_text(Path::new("/dev/zero"), 4096).unwrap_err();
        assert!(e.to_string().contains("longer than the limit of 4096 bytes"), "{e}");
    }

    #[test]
    fn deeply_nested_json_is_refused_with_its_limit() {
        let deep = format!("{}{}", "[".repeat(65), "]".repeat(65));
        assert!(matches!(check_json_depth(&deep, 64), Err(Refused::TooDeep { limit: 64, at: 64 })));
        let ok = format!("{}{}", "[".repeat(64), "]".repeat(64));
        check_json_depth(&ok, 64).unwrap();
    }

    #[test]
    fn brackets_inside_strings_do_not_count_toward_depth() {
        check_json_depth(r#"{"a": "[[[[[[[[\"[[[[", "b": [1]}"#, 2).unwrap();
    }

    #[test]
    fn names_with_separators_dots_or_control_characters_are_not_path_components() {
        for bad in ["", ".", "..", "../../etc", "a/b", "a\\b", "a\nb", "a\u{7}", &"x".repeat(129)] {
            assert!(path_component(bad).is_err(), "{bad:?}");
        }
        assert_eq!(path_component("stop_strings-2").unwrap(), "stop_strings-2");
    }
}
