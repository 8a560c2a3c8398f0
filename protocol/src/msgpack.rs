//! MessagePack at the token level: a bounds-checked reader over a byte slice
//! and a writer that picks the byte forms msgspec 0.23 picks.
//!
//! Wire facts relied on (MessagePack spec; msgspec behaviour verified in
//! docs/wire-protocol.md §5.5-§5.8):
//! - integers are written in their smallest form, non-negative values always
//!   with the unsigned markers (`cc`..`cf`), negative ones with `d0`..`d3`;
//! - floats are always written as float64 (`cb`); float32 (`ca`) is accepted
//!   on read and widened exactly;
//! - `str` (`a0`-`bf`, `d9`-`db`) and `bin` (`c4`-`c6`) are distinct types;
//! - maps for structs of more than 15 fields use a `map16` header (`de`)
//!   whatever the entry count; that choice is the caller's (see `encode`).
//!
//! Markers are classified with `rmp::Marker`; writes go through `rmp::encode`.
//! The reader never allocates: strings, binaries and ext bodies are borrowed
//! from the input, and every declared length is checked against the bytes
//! that remain before the caller can act on it.
#![warn(missing_docs)]

use rmp::Marker;

/// One MessagePack token, with borrowed payloads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Token<'a> {
    /// `nil`.
    Nil,
    /// `true` / `false`.
    Bool(bool),
    /// Any integer that fits `i64`.
    Int(i64),
    /// A non-negative integer above `i64::MAX`.
    UInt(u64),
    /// A float32.
    F32(f32),
    /// A float64.
    F64(f64),
    /// UTF-8 is not checked here: the typed decoder checks it where it
    /// matters (msgspec rejects invalid UTF-8 in `str`).
    Str(&'a [u8]),
    /// A bin's bytes.
    Bin(&'a [u8]),
    /// An array header: its element count (the elements follow).
    Array(u32),
    /// A map header: its entry count (keys and values follow).
    Map(u32),
    /// An ext: its type and data.
    Ext(i8, &'a [u8]),
}

impl Token<'_> {
    /// The MessagePack type name used in error messages (msgspec's words).
    pub fn type_name(&self) -> &'static str {
        match self {
            Token::Nil => "null",
            Token::Bool(_) => "bool",
            Token::Int(_) | Token::UInt(_) => "int",
            Token::F32(_) | Token::F64(_) => "float",
            Token::Str(_) => "str",
            Token::Bin(_) => "bytes",
            Token::Array(_) => "array",
            Token::Map(_) => "object",
            Token::Ext(..) => "ext",
        }
    }
}

/// Why the reader stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadError {
    /// The input ends inside a token or inside a declared length.
    Truncated,
    /// Byte `0xc1`, which MessagePack reserves and never uses.
    ReservedMarker,
}

