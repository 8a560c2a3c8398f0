//! The ZeroMQ multipart layer: request-type bytes, engine identities, the
//! death sentinel, and which message travels in which frames.
//!
//! Wire facts (docs/wire-protocol.md §2.4, §3.1-§3.4):
//! - on the engine's input socket a message is `[type(1 byte), payload,
//!   aux...]` after the ROUTER's routing-identity frame: `00` ADD, `01`
//!   ABORT, `02` START_DP_WAVE, `03` UTILITY. `04` (EXECUTOR_FAILED) and
//!   `05` (WAKEUP) are engine-internal sentinels a client must never send;
//!   any other byte makes the engine's input thread die;
//! - engine identities are the engine index as 2 bytes little-endian;
//! - engine to client: `[payload, aux...]`, or the single frame
//!   `ENGINE_CORE_DEAD`;
//! - aux frames are referenced by index from the payload; index 0 is the
//!   payload frame itself; unreferenced extra frames are accepted.
#![warn(missing_docs)]

use crate::error::{Error, RejectClass};

/// The one-byte request type that precedes every payload on the input socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RequestType {
    /// `ADD` (`0x00`): an `EngineCoreRequest` follows.
    Add = 0,
    /// `ABORT` (`0x01`): a list of request ids follows.
    Abort = 1,
    /// `START_DP_WAVE` (`0x02`).
    StartDpWave = 2,
    /// `UTILITY` (`0x03`): a utility call follows.
    Utility = 3,
}

impl RequestType {
    /// The byte on the wire.
    pub fn byte(self) -> u8 {
        self as u8
    }

    /// The request-type frame: its one byte, as a static slice.
    pub fn frame(self) -> &'static [u8] {
        match self {
            RequestType::Add => &[0],
            RequestType::Abort => &[1],
            RequestType::StartDpWave => &[2],
            RequestType::Utility => &[3],
        }
    }

    /// vLLM's name for it (`ADD`, ...).
    pub fn name(self) -> &'static str {
        match self {
            RequestType::Add => "ADD",
            RequestType::Abort => "ABORT",
            RequestType::StartDpWave => "START_DP_WAVE",
            RequestType::Utility => "UTILITY",
        }
    }

    /// Parses a request-type frame: exactly one byte, a client-sendable type.
    pub fn from_frame(frame: &[u8]) -> Result<RequestType, Error> {
        let path = "request_type";
        match frame {
            [0] => Ok(RequestType::Add),
            [1] => Ok(RequestType::Abort),
            [2] => Ok(RequestType::StartDpWave),
            [3] => Ok(RequestType::Utility),
            [4] => Err(Error::new(RejectClass::Frames, path, "request type 0x04 (EXECUTOR_FAILED) is engine-internal")),
            [5] => Err(Error::new(RejectClass::Frames, path, "request type 0x05 (WAKEUP) is engine-internal")),
            [b] => Err(Error::new(RejectClass::Frames, path, format!("unknown request type byte 0x{b:02x}"))),
            other => Err(Error::new(
                RejectClass::Frames,
                path,
                format!("request-type frame must be 1 byte, got {}", other.len()),
            )),
        }
    }
}

/// The frame a dying engine sends on every output socket.
pub const ENGINE_CORE_DEAD: &[u8] = b"ENGINE_CORE_DEAD";

/// True when `frames` is the death sentinel.
pub fn is_engine_dead(frames: &[impl AsRef<[u8]>]) -> bool {
    crate::frames::with_frame_refs(frames, |frames| matches!(frames, [only] if *only == ENGINE_CORE_DEAD))
}

/// The routing identity of engine `index`: 2 bytes, little-endian.
pub fn engine_identity(index: u16) -> [u8; 2] {
    index.to_le_bytes()
}

/// The engine index from a 2-byte routing identity.
pub fn engine_index(identity: &[u8]) -> Result<u16, Error> {
    match identity {
        [a, b] => Ok(u16::from_le_bytes([*a, *b])),
        other => Err(Error::new(
            RejectClass::Frames,
            "identity",
            format!("engine identity must be 2 bytes, got {}", other.len()),
        )),
    }
}

/// Calls `f` with `frames` as byte slices: the decoders take any sequence
/// of buffers (`&[&[u8]]`, `&[Vec<u8>]`, a socket library's message
/// frames) and read `&[&[u8]]`. Up to 8 frames (every message the engines
/// send but tensor-heavy outputs) are viewed from the stack, more from one
/// allocation of a pointer per frame.
#[inline]
pub(crate) fn with_frame_refs<'a, F: AsRef<[u8]>, R>(frames: &'a [F], f: impl FnOnce(&[&'a [u8]]) -> R) -> R {
    const ON_STACK: usize = 8;
    if frames.len() <= ON_STACK {
        let mut buf: [&'a [u8]; ON_STACK] = [&[]; ON_STACK];
        for (b, x) in buf.iter_mut().zip(frames) {
            *b = x.as_ref();
        }
        f(&buf[..frames.len()])
    } else {
        let refs: Vec<&'a [u8]> = frames.iter().map(AsRef::as_ref).collect();
        f(&refs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_identity_is_two_bytes_little_endian() {
        // docs/wire-protocol.md §2.4 and §15.
        assert_eq!(engine_identity(0), [0, 0]);
        assert_eq!(engine_identity(1), [1, 0]);
        assert_eq!(engine_identity(258), [2, 1]);
        assert_eq!(engine_index(&[2, 1]), Ok(258));
        assert_eq!(engine_index(&[2]).unwrap_err().class, RejectClass::Frames);
    }

    #[test]
    fn request_type_frame_rejects_internal_and_unknown_bytes() {
        assert_eq!(RequestType::from_frame(&[3]), Ok(RequestType::Utility));
        for bad in [&[4u8][..], &[5], &[9], &[], &[0, 0]] {
            assert_eq!(RequestType::from_frame(bad).unwrap_err().class, RejectClass::Frames, "{bad:?}");
        }
    }

    #[test]
    fn death_sentinel_is_recognised_only_alone() {
        assert!(is_engine_dead(&[b"ENGINE_CORE_DEAD"]));
        assert!(!is_engine_dead(&[&b"ENGINE_CORE_DEAD"[..], b""]));
        assert_eq!(hex(ENGINE_CORE_DEAD), "454e47494e455f434f52455f44454144");
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }
}
