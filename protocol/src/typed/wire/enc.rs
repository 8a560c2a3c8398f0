//! The byte writer of the direct encoder ([`Enc`]): the payload, its aux
//! frames, and the size from which an array goes to an aux frame
//! (docs/wire-protocol.md §5.11: a tensor inline as ext 3 under the
//! zero-copy threshold, or 0-d, otherwise in a new aux frame whose index,
//! from 1, replaces its data). A struct's map header is written up front or
//! patched once its unknown keys are counted (fixmap up to 15 entries,
//! map16 above).

use bytes::Bytes;

use crate::error::Error;
use crate::msgpack::write;
use crate::schema::Ty;
use crate::value::{Tensor, Value};

/// The byte writer of the direct encoder: the payload, its aux frames,
/// and the size from which an array goes to an aux frame. An aux frame
/// the encoder made (a tensor's data) is a `Vec` in `aux`; one it shares
/// with the caller (an array held as [`Bytes`], written without a copy) is
/// in `shared`, with an empty placeholder at its place in `aux`, so that
/// the common case keeps the plain vectors.
#[derive(Debug)]
pub struct Enc {
    pub out: Vec<u8>,
    pub aux: Vec<Vec<u8>>,
    /// `(index in aux, bytes)` of the shared aux frames.
    pub shared: Vec<(usize, Bytes)>,
    /// vLLM's `VLLM_MSGPACK_ZERO_COPY_THRESHOLD`: an array of fewer bytes
    /// is written inline.
    pub zero_copy_threshold: usize,
}

impl Default for Enc {
    fn default() -> Self {
        Enc::new(Vec::new())
    }
}

impl Enc {
    /// A writer appending to `out`, with vLLM's default threshold.
    pub fn new(out: Vec<u8>) -> Enc {
        Enc { out, aux: Vec::new(), shared: Vec::new(), zero_copy_threshold: crate::encode::ZERO_COPY_THRESHOLD }
    }

    /// Appends a shared aux frame; returns its index as the payload names
    /// it (from 1).
    pub fn push_shared(&mut self, b: Bytes) -> usize {
        self.shared.push((self.aux.len(), b));
        self.aux.push(Vec::new());
        self.aux.len()
    }

    /// The aux frames as owned vectors (a shared one copied).
    pub fn aux_owned(&mut self) -> Vec<Vec<u8>> {
        let mut aux = std::mem::take(&mut self.aux);
        for (i, b) in self.shared.drain(..) {
            aux[i] = b.to_vec();
        }
        aux
    }

    /// The aux frames as shared buffers (a made one moved, a shared one
    /// as it is).
    pub fn aux_shared(&mut self) -> Vec<Bytes> {
        let mut aux: Vec<Bytes> = std::mem::take(&mut self.aux).into_iter().map(Bytes::from).collect();
        for (i, b) in self.shared.drain(..) {
            aux[i] = b;
        }
        aux
    }

    #[inline(always)]
    pub fn raw(&mut self, bytes: &[u8]) {
        self.out.extend_from_slice(bytes);
    }

    /// A map header as msgspec sizes a struct's: `map16` whatever the count
    /// when the struct has more than 15 fields.
    #[inline]
    pub fn struct_map(&mut self, fields: usize, n: usize) {
        if fields > 15 {
            write::map16_len(&mut self.out, n as u16);
        } else {
            write::map_len(&mut self.out, n as u32);
        }
    }

    /// [`Enc::struct_map`] with a count of 0, for a sparse struct whose
    /// count is known only once its fields are written: the header's size
    /// depends on `fields` alone. Returns where it starts, for
    /// [`Enc::patch_struct_map`].
    #[inline]
    pub fn struct_map_placeholder(&mut self, fields: usize) -> usize {
        let at = self.out.len();
        self.struct_map(fields, 0);
        at
    }

    /// Makes the header [`Enc::struct_map_placeholder`] wrote at `at` the
    /// header [`Enc::struct_map`] writes for `fields` and `n`: the count is
    /// patched in place, except in the rare case of a struct of at most 15
    /// fields with unknown keys taking the count past 15, whose header
    /// grows (the body moves).
    #[inline]
    pub fn patch_struct_map(&mut self, at: usize, fields: usize, n: usize) {
        if fields > 15 {
            self.out[at + 1..at + 3].copy_from_slice(&(n as u16).to_be_bytes());
        } else if n < 16 {
            self.out[at] = 0x80 | n as u8;
        } else {
            let mut header = Vec::with_capacity(5);
            write::map_len(&mut header, n as u32);
            self.out.splice(at..at + 1, header);
        }
    }

    pub fn tensor(&mut self, t: &Tensor) {
        crate::encode::write_tensor(&mut self.out, &mut self.aux, t, self.zero_copy_threshold);
    }

    /// An `Any` value, with the Value encoder's rules.
    pub fn any(&mut self, v: &Value) -> Result<(), Error> {
        static ANY: Ty = Ty::Any;
        crate::encode::encode_into("", &ANY, v, &mut self.out, &mut self.aux)
    }
}
#[cfg(test)]
mod tests {
    use super::Enc;

    #[test]
    fn a_patched_struct_map_header_is_the_header_struct_map_writes() {
        // Both header forms, and a small struct whose unknown keys take the
        // count past 15 (its header grows from a fixmap to a map16).
        for fields in [0, 1, 5, 15, 16, 43] {
            for n in [0, 1, 15, 16, 17, 300, 65535] {
                let mut direct = Enc::new(vec![0x42]);
                direct.struct_map(fields, n);
                direct.out.extend_from_slice(b"body");
                let mut patched = Enc::new(vec![0x42]);
                let at = patched.struct_map_placeholder(fields);
                patched.out.extend_from_slice(b"body");
                patched.patch_struct_map(at, fields, n);
                assert_eq!(patched.out, direct.out, "{fields} fields, count {n}");
            }
        }
    }
}
