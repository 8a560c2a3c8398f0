//! Tensors: `[dtype, shape, data]`, data an ext-3 body, a `bin`, or the
//! index of a frame (index 0 is the payload frame itself, as in vLLM; a
//! negative index, which vLLM's Python list would count from the end, is
//! refused as `frames`); the shape is resolved against the buffer as
//! numpy's `reshape` and torch's `view` do, one dimension being inferred
//! ([`check_tensor_shape`]), and the value keeps the shape as sent.
//! TokenSpeed's tensors are judged in the order their elements are read
//! (docs/tokenspeed-wire.md).

use super::{err, type_err, utf8, Decoder, Seg, Under, R};
use crate::error::{Error, RejectClass};
use crate::msgpack::Token;
use crate::schema::{TensorKind, Ty};
use crate::value::{numpy_dtype, torch_dtype, DType, Tensor};

impl<'a> Decoder<'a, '_> {
    pub(super) fn tensor(&mut self, kind: TensorKind) -> R<Tensor> {
        let t = self.token()?;
        let Token::Array(n) = t else {
            return Err(err(RejectClass::Type, format!("expected tensor [dtype, shape, data], got {}", t.type_name())));
        };
        if n != 3 {
            // vLLM's decode hook unpacks three names (`dtype, shape, data =
            // arr`): too few elements is a missing field, too many a wrong
            // type (docs/case-format.md §5.2).
            let class = if n < 3 { RejectClass::MissingField } else { RejectClass::Type };
            return Err(err(class, format!("expected tensor [dtype, shape, data], got array of {n}")));
        }
        self.enter()?;
        if self.tokenspeed {
            return self.tensor_in_read_order(kind);
        }
        // vLLM's hooks (`_decode_ndarray`, `_decode_tensor`) get the three
        // elements as msgspec decoded them, whatever their types, and look
        // at `data` first (an int indexes the frames: `IndexError`), then
        // the dtype (`np.frombuffer(buf, dtype)`, `getattr(torch, dtype)`),
        // the buffer's size, then the shape (`reshape`, `view`): the
        // elements are read as they come and judged in that order
        // (docs/wire-protocol.md §6.5).
        let dtype = self.at(Seg::Index(0), |d| match d.r.peek_byte() {
            Some(0xa0..=0xbf | 0xd9..=0xdb) => match d.token()? {
                Token::Str(b) => Ok(Ok(utf8(b)?)),
                _ => unreachable!("a str marker"),
            },
            _ => d.any().map(|v| Err(v.kind_name())),
        })?;
        let shape = self.at(Seg::Index(1), |d| {
            if !matches!(d.r.peek_byte(), Some(0x90..=0x9f | 0xdc | 0xdd)) {
                return d.any().map(|v| Err(v.kind_name()));
            }
            let Token::Array(dims) = d.token()? else { unreachable!("an array marker") };
            let dims = d.check_len(dims, 1)?;
            let mut shape = Vec::with_capacity(d.prealloc(dims));
            let mut bad = None;
            for i in 0..dims {
                let v = d.at(Seg::Index(i), |d| match d.r.peek_byte() {
                    Some(0x00..=0x7f | 0xe0..=0xff | 0xcc..=0xcf | 0xd0..=0xd3) => match d.token()? {
                        // Negative dimensions are judged with the buffer
                        // below (numpy and torch infer one unknown one).
                        Token::Int(x) => Ok(Some(x)),
                        t => Err(type_err(&Ty::Int, &t)),
                    },
                    _ => d.any().map(|v| {
                        bad.get_or_insert(v.kind_name());
                        None
                    }),
                })?;
                shape.extend(v);
            }
            Ok(match bad {
                None => Ok(shape),
                Some(k) => Err(k),
            })
        })?;
        let frames = self.frames;
        let data = self.at(Seg::Index(2), |d| match d.r.peek_byte() {
            Some(
                0xc0 | 0xa0..=0xbf | 0xd9..=0xdb | 0x90..=0x9f | 0xdc | 0xdd | 0x80..=0x8f | 0xde | 0xdf | 0xca | 0xcb,
            ) => d.any().map(|v| Err(v.kind_name())),
            _ => match d.token()? {
                Token::Ext(3, b) => Ok(Ok(b)),
                Token::Bin(b) => Ok(Ok(b)),
                // A Python bool is an int: `aux_buffers[True]`.
                Token::Bool(b) => match frames.get(usize::from(b)) {
                    Some(f) => Ok(Ok(*f)),
                    None => Err(index_err(i64::from(b), frames.len())),
                },
                Token::Int(i) => {
                    // A negative index is refused: vLLM indexes a Python list,
                    // where -1 is the last frame, but an engine never writes
                    // one, and honouring it would let an appended frame change
                    // what a message means (docs/limits.md).
                    if i < 0 || i as usize >= frames.len() {
                        return Err(index_err(i, frames.len()));
                    }
                    Ok(Ok(frames[i as usize]))
                }
                Token::Ext(t, _) => Err(err(RejectClass::Type, format!("tensor data has ext type {t}, expected 3"))),
                t => Err(err(
                    RejectClass::Type,
                    format!("expected tensor data (ext 3 or frame index), got {}", t.type_name()),
                )),
            },
        })?;
        let which = if kind == TensorKind::Numpy { "numpy" } else { "torch" };
        let data = data.map_err(|k| {
            err(RejectClass::Validation, format!("{which} cannot read a buffer from a {k} (tensor data)")).under("[2]")
        })?;
        let dtype = dtype
            .map_err(|k| err(RejectClass::Validation, format!("{which} cannot read a {k} as a dtype")).under("[0]"))?;
        let parsed = match kind {
            TensorKind::Numpy => numpy_dtype(&dtype),
            TensorKind::Torch => torch_dtype(&dtype),
        }
        .ok_or_else(|| err(RejectClass::Validation, format!("unknown {which} dtype {dtype:?}")).under("[0]"))?;
        let shape = match shape {
            Ok(shape) => shape,
            Err(k) => {
                let size = parsed.elem.size();
                if !data.len().is_multiple_of(size) {
                    return Err(err(
                        RejectClass::Frames,
                        format!("buffer of {} bytes is not a multiple of the item size {size}", data.len()),
                    )
                    .under("[2]"));
                }
                return Err(
                    err(RejectClass::Validation, format!("{which} cannot read a shape holding a {k}")).under("[1]")
                );
            }
        };
        self.tensor_checked(kind, dtype, parsed, shape, data)
    }

    /// TokenSpeed's tensors, judged in the order their elements are read
    /// (its receive path: docs/tokenspeed-wire.md).
    fn tensor_in_read_order(&mut self, kind: TensorKind) -> R<Tensor> {
        let (dtype, parsed) = self.at(Seg::Index(0), |d| {
            let dtype = match d.token()? {
                Token::Str(b) => utf8(b)?,
                t => return Err(type_err(&Ty::Str, &t)),
            };
            let parsed = match kind {
                TensorKind::Numpy => numpy_dtype(&dtype),
                TensorKind::Torch => torch_dtype(&dtype).or_else(|| numpy_dtype(&dtype)),
            };
            match parsed {
                Some(p) => Ok((dtype, p)),
                None => {
                    let which = if kind == TensorKind::Numpy { "numpy" } else { "torch" };
                    Err(err(RejectClass::Validation, format!("unknown {which} dtype {dtype:?}")))
                }
            }
        })?;
        let shape = self.at(Seg::Index(1), |d| {
            let t = d.token()?;
            let Token::Array(dims) = t else { return Err(type_err(&Ty::List(&Ty::Int), &t)) };
            let dims = d.check_len(dims, 1)?;
            let mut shape = Vec::with_capacity(d.prealloc(dims));
            for i in 0..dims {
                match d.token()? {
                    Token::Int(x) => shape.push(x),
                    t => return Err(type_err(&Ty::Int, &t).under(&Seg::Index(i).render())),
                }
            }
            Ok(shape)
        })?;
        let frames = self.frames;
        let data: &[u8] = self.at(Seg::Index(2), |d| match d.token()? {
            Token::Ext(3, b) => Ok(b),
            Token::Bin(b) => Ok(b),
            Token::Int(i) if i < 0 && i.unsigned_abs() <= frames.len() as u64 => {
                // TokenSpeed indexes its frame list from the end.
                Ok(frames[frames.len() - i.unsigned_abs() as usize])
            }
            Token::Int(i) => {
                if i < 0 || i as usize >= frames.len() {
                    return Err(index_err(i, frames.len()));
                }
                Ok(frames[i as usize])
            }
            Token::Ext(t, _) => Err(err(RejectClass::Type, format!("tensor data has ext type {t}, expected 3"))),
            t => Err(err(
                RejectClass::Type,
                format!("expected tensor data (ext 3 or frame index), got {}", t.type_name()),
            )),
        })?;
        self.tensor_checked(kind, dtype, parsed, shape, data)
    }

    /// The checks on a tensor whose elements have their types: the shape
    /// against the buffer, the tensor budget; the tensor.
    fn tensor_checked(
        &mut self,
        kind: TensorKind,
        dtype: String,
        parsed: DType,
        shape: Vec<i64>,
        data: &[u8],
    ) -> R<Tensor> {
        if let Err((class, seg, detail)) = check_tensor_shape(kind, &shape, data.len(), parsed.elem.size()) {
            return Err(err(class, format!("{detail} (dtype {dtype}, shape {shape:?})")).under(seg));
        }
        if data.len() > self.tensor_budget {
            return Err(err(
                RejectClass::Limits,
                format!(
                    "tensor data of {} bytes exceeds what the frames hold ({} bytes left): buffers referenced more than once",
                    data.len(),
                    self.tensor_budget
                ),
            )
            .under("[2]"));
        }
        self.tensor_budget -= data.len();
        self.depth -= 1;
        Ok(Tensor { dtype, shape, data: data.to_vec() })
    }
}

