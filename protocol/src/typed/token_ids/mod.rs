//! [`TokenIds`]: a prompt's token ids, as each release sends them.
//!
//! Wire facts (docs/wire-protocol.md §6.9, read in vLLM 0.34.0's
//! `vllm/v1/engine/__init__.py`, `vllm/v1/serial_utils.py`,
//! `vllm/v1/engine/core_client.py`, `vllm/v1/token_buffer.py`):
//!
//! - Up to 0.33.0 `EngineCoreRequest.prompt_token_ids` is `list[int] |
//!   None`: a MessagePack array of integers, each in its smallest form, any
//!   integer MessagePack carries ([`IntList`]).
//! - From 0.34.0 it is `np.ndarray | None`: the triple `[dtype, shape,
//!   data]` that vLLM's encoder writes for every ndarray, `data` inline as
//!   ext 3 when the array holds fewer bytes than
//!   `VLLM_MSGPACK_ZERO_COPY_THRESHOLD` (256 by default, 64 ids; a 0-d
//!   array always), otherwise the index (from 1) of an extra frame of the
//!   ADD holding the raw bytes, which vLLM's encoder does not copy and its
//!   decoder reads as a view of the received frame. vLLM's Python frontend
//!   sends `<i4` (`np.frombuffer(array("i", ids), np.int32)`: an id outside
//!   the int32 range raises `OverflowError` before anything is sent), its
//!   Rust frontend `=u4`.
//! - The 0.34.0 decoder takes any dtype numpy parses and any shape the
//!   bytes fit (`np.frombuffer(buf, dtype).reshape(shape)`) and refuses a
//!   plain list. The engine then copies the array into an int32
//!   `TokenBuffer`, asserting a dtype of kind `i` or `u` and item size 4: any
//!   other dtype fails the request at run time
//!   ([`ServingProblem::PromptNotInt32`](crate::ServingProblem)); the bytes are copied as they
//!   are, so a `=u4` id at or above 2^31 becomes the negative int32 of the
//!   same bits, a big-endian `>i4` array is read in the engine's byte order
//!   (other ids), and a shape of several dimensions is flattened.
//!
//! [`TokenIds`] holds either form: a list (decoded from a 0.32/0.33 ADD, or
//! built from `i64`s) or an array (decoded from a 0.34 ADD, or built from
//! `i32`s / `u32`s: `<i4`, the Python frontend's dtype). The typed encoder
//! writes it as the release's table types the field: a list for 0.32/0.33
//! (an array's ids as integers), an array for 0.34 (a list's ids as `<i4`,
//! each checked to fit). An array's bytes are a shared [`Bytes`]: built
//! from a `Vec<i32>` without a copy (on little-endian machines), sent as
//! the ADD's aux frame without a copy
//! ([`EngineCoreRequest::encode_shared`](crate::typed::EngineCoreRequest::encode_shared)),
//! and decoded from a received frame without a copy
//! ([`crate::hot::decode_request_shared`]).

use std::fmt;

use crate::error::{Error, RejectClass};
use crate::msgpack::write;
use crate::schema::{Default as FieldDefault, TensorKind, Ty};
use crate::value::{Elem, Value};

use super::int_list::write_wire_int;
use super::wire::{type_error, At, Enc, EncodeResult, Rel, WireType};
use super::IntList;

mod array;
pub use array::{ArrayIds, TokenArray};

static LIST_INT: Ty = Ty::List(&Ty::Int);
static NDARRAY: Ty = Ty::Tensor(TensorKind::Numpy);

/// The dtype vLLM 0.34.0's Python frontend sends a prompt as (`np.int32` on
/// a little-endian machine), and what [`TokenIds`] built from ids use.
pub const INT32_DTYPE: &str = "<i4";

/// The dtype vLLM 0.34.0's Rust frontend (`vllm-rs`) sends a prompt as.
pub const UINT32_DTYPE: &str = "=u4";

/// A prompt's token ids: a list of wire integers or an ndarray as sent
/// (module docs).
///
/// Equality is by what is sent: two arrays are equal when dtype, shape and
/// bytes are; a list equals a one-dimensional `<i4` array of the same ids
/// (what the encoder sends the list as to a release that takes arrays).
#[derive(Clone)]
pub struct TokenIds(Repr);

#[derive(Clone)]
enum Repr {
    List(IntList),
    Array(TokenArray),
}

