//! The frame convention of the multi-frame fuzz targets: how one fuzz input
//! becomes a ZeroMQ multipart message.
//!
//! ```text
//! input      = count frame-desc* last
//! count      = 1 byte: the number of frames N (0..=255)
//! frame-desc = for each of the first N-1 frames:
//!              u16 little-endian D, then D & 0x7fff literal bytes;
//!              when D & 0x8000 is set, 3 more bytes follow: a fill byte F
//!              and a u16 little-endian K, and the frame is the literal
//!              bytes followed by K * 64 copies of F (up to 4 MiB)
//! last       = frame N: every byte that remains
//! ```
//!
//! Every input is some message: lengths are clamped to what remains, and the
//! frame list ends early where a descriptor would start with fewer than two
//! bytes left (so a message may have fewer than N frames). The fill form lets
//! a short input carry frames over 64 KiB (payloads past the 16-bit size
//! classes, aux buffers whose size must match dtype times shape) without
//! libFuzzer's input-length limit getting in the way.
//!
//! [`join`] writes frames in this convention (literal form only): the seed
//! writer uses it for golden frames, and a crash reproducer in this form can
//! be turned back into frames with [`split`].
//!
//! The fuzz targets (`fuzz/`), their stable seed tests and
//! `protocol/tests/fuzz_seed_corpus.rs` all read inputs with this module.

use std::borrow::Cow;

/// One fill unit: a fill count K stands for `K * FILL_UNIT` bytes.
pub const FILL_UNIT: usize = 64;
/// The largest literal frame a descriptor can carry.
pub const MAX_LITERAL: usize = 0x7fff;

/// The frames of a fuzz input (see the module documentation).
pub fn split(data: &[u8]) -> Vec<Cow<'_, [u8]>> {
    let Some((&count, mut rest)) = data.split_first() else {
        return Vec::new();
    };
    let count = count as usize;
    let mut frames = Vec::with_capacity(count);
    while frames.len() < count {
        if frames.len() + 1 == count {
            frames.push(Cow::Borrowed(rest));
            break;
        }
        if rest.len() < 2 {
            break;
        }
        let d = u16::from_le_bytes([rest[0], rest[1]]) as usize;
        rest = &rest[2..];
        let (literal, after) = rest.split_at((d & MAX_LITERAL).min(rest.len()));
        rest = after;
        if d & 0x8000 == 0 || rest.len() < 3 {
            frames.push(Cow::Borrowed(literal));
            continue;
        }
        let fill = rest[0];
        let k = u16::from_le_bytes([rest[1], rest[2]]) as usize;
        rest = &rest[3..];
        let mut frame = Vec::with_capacity(literal.len() + k * FILL_UNIT);
        frame.extend_from_slice(literal);
        frame.resize(literal.len() + k * FILL_UNIT, fill);
        frames.push(Cow::Owned(frame));
    }
    frames
}

/// Writes `frames` in the convention (literal descriptors only). `None` when
/// there are more than 255 frames or a non-last frame is longer than
/// [`MAX_LITERAL`].
pub fn join<F: AsRef<[u8]>>(frames: &[F]) -> Option<Vec<u8>> {
    let count = u8::try_from(frames.len()).ok()?;
    let mut out = vec![count];
    for (i, f) in frames.iter().enumerate() {
        let f = f.as_ref();
        if i + 1 < frames.len() {
            if f.len() > MAX_LITERAL {
                return None;
            }
            out.extend_from_slice(&(f.len() as u16).to_le_bytes());
        }
        out.extend_from_slice(f);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_then_split_gives_the_frames_back() {
        let frames: Vec<Vec<u8>> = vec![vec![0], vec![0x91, 0x01], vec![], vec![7; 300]];
        let data = join(&frames).unwrap();
        let back: Vec<Vec<u8>> = split(&data).into_iter().map(Cow::into_owned).collect();
        assert_eq!(back, frames);
        assert_eq!(split(&[]).len(), 0);
        assert_eq!(split(&[0, 1, 2]).len(), 0);
        assert_eq!(split(&[1]).len(), 1);
    }

    #[test]
    fn fill_descriptors_expand() {
        // Two frames: literal "ab" plus 2 * 64 bytes of 0x01, then "z".
        let data = [2, 0x02, 0x80, b'a', b'b', 0x01, 0x02, 0x00, b'z'];
        let frames = split(&data);
        assert_eq!(frames.len(), 2);
        assert_eq!(frames[0].len(), 2 + 128);
        assert_eq!(&frames[0][..3], b"ab\x01");
        assert_eq!(&*frames[1], b"z");
    }

    #[test]
    fn short_inputs_end_the_frame_list() {
        assert_eq!(split(&[5, 0x01]).len(), 0);
        let frames = split(&[3, 0x05, 0x00, 1, 2]);
        assert_eq!(frames.len(), 1);
        assert_eq!(&*frames[0], &[1, 2]);
    }
}