/// An aux-frame index out of the message's frames (vLLM's `IndexError`).
fn index_err(i: i64, frames: usize) -> Box<Error> {
    err(RejectClass::Frames, format!("aux frame index {i} out of range ({frames} frames)"))
}

/// The dimensions `shape` stands for when the buffer holds `elements`
/// items, with numpy's `reshape` rules: at most one negative dimension,
/// which is inferred (numpy takes any negative value as "unknown"; it needs
/// the other dimensions' product to be non-zero and to divide `elements`);
/// otherwise the product must equal `elements`. `None` when the shape does
/// not fit (or its product overflows). Every tensor vLLM accepts, numpy or
/// torch, satisfies this (torch's rules are stricter, see
/// `check_tensor_shape`).
pub fn resolve_shape(shape: &[i64], elements: usize) -> Option<Vec<u64>> {
    let mut unknown = None;
    let mut known: u64 = 1;
    for (i, &d) in shape.iter().enumerate() {
        if d < 0 {
            if unknown.replace(i).is_some() {
                return None;
            }
        } else {
            known = known.checked_mul(d as u64)?;
        }
    }
    let elements = elements as u64;
    let mut out: Vec<u64> = shape.iter().map(|&d| d.max(0) as u64).collect();
    match unknown {
        None => (known == elements).then_some(out),
        Some(i) => {
            if known == 0 || !elements.is_multiple_of(known) {
                return None;
            }
            out[i] = elements / known;
            Some(out)
        }
    }
}