impl TokenIds {
    /// No ids (an empty `<i4` array; a list to releases that take lists).
    pub fn new() -> TokenIds {
        TokenIds(Repr::Array(TokenArray::from_i32(Vec::new())))
    }

    /// Ids as an int32 array (`<i4`), the vector's memory shared without a
    /// copy on little-endian machines.
    ///
    /// ```
    /// use engine_protocol::typed::TokenIds;
    ///
    /// let ids = TokenIds::from_i32(vec![1, 15043, 29892]);
    /// assert_eq!(ids.len(), 3);
    /// assert_eq!(ids.array().unwrap().dtype(), "<i4");
    /// assert_eq!(ids.iter().collect::<Vec<_>>(), [1, 15043, 29892]);
    /// ```
    pub fn from_i32(ids: Vec<i32>) -> TokenIds {
        TokenIds(Repr::Array(TokenArray::from_i32(ids)))
    }

    /// Ids as a tokenizer gives them: an int32 array (`<i4`, copied) when
    /// every id fits int32 (every real vocabulary), else a list, which a
    /// release that takes arrays refuses to encode.
    pub fn from_u32(ids: &[u32]) -> TokenIds {
        if ids.iter().all(|&x| x <= i32::MAX as u32) {
            TokenIds::from_i32(ids.iter().map(|&x| x as i32).collect())
        } else {
            TokenIds(Repr::List(IntList::from_token_ids(ids)))
        }
    }

    /// An array as received or written by another sender.
    pub fn from_array(array: TokenArray) -> TokenIds {
        TokenIds(Repr::Array(array))
    }

    /// A list of wire integers, as 0.32/0.33 send it.
    pub fn from_list(list: IntList) -> TokenIds {
        TokenIds(Repr::List(list))
    }

    /// The array, when held as one.
    pub fn array(&self) -> Option<&TokenArray> {
        match &self.0 {
            Repr::Array(a) => Some(a),
            Repr::List(_) => None,
        }
    }

    /// The list, when held as one.
    pub fn list(&self) -> Option<&IntList> {
        match &self.0 {
            Repr::List(l) => Some(l),
            Repr::Array(_) => None,
        }
    }

