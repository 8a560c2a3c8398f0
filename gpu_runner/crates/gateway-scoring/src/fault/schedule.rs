//! The fault schedule, as data: which messages of which direction get
//! which fault, with what probability, under one seed; and the pure
//! frame edits (truncate, corrupt) that faults make.
//!
//! A schedule is JSON (docs/runner/fault-wire.md "The fault-injecting wire"):
//!
//! ```json
//! {"seed": 7, "faults": [
//!   {"direction": "to_gateway", "kind": "outputs", "nth": 0, "fault": {"truncate": {"frame": 0, "keep": 3}}},
//!   {"direction": "to_engine", "kind": "add", "probability": 0.5, "fault": "drop"}
//! ]}
//! ```
//!
//! Message kinds come from the wire (docs/wire-protocol.md): gateway to
//! engine, the first frame is the request type (`00` ADD, `01` ABORT, `03`
//! UTILITY); engine to gateway, a frame set is an output batch unless it is
//! the single frame `ENGINE_CORE_DEAD`. Handshake and registration messages
//! are never faulted.

use engine_protocol::ENGINE_CORE_DEAD;
use serde::{Deserialize, Serialize};

/// Which way a message travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Gateway to engine (input: ADD, ABORT, UTILITY).
    ToEngine,
    /// Engine to gateway (output batches, the death sentinel).
    ToGateway,
}

impl Direction {
    pub fn name(self) -> &'static str {
        match self {
            Direction::ToEngine => "to_engine",
            Direction::ToGateway => "to_gateway",
        }
    }
}

/// What a message is, read from its frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FrameKind {
    Add,
    Abort,
    Utility,
    /// Any other request type byte.
    OtherInput,
    /// An `EngineCoreOutputs` batch (utility replies included).
    Outputs,
    /// The `ENGINE_CORE_DEAD` sentinel.
    Dead,
    /// In a schedule: every message of the direction.
    Any,
}

impl FrameKind {
    /// The kind of the frame set `frames` travelling `dir` (without the
    /// routing identity).
    pub fn of(dir: Direction, frames: &[Vec<u8>]) -> FrameKind {
        match dir {
            Direction::ToEngine => match frames.first().map(|f| f.as_slice()) {
                Some([0x00]) => FrameKind::Add,
                Some([0x01]) => FrameKind::Abort,
                Some([0x03]) => FrameKind::Utility,
                _ => FrameKind::OtherInput,
            },
            Direction::ToGateway => match frames {
                [only] if only.as_slice() == ENGINE_CORE_DEAD => FrameKind::Dead,
                _ => FrameKind::Outputs,
            },
        }
    }

    fn matches(self, actual: FrameKind) -> bool {
        self == FrameKind::Any || self == actual
    }
}

/// Which side's sockets a cut closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// The proxy's connections to the gateway (it sees its engine's
    /// input and output connections drop).
    Gateway,
    /// The proxy's sockets the engine dialled.
    Engine,
    Both,
}

/// One fault.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WireFault {
    /// Hold this message and every later one of its direction for `ms`
    /// (a slow link: order is kept).
    Delay {
        ms: u64,
    },
    Drop,
    /// Deliver the message twice.
    Duplicate,
    /// Deliver the next message of the direction first (this one follows
    /// it, or goes alone after `hold_ms` when nothing follows).
    Reorder {
        #[serde(default = "default_hold_ms")]
        hold_ms: u64,
    },
    /// Keep the first `keep` bytes of frame `frame`.
    Truncate {
        frame: usize,
        keep: usize,
    },
    /// Flip (xor 0xff) `bytes` bytes of frame `frame`, from `offset` or,
    /// without one, at positions drawn from the seed.
    Corrupt {
        frame: usize,
        bytes: usize,
        #[serde(default)]
        offset: Option<usize>,
    },
    /// Close the proxy's sockets to `side`; the message is not delivered.
    Cut {
        side: Side,
    },
    /// Decode the message (an ADD or an output batch), set one field
    /// ([`super::rewrite`]) and deliver it re-encoded: a planted bug.
    Rewrite(super::rewrite::Rewrite),
}

fn default_hold_ms() -> u64 {
    1000
}

impl WireFault {
    /// The fault's name (`delay`, `drop`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            WireFault::Delay { .. } => "delay",
            WireFault::Drop => "drop",
            WireFault::Duplicate => "duplicate",
            WireFault::Reorder { .. } => "reorder",
            WireFault::Truncate { .. } => "truncate",
            WireFault::Corrupt { .. } => "corrupt",
            WireFault::Cut { .. } => "cut",
            WireFault::Rewrite(_) => "rewrite",
        }
    }
}

