//! [`TokenArray`]: a prompt's ids as the ndarray vLLM 0.34.0 on sends
//! (`[dtype, shape, data]`, docs/wire-protocol.md §6.9): its dtype string
//! and shape as sent, its raw C-order bytes shared. The checks are the
//! decoder's (a dtype numpy parses, a whole number of items fitting the
//! shape, one negative dimension inferred as numpy's `reshape` does); the
//! engine later fails any dtype other than a 4-byte integer. Built from
//! `i32`s, the bytes are the vector's own memory (little-endian machines).

use std::borrow::Cow;
use std::fmt;

use bytes::Bytes;

use super::{INT32_DTYPE, UINT32_DTYPE};
use crate::error::{Error, RejectClass};
use crate::value::{numpy_dtype, DType, Elem, Tensor};

/// An ndarray of token ids as it travels from vLLM 0.34.0 on: its dtype
/// string as sent, its shape as sent, and its raw C-order bytes (shared).
///
/// [`TokenArray::new`] checks what vLLM's decoder checks (a dtype numpy
/// parses, a byte count that is a whole number of items fitting the shape,
/// one negative dimension inferred as numpy's `reshape` does); what the
/// engine fails later (a dtype other than a 4-byte integer) is
/// [`TokenArray::is_int32`]'s question.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenArray {
    pub(super) dtype: Cow<'static, str>,
    pub(super) parsed: DTypeKey,
    pub(super) shape: Vec<i64>,
    pub(super) data: Bytes,
}

/// The parsed dtype, kept beside the string (equality goes by the string).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct DTypeKey(pub(super) DType);

impl fmt::Debug for TokenArray {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("TokenArray");
        d.field("dtype", &self.dtype).field("shape", &self.shape);
        match self.ids() {
            Some(ids) if self.len() <= 32 => d.field("ids", &ids.collect::<Vec<_>>()),
            _ => d.field("bytes", &self.data.len()),
        };
        d.finish()
    }
}

impl TokenArray {
    /// An array as received or as another sender writes it: `dtype` a
    /// numpy dtype string (`<i4`, `=u4`, `<i8`, `int32`, ...), `shape` as
    /// sent, `data` its raw bytes. An error (class `validation` for an
    /// unknown dtype or an impossible shape, `frames` for a byte count that
    /// does not fit it, as vLLM's decoder classifies them) when vLLM's
    /// decoder would refuse it.
    pub fn new(dtype: impl Into<String>, shape: Vec<i64>, data: impl Into<Bytes>) -> Result<TokenArray, Error> {
        let dtype = interned(dtype.into());
        let data = data.into();
        let parsed = numpy_dtype(&dtype)
            .ok_or_else(|| Error::new(RejectClass::Validation, "", format!("unknown numpy dtype {dtype:?}")))?;
        let size = parsed.elem.size();
        if !data.len().is_multiple_of(size) {
            return Err(Error::new(
                RejectClass::Frames,
                "",
                format!("{} bytes are no whole number of {dtype} items", data.len()),
            ));
        }
        if shape.iter().filter(|&&d| d < 0).count() > 1 {
            return Err(Error::new(RejectClass::Validation, "", "can only specify one unknown dimension"));
        }
        if !shape.is_empty() && crate::decode::resolve_shape(&shape, data.len() / size).is_none() {
            return Err(Error::new(
                RejectClass::Frames,
                "",
                format!("{} items of {dtype} do not fit the shape {shape:?}", data.len() / size),
            ));
        }
        if shape.is_empty() && data.len() != size {
            return Err(Error::new(
                RejectClass::Frames,
                "",
                format!("a 0-d array holds one item, not {} bytes", data.len()),
            ));
        }
        Ok(TokenArray { dtype, parsed: DTypeKey(parsed), shape, data })
    }

    /// An array the decoder has checked (dtype parsed, shape and bytes
    /// fitting): the hot request decoder's.
    pub(crate) fn checked(dtype: Cow<'static, str>, parsed: DType, shape: Vec<i64>, data: Bytes) -> TokenArray {
        TokenArray { dtype, parsed: DTypeKey(parsed), shape, data }
    }

    /// A one-dimensional `<i4` array of `ids` (little-endian bytes).
    pub fn from_i32(ids: Vec<i32>) -> TokenArray {
        let n = ids.len() as i64;
        TokenArray {
            dtype: Cow::Borrowed(INT32_DTYPE),
            parsed: DTypeKey(DType { elem: Elem::I32, big_endian: false }),
            shape: vec![n],
            data: i32_bytes(ids),
        }
    }

    /// The dtype string, as sent.
    pub fn dtype(&self) -> &str {
        &self.dtype
    }

    /// The shape, as sent (one dimension may be negative: inferred).
    pub fn shape(&self) -> &[i64] {
        &self.shape
    }

