//! Runs of integers, as token ids travel (docs/wire-protocol.md §6.9 up
//! to 0.33.0: a MessagePack array of integers in their smallest forms):
//! read in blocks after one bounds check while the 1-5 byte forms fit,
//! value by value near the frame's end, and Python-set deduplication of a
//! decoded list (first occurrence kept, wire order otherwise preserved).

use super::reader::{be, Bail, P};

/// Values read per bounds check by [`int_run`].
const RUN_BLOCK: usize = 16;

/// Reads `out.len()` integers starting at `at` into `out`; the position
/// after them. Token ids take the 1-5 byte forms (positive fixint,
/// uint8/16/32): while [`RUN_BLOCK`] such values of up to 5 bytes fit in
/// the bytes left, a block of them is read after one bounds check; any
/// other form, and the values near the frame's end, go through
/// [`read_int`], one bounds check each.
///
/// A branch per form, not a table: the position of the next value depends
/// on this one's size, and a table lookup puts two loads on that chain
/// (measured at twice the time of this loop on the 512-token request of
/// `docs/bench.md`), where a predicted branch puts none.
#[inline]
pub(super) fn int_run(b: &[u8], mut at: usize, out: &mut [std::mem::MaybeUninit<i64>]) -> P<usize> {
    let mut i = 0;
    while i < out.len() {
        if out.len() - i >= RUN_BLOCK {
            if let Some(window) = b.get(at..at + 5 * RUN_BLOCK) {
                let (read, used) = token_block(window, &mut out[i..i + RUN_BLOCK]);
                i += read;
                at += used;
                if read == RUN_BLOCK {
                    continue;
                }
            }
        }
        let (v, k) = read_int(b, at)?;
        out[i].write(v);
        at += k;
        i += 1;
    }
    Ok(at)
}

/// Reads up to `out.len()` values of the token-id forms from `window`,
/// which holds at least 5 bytes per slot of `out`; stops at the first other
/// form. The number of values read and the bytes they took.
#[inline(always)]
fn token_block(window: &[u8], out: &mut [std::mem::MaybeUninit<i64>]) -> (usize, usize) {
    debug_assert!(window.len() >= 5 * out.len());
    let mut at = 0;
    for (read, slot) in out.iter_mut().enumerate() {
        // SAFETY: each value read so far took at most 5 bytes, so
        // `at <= 5 * read` and `at + 5 <= 5 * out.len() <= window.len()`:
        // the bytes `at..at + 5` are in the window.
        let w = |k: usize| unsafe { *window.get_unchecked(at + k) };
        let m = w(0);
        let (v, k) = match m {
            0x00..=0x7f => (m as i64, 1),
            0xcd => (u16::from_be_bytes([w(1), w(2)]) as i64, 3),
            0xce => (u32::from_be_bytes([w(1), w(2), w(3), w(4)]) as i64, 5),
            0xcc => (w(1) as i64, 2),
            _ => return (read, at),
        };
        slot.write(v);
        at += k;
    }
    (out.len(), at)
}

/// One MessagePack integer at `at` that fits `i64`, and its size.
#[inline(always)]
pub(super) fn read_int(b: &[u8], at: usize) -> P<(i64, usize)> {
    let m = *b.get(at).ok_or(Bail)?;
    Ok(match m {
        0x00..=0x7f => (m as i64, 1),
        0xe0..=0xff => (m as i8 as i64, 1),
        0xcc => (be::<1>(b, at + 1)?[0] as i64, 2),
        0xcd => (u16::from_be_bytes(be(b, at + 1)?) as i64, 3),
        0xce => (u32::from_be_bytes(be(b, at + 1)?) as i64, 5),
        0xcf => (i64::try_from(u64::from_be_bytes(be(b, at + 1)?)).map_err(|_| Bail)?, 9),
        0xd0 => (be::<1>(b, at + 1)?[0] as i8 as i64, 2),
        0xd1 => (i16::from_be_bytes(be(b, at + 1)?) as i64, 3),
        0xd2 => (i32::from_be_bytes(be(b, at + 1)?) as i64, 5),
        0xd3 => (i64::from_be_bytes(be(b, at + 1)?), 9),
        _ => return Err(Bail),
    })
}

/// Python set semantics: duplicates collapse, the first occurrence kept.
pub(super) fn dedup(xs: &mut Vec<i64>) {
    if xs.len() < 2 {
        return;
    }
    if xs.len() <= 16 {
        let mut kept = 0;
        for i in 0..xs.len() {
            let x = xs[i];
            if !xs[..kept].contains(&x) {
                xs[kept] = x;
                kept += 1;
            }
        }
        xs.truncate(kept);
    } else {
        let mut seen = std::collections::HashSet::with_capacity(xs.len());
        xs.retain(|x| seen.insert(*x));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_runs_read_every_form_as_read_int_does_up_to_the_frame_end() {
        // Every form and boundary (2^k - 1, 2^k for k up to 40, negatives),
        // written by the encoder, in runs that end at every distance from
        // the frame's end (the window path and the tail path).
        let mut xs: Vec<i64> = (0..=40).flat_map(|k| [(1i64 << k) - 1, 1 << k]).collect();
        xs.extend([-1, -32, -33, -128, -129, -32768, -32769, i32::MIN as i64, i64::MIN, i64::MAX]);
        for n in 0..=xs.len() {
            let mut b = Vec::new();
            for &x in &xs[..n] {
                crate::msgpack::write::int(&mut b, x);
            }
            let mut out = vec![std::mem::MaybeUninit::uninit(); n];
            let end = int_run(&b, 0, &mut out).unwrap_or_else(|_| panic!("{n} values refused"));
            assert_eq!(end, b.len());
            // SAFETY: `int_run` returned Ok, so it wrote all `n` slots.
            let got: Vec<i64> = out.iter().map(|v| unsafe { v.assume_init() }).collect();
            assert_eq!(got, xs[..n]);
        }
        // A value cut short by the frame end is refused.
        let mut out = [std::mem::MaybeUninit::uninit(); 1];
        assert!(int_run(&[0xce, 0, 1], 0, &mut out).is_err());
    }

    #[test]
    fn integers_decode_in_every_form_that_fits_i64_and_refuse_the_rest() {
        let cases: [(&[u8], Option<i64>); 12] = [
            (&[0x05], Some(5)),
            (&[0xfd], Some(-3)),
            (&[0xcc, 200], Some(200)),
            (&[0xcd, 0x03, 0xe8], Some(1000)),
            (&[0xce, 0, 1, 0x11, 0x70], Some(70000)),
            (&[0xcf, 0, 0, 1, 0, 0, 0, 0, 0], Some(1 << 40)),
            (&[0xcf, 0x80, 0, 0, 0, 0, 0, 0, 0], None),
            (&[0xd0, 0x9c], Some(-100)),
            (&[0xd1, 0xfc, 0x18], Some(-1000)),
            (&[0xd2, 0xff, 0xfe, 0xee, 0x90], Some(-70000)),
            (&[0xcd, 0x03], None),
            (&[0xc0], None),
        ];
        for (bytes, want) in cases {
            assert_eq!(read_int(bytes, 0).ok().map(|(v, _)| v), want, "{bytes:x?}");
        }
    }

    #[test]
    fn set_dedup_keeps_first_occurrences_in_order() {
        let mut short = vec![3, 1, 3, 2, 1];
        dedup(&mut short);
        assert_eq!(short, [3, 1, 2]);
        let mut long: Vec<i64> = (0..40).map(|i| i % 7).collect();
        dedup(&mut long);
        assert_eq!(long, [0, 1, 2, 3, 4, 5, 6]);
    }
}