/// A cursor over one MessagePack buffer.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Whether every byte was consumed.
    pub fn is_empty(&self) -> bool {
        self.pos == self.buf.len()
    }

    /// The next byte, without consuming it.
    pub fn peek_byte(&self) -> Option<u8> {
        self.buf.get(self.pos).copied()
    }

    /// Consumes one byte already seen with `peek_byte`.
    #[inline]
    pub fn bump(&mut self) {
        debug_assert!(self.pos < self.buf.len());
        self.pos += 1;
    }

    /// Fast path for integers (the bulk of token-id lists): positive and
    /// negative fixints and the unsigned forms. `None` when the next token is
    /// something else (the caller then uses `token`).
    #[inline]
    pub fn small_int(&mut self) -> Option<i64> {
        let b = *self.buf.get(self.pos)?;
        let rest = &self.buf[self.pos + 1..];
        let (v, n) = match b {
            0x00..=0x7f => (b as i64, 1),
            0xe0..=0xff => (b as i8 as i64, 1),
            0xcc if !rest.is_empty() => (rest[0] as i64, 2),
            0xcd if rest.len() >= 2 => (u16::from_be_bytes([rest[0], rest[1]]) as i64, 3),
            0xce if rest.len() >= 4 => (u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as i64, 5),
            _ => return None,
        };
        self.pos += n;
        Some(v)
    }

    #[inline]
    fn take(&mut self, n: usize) -> Result<&'a [u8], ReadError> {
        if self.remaining() < n {
            return Err(ReadError::Truncated);
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    #[inline]
    fn be<const N: usize>(&mut self) -> Result<[u8; N], ReadError> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    /// Reads one token. Container tokens only carry their declared length;
    /// the caller reads the elements.
    #[inline]
    pub fn token(&mut self) -> Result<Token<'a>, ReadError> {
        let b = self.take(1)?[0];
        Ok(match Marker::from_u8(b) {
            Marker::FixPos(v) => Token::Int(v as i64),
            Marker::FixNeg(v) => Token::Int(v as i64),
            Marker::Null => Token::Nil,
            Marker::True => Token::Bool(true),
            Marker::False => Token::Bool(false),
            Marker::U8 => Token::Int(self.be::<1>()?[0] as i64),
            Marker::U16 => Token::Int(u16::from_be_bytes(self.be()?) as i64),
            Marker::U32 => Token::Int(u32::from_be_bytes(self.be()?) as i64),
            Marker::U64 => {
                let v = u64::from_be_bytes(self.be()?);
                if v <= i64::MAX as u64 {
                    Token::Int(v as i64)
                } else {
                    Token::UInt(v)
                }
            }
            Marker::I8 => Token::Int(self.be::<1>()?[0] as i8 as i64),
            Marker::I16 => Token::Int(i16::from_be_bytes(self.be()?) as i64),
            Marker::I32 => Token::Int(i32::from_be_bytes(self.be()?) as i64),
            Marker::I64 => Token::Int(i64::from_be_bytes(self.be()?)),
            Marker::F32 => Token::F32(f32::from_be_bytes(self.be()?)),
            Marker::F64 => Token::F64(f64::from_be_bytes(self.be()?)),
            Marker::FixStr(n) => Token::Str(self.take(n as usize)?),
            Marker::Str8 => {
                let n = self.be::<1>()?[0] as usize;
                Token::Str(self.take(n)?)
            }
            Marker::Str16 => {
                let n = u16::from_be_bytes(self.be()?) as usize;
                Token::Str(self.take(n)?)
            }
            Marker::Str32 => {
                let n = u32::from_be_bytes(self.be()?) as usize;
                Token::Str(self.take(n)?)
            }
            Marker::Bin8 => {
                let n = self.be::<1>()?[0] as usize;
                Token::Bin(self.take(n)?)
            }
            Marker::Bin16 => {
                let n = u16::from_be_bytes(self.be()?) as usize;
                Token::Bin(self.take(n)?)
            }
            Marker::Bin32 => {
                let n = u32::from_be_bytes(self.be()?) as usize;
                Token::Bin(self.take(n)?)
            }
            Marker::FixArray(n) => Token::Array(n as u32),
            Marker::Array16 => Token::Array(u16::from_be_bytes(self.be()?) as u32),
            Marker::Array32 => Token::Array(u32::from_be_bytes(self.be()?)),
            Marker::FixMap(n) => Token::Map(n as u32),
            Marker::Map16 => Token::Map(u16::from_be_bytes(self.be()?) as u32),
            Marker::Map32 => Token::Map(u32::from_be_bytes(self.be()?)),
            Marker::FixExt1 => self.ext_body(1)?,
            Marker::FixExt2 => self.ext_body(2)?,
            Marker::FixExt4 => self.ext_body(4)?,
            Marker::FixExt8 => self.ext_body(8)?,
            Marker::FixExt16 => self.ext_body(16)?,
            Marker::Ext8 => {
                let n = self.be::<1>()?[0] as usize;
                self.ext_body(n)?
            }
            Marker::Ext16 => {
                let n = u16::from_be_bytes(self.be()?) as usize;
                self.ext_body(n)?
            }
            Marker::Ext32 => {
                let n = u32::from_be_bytes(self.be()?) as usize;
                self.ext_body(n)?
            }
            Marker::Reserved => return Err(ReadError::ReservedMarker),
        })
    }

    fn ext_body(&mut self, n: usize) -> Result<Token<'a>, ReadError> {
        let ty = self.be::<1>()?[0] as i8;
        Ok(Token::Ext(ty, self.take(n)?))
    }

    /// Skips one complete value (containers included), iteratively, so no
    /// input can make it recurse. Each element costs at least one byte, so the
    /// pending count is bounded by the input length.
    pub fn skip_value(&mut self) -> Result<(), ReadError> {
        let mut pending: u64 = 1;
        while pending > 0 {
            pending -= 1;
            match self.token()? {
                Token::Array(n) => pending += n as u64,
                Token::Map(n) => pending += 2 * n as u64,
                _ => {}
            }
            if pending > self.remaining() as u64 {
                return Err(ReadError::Truncated);
            }
        }
        Ok(())
    }
}