/// One schedule entry: messages of `direction` and `kind`; the `nth` of
/// them (0-based; every one without `nth`), each with `probability`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleEntry {
    pub direction: Direction,
    #[serde(default = "any_kind")]
    pub kind: FrameKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nth: Option<u64>,
    #[serde(default = "certain")]
    pub probability: f64,
    pub fault: WireFault,
}

fn any_kind() -> FrameKind {
    FrameKind::Any
}

fn certain() -> f64 {
    1.0
}

/// A seeded list of entries; the first entry that fires on a message
/// applies (one fault per message).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schedule {
    #[serde(default)]
    pub seed: u64,
    pub faults: Vec<ScheduleEntry>,
}

/// Why a schedule cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScheduleError {
    #[error("fault schedule {origin}: {source}")]
    Json { origin: String, source: serde_json::Error },
    #[error("fault schedule {origin}: entry {entry}: probability {p} is not within 0..=1")]
    Probability { origin: String, entry: usize, p: f64 },
    #[error("fault schedule {origin}: entry {entry}: {why}")]
    Entry { origin: String, entry: usize, why: &'static str },
}

impl Schedule {
    /// Reads and checks a schedule; `origin` names it in errors.
    pub fn from_json(text: &str, origin: &str) -> Result<Schedule, ScheduleError> {
        let s: Schedule =
            serde_json::from_str(text).map_err(|source| ScheduleError::Json { origin: origin.into(), source })?;
        s.check(origin)?;
        Ok(s)
    }

    /// Checks what serde cannot: probabilities, kinds that fit the direction.
    pub fn check(&self, origin: &str) -> Result<(), ScheduleError> {
        for (i, e) in self.faults.iter().enumerate() {
            if !(0.0..=1.0).contains(&e.probability) {
                return Err(ScheduleError::Probability { origin: origin.into(), entry: i, p: e.probability });
            }
            let fits = match e.direction {
                Direction::ToEngine => !matches!(e.kind, FrameKind::Outputs | FrameKind::Dead),
                Direction::ToGateway => matches!(e.kind, FrameKind::Outputs | FrameKind::Dead | FrameKind::Any),
            };
            if !fits {
                return Err(ScheduleError::Entry {
                    origin: origin.into(),
                    entry: i,
                    why: "kind does not travel that way",
                });
            }
        }
        Ok(())
    }

    /// A schedule without faults: every message passes as it is.
    pub fn none() -> Schedule {
        Schedule { seed: 0, faults: vec![] }
    }

    /// A schedule of one entry that always fires.
    pub fn single(direction: Direction, kind: FrameKind, nth: Option<u64>, fault: WireFault) -> Schedule {
        Schedule { seed: 0, faults: vec![ScheduleEntry { direction, kind, nth, probability: 1.0, fault }] }
    }
}

/// A fault chosen for one message.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    /// The schedule entry's index.
    pub entry: usize,
    pub fault: WireFault,
}

/// Decides, message by message, which fault applies: counts each entry's
/// matches and rolls its probability on a seeded generator.
#[derive(Debug)]
pub struct Decider {
    schedule: Schedule,
    seen: Vec<u64>,
    rng: fastrand::Rng,
}

impl Decider {
    pub fn new(schedule: Schedule) -> Decider {
        let seen = vec![0; schedule.faults.len()];
        let rng = fastrand::Rng::with_seed(schedule.seed);
        Decider { schedule, seen, rng }
    }

    /// The fault for a message of `dir` and `kind`, if one fires.
    pub fn decide(&mut self, dir: Direction, kind: FrameKind) -> Option<Decision> {
        let mut chosen = None;
        for (i, e) in self.schedule.faults.iter().enumerate() {
            if e.direction != dir || !e.kind.matches(kind) {
                continue;
            }
            let index = self.seen[i];
            self.seen[i] += 1;
            if chosen.is_some() || e.nth.is_some_and(|n| n != index) {
                continue;
            }
            if e.probability >= 1.0 || self.rng.f64() < e.probability {
                chosen = Some(Decision { entry: i, fault: e.fault.clone() });
            }
        }
        chosen
    }

    /// A random position below `len` (corruption without an offset).
    pub fn position(&mut self, len: usize) -> usize {
        if len == 0 {
            0
        } else {
            self.rng.usize(..len)
        }
    }
}

/// Keeps the first `keep` bytes of frame `frame`; false when there is no
/// such frame (the message is left as it is).
pub fn truncate(frames: &mut [Vec<u8>], frame: usize, keep: usize) -> bool {
    match frames.get_mut(frame) {
        Some(f) => {
            f.truncate(keep);
            true
        }
        None => false,
    }
}