    /// The number of ids (of an array: its element count, flattened).
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::List(l) => l.len(),
            Repr::Array(a) => a.len(),
        }
    }

    /// Whether there is no id.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether these are token ids: a list, or an array of an integer
    /// dtype (a float or bool array is not, and the engine fails it).
    pub fn is_integer(&self) -> bool {
        match &self.0 {
            Repr::List(_) => true,
            Repr::Array(a) => a.is_integer(),
        }
    }

    /// The ids as sent, in order (of an array: flattened in C order). An
    /// array of a dtype that is no integer type ([`TokenIds::is_integer`]
    /// false) yields none.
    pub fn iter(&self) -> Ids<'_> {
        match &self.0 {
            Repr::List(l) => Ids::List(l.iter()),
            Repr::Array(a) => match a.ids() {
                Some(it) => Ids::Array(it),
                None => Ids::Array(ArrayIds { data: &[], at: 0, dtype: a.parsed.0 }),
            },
        }
    }

    /// Id `i` as sent (`None` past the end, or for a non-integer array).
    pub fn get(&self, i: usize) -> Option<i128> {
        match &self.0 {
            Repr::List(l) => l.get(i),
            Repr::Array(a) => {
                let size = a.parsed.0.elem.size();
                let b = a.data.get(i * size..(i + 1) * size)?;
                ArrayIds { data: b, at: 0, dtype: a.parsed.0 }.next().filter(|_| a.is_integer())
            }
        }
    }

    /// The ids as sent, as `i128`s (none for a non-integer array).
    pub fn to_vec(&self) -> Vec<i128> {
        self.iter().collect()
    }

    /// The ids as `i64`s, when every one is an integer that fits.
    pub fn to_i64_vec(&self) -> Option<Vec<i64>> {
        if !self.is_integer() {
            return None;
        }
        self.iter().map(|x| i64::try_from(x).ok()).collect()
    }

    /// The array a release that takes arrays is sent: the array itself, or
    /// a list's ids as `<i4` (an error of class `type` at the first id
    /// outside int32, which vLLM's frontend cannot send either).
    pub fn to_int32_array(&self) -> Result<TokenArray, Error> {
        match &self.0 {
            Repr::Array(a) => Ok(a.clone()),
            Repr::List(l) => {
                let mut ids = Vec::with_capacity(l.len());
                for (i, x) in l.iter().enumerate() {
                    let x = i32::try_from(x).map_err(|_| {
                        Error::new(
                            RejectClass::Type,
                            "",
                            format!("token id {x} does not fit the int32 array this release takes"),
                        )
                        .under(&format!("[{i}]"))
                    })?;
                    ids.push(x);
                }
                Ok(TokenArray::from_i32(ids))
            }
        }
    }

    /// The value tree's form: an `IntArray` / array of ints for a list, a
    /// tensor for an array.
    pub fn to_plain_value(&self) -> Value {
        match &self.0 {
            Repr::List(l) => l.to_plain_value(),
            Repr::Array(a) => Value::Tensor(Box::new(a.to_tensor())),
        }
    }

    /// The value of `EngineCoreRequest.prompt_token_ids` in `release`'s
    /// table: a list of ints up to 0.33.0, a tensor (the ids as `<i4`
    /// when held as a list) from 0.34.0. For building value trees
    /// (tests, fuzzers, [`crate::encode_message`]).
    pub fn value_in(&self, release: &'static crate::ReleaseSchema) -> Result<Value, Error> {
        let ty = release
            .engine_core_request
            .as_struct()
            .and_then(|s| s.index_of("prompt_token_ids").map(|i| s.fields[i].ty))
            .ok_or_else(|| Error::new(RejectClass::Type, "", "the release's request has no prompt_token_ids"))?;
        match crate::typed::wire::unwrap_optional(ty) {
            Ty::Tensor(_) => self.to_int32_array().map(|a| Value::Tensor(Box::new(a.to_tensor()))),
            _ => self.list_value(),
        }
    }

    /// The ids as the value of a `list[int]` field.
    fn list_value(&self) -> Result<Value, Error> {
        match &self.0 {
            Repr::List(l) => Ok(l.to_plain_value()),
            Repr::Array(a) => {
                let ids = a.ids().ok_or_else(|| {
                    Error::new(
                        RejectClass::Type,
                        "",
                        format!("an array of dtype {} holds no token ids for a list[int] field", a.dtype),
                    )
                })?;
                let mut l = IntList::new();
                for (i, x) in ids.enumerate() {
                    l.push_wide(x).at_index(i)?;
                }
                Ok(l.to_plain_value())
            }
        }
    }

    /// From a decoded value: a list of ints or a tensor.
    pub fn from_plain_value(v: &Value) -> Result<TokenIds, Error> {
        match v {
            Value::Tensor(t) => {
                TokenArray::new(t.dtype.clone(), t.shape.clone(), t.data.clone()).map(TokenIds::from_array)
            }
            Value::IntArray(_) | Value::Array(_) => IntList::from_plain_value(v).map(TokenIds::from_list),
            other => Err(type_error("array or ndarray", other)),
        }
    }

    /// The bytes of this prompt as a release whose field type is `ty`
    /// (without `None`) takes it: a list of ints, or an ndarray (inline
    /// under `threshold` bytes or for a 0-d array, else an aux frame).
    fn write_as(&self, ty: &'static Ty, rel: Rel, e: &mut Enc) -> EncodeResult {
        match ty {
            Ty::Tensor(_) => {
                let owned;
                let a = match &self.0 {
                    Repr::Array(a) => a,
                    Repr::List(_) => {
                        owned = self.to_int32_array().map_err(Box::new)?;
                        &owned
                    }
                };
                write_array(a, e);
                Ok(())
            }
            Ty::List(_) => match &self.0 {
                Repr::List(l) => l.encode(rel, e),
                Repr::Array(a) => {
                    let Some(ids) = a.ids() else {
                        return Err(Box::new(Error::new(
                            RejectClass::Type,
                            "",
                            format!("an array of dtype {} holds no token ids for a list[int] field", a.dtype),
                        )));
                    };
                    if a.parsed.0.elem == Elem::I32 && !a.parsed.0.big_endian {
                        // The common case (`<i4`: from ids, or from a 0.34
                        // frontend): the branchless run writer.
                        write::int32_array(&mut e.out, &a.data);
                    } else {
                        write::array_len(&mut e.out, ids.len() as u32);
                        for x in ids {
                            write_wire_int(&mut e.out, x);
                        }
                    }
                    Ok(())
                }
            },
            other => Err(Box::new(Error::new(
                RejectClass::Type,
                "",
                format!("token ids have no form for a field of type {}", crate::schema::python_type(other)),
            ))),
        }
    }
}