/// Writer helpers producing msgspec's byte forms. Writing into a `Vec` cannot
/// fail, so the `rmp` results are unwrapped through `ok()`.
pub mod write {
    use rmp::encode;

    /// Appends `nil`.
    #[inline]
    pub fn nil(out: &mut Vec<u8>) {
        out.push(0xc0);
    }

    /// Appends a bool.
    #[inline]
    pub fn bool(out: &mut Vec<u8>, v: bool) {
        out.push(if v { 0xc3 } else { 0xc2 });
    }

    /// Smallest form; non-negative values as unsigned (msgspec's choice).
    /// Hand-written for the hot path (one `extend` per value); the forms are
    /// checked against `rmp::encode::write_sint` in this module's tests.
    #[inline(always)]
    pub fn int(out: &mut Vec<u8>, v: i64) {
        if v >= 0 {
            uint(out, v as u64);
        } else if v >= -32 {
            out.push(v as u8);
        } else if v >= i8::MIN as i64 {
            out.extend_from_slice(&[0xd0, v as u8]);
        } else if v >= i16::MIN as i64 {
            let b = (v as i16).to_be_bytes();
            out.extend_from_slice(&[0xd1, b[0], b[1]]);
        } else if v >= i32::MIN as i64 {
            let b = (v as i32).to_be_bytes();
            out.extend_from_slice(&[0xd2, b[0], b[1], b[2], b[3]]);
        } else {
            out.push(0xd3);
            out.extend_from_slice(&v.to_be_bytes());
        }
    }

    /// The unsigned forms of a value below 2^32, by the index of the
    /// highest set bit of `value | 1` (`0..=31`), as three tables read by
    /// the same index: the form is `(value.swap_bytes() >> UINT_SHIFT[i])
    /// | UINT_MARKER[i]` in its low `UINT_LEN[i]` bytes, little-endian. The
    /// shift leaves the value's big-endian bytes above one zero byte (the
    /// byte above its top byte), where the marker goes; for a positive
    /// fixint (marker 0) it leaves the value itself. Three tables rather
    /// than one packed word: each is used as an operand as it stands (the
    /// shift count, an `or` and an `add` from memory), where unpacking one
    /// word took three more instructions a value.
    const fn uint_form(i: usize) -> (u64, u64, usize) {
        match i {
            0..=6 => (0x00, 56, 1),
            7 => (0xcc, 48, 2),
            8..=15 => (0xcd, 40, 3),
            _ => (0xce, 24, 5),
        }
    }
    static UINT_MARKER: [u64; 32] = {
        let mut t = [0; 32];
        let mut i = 0;
        while i < 32 {
            t[i] = uint_form(i).0;
            i += 1;
        }
        t
    };
    static UINT_SHIFT: [u64; 32] = {
        let mut t = [0; 32];
        let mut i = 0;
        while i < 32 {
            t[i] = uint_form(i).1;
            i += 1;
        }
        t
    };
    static UINT_LEN: [usize; 32] = {
        let mut t = [0; 32];
        let mut i = 0;
        while i < 32 {
            t[i] = uint_form(i).2;
            i += 1;
        }
        t
    };