    /// The raw bytes (shared: cloning them copies nothing).
    pub fn bytes(&self) -> &Bytes {
        &self.data
    }

    /// The element type and byte order.
    pub fn element(&self) -> DType {
        self.parsed.0
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.data.len() / self.parsed.0.elem.size()
    }

    /// Whether the array holds no element.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Whether the engine takes it: a 4-byte integer dtype, signed or
    /// unsigned, of either byte order (vLLM 0.34.0's `TokenBuffer`
    /// asserts `dtype.kind in "iu" and dtype.itemsize == 4`).
    pub fn is_int32(&self) -> bool {
        matches!(self.parsed.0.elem, Elem::I32 | Elem::U32)
    }

    /// Whether every element is an integer (any width): the array holds
    /// token ids, read by [`TokenArray::ids`].
    pub fn is_integer(&self) -> bool {
        matches!(
            self.parsed.0.elem,
            Elem::I8 | Elem::U8 | Elem::I16 | Elem::U16 | Elem::I32 | Elem::U32 | Elem::I64 | Elem::U64
        )
    }

    /// The ids as sent, in C order, when the dtype is an integer type;
    /// `None` otherwise (a float or bool array holds no token ids).
    pub fn ids(&self) -> Option<ArrayIds<'_>> {
        self.is_integer().then(|| ArrayIds { data: &self.data, at: 0, dtype: self.parsed.0 })
    }

    /// The ids as the engine reads them: the array's bytes as native
    /// little-endian int32s (what vLLM 0.34.0's `TokenBuffer` copies them
    /// into), when [`TokenArray::is_int32`]; `None` otherwise.
    pub fn engine_ids(&self) -> Option<impl ExactSizeIterator<Item = i32> + '_> {
        self.is_int32().then(|| self.data.chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]])))
    }

    /// As a value-tree tensor (the bytes copied).
    pub fn to_tensor(&self) -> Tensor {
        Tensor { dtype: self.dtype.to_string(), shape: self.shape.clone(), data: self.data.to_vec() }
    }

    /// Whether it is a one-dimensional `<i4` array: what a list of the same
    /// ids is sent as to a release that takes arrays.
    pub(super) fn is_plain_int32(&self) -> bool {
        self.dtype == INT32_DTYPE && self.shape.len() == 1
    }
}

/// The two dtypes vLLM's frontends send, without an allocation; any other
/// as given.
pub(crate) fn interned(dtype: String) -> Cow<'static, str> {
    match dtype.as_str() {
        INT32_DTYPE => Cow::Borrowed(INT32_DTYPE),
        UINT32_DTYPE => Cow::Borrowed(UINT32_DTYPE),
        _ => Cow::Owned(dtype),
    }
}

/// The bytes of `<i4` ids: on a little-endian machine the vector's own
/// memory, shared without a copy.
fn i32_bytes(ids: Vec<i32>) -> Bytes {
    #[cfg(target_endian = "little")]
    {
        /// Owns the ids; its bytes are their memory.
        struct Le(Vec<i32>);
        impl AsRef<[u8]> for Le {
            fn as_ref(&self) -> &[u8] {
                // SAFETY: the pointer and length describe the vector's
                // initialized elements, 4 bytes each; `u8` has no alignment
                // or validity requirement; the slice borrows `self`, which
                // owns the memory and never mutates it.
                unsafe { std::slice::from_raw_parts(self.0.as_ptr().cast::<u8>(), self.0.len() * 4) }
            }
        }
        Bytes::from_owner(Le(ids))
    }
    #[cfg(not(target_endian = "little"))]
    {
        Bytes::from(ids.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>())
    }
}

/// The iterator of [`TokenArray::ids`]: each element as an `i128`.
#[derive(Debug, Clone)]
pub struct ArrayIds<'a> {
    pub(super) data: &'a [u8],
    pub(super) at: usize,
    pub(super) dtype: DType,
}

impl Iterator for ArrayIds<'_> {
    type Item = i128;

    #[inline]
    fn next(&mut self) -> Option<i128> {
        let size = self.dtype.elem.size();
        let b = self.data.get(self.at..self.at + size)?;
        self.at += size;
        let mut a = [0u8; 8];
        if self.dtype.big_endian {
            a[8 - size..].copy_from_slice(b);
            a.reverse();
        } else {
            a[..size].copy_from_slice(b);
        }
        let u = u64::from_le_bytes(a);
        let shift = 64 - 8 * size as u32;
        Some(match self.dtype.elem {
            Elem::I8 | Elem::I16 | Elem::I32 | Elem::I64 => i128::from(((u << shift) as i64) >> shift),
            _ => i128::from(u),
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = (self.data.len() - self.at) / self.dtype.elem.size();
        (n, Some(n))
    }
}

impl ExactSizeIterator for ArrayIds<'_> {}