/// vLLM's decode hook on a tensor's shape and buffer (`_decode_ndarray`:
/// `np.frombuffer(buf, dtype).reshape(shape)`; `_decode_tensor`:
/// `torch.frombuffer(buf, uint8).view(dtype).view(shape)`, or for an empty
/// buffer `assert 0 in shape; torch.empty(shape)`), in the order it checks:
///
/// 1. the byte count must be a multiple of the item size (`frames`);
/// 2. the shape must be well-formed: numpy admits one negative dimension of
///    any value, torch exactly one `-1` and no other negative value; an empty
///    torch buffer needs a `0` dimension and no negative one (`validation`:
///    numpy's "can only specify one unknown dimension", torch's "only one
///    dimension can be inferred" / "invalid shape dimension", the failed
///    assertion, "negative dimension");
/// 3. the shape must fit the item count, one unknown dimension being
///    inferred from it ([`resolve_shape`]; `frames`).
///
/// On error: the class, the tensor element the error belongs to (`[1]` the
/// shape, `[2]` the data) and what went wrong.
pub fn check_tensor_shape(
    kind: TensorKind,
    shape: &[i64],
    nbytes: usize,
    itemsize: usize,
) -> Result<(), (RejectClass, &'static str, String)> {
    if !nbytes.is_multiple_of(itemsize) {
        return Err((
            RejectClass::Frames,
            "[2]",
            format!("buffer of {nbytes} bytes is not a multiple of the item size {itemsize}"),
        ));
    }
    let negatives = shape.iter().filter(|&&d| d < 0).count();
    match kind {
        TensorKind::Numpy if negatives > 1 => {
            return Err((RejectClass::Validation, "[1]", "more than one unknown (negative) dimension".into()));
        }
        TensorKind::Torch if nbytes == 0 => {
            if !shape.contains(&0) {
                return Err((RejectClass::Validation, "[1]", "an empty buffer needs a 0 dimension".into()));
            }
            if negatives > 0 {
                return Err((RejectClass::Validation, "[1]", "negative dimension with an empty buffer".into()));
            }
        }
        TensorKind::Torch => {
            if let Some(d) = shape.iter().find(|&&d| d < -1) {
                return Err((RejectClass::Validation, "[1]", format!("invalid dimension {d} (only -1 is inferred)")));
            }
            if negatives > 1 {
                return Err((RejectClass::Validation, "[1]", "more than one dimension to infer".into()));
            }
        }
        TensorKind::Numpy => {}
    }
    match resolve_shape(shape, nbytes / itemsize) {
        Some(_) => Ok(()),
        None => Err((
            RejectClass::Frames,
            "[2]",
            format!("buffer of {nbytes} bytes ({} items) does not fit the shape", nbytes / itemsize),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::{check_tensor_shape, resolve_shape};
    use crate::error::RejectClass;
    use crate::schema::TensorKind;

    #[test]
    fn the_one_unknown_dimension_is_what_the_buffer_leaves_for_it() {
        assert_eq!(resolve_shape(&[-1, 2], 6), Some(vec![3, 2]));
        assert_eq!(resolve_shape(&[3, -1], 6), Some(vec![3, 2]));
        assert_eq!(resolve_shape(&[4, -1], 6), None, "6 is no multiple of 4");
        assert_eq!(resolve_shape(&[2, 3], 6), Some(vec![2, 3]));
    }

    #[test]
    fn numpy_takes_one_unknown_dimension_and_refuses_two() {
        // 6 float32 elements.
        assert_eq!(check_tensor_shape(TensorKind::Numpy, &[2, 3], 24, 4), Ok(()));
        assert_eq!(check_tensor_shape(TensorKind::Numpy, &[-1, 3], 24, 4), Ok(()));
        let e = check_tensor_shape(TensorKind::Numpy, &[-1, -1], 24, 4).unwrap_err();
        assert_eq!((e.0, e.1), (RejectClass::Validation, "[1]"));
        let e = check_tensor_shape(TensorKind::Numpy, &[4, 3], 24, 4).unwrap_err();
        assert_eq!((e.0, e.1), (RejectClass::Frames, "[2]"));
    }

    #[test]
    fn torch_takes_an_empty_buffer_only_with_a_zero_dimension_and_none_to_infer() {
        assert_eq!(check_tensor_shape(TensorKind::Torch, &[0, 3], 0, 4), Ok(()));
        for shape in [&[0, -1][..], &[2, 3]] {
            let e = check_tensor_shape(TensorKind::Torch, shape, 0, 4).unwrap_err();
            assert_eq!((e.0, e.1), (RejectClass::Validation, "[1]"), "{shape:?}");
        }
    }
}
