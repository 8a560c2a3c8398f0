//! `Any`-typed values (`extra_args`, `kv_transfer_params`, UTILITY
//! arguments, ...) and multimodal `NestedTensors`: the only unbounded
//! nesting on the wire, so both are decoded iteratively, with an explicit
//! stack of open containers on the heap, never the call stack. Ext types:
//! vLLM's decoder knows 3 (a raw view); 1 and 2 (pickle) are refused.

use super::{err, type_err, utf8, Decoder, Seg, Under, R};
use crate::error::RejectClass;
use crate::msgpack::Token;
use crate::schema::{TensorKind, Ty};
use crate::value::Value;

/// An open container of an `Any` value (see `Decoder::any`).
enum AnyFrame {
    Array {
        items: Vec<Value>,
        left: usize,
    },
    /// `key` holds the key whose value comes next.
    Map {
        entries: Vec<(Value, Value)>,
        key: Option<Value>,
        left: usize,
    },
}

/// The path inside an `Any` value to the element being read.
fn any_path(open: &[AnyFrame]) -> String {
    let mut p = String::new();
    for f in open {
        match f {
            AnyFrame::Array { items, .. } => p.push_str(&Seg::Index(items.len()).render()),
            AnyFrame::Map { key: Some(k), .. } => {
                let label = match k {
                    Value::Str(s) => s.clone(),
                    other => format!("{other:?}"),
                };
                p.push_str(&Seg::Key(&label).render());
            }
            AnyFrame::Map { key: None, .. } => {}
        }
    }
    p
}

impl<'a> Decoder<'a, '_> {
    /// vLLM's rule (`_decode_nested_tensors`): numbers stay numbers; a
    /// non-empty array whose first element is a string is a torch tensor;
    /// any other array is a list of nested tensors. Iterative (an explicit
    /// stack of open lists), so the nesting costs heap, not call stack.
    pub(super) fn nested_tensors(&mut self) -> R<Value> {
        let mut open: Vec<(Vec<Value>, usize)> = Vec::new();
        let path =
            |open: &[(Vec<Value>, usize)]| open.iter().map(|(xs, _)| Seg::Index(xs.len()).render()).collect::<String>();
        loop {
            let t = self.peek().map_err(|e| e.under(&path(&open)))?;
            let mut v = match t {
                Token::Int(_) | Token::UInt(_) | Token::F32(_) | Token::F64(_) | Token::Bool(_) => {
                    self.any().map_err(|e| e.under(&path(&open)))?
                }
                Token::Array(n) => {
                    let mut look = self.r.clone();
                    let _ = look.token();
                    if n > 0 && matches!(look.token(), Ok(Token::Str(_))) {
                        let t = self.tensor(TensorKind::Torch).map_err(|e| e.under(&path(&open)))?;
                        Value::Tensor(Box::new(t))
                    } else {
                        self.token()?;
                        let n = self.check_len(n, 1).and_then(|n| self.enter().map(|()| n));
                        let n = n.map_err(|e| e.under(&path(&open)))?;
                        if n > 0 {
                            open.push((Vec::with_capacity(self.prealloc(n)), n));
                            continue;
                        }
                        self.depth -= 1;
                        Value::Array(Vec::new())
                    }
                }
                t => return Err(type_err(&Ty::NestedTensors, &t).under(&path(&open))),
            };
            // Hand the value to the innermost open list, closing the lists
            // it completes.
            loop {
                let Some((items, left)) = open.last_mut() else { return Ok(v) };
                items.push(v);
                *left -= 1;
                if *left > 0 {
                    break;
                }
                let (items, _) = open.pop().unwrap_or_default();
                self.depth -= 1;
                v = Value::Array(items);
            }
        }
    }

    /// An `Any`-typed value: the plain MessagePack tree. Iterative (an
    /// explicit stack of open arrays and maps), so that the nesting the
    /// depth limit admits costs heap, not call stack; errors name the path
    /// as the recursive rendering would (`[i]` per array element, `.key`
    /// per map value, nothing for a map key).
    pub(super) fn any(&mut self) -> R<Value> {
        let mut open: Vec<AnyFrame> = Vec::new();
        loop {
            let mut v = match self.any_scalar_or_open(&mut open) {
                Ok(Some(v)) => v,
                Ok(None) => continue,
                Err(e) => return Err(e.under(&any_path(&open))),
            };
            // Hand the value to the innermost open container, closing the
            // containers it completes.
            loop {
                match open.last_mut() {
                    None => return Ok(v),
                    Some(AnyFrame::Array { items, left }) => {
                        items.push(v);
                        *left -= 1;
                        if *left > 0 {
                            break;
                        }
                        let Some(AnyFrame::Array { items, .. }) = open.pop() else { unreachable!() };
                        v = Value::Array(items);
                    }
                    Some(AnyFrame::Map { entries, key, left }) => match key.take() {
                        None => {
                            *key = Some(v);
                            break;
                        }
                        Some(k) => {
                            entries.push((k, v));
                            *left -= 1;
                            if *left > 0 {
                                break;
                            }
                            let Some(AnyFrame::Map { entries, .. }) = open.pop() else { unreachable!() };
                            v = Value::Map(entries);
                        }
                    },
                }
                self.depth -= 1;
            }
        }
    }

    /// One step of [`Decoder::any`]: a scalar (or an empty container) as
    /// `Some`, or `None` after opening a non-empty container on `open`.
    fn any_scalar_or_open(&mut self, open: &mut Vec<AnyFrame>) -> R<Option<Value>> {
        Ok(Some(match self.token()? {
            Token::Nil => Value::Nil,
            Token::Bool(b) => Value::Bool(b),
            Token::Int(v) => Value::Int(v),
            Token::UInt(v) => Value::UInt(v),
            Token::F32(v) => Value::Float(v as f64),
            Token::F64(v) => Value::Float(v),
            Token::Str(b) => Value::Str(utf8(b)?),
            Token::Bin(b) => Value::Bytes(b.to_vec()),
            Token::Ext(t, b) => ext(t, b)?,
            Token::Array(n) => {
                let n = self.check_len(n, 1)?;
                self.enter()?;
                if n > 0 {
                    open.push(AnyFrame::Array { items: Vec::with_capacity(self.prealloc(n)), left: n });
                    return Ok(None);
                }
                self.depth -= 1;
                Value::Array(Vec::new())
            }
            Token::Map(n) => {
                let n = self.check_len(n, 2)?;
                self.enter()?;
                if n > 0 {
                    open.push(AnyFrame::Map { entries: Vec::with_capacity(self.prealloc(n)), key: None, left: n });
                    return Ok(None);
                }
                self.depth -= 1;
                Value::Map(Vec::new())
            }
        }))
    }
}

/// Ext types: vLLM's decoder knows 3 (raw view); 1 and 2 (pickle) need
/// `VLLM_ALLOW_INSECURE_SERIALIZATION`, which a gateway never enables.
fn ext(t: i8, b: &[u8]) -> R<Value> {
    if t == 3 {
        Ok(Value::Ext(t, b.to_vec()))
    } else {
        Err(err(RejectClass::Type, format!("unsupported ext type {t} (only ext 3, raw buffers, is decoded)")))
    }
}
