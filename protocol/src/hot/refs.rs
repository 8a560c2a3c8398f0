//! The borrowed forms [`decode_outputs`](super::decode_outputs) returns:
//! the batch and its outputs with their common fields as plain values or
//! views into the frames: `request_id` a `&str` into the payload,
//! `new_token_ids` an [`IntRun`] (MessagePack integers, validated, each
//! fitting `i64`, decoded as iterated), `stop_reason` a [`StopRef`],
//! `new_logprobs` three [`TensorRef`]s (dtype, shape and the bytes of an
//! ext 3 or `bin` body, or of the aux frame the index names).

use std::ops::Range;

use super::owned;
use crate::typed::{FinishReason, StopReason};
use crate::value::numpy_dtype;

/// A decoded `EngineCoreOutputs`, borrowing from its frames.
#[derive(Debug, Clone, PartialEq)]
pub struct Outputs<'a> {
    pub engine_index: i64,
    pub outputs: Vec<Output<'a>>,
    /// `timestamp` (an integer on the wire is widened).
    pub timestamp: f64,
    pub wave_complete: Option<i64>,
    pub start_wave: Option<i64>,
    pub weight_version: Option<&'a str>,
    /// The other non-nil batch fields (`scheduler_stats`, `utility_output`,
    /// `finished_requests`, an integer above `i64::MAX`), as the
    /// schema-driven decoder decodes them: `(field position, value)`, in
    /// wire order. Read by name, typed: [`Outputs::utility_output`], ...,
    /// [`Outputs::to_owned`].
    pub(crate) other: owned::Rare,
    /// Drift paths, as [`decode_message`](crate::decode_message) reports them.
    pub drift: Vec<String>,
    pub(crate) table: owned::Table,
}

/// One `EngineCoreOutput`.
#[derive(Debug, Clone, PartialEq)]
pub struct Output<'a> {
    pub request_id: &'a str,
    pub new_token_ids: IntRun<'a>,
    pub new_logprobs: Option<Box<LogprobsRef<'a>>>,
    pub finish_reason: Option<FinishReason>,
    pub stop_reason: Option<StopRef<'a>>,
    pub num_nans_in_logits: i64,
    /// The other non-nil fields, decoded by the schema-driven decoder:
    /// `(field position, value)`, in wire order. Read by name, typed:
    /// [`Output::error`], ..., [`Output::to_owned`].
    pub(crate) other: owned::Rare,
    /// Where the output's array lies in the payload frame (for
    /// [`decode_output_value`](super::decode_output_value)).
    pub raw: Range<usize>,
    pub(crate) table: owned::Table,
}

/// `stop_reason`, borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopRef<'a> {
    TokenId(i64),
    Text(&'a str),
}

impl StopRef<'_> {
    pub fn to_owned(self) -> StopReason {
        match self {
            StopRef::TokenId(t) => StopReason::TokenId(i128::from(t)),
            StopRef::Text(s) => StopReason::Text(s.to_string()),
        }
    }
}

/// A validated run of MessagePack integers (each fits `i64`), borrowed from
/// the payload and decoded as it is iterated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IntRun<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) len: usize,
}

impl<'a> IntRun<'a> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn iter(&self) -> IntIter<'a> {
        IntIter { bytes: self.bytes, left: self.len }
    }

    /// Appends the integers to `out` (a buffer a caller reuses).
    pub fn extend_into(&self, out: &mut Vec<i64>) {
        out.reserve(self.len);
        out.extend(self.iter());
    }

    pub fn to_vec(&self) -> Vec<i64> {
        let mut v = Vec::with_capacity(self.len);
        v.extend(self.iter());
        v
    }

    /// The MessagePack bytes of the elements.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

impl<'a> IntoIterator for IntRun<'a> {
    type Item = i64;
    type IntoIter = IntIter<'a>;
    fn into_iter(self) -> IntIter<'a> {
        self.iter()
    }
}

/// Iterates an [`IntRun`].
#[derive(Debug, Clone)]
pub struct IntIter<'a> {
    bytes: &'a [u8],
    left: usize,
}

impl Iterator for IntIter<'_> {
    type Item = i64;

    #[inline]
    fn next(&mut self) -> Option<i64> {
        if self.left == 0 {
            return None;
        }
        let (v, n) = read_int(self.bytes)?;
        self.bytes = &self.bytes[n..];
        self.left -= 1;
        Some(v)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for IntIter<'_> {}

/// One MessagePack integer that fits `i64` and its size; `None` for
/// anything else (a run holds only those, validated when it was read).
#[inline]
pub(super) fn read_int(b: &[u8]) -> Option<(i64, usize)> {
    let m = *b.first()?;
    let be = |n: usize| -> Option<u64> {
        let s = b.get(1..1 + n)?;
        Some(s.iter().fold(0u64, |acc, &x| (acc << 8) | x as u64))
    };
    Some(match m {
        0x00..=0x7f => (m as i64, 1),
        0xe0..=0xff => (m as i8 as i64, 1),
        0xcc => (be(1)? as i64, 2),
        0xcd => (be(2)? as i64, 3),
        0xce => (be(4)? as i64, 5),
        0xcf => (i64::try_from(be(8)?).ok()?, 9),
        0xd0 => (be(1)? as u8 as i8 as i64, 2),
        0xd1 => (be(2)? as u16 as i16 as i64, 3),
        0xd2 => (be(4)? as u32 as i32 as i64, 5),
        0xd3 => (be(8)? as i64, 9),
        _ => return None,
    })
}

/// A tensor `[dtype, shape, data]`, borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TensorRef<'a> {
    /// The dtype string as sent (`<i4`, `float32`).
    pub dtype: &'a str,
    /// The shape as sent (one dimension may be negative: inferred).
    pub shape: IntRun<'a>,
    /// The buffer: the ext-3 or `bin` body, or the whole aux frame.
    pub data: &'a [u8],
    /// The frame index when the data is an aux frame (0 is the payload).
    pub frame: Option<usize>,
}

impl TensorRef<'_> {
    /// The element size in bytes (the dtype was validated).
    pub fn item_size(&self) -> usize {
        numpy_dtype(self.dtype).map_or(1, |d| d.elem.size())
    }
}

/// `new_logprobs` (`LogprobsLists`), borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogprobsRef<'a> {
    pub logprob_token_ids: TensorRef<'a>,
    pub logprobs: TensorRef<'a>,
    pub sampled_token_ranks: TensorRef<'a>,
    pub cu_num_generated_tokens: Option<IntRun<'a>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_runs_decode_every_integer_form_that_fits_i64() {
        // 5, -3, 200 (cc), 1000 (cd), 70000 (ce), 2^40 (cf), -100 (d0),
        // -1000 (d1), -70000 (d2), -2^40 (d3).
        let bytes = [
            0x05, 0xfd, 0xcc, 200, 0xcd, 0x03, 0xe8, 0xce, 0x00, 0x01, 0x11, 0x70, 0xcf, 0, 0, 1, 0, 0, 0, 0, 0, 0xd0,
            0x9c, 0xd1, 0xfc, 0x18, 0xd2, 0xff, 0xfe, 0xee, 0x90, 0xd3, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0,
        ];
        let run = IntRun { bytes: &bytes, len: 10 };
        assert_eq!(run.to_vec(), [5, -3, 200, 1000, 70000, 1 << 40, -100, -1000, -70000, -(1i64 << 40)]);
        assert_eq!(run.iter().len(), 10);
    }
}
