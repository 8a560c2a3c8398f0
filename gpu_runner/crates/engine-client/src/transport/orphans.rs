//! What an engine can make the gateway hold with outputs it should not
//! send: outputs for request ids the gateway does not know, and anything on
//! its output connection after it died (docs/limits.md "Limits on the
//! suite's peers", docs/runner/transport.md "Failure paths").
//!
//! Wire facts relied on (vLLM 0.32.0 `vllm/v1/engine/core.py`):
//!
//! - an engine sends outputs only for requests it was given; the ones a
//!   gateway does not know are leftovers of a previous gateway process,
//!   still queued in the engine's PUSH, and one ABORT for each id stops the
//!   engine generating them. Their number is about the requests left in the
//!   engine times the steps until the ABORT lands: hundreds to thousands of
//!   outputs, never an endless stream;
//! - `ENGINE_CORE_DEAD` is the last frame a dying engine pushes (its output
//!   thread sends it and the process exits), so nothing legitimate follows
//!   it; a connection that dropped carries nothing more either.
//!
//! So: the unknown ids aborted are remembered up to [`ORPHAN_IDS_REMEMBERED`]
//! ids and [`ORPHAN_ID_BYTES_REMEMBERED`] bytes (past that, new unknown ids
//! are counted, neither remembered nor aborted); an engine incarnation that
//! sends more than [`DEFAULT_ORPHAN_FLOOD_LIMIT`] outputs for unknown ids
//! (`ClientConfig::orphan_flood_limit`) is ended with
//! [`super::DeathCause::OrphanFlood`]; a dead engine's output messages are
//! counted and dropped undecoded, and after [`MAX_MESSAGES_AFTER_DEATH`] of
//! them its output socket is closed.

use std::collections::HashSet;

/// How many distinct unknown request ids the gateway remembers having
/// aborted (each is aborted once). Past it, new unknown ids are still
/// counted (`ClientStats::orphan_outputs`) but neither remembered nor
/// aborted, so a flood of distinct ids costs a bounded set.
pub const ORPHAN_IDS_REMEMBERED: usize = 4096;

/// The bytes of the unknown ids remembered, all together (an id's length is
/// the engine's choice): 1 MiB. Past it, as past [`ORPHAN_IDS_REMEMBERED`].
pub const ORPHAN_ID_BYTES_REMEMBERED: usize = 1 << 20;

/// The default of `ClientConfig::orphan_flood_limit`: outputs for unknown
/// request ids one engine incarnation (from its HELLO) may send before it is
/// ended with `DeathCause::OrphanFlood`. 100 000 is about 400 leftover
/// outputs for each of 256 requests a previous gateway left running: far
/// above what a previous gateway's leftovers come to before the ABORTs
/// land. Late outputs of requests this gateway finished or aborted itself
/// are not counted against it.
pub const DEFAULT_ORPHAN_FLOOD_LIMIT: u64 = 100_000;

/// Output messages of a dead engine counted (and dropped, undecoded) before
/// the gateway closes that engine's output socket (what its receive loop had
/// already queued, at most `INBOUND_QUEUE` more, is dropped the same way).
/// Nothing legitimate
/// follows a death, so this only bounds the time a hostile engine can make
/// the gateway spend reading.
pub const MAX_MESSAGES_AFTER_DEATH: u64 = 1000;

/// The unknown ids the gateway aborted, bounded in count and bytes.
#[derive(Debug, Default)]
pub(crate) struct Remembered {
    ids: HashSet<String>,
    bytes: usize,
}

impl Remembered {
    /// Whether an output for unknown `id` should make the gateway abort it
    /// now: the first time it is seen, while there is room to remember it.
    pub(crate) fn first_sight(&mut self, id: &str) -> bool {
        if self.ids.contains(id)
            || self.ids.len() >= ORPHAN_IDS_REMEMBERED
            || self.bytes + id.len() > ORPHAN_ID_BYTES_REMEMBERED
        {
            return false;
        }
        self.bytes += id.len();
        self.ids.insert(id.to_string());
        true
    }

    /// Forgets `id` (the gateway now sends a request of that id itself).
    pub(crate) fn forget(&mut self, id: &str) {
        if self.ids.remove(id) {
            self.bytes -= id.len();
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.ids.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_remembered_ids_stop_at_their_count_and_byte_limits() {
        let mut r = Remembered::default();
        for i in 0..ORPHAN_IDS_REMEMBERED + 10 {
            let first = r.first_sight(&format!("x{i}"));
            assert_eq!(first, i < ORPHAN_IDS_REMEMBERED, "{i}");
        }
        assert!(!r.first_sight("x0"), "an id is aborted once");
        assert_eq!(r.len(), ORPHAN_IDS_REMEMBERED);
        let mut r = Remembered::default();
        let long = "y".repeat(ORPHAN_ID_BYTES_REMEMBERED / 2 + 1);
        assert!(r.first_sight(&long));
        assert!(!r.first_sight(&format!("{long}z")), "past the byte limit");
        r.forget(&long);
        assert_eq!((r.len(), r.bytes), (0, 0));
    }
}