/// Flips the bytes of frame `frame` at `positions` (those past its end are
/// skipped); returns how many were flipped.
pub fn corrupt(frames: &mut [Vec<u8>], frame: usize, positions: &[usize]) -> usize {
    let Some(f) = frames.get_mut(frame) else { return 0 };
    let mut n = 0;
    for &p in positions {
        if let Some(b) = f.get_mut(p) {
            *b ^= 0xff;
            n += 1;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schedule_reads_from_json_with_its_defaults() {
        let s = Schedule::from_json(
            r#"{"seed": 7, "faults": [
                {"direction": "to_gateway", "kind": "outputs", "nth": 2, "fault": {"truncate": {"frame": 0, "keep": 3}}},
                {"direction": "to_engine", "fault": {"reorder": {}}},
                {"direction": "to_engine", "kind": "add", "probability": 0.5, "fault": {"cut": {"side": "gateway"}}}
            ]}"#,
            "test",
        )
        .unwrap();
        assert_eq!(s.faults[0].fault, WireFault::Truncate { frame: 0, keep: 3 });
        assert_eq!((s.faults[1].kind, s.faults[1].probability), (FrameKind::Any, 1.0));
        assert_eq!(s.faults[1].fault, WireFault::Reorder { hold_ms: 1000 });
        assert_eq!(s.faults[2].fault, WireFault::Cut { side: Side::Gateway });
    }

    #[test]
    fn a_schedule_with_a_bad_probability_or_kind_is_refused() {
        let p = r#"{"faults": [{"direction": "to_engine", "probability": 1.5, "fault": "drop"}]}"#;
        assert!(matches!(Schedule::from_json(p, "t"), Err(ScheduleError::Probability { entry: 0, .. })));
        let k = r#"{"faults": [{"direction": "to_engine", "kind": "outputs", "fault": "drop"}]}"#;
        assert!(matches!(Schedule::from_json(k, "t"), Err(ScheduleError::Entry { entry: 0, .. })));
        let unknown = r#"{"faults": [{"direction": "sideways", "fault": "drop"}]}"#;
        assert!(matches!(Schedule::from_json(unknown, "t"), Err(ScheduleError::Json { .. })));
    }

    #[test]
    fn kinds_are_read_from_the_type_byte_and_the_sentinel() {
        assert_eq!(FrameKind::of(Direction::ToEngine, &[vec![0], vec![0x90]]), FrameKind::Add);
        assert_eq!(FrameKind::of(Direction::ToEngine, &[vec![1], vec![0x90]]), FrameKind::Abort);
        assert_eq!(FrameKind::of(Direction::ToEngine, &[vec![3], vec![0x90]]), FrameKind::Utility);
        assert_eq!(FrameKind::of(Direction::ToEngine, &[vec![9]]), FrameKind::OtherInput);
        assert_eq!(FrameKind::of(Direction::ToGateway, &[ENGINE_CORE_DEAD.to_vec()]), FrameKind::Dead);
        assert_eq!(FrameKind::of(Direction::ToGateway, &[vec![0x93]]), FrameKind::Outputs);
    }

    #[test]
    fn the_nth_entry_fires_only_on_its_message() {
        let mut d = Decider::new(Schedule::single(Direction::ToEngine, FrameKind::Add, Some(1), WireFault::Drop));
        assert_eq!(d.decide(Direction::ToEngine, FrameKind::Abort), None);
        assert_eq!(d.decide(Direction::ToEngine, FrameKind::Add), None);
        assert_eq!(d.decide(Direction::ToGateway, FrameKind::Outputs), None);
        assert_eq!(d.decide(Direction::ToEngine, FrameKind::Add).map(|x| x.fault), Some(WireFault::Drop));
        assert_eq!(d.decide(Direction::ToEngine, FrameKind::Add), None);
    }

    #[test]
    fn the_same_seed_draws_the_same_faults() {
        let s = |seed| Schedule {
            seed,
            faults: vec![ScheduleEntry {
                direction: Direction::ToGateway,
                kind: FrameKind::Outputs,
                nth: None,
                probability: 0.3,
                fault: WireFault::Drop,
            }],
        };
        let draw = |seed| {
            let mut d = Decider::new(s(seed));
            (0..200).map(|_| d.decide(Direction::ToGateway, FrameKind::Outputs).is_some()).collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
        let fired = draw(7).iter().filter(|x| **x).count();
        assert!((30..90).contains(&fired), "{fired} of 200 at p=0.3");
    }

    #[test]
    fn truncate_and_corrupt_edit_only_the_named_frame() {
        let mut f = vec![vec![1, 2, 3, 4], vec![5, 6]];
        assert!(truncate(&mut f, 0, 2));
        assert!(!truncate(&mut f, 5, 1));
        assert_eq!(corrupt(&mut f, 1, &[0, 9]), 1);
        assert_eq!(f, vec![vec![1, 2], vec![0xfa, 6]]);
    }
}