    /// An array of integers (token ids): the header, then each value in
    /// its smallest form (as [`int`] writes it).
    ///
    /// The run is written first as if every value were in `0..2^32` (every
    /// token id), without a branch on a value's form: its highest bit
    /// indexes the `UINT_*` tables, the marker and big-endian body are
    /// assembled in one `u64` by a byte swap, a shift and an or, and stored
    /// as eight bytes of which the form's length are kept (the reservation,
    /// 5 bytes a value and 8 over, leaves room for the overhang). The
    /// values are or'd together on the way; if one was outside `0..2^32`
    /// the run is truncated back and written again by the general loop.
    /// About 12 instructions a value (21 with the range check and the
    /// packed table of the previous writer, 35% faster again than a
    /// branching writer, which mispredicts where the forms change): see
    /// `docs/bench.md`, "The request encode against memory bandwidth".
    pub fn int_array(out: &mut Vec<u8>, xs: &[i64]) {
        array_len(out, xs.len() as u32);
        if xs.len() < 4 {
            // One output's new token ids: the loop's set-up would cost
            // more than it saves.
            for &v in xs {
                int(out, v);
            }
            return;
        }
        // 8 more than 5 bytes a value: the last store's overhang.
        out.reserve(xs.len() * 5 + 8);
        let start = out.len();
        let base = out.as_mut_ptr();
        let mut p = start;
        let mut all = 0u64;
        // Invariant: `p + 5 * (values left) + 8 <= out.capacity()`, so
        // each store below (`p + 8 <= capacity`, at least its value left)
        // stays inside the reservation. Four values an iteration: the
        // loop's own count and branch are a quarter of an instruction a
        // value.
        let mut quads = xs.chunks_exact(4);
        for q in &mut quads {
            all |= (q[0] | q[1] | q[2] | q[3]) as u64;
            // SAFETY: the invariant (four values left).
            unsafe {
                p = put_uint32(base, p, q[0] as u32);
                p = put_uint32(base, p, q[1] as u32);
                p = put_uint32(base, p, q[2] as u32);
                p = put_uint32(base, p, q[3] as u32);
            }
        }
        for &v in quads.remainder() {
            all |= v as u64;
            // SAFETY: the invariant.
            unsafe { p = put_uint32(base, p, v as u32) };
        }
        if all >> 32 == 0 {
            // SAFETY: the bytes up to `p` were written above.
            unsafe { out.set_len(p) };
        } else {
            // A value outside `0..2^32` (its high bits were dropped above).
            int_array_general(out, start, xs);
        }
    }

