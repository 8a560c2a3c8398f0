//! A direct decoder of TokenSpeed's output batch (`BatchTokenIDOutSlim`)
//! into the typed struct, for a gateway's output loop: bytes straight into
//! the columns, no [`crate::Value`] tree.
//!
//! [`decode_batch`] gives the verdict, drift and struct of
//! [`crate::typed::tokenspeed::decode_typed`] on the same frames and
//! limits. It reads only the common shape and hands anything else, whole,
//! to that reference path, whose result it returns:
//!
//! - one frame (the batch has no tensors: docs/tokenspeed-wire.md §7.1);
//! - a tagged array (`["BatchTokenIDOutSlim", ...]`, §3) with exactly the
//!   release's fields (so no drift and no defaults to fill: 8 columns, then
//!   in 0.1.1 `engine_index` and the four load integers);
//! - `rids` nil or a list of `str`; the id columns lists of integers that
//!   fit `i64`; `finished_reasons` a list of `str`; the logprob values
//!   float64 (msgspec also takes an integer or a float32 there: those
//!   batches go to the reference path);
//! - nesting within the depth limit (the root struct is level 1, a column
//!   level 2, a row's ids level 3) and no bytes after the batch.
//!
//! Both versions' goldens and a fuzz target (`tokenspeed_outputs`, oracle
//! `engine_testkit::oracle::tokenspeed_outputs`) hold the two paths to the
//! same result.

use crate::decode::Limits;
use crate::error::Error;
use crate::msgpack::{Reader, Token};
use crate::schema::ReleaseSchema;
use crate::typed::tokenspeed::{decode_typed, BatchTokenIDOutSlim};
use crate::typed::IntList;

/// "Not read here": the frames go to the reference path.
struct Bail;

type P<T> = Result<T, Bail>;

/// Decodes the frames of one `BatchTokenIDOutSlim` of `release` (module
/// docs): the struct and the drift paths, or the reference path's error.
pub fn decode_batch(
    release: &'static ReleaseSchema,
    frames: &[impl AsRef<[u8]>],
    limits: &Limits,
) -> Result<(BatchTokenIDOutSlim, Vec<String>), Error> {
    crate::frames::with_frame_refs(frames, |frames| {
        if let Some(b) = decode_batch_direct(release, frames, limits) {
            return Ok((b, Vec::new()));
        }
        decode_typed::<BatchTokenIDOutSlim>(release, frames, limits)
    })
}

/// The direct path alone: the struct when it reads the batch itself,
/// `None` when it hands the frames to the reference path (for the
/// differential tests and the fuzz target, which check that the direct
/// path is the one taken).
pub fn decode_batch_direct(
    release: &'static ReleaseSchema,
    frames: &[&[u8]],
    limits: &Limits,
) -> Option<BatchTokenIDOutSlim> {
    if !release.is_tokenspeed() {
        return None;
    }
    let schema = release.engine_core_outputs.as_struct()?;
    let fields = schema.fields.len();
    // The layout read here: the 8 columns, then the 0.1.1 tail.
    let tail = match fields {
        8 => false,
        13 => true,
        _ => return None,
    };
    let [payload] = frames else { return None };
    if limits.max_depth < 3 || limits.max_frames < 1 || payload.len() > limits.max_frame_bytes {
        return None;
    }
    let mut p = Parser { r: Reader::new(payload) };
    let b = p.batch(schema.tag()?, fields, tail).ok()?;
    (p.r.remaining() == 0).then_some(b)
}

struct Parser<'a> {
    r: Reader<'a>,
}

impl<'a> Parser<'a> {
    fn token(&mut self) -> P<Token<'a>> {
        self.r.token().map_err(|_| Bail)
    }

    /// An array header whose count the remaining bytes can hold (one byte
    /// an element at least).
    fn array(&mut self) -> P<usize> {
        match self.token()? {
            Token::Array(n) if n as usize <= self.r.remaining() => Ok(n as usize),
            _ => Err(Bail),
        }
    }

    fn str(&mut self) -> P<String> {
        match self.token()? {
            Token::Str(s) => std::str::from_utf8(s).map(str::to_owned).map_err(|_| Bail),
            _ => Err(Bail),
        }
    }

    fn int(&mut self) -> P<i64> {
        match self.token()? {
            Token::Int(v) => Ok(v),
            _ => Err(Bail),
        }
    }

    fn list<T>(&mut self, mut item: impl FnMut(&mut Self) -> P<T>) -> P<Vec<T>> {
        let n = self.array()?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(item(self)?);
        }
        Ok(out)
    }

    /// A `list[int]` whose elements fit `i64` (one above it, rare, goes to
    /// the reference path).
    fn ints(&mut self) -> P<IntList> {
        self.list(Self::int).map(IntList::from)
    }

    fn wide_int(&mut self) -> P<Option<i128>> {
        self.int().map(|v| Some(i128::from(v)))
    }

    fn floats(&mut self) -> P<Vec<f64>> {
        self.list(|p| match p.token()? {
            Token::F64(v) => Ok(v),
            _ => Err(Bail),
        })
    }

    /// The tagged array: `tag`, then `fields` fields.
    fn batch(&mut self, tag: &str, fields: usize, tail: bool) -> P<BatchTokenIDOutSlim> {
        if self.array()? != fields + 1 || self.str()? != tag {
            return Err(Bail);
        }
        let rids = if self.r.peek_byte() == Some(0xc0) {
            self.r.bump();
            None
        } else {
            Some(self.list(Self::str)?)
        };
        let mut b = BatchTokenIDOutSlim {
            rids,
            output_ids: self.list(Self::ints)?,
            finished_reasons: self.list(Self::str)?,
            prompt_tokens: self.ints()?,
            completion_tokens: self.ints()?,
            cached_tokens: self.ints()?,
            output_token_logprobs_val: self.list(Self::floats)?,
            output_token_logprobs_idx: self.list(Self::ints)?,
            ..BatchTokenIDOutSlim::default()
        };
        if tail {
            b.engine_index = self.wide_int()?;
            b.num_running = self.wide_int()?;
            b.num_waiting = self.wide_int()?;
            b.kv_active_pages = self.wide_int()?;
            b.kv_total_pages = self.wide_int()?;
        }
        Ok(b)
    }
}