/// An ndarray as vLLM's encoder writes it (`_encode_ndarray`): `[dtype,
/// shape, data]`, the data inline as ext 3 under the threshold or for a
/// 0-d array, else the 1-based index of a new aux frame sharing the bytes.
fn write_array(a: &TokenArray, e: &mut Enc) {
    write::array_len(&mut e.out, 3);
    write::str(&mut e.out, &a.dtype);
    write::array_len(&mut e.out, a.shape.len() as u32);
    for &d in &a.shape {
        write::int(&mut e.out, d);
    }
    if a.data.len() < e.zero_copy_threshold || a.shape.is_empty() {
        write::ext(&mut e.out, 3, &a.data);
    } else {
        let index = e.push_shared(a.data.clone());
        write::int(&mut e.out, index as i64);
    }
}

impl Default for TokenIds {
    fn default() -> Self {
        TokenIds::new()
    }
}

impl fmt::Debug for TokenIds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Repr::List(l) => f.debug_tuple("TokenIds::List").field(l).finish(),
            Repr::Array(a) => f.debug_tuple("TokenIds::Array").field(a).finish(),
        }
    }
}

impl PartialEq for TokenIds {
    fn eq(&self, other: &TokenIds) -> bool {
        match (&self.0, &other.0) {
            (Repr::List(a), Repr::List(b)) => a == b,
            (Repr::Array(a), Repr::Array(b)) => a == b,
            (Repr::List(l), Repr::Array(a)) | (Repr::Array(a), Repr::List(l)) => {
                a.is_plain_int32() && a.len() == l.len() && a.ids().is_some_and(|ids| ids.eq(l.iter()))
            }
        }
    }
}

/// The iterator of [`TokenIds::iter`].
#[derive(Debug, Clone)]
pub enum Ids<'a> {
    #[doc(hidden)]
    List(super::IntListIter<'a>),
    #[doc(hidden)]
    Array(ArrayIds<'a>),
}

impl Iterator for Ids<'_> {
    type Item = i128;

    #[inline]
    fn next(&mut self) -> Option<i128> {
        match self {
            Ids::List(it) => it.next(),
            Ids::Array(it) => it.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Ids::List(it) => it.size_hint(),
            Ids::Array(it) => it.size_hint(),
        }
    }
}

impl ExactSizeIterator for Ids<'_> {}

impl From<Vec<i32>> for TokenIds {
    fn from(ids: Vec<i32>) -> Self {
        TokenIds::from_i32(ids)
    }
}

impl From<&[u32]> for TokenIds {
    fn from(ids: &[u32]) -> Self {
        TokenIds::from_u32(ids)
    }
}

impl From<Vec<u32>> for TokenIds {
    fn from(ids: Vec<u32>) -> Self {
        TokenIds::from_u32(&ids)
    }
}

/// `i64`s are held as a list (as 0.32/0.33 send them); a release that
/// takes arrays gets them as `<i4`, each checked to fit.
impl From<Vec<i64>> for TokenIds {
    fn from(ids: Vec<i64>) -> Self {
        TokenIds::from_list(IntList::from(ids))
    }
}

impl From<IntList> for TokenIds {
    fn from(list: IntList) -> Self {
        TokenIds::from_list(list)
    }
}

impl From<TokenArray> for TokenIds {
    fn from(array: TokenArray) -> Self {
        TokenIds::from_array(array)
    }
}

impl FromIterator<i64> for TokenIds {
    fn from_iter<I: IntoIterator<Item = i64>>(iter: I) -> Self {
        TokenIds::from_list(iter.into_iter().collect())
    }
}

impl<const N: usize> PartialEq<[i64; N]> for TokenIds {
    fn eq(&self, other: &[i64; N]) -> bool {
        self.len() == N && self.iter().eq(other.iter().map(|&x| i128::from(x)))
    }
}

