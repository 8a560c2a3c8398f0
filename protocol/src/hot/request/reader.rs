//! The MessagePack primitives of the direct request decoder: a cursor over
//! the payload that reads the wire forms a request field may take (integers
//! in every form, floats as float64 or float32 widened, strings, `bin`,
//! ext, nil for `None`) and bails out (`Bail`: "not read here", the message
//! then goes to the reference path) on anything else. Arrays and maps count
//! against the nesting limit as the schema-driven decoder counts them;
//! declared lengths are checked against the bytes left before allocating.

use std::borrow::Cow;

use bytes::Bytes;

use super::int_runs::{int_run, read_int};
use super::Prompt;
use crate::decode::{check_tensor_shape, decode_sub, Limits};
use crate::schema::{TensorKind, Ty};
use crate::typed::wire::{Rel, WireType};
use crate::typed::{IntList, TokenArray, TokenIds, INT32_DTYPE, UINT32_DTYPE};
use crate::value::numpy_dtype;

/// "Not read here": the message goes to the reference path.
pub(super) struct Bail;

pub(super) type P<T> = Result<T, Bail>;

pub(super) struct Parser<'a, 'f, 'l> {
    pub(super) buf: &'a [u8],
    pub(super) pos: usize,
    /// The data frames (payload first), for aux-frame tensors.
    pub(super) frames: &'f [&'a [u8]],
    /// The same frames as shared buffers, when the caller holds them so:
    /// a prompt array is then a view of its frame.
    pub(super) shared: Option<&'f [Bytes]>,
    pub(super) limits: &'l Limits,
    pub(super) depth: usize,
    pub(super) tensor_budget: usize,
    pub(super) rel: Rel,
    pub(super) prompt: Prompt,
}

#[inline]
pub(super) fn string(b: &[u8]) -> P<String> {
    if b.is_ascii() {
        // SAFETY: ASCII is valid UTF-8.
        return Ok(unsafe { String::from_utf8_unchecked(b.to_vec()) });
    }
    std::str::from_utf8(b).map(str::to_owned).map_err(|_| Bail)
}

#[inline]
pub(super) fn be<const N: usize>(b: &[u8], at: usize) -> P<[u8; N]> {
    let s = b.get(at..at + N).ok_or(Bail)?;
    let mut a = [0u8; N];
    a.copy_from_slice(s);
    Ok(a)
}