    /// An array of the little-endian int32s of `le` (a 0.34.0 prompt's
    /// bytes, `<i4`), written as [`int_array`] writes the same values: the
    /// header, then each in its smallest form, by the same branchless
    /// writer while they are non-negative (every token id).
    pub fn int32_array(out: &mut Vec<u8>, le: &[u8]) {
        let n = le.len() / 4;
        array_len(out, n as u32);
        out.reserve(n * 5 + 8);
        let start = out.len();
        let base = out.as_mut_ptr();
        let mut p = start;
        let mut all = 0u32;
        // Invariant: `p + 5 * (values left) + 8 <= out.capacity()`.
        for c in le.chunks_exact(4) {
            let u = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            all |= u;
            // SAFETY: the invariant.
            unsafe { p = put_uint32(base, p, u) };
        }
        if all >> 31 == 0 {
            // SAFETY: the bytes up to `p` were written above.
            unsafe { out.set_len(p) };
        } else {
            // A negative value (its sign was written as a magnitude above).
            out.truncate(start);
            for c in le.chunks_exact(4) {
                int(out, i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])));
            }
        }
    }

    /// Stores `u`'s smallest form at `base + p` as eight bytes (the
    /// form's length of them meaningful) and returns the position after
    /// the form.
    ///
    /// # Safety
    /// `base + p .. base + p + 8` must be inside one allocation, writable.
    #[inline(always)]
    unsafe fn put_uint32(base: *mut u8, p: usize, u: u32) -> usize {
        let i = (31 - (u | 1).leading_zeros()) as usize;
        let word = (u64::from(u).swap_bytes() >> UINT_SHIFT[i]) | UINT_MARKER[i];
        // SAFETY: by the caller's contract; the store may be unaligned.
        unsafe { std::ptr::write_unaligned(base.add(p) as *mut u64, word.to_le()) };
        p + UINT_LEN[i]
    }

    /// [`int_array`]'s run when some value is outside `0..2^32`, from
    /// `start` (just after the header; the bytes from there on are
    /// overwritten): values below 2^32 as above, the others through
    /// [`int`] after reserving for themselves (up to 9 bytes, where the
    /// first reservation counted 5).
    #[cold]
    fn int_array_general(out: &mut Vec<u8>, start: usize, xs: &[i64]) {
        out.truncate(start);
        let mut base = out.as_mut_ptr();
        let mut p = out.len();
        // Invariant: `p + 5 * (values left) + 8 <= out.capacity()`.
        for (i, &v) in xs.iter().enumerate() {
            let u = v as u64;
            if u < 1 << 32 {
                // SAFETY: by the invariant, `p + 8 <= capacity`.
                p = unsafe { put_uint32(base, p, u as u32) };
            } else {
                // SAFETY: the bytes up to `p` were written above.
                unsafe { out.set_len(p) };
                out.reserve(9 + (xs.len() - i - 1) * 5 + 8);
                int(out, v);
                base = out.as_mut_ptr();
                p = out.len();
            }
        }
        // SAFETY: the bytes up to `p` were written above.
        unsafe { out.set_len(p) };
    }

    /// Appends a non-negative integer in its smallest form.
    #[inline(always)]
    pub fn uint(out: &mut Vec<u8>, v: u64) {
        if v < 128 {
            out.push(v as u8);
        } else if v < 256 {
            out.extend_from_slice(&[0xcc, v as u8]);
        } else if v < 65536 {
            let b = (v as u16).to_be_bytes();
            out.extend_from_slice(&[0xcd, b[0], b[1]]);
        } else if v < 1 << 32 {
            let b = (v as u32).to_be_bytes();
            out.extend_from_slice(&[0xce, b[0], b[1], b[2], b[3]]);
        } else {
            out.push(0xcf);
            out.extend_from_slice(&v.to_be_bytes());
        }
    }

    /// Always float64, as msgspec writes Python floats.
    #[inline]
    pub fn float(out: &mut Vec<u8>, v: f64) {
        let b = v.to_be_bytes();
        out.extend_from_slice(&[0xcb, b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
    }

    /// Appends a string (smallest header).
    #[inline]
    pub fn str(out: &mut Vec<u8>, s: &str) {
        let n = s.len();
        if n < 32 {
            out.push(0xa0 | n as u8);
        } else if n < 256 {
            out.extend_from_slice(&[0xd9, n as u8]);
        } else if n < 65536 {
            let b = (n as u16).to_be_bytes();
            out.extend_from_slice(&[0xda, b[0], b[1]]);
        } else {
            let b = (n as u32).to_be_bytes();
            out.extend_from_slice(&[0xdb, b[0], b[1], b[2], b[3]]);
        }
        out.extend_from_slice(s.as_bytes());
    }

    /// Appends a bin (smallest header).
    pub fn bin(out: &mut Vec<u8>, b: &[u8]) {
        let _ = encode::write_bin_len(out, b.len() as u32);
        out.extend_from_slice(b);
    }

    /// Appends an array header (smallest form).
    #[inline]
    pub fn array_len(out: &mut Vec<u8>, n: u32) {
        if n < 16 {
            out.push(0x90 | n as u8);
        } else if n < 65536 {
            let b = (n as u16).to_be_bytes();
            out.extend_from_slice(&[0xdc, b[0], b[1]]);
        } else {
            let b = n.to_be_bytes();
            out.extend_from_slice(&[0xdd, b[0], b[1], b[2], b[3]]);
        }
    }

    /// Appends a map header (smallest form).
    #[inline]
    pub fn map_len(out: &mut Vec<u8>, n: u32) {
        if n < 16 {
            out.push(0x80 | n as u8);
        } else if n < 65536 {
            let b = (n as u16).to_be_bytes();
            out.extend_from_slice(&[0xde, b[0], b[1]]);
        } else {
            let b = n.to_be_bytes();
            out.extend_from_slice(&[0xdf, b[0], b[1], b[2], b[3]]);
        }
    }

    /// A `map16` header whatever the count, as msgspec writes structs and
    /// dataclasses of more than 15 fields.
    pub fn map16_len(out: &mut Vec<u8>, n: u16) {
        out.push(0xde);
        out.extend_from_slice(&n.to_be_bytes());
    }

    /// Ext header in its smallest form (fixext for 1/2/4/8/16-byte bodies).
    pub fn ext(out: &mut Vec<u8>, ty: i8, body: &[u8]) {
        let _ = encode::write_ext_meta(out, body.len() as u32, ty);
        out.extend_from_slice(body);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_array_writes_every_bit_length_as_int_writes_it() {
        // 2^k - 1, 2^k and 2^k + 1 for every k up to 34, then a run mixing
        // every form, to catch a table entry or an overhang gone wrong.
        let mut xs: Vec<i64> = (0..=34).flat_map(|k| [(1i64 << k) - 1, 1 << k, (1 << k) + 1]).collect();
        xs.extend(xs.clone().iter().rev().map(|x| -x));
        let mut one_by_one = Vec::new();
        write::array_len(&mut one_by_one, xs.len() as u32);
        for &x in &xs {
            write::int(&mut one_by_one, x);
        }
        assert_eq!(written(|o| write::int_array(o, &xs)), one_by_one);
    }

    #[test]
    fn int32_array_writes_what_int_array_writes_for_the_same_values() {
        let edges: [i32; 12] = [0, 1, 127, 128, 255, 256, 65535, 65536, i32::MAX, -1, -129, i32::MIN];
        for n in 0..edges.len() * 2 {
            let xs: Vec<i32> = edges.iter().cycle().skip(n % edges.len()).take(n).copied().collect();
            let le: Vec<u8> = xs.iter().flat_map(|x| x.to_le_bytes()).collect();
            let wide: Vec<i64> = xs.iter().map(|&x| i64::from(x)).collect();
            let (mut a, mut b) = (vec![0x42], vec![0x42]);
            write::int32_array(&mut a, &le);
            write::int_array(&mut b, &wide);
            assert_eq!(a, b, "{xs:?}");
        }
    }

    #[test]
    fn int_array_writes_each_value_as_int_writes_it_after_the_array_header() {
        // Every boundary of msgspec's integer forms (docs/wire-protocol.md
        // §5.6), in runs of every length up to three times the list.
        let edges = [
            0,
            127,
            128,
            255,
            256,
            65535,
            65536,
            (1 << 32) - 1,
            1 << 32,
            -1,
            -32,
            -33,
            -128,
            -129,
            -32768,
            -32769,
            i32::MIN as i64,
            i32::MIN as i64 - 1,
            i64::MIN,
            i64::MAX,
        ];
        for n in 0..edges.len() * 3 {
            let xs: Vec<i64> = edges.iter().cycle().skip(n % edges.len()).take(n).copied().collect();
            let mut one_by_one = vec![0x42];
            write::array_len(&mut one_by_one, n as u32);
            for &x in &xs {
                write::int(&mut one_by_one, x);
            }
            assert_eq!(
                written(|o| {
                    o.push(0x42);
                    write::int_array(o, &xs)
                }),
                one_by_one,
                "{xs:?}"
            );
        }
    }

    #[test]
    fn int_array_of_wide_values_reserves_for_each_beyond_the_five_bytes_a_token_id_takes() {
        // The reservation counts 5 bytes a value; a run of 9-byte forms
        // (and 5-byte ones between them) must grow it as it goes.
        for n in [1, 2, 7, 64, 1000] {
            let xs: Vec<i64> = (0..n).map(|i| if i % 3 == 2 { (1 << 32) - 1 } else { i64::MIN + i as i64 }).collect();
            let mut one_by_one = Vec::new();
            write::array_len(&mut one_by_one, xs.len() as u32);
            for &x in &xs {
                write::int(&mut one_by_one, x);
            }
            let mut exact = Vec::with_capacity(0);
            write::int_array(&mut exact, &xs);
            assert_eq!(exact, one_by_one, "{n} values");
        }
    }

    fn written(f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut v = Vec::new();
        f(&mut v);
        v
    }

    #[test]
    fn integers_use_msgspec_smallest_forms() {
        // Byte forms from docs/wire-protocol.md §5.6 (msgspec 0.23.0).
        assert_eq!(written(|o| write::int(o, 127)), [0x7f]);
        assert_eq!(written(|o| write::int(o, 128)), [0xcc, 0x80]);
        assert_eq!(written(|o| write::int(o, 256)), [0xcd, 0x01, 0x00]);
        assert_eq!(written(|o| write::int(o, 1 << 32)), [0xcf, 0, 0, 0, 1, 0, 0, 0, 0]);
        assert_eq!(written(|o| write::int(o, -1)), [0xff]);
        assert_eq!(written(|o| write::int(o, -33)), [0xd0, 0xdf]);
        assert_eq!(written(|o| write::uint(o, 0x8000_0000_0000_0001)), [0xcf, 0x80, 0, 0, 0, 0, 0, 0, 1]);
    }

    #[test]
    fn hand_written_forms_match_rmp() {
        let mut probes: Vec<i64> = vec![i64::MIN, i64::MAX, 0];
        for shift in 0..63 {
            let p = 1i64 << shift;
            probes.extend([p - 1, p, p + 1, -p - 1, -p, -p + 1]);
        }
        for v in probes {
            let mut theirs = Vec::new();
            rmp::encode::write_sint(&mut theirs, v).unwrap();
            assert_eq!(written(|o| write::int(o, v)), theirs, "{v}");
        }
        for n in [0u32, 1, 15, 16, 31, 32, 255, 256, 65535, 65536, 1 << 20] {
            let (mut a, mut m, mut s) = (Vec::new(), Vec::new(), Vec::new());
            rmp::encode::write_array_len(&mut a, n).unwrap();
            rmp::encode::write_map_len(&mut m, n).unwrap();
            rmp::encode::write_str_len(&mut s, n).unwrap();
            assert_eq!(written(|o| write::array_len(o, n)), a, "array {n}");
            assert_eq!(written(|o| write::map_len(o, n)), m, "map {n}");
            let text = "x".repeat(n as usize);
            assert_eq!(&written(|o| write::str(o, &text))[..s.len()], &s[..], "str {n}");
        }
    }

    #[test]
    fn floats_are_always_float64() {
        assert_eq!(written(|o| write::float(o, 1.0)), [0xcb, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn ext_headers_use_fixext_for_exact_sizes() {
        assert_eq!(written(|o| write::ext(o, 3, &[0; 8]))[..2], [0xd7, 0x03]);
        assert_eq!(written(|o| write::ext(o, 3, &[0; 12]))[..3], [0xc7, 12, 0x03]);
    }

    #[test]
    fn reader_consumes_exactly_one_token() {
        let bytes = [0xcd, 0x01, 0x00, 0xc0];
        let mut r = Reader::new(&bytes);
        assert_eq!(r.token(), Ok(Token::Int(256)));
        assert_eq!(r.position(), 3);
        assert_eq!(r.token(), Ok(Token::Nil));
        assert!(r.is_empty());
    }

    #[test]
    fn reader_reports_truncation_inside_a_declared_length() {
        let mut r = Reader::new(&[0xa5, b'a', b'b']);
        assert_eq!(r.token(), Err(ReadError::Truncated));
        let mut r = Reader::new(&[0xdd, 0xff, 0xff]);
        assert_eq!(r.token(), Err(ReadError::Truncated));
    }

    #[test]
    fn skip_value_rejects_declared_lengths_beyond_the_input() {
        let mut r = Reader::new(&[0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0]);
        assert_eq!(r.skip_value(), Err(ReadError::Truncated));
    }

    #[test]
    fn uint64_above_i64_max_stays_unsigned() {
        let mut r = Reader::new(&[0xcf, 0x80, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(r.token(), Ok(Token::UInt(0x8000_0000_0000_0001)));
    }
}