impl WireType for TokenIds {
    fn from_value(v: &Value, _: Option<&Value>, _: Rel) -> Result<Self, Error> {
        TokenIds::from_plain_value(v)
    }
    fn to_value(&self, ty: &'static Ty, _: Rel) -> Result<Value, Error> {
        match crate::typed::wire::unwrap_optional(ty) {
            Ty::Tensor(_) => self.to_int32_array().map(|a| Value::Tensor(Box::new(a.to_tensor()))),
            _ => self.list_value(),
        }
    }
    /// Without the field's type: written as it is held (the generated
    /// encoders call `encode_as` with the release's type).
    fn encode(&self, rel: Rel, e: &mut Enc) -> EncodeResult {
        match &self.0 {
            Repr::List(_) => self.write_as(&LIST_INT, rel, e),
            Repr::Array(_) => self.write_as(&NDARRAY, rel, e),
        }
    }
    /// As the release's table types the field: a list for `list[int]`, an
    /// ndarray for `numpy.ndarray` (module docs).
    #[inline]
    fn encode_as(&self, ty: &'static Ty, rel: Rel, e: &mut Enc) -> EncodeResult {
        self.write_as(ty, rel, e)
    }
    fn is_default(&self, d: &FieldDefault) -> bool {
        matches!(d, FieldDefault::EmptyList) && self.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::typed::{EngineCoreRequest, Eos, SamplingParams, ServingProblem};
    use crate::{RejectClass, VLLM_0_33_0, VLLM_0_34_0};

    fn request(ids: TokenIds) -> EngineCoreRequest {
        EngineCoreRequest {
            request_id: "r".into(),
            prompt_token_ids: Some(ids),
            sampling_params: Some(SamplingParams { max_tokens: Some(4), eos_token_id: Some(2), ..Default::default() }),
            ..Default::default()
        }
    }

    #[test]
    fn ids_built_from_i32s_are_the_vectors_memory_as_little_endian_int32() {
        let ids = TokenIds::from_i32(vec![1, -2, i32::MAX]);
        let a = ids.array().expect("an array");
        assert_eq!((a.dtype(), a.shape(), a.len()), ("<i4", &[3][..], 3));
        assert_eq!(a.bytes().as_ref(), [1, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]);
        assert_eq!(ids.to_vec(), [1, -2, i128::from(i32::MAX)]);
    }

    #[test]
    fn an_array_is_read_by_its_dtype_in_either_byte_order() {
        let be = TokenArray::new(">i4", vec![2], vec![0, 0, 0, 5, 0xff, 0xff, 0xff, 0xfe]).unwrap();
        assert_eq!(be.ids().unwrap().collect::<Vec<_>>(), [5, -2]);
        let u8s = TokenArray::new("|u1", vec![3], vec![1, 200, 255]).unwrap();
        assert_eq!(u8s.ids().unwrap().collect::<Vec<_>>(), [1, 200, 255]);
        let i64s = TokenArray::new("<i8", vec![-1], (-3i64).to_le_bytes().to_vec()).unwrap();
        assert_eq!(i64s.ids().unwrap().collect::<Vec<_>>(), [-3]);
        let u64s = TokenArray::new("<u8", vec![1], u64::MAX.to_le_bytes().to_vec()).unwrap();
        assert_eq!(u64s.ids().unwrap().collect::<Vec<_>>(), [i128::from(u64::MAX)]);
        let floats = TokenArray::new("<f4", vec![1], 1.0f32.to_le_bytes().to_vec()).unwrap();
        assert!(floats.ids().is_none() && !floats.is_int32());
        assert!(TokenIds::from_array(floats).iter().next().is_none());
    }

    #[test]
    fn a_uint32_id_at_or_above_2_to_the_31_is_the_negative_int32_the_engine_reads() {
        // vLLM 0.34.0's TokenBuffer copies the bytes into an int32 array.
        let a = TokenArray::new(
            UINT32_DTYPE,
            vec![2],
            [7u32, 1 << 31].iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>(),
        )
        .unwrap();
        assert_eq!(a.ids().unwrap().collect::<Vec<_>>(), [7, 1 << 31]);
        assert_eq!(a.engine_ids().unwrap().collect::<Vec<_>>(), [7, i32::MIN]);
    }

    #[test]
    fn an_array_the_engine_decoder_refuses_is_refused_with_its_class() {
        let e = TokenArray::new("<zz", vec![1], vec![0; 4]).unwrap_err();
        assert_eq!(e.class, RejectClass::Validation);
        let e = TokenArray::new("<i4", vec![2], vec![0; 7]).unwrap_err();
        assert_eq!(e.class, RejectClass::Frames);
        let e = TokenArray::new("<i4", vec![5], vec![0; 16]).unwrap_err();
        assert_eq!(e.class, RejectClass::Frames);
        let e = TokenArray::new("<i4", vec![-1, -1], vec![0; 16]).unwrap_err();
        assert_eq!(e.class, RejectClass::Validation);
        assert!(TokenArray::new("<i4", vec![-1], vec![0; 16]).is_ok());
        assert!(TokenArray::new("<i4", vec![2, 2], vec![0; 16]).is_ok());
    }

    #[test]
    fn a_list_equals_the_plain_int32_array_of_the_same_ids_and_nothing_else() {
        let list = TokenIds::from(vec![1_i64, 450, 7483]);
        assert_eq!(list, TokenIds::from_i32(vec![1, 450, 7483]));
        assert_ne!(list, TokenIds::from_i32(vec![1, 450]));
        let u4 = TokenArray::new(
            UINT32_DTYPE,
            vec![3],
            [1u32, 450, 7483].iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>(),
        );
        assert_ne!(list, TokenIds::from_array(u4.unwrap()), "=u4 is sent otherwise than <i4");
        let two_d = TokenArray::new(
            INT32_DTYPE,
            vec![1, 3],
            TokenIds::from_i32(vec![1, 450, 7483]).array().unwrap().bytes().clone(),
        );
        assert_ne!(list, TokenIds::from_array(two_d.unwrap()));
        assert_eq!(TokenIds::from_u32(&[1, 450, 7483]), list);
    }

    #[test]
    fn a_release_that_takes_arrays_gets_a_lists_ids_as_int32_and_refuses_one_that_does_not_fit() {
        let fits = request(TokenIds::from(vec![1_i64, i64::from(i32::MAX)]));
        let frames = fits.encode(VLLM_0_34_0).unwrap();
        assert_eq!(&frames[1][3 + 2..3 + 2 + 5], &[0x93, 0xa3, b'<', b'i', b'4']);
        let wide = request(TokenIds::from(vec![1_i64, 1 << 31]));
        let e = wide.encode(VLLM_0_34_0).unwrap_err();
        assert_eq!((e.class, e.path.as_str()), (RejectClass::Type, "EngineCoreRequest.prompt_token_ids[1]"));
        // A release that takes lists takes it (an engine fails such an id
        // out of the vocabulary, not the decoder).
        assert!(wide.encode(VLLM_0_33_0).is_ok());
        // vLLM's frontend cannot send it either: the builder refuses it.
        let e = EngineCoreRequest::builder("r", vec![1_i64, 1 << 31], 4, Eos::token(2)).build().unwrap_err();
        assert_eq!(e.path, "EngineCoreRequest.prompt_token_ids[1]");
    }

    #[test]
    fn a_release_that_takes_lists_gets_an_arrays_ids_and_refuses_a_float_array() {
        let frames = request(TokenIds::from_i32(vec![1, 450])).encode(VLLM_0_33_0).unwrap();
        assert_eq!(&frames[1][3 + 2..3 + 2 + 4], &[0x92, 0x01, 0xcd, 0x01]);
        let floats = TokenArray::new("<f4", vec![1], 1.0f32.to_le_bytes().to_vec()).unwrap();
        let e = request(TokenIds::from_array(floats)).encode(VLLM_0_33_0).unwrap_err();
        assert_eq!((e.class, e.path.as_str()), (RejectClass::Type, "EngineCoreRequest.prompt_token_ids"));
    }

    #[test]
    fn the_engine_fails_a_prompt_array_that_is_no_little_endian_4_byte_integer() {
        for (dtype, item, problem) in [
            ("<i8", 8, Some(ServingProblem::PromptNotInt32 { dtype: "<i8".into() })),
            ("<f4", 4, Some(ServingProblem::PromptNotInt32 { dtype: "<f4".into() })),
            (">i4", 4, Some(ServingProblem::PromptBigEndian { dtype: ">i4".into() })),
            ("=u4", 4, None),
            ("int32", 4, None),
        ] {
            let a = TokenArray::new(dtype, vec![1], vec![1; item]).unwrap();
            let r = request(TokenIds::from_array(a));
            let fatal = r.serving_problems(None).into_iter().find(ServingProblem::is_fatal);
            assert_eq!(fatal, problem, "{dtype}");
            assert_eq!(r.encode_checked(VLLM_0_34_0).is_ok(), problem.is_none(), "{dtype}");
        }
    }
}