impl Parser<'_, '_, '_> {
    #[inline]
    pub(super) fn peek(&self) -> P<u8> {
        self.buf.get(self.pos).copied().ok_or(Bail)
    }

    #[inline]
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Consumes a nil if one is next.
    #[inline]
    pub(super) fn nil_next(&mut self) -> bool {
        if self.buf.get(self.pos) == Some(&0xc0) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    #[inline]
    pub(super) fn enter(&mut self) -> P<()> {
        self.depth += 1;
        if self.depth > self.limits.max_depth {
            return Err(Bail);
        }
        Ok(())
    }

    /// A declared element count the remaining input can hold
    /// (`bytes_each` bytes each at least, as the reference decoder checks).
    #[inline]
    fn count(&self, n: usize, bytes_each: usize) -> P<usize> {
        if n.saturating_mul(bytes_each) > self.remaining() {
            return Err(Bail);
        }
        Ok(n)
    }

    /// An array header.
    #[inline]
    pub(super) fn array_len(&mut self) -> P<usize> {
        let b = self.peek()?;
        let (n, k) = match b {
            0x90..=0x9f => ((b & 0x0f) as usize, 1),
            0xdc => (u16::from_be_bytes(be(self.buf, self.pos + 1)?) as usize, 3),
            0xdd => (u32::from_be_bytes(be(self.buf, self.pos + 1)?) as usize, 5),
            _ => return Err(Bail),
        };
        self.pos += k;
        self.count(n, 1)
    }

    /// A map header.
    #[inline]
    pub(super) fn map_len(&mut self) -> P<usize> {
        let b = self.peek()?;
        let (n, k) = match b {
            0x80..=0x8f => ((b & 0x0f) as usize, 1),
            0xde => (u16::from_be_bytes(be(self.buf, self.pos + 1)?) as usize, 3),
            0xdf => (u32::from_be_bytes(be(self.buf, self.pos + 1)?) as usize, 5),
            _ => return Err(Bail),
        };
        self.pos += k;
        self.count(n, 2)
    }

    /// The bytes of a `str`, unchecked.
    #[inline]
    pub(super) fn str_bytes(&mut self) -> P<&[u8]> {
        let b = self.peek()?;
        let (n, k) = match b {
            0xa0..=0xbf => ((b & 0x1f) as usize, 1),
            0xd9 => (be::<1>(self.buf, self.pos + 1)?[0] as usize, 2),
            0xda => (u16::from_be_bytes(be(self.buf, self.pos + 1)?) as usize, 3),
            0xdb => (u32::from_be_bytes(be(self.buf, self.pos + 1)?) as usize, 5),
            _ => return Err(Bail),
        };
        let at = self.pos + k;
        let s = self.buf.get(at..at.checked_add(n).ok_or(Bail)?).ok_or(Bail)?;
        self.pos = at + n;
        Ok(s)
    }

    #[inline]
    pub(super) fn string(&mut self) -> P<String> {
        let b = self.str_bytes()?;
        string(b)
    }

    #[inline]
    pub(super) fn opt_string(&mut self) -> P<Option<String>> {
        if self.nil_next() {
            return Ok(None);
        }
        self.string().map(Some)
    }

    #[inline]
    pub(super) fn bool(&mut self) -> P<bool> {
        let v = match self.peek()? {
            0xc2 => false,
            0xc3 => true,
            _ => return Err(Bail),
        };
        self.pos += 1;
        Ok(v)
    }

    #[inline]
    pub(super) fn opt_bool(&mut self) -> P<Option<bool>> {
        if self.nil_next() {
            return Ok(None);
        }
        self.bool().map(Some)
    }

    /// An integer that fits `i64` (one above it, rare on the wire, is
    /// handed over: the reference path reads it into the struct's `i128`).
    #[inline]
    pub(super) fn int64(&mut self) -> P<i64> {
        let (v, k) = read_int(self.buf, self.pos)?;
        self.pos += k;
        Ok(v)
    }

    /// An `int` field's value, read by [`Self::int64`].
    #[inline]
    pub(super) fn int(&mut self) -> P<i128> {
        self.int64().map(i128::from)
    }

    #[inline]
    pub(super) fn opt_int(&mut self) -> P<Option<i128>> {
        if self.nil_next() {
            return Ok(None);
        }
        self.int().map(Some)
    }

    /// A `float` field: float64, float32 (widened) or an integer (as the
    /// typed conversion reads it).
    #[inline]
    pub(super) fn float(&mut self) -> P<f64> {
        match self.peek()? {
            0xcb => {
                let v = f64::from_be_bytes(be(self.buf, self.pos + 1)?);
                self.pos += 9;
                Ok(v)
            }
            0xca => {
                let v = f32::from_be_bytes(be(self.buf, self.pos + 1)?);
                self.pos += 5;
                Ok(v as f64)
            }
            0xcf => {
                let u = u64::from_be_bytes(be(self.buf, self.pos + 1)?);
                self.pos += 9;
                Ok(u as f64)
            }
            _ => self.int64().map(|i| i as f64),
        }
    }

    /// A `list[int]` one level down, every element fitting `i64` (one
    /// above it is handed over, as by [`Self::int64`]).
    pub(super) fn int_list(&mut self) -> P<Vec<i64>> {
        let n = self.array_len()?;
        self.enter()?;
        let mut out: Vec<i64> = Vec::with_capacity(n);
        self.pos = int_run(self.buf, self.pos, &mut out.spare_capacity_mut()[..n])?;
        // SAFETY: `int_run` wrote all `n` elements (it returns `Ok` only
        // then), and `n` is within the capacity.
        unsafe { out.set_len(n) };
        self.depth -= 1;
        Ok(out)
    }

    #[inline]
    pub(super) fn opt_int_list(&mut self) -> P<Option<IntList>> {
        if self.nil_next() {
            return Ok(None);
        }
        self.int_list().map(|xs| Some(IntList::from(xs)))
    }

    /// An ndarray prompt (`[dtype, shape, data]`), or nil, with the
    /// checks of vLLM's decode hook as the schema-driven decoder applies
    /// them (a dtype numpy parses, a shape the bytes fit, an aux index in
    /// range, the tensor budget); what it refuses is handed over. The ids
    /// are the frame's own bytes when the frames are shared, else copied
    /// once.
    pub(super) fn opt_token_array(&mut self) -> P<Option<TokenIds>> {
        if self.nil_next() {
            return Ok(None);
        }
        if self.array_len()? != 3 {
            return Err(Bail);
        }
        self.enter()?;
        let dtype_bytes = self.str_bytes()?;
        let dtype: Cow<'static, str> = match dtype_bytes {
            b"<i4" => Cow::Borrowed(INT32_DTYPE),
            b"=u4" => Cow::Borrowed(UINT32_DTYPE),
            other => Cow::Owned(std::str::from_utf8(other).map_err(|_| Bail)?.to_owned()),
        };
        let parsed = numpy_dtype(&dtype).ok_or(Bail)?;
        let dims = self.array_len()?;
        let mut shape = Vec::with_capacity(dims);
        for _ in 0..dims {
            shape.push(self.int64()?);
        }
        let (frame, range) = match self.peek()? {
            0xc7..=0xc9 | 0xd4..=0xd8 => {
                let (ty, body) = self.ext()?;
                if ty != 3 {
                    return Err(Bail);
                }
                (0, body)
            }
            0xc4..=0xc6 => (0, self.bin()?),
            _ => {
                let i = self.int64()?;
                let frame = usize::try_from(i).map_err(|_| Bail)?;
                let f = *self.frames.get(frame).ok_or(Bail)?;
                (frame, 0..f.len())
            }
        };
        let nbytes = range.len();
        if check_tensor_shape(TensorKind::Numpy, &shape, nbytes, parsed.elem.size()).is_err()
            || nbytes > self.tensor_budget
        {
            return Err(Bail);
        }
        self.tensor_budget -= nbytes;
        let data = match self.shared {
            Some(frames) => frames[frame].slice(range),
            None => Bytes::copy_from_slice(&self.frames[frame][range]),
        };
        self.depth -= 1;
        Ok(Some(TokenIds::from_array(TokenArray::checked(dtype, parsed, shape, data))))
    }

    /// An ext value: its type and where its body lies in the payload.
    fn ext(&mut self) -> P<(i8, std::ops::Range<usize>)> {
        let b = self.peek()?;
        let (n, k) = match b {
            0xd4 => (1, 1),
            0xd5 => (2, 1),
            0xd6 => (4, 1),
            0xd7 => (8, 1),
            0xd8 => (16, 1),
            0xc7 => (be::<1>(self.buf, self.pos + 1)?[0] as usize, 2),
            0xc8 => (u16::from_be_bytes(be(self.buf, self.pos + 1)?) as usize, 3),
            0xc9 => (u32::from_be_bytes(be(self.buf, self.pos + 1)?) as usize, 5),
            _ => return Err(Bail),
        };
        let ty = be::<1>(self.buf, self.pos + k)?[0] as i8;
        let at = self.pos + k + 1;
        let end = at.checked_add(n).ok_or(Bail)?;
        if end > self.buf.len() {
            return Err(Bail);
        }
        self.pos = end;
        Ok((ty, at..end))
    }

    /// A `bin` value: where its bytes lie in the payload.
    fn bin(&mut self) -> P<std::ops::Range<usize>> {
        let b = self.peek()?;
        let (n, k) = match b {
            0xc4 => (be::<1>(self.buf, self.pos + 1)?[0] as usize, 2),
            0xc5 => (u16::from_be_bytes(be(self.buf, self.pos + 1)?) as usize, 3),
            0xc6 => (u32::from_be_bytes(be(self.buf, self.pos + 1)?) as usize, 5),
            _ => return Err(Bail),
        };
        let at = self.pos + k;
        let end = at.checked_add(n).ok_or(Bail)?;
        if end > self.buf.len() {
            return Err(Bail);
        }
        self.pos = end;
        Ok(at..end)
    }

    /// A `list[str]` one level down.
    pub(super) fn str_list(&mut self) -> P<Vec<String>> {
        let n = self.array_len()?;
        self.enter()?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(self.string()?);
        }
        self.depth -= 1;
        Ok(out)
    }

    /// The value of `ty` (not nil) through the schema-driven decoder on its
    /// own bytes, then the typed conversion.
    fn sub<T: WireType>(&mut self, ty: &'static Ty) -> P<T> {
        let sub =
            decode_sub(ty, self.frames, self.pos, self.depth, self.tensor_budget, self.limits).map_err(|_| Bail)?;
        if sub.drift {
            return Err(Bail);
        }
        self.tensor_budget = sub.tensor_budget;
        self.pos = sub.end;
        T::from_value(&sub.value, None, self.rel).map_err(|_| Bail)
    }

    /// An optional field read by [`Self::sub`].
    #[inline]
    pub(super) fn opt_sub<T: WireType>(&mut self, ty: &'static Ty) -> P<Option<T>> {
        if self.nil_next() {
            return Ok(None);
        }
        self.sub::<Option<T>>(ty)
    }
}
