//! Hex, as golden cases carry frames (docs/case-format.md §4: each frame a
//! lowercase hex string) and as test sources and failure messages write
//! bytes.

use std::fmt;

/// Why a string is not hex: where and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HexError {
    /// A character that is not a hex digit, at this character offset (of
    /// the string as given, whitespace included).
    BadDigit { at: usize, found: char },
    /// An odd number of hex digits.
    OddLength { digits: usize },
}

impl fmt::Display for HexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HexError::BadDigit { at, found } => write!(f, "{found:?} at offset {at} is not a hex digit"),
            HexError::OddLength { digits } => write!(f, "odd number of hex digits ({digits})"),
        }
    }
}

impl std::error::Error for HexError {}

/// Lowercase hex of `bytes`.
pub fn encode(bytes: impl AsRef<[u8]>) -> String {
    hex::encode(bytes)
}

/// The bytes of a hex string (either case). Strict: no whitespace (a
/// golden frame is one unbroken string).
pub fn decode(s: &str) -> Result<Vec<u8>, HexError> {
    if let Some((at, found)) = s.char_indices().find(|(_, c)| !c.is_ascii_hexdigit()) {
        return Err(HexError::BadDigit { at: s[..at].chars().count(), found });
    }
    if !s.len().is_multiple_of(2) {
        return Err(HexError::OddLength { digits: s.len() });
    }
    hex::decode(s).map_err(|_| HexError::OddLength { digits: s.len() })
}

/// The bytes of hex written for people: whitespace between digits (and
/// inside a byte) is ignored, so a payload can be split at its fields.
pub fn decode_spaced(s: &str) -> Result<Vec<u8>, HexError> {
    let mut digits = String::with_capacity(s.len());
    for (at, c) in s.chars().enumerate() {
        if c.is_whitespace() {
            continue;
        }
        if !c.is_ascii_hexdigit() {
            return Err(HexError::BadDigit { at, found: c });
        }
        digits.push(c);
    }
    decode(&digits)
}

/// [`decode_spaced`] for hex literals in tests: panics naming the error.
#[track_caller]
pub fn unhex(s: &str) -> Vec<u8> {
    decode_spaced(s).unwrap_or_else(|e| panic!("test hex: {e}"))
}

/// Why a case's `frames` are not a list of hex frames: which element.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FramesError {
    /// `frames` is not an array.
    #[error("`frames` must be an array of hex strings")]
    NotArray,
    /// `frames[index]` is not a string.
    #[error("frames[{index}] is not a string")]
    NotString { index: usize },
    /// `frames[index]` is a string but not hex.
    #[error("frames[{index}] is not hex: {error}")]
    NotHex {
        index: usize,
        #[source]
        error: HexError,
    },
}

/// The bytes of a hex frame list (`frames` of a case): each element must
/// be a hex string. Errors name the element (`frames[2]`).
pub fn decode_frames(frames: &serde_json::Value) -> Result<Vec<Vec<u8>>, FramesError> {
    let serde_json::Value::Array(xs) = frames else {
        return Err(FramesError::NotArray);
    };
    xs.iter()
        .enumerate()
        .map(|(index, x)| {
            let s = x.as_str().ok_or(FramesError::NotString { index })?;
            decode(s).map_err(|error| FramesError::NotHex { index, error })
        })
        .collect()
}

/// Frames for a failure message: `[hex, hex, ...]`, each frame cut after
/// `max` bytes with its length noted.
pub fn frames_shown<F: AsRef<[u8]>>(frames: &[F], max: usize) -> String {
    let shown: Vec<String> = frames
        .iter()
        .map(|f| {
            let f = f.as_ref();
            if f.len() > max {
                format!("{}...({} bytes)", encode(&f[..max]), f.len())
            } else {
                encode(f)
            }
        })
        .collect();
    format!("[{}]", shown.join(", "))
}
