//! The allocation-bound oracle: a counting global allocator and the bound
//! every decode must stay under.
//!
//! A target installs [`Counting`] as its global allocator
//! ([`crate::install_counting_allocator!`]); [`measure`] then reports the
//! peak number of bytes live during one call, above what was live before
//! it (the result, returned from the call, is included). Counting is per
//! thread, so `cargo test` threads do not disturb each other.
//!
//! # The bound
//!
//! `peak <= K * input + C`, `input` being every byte of every frame the
//! decoder was given, with `K` = [`BYTES_PER_INPUT_BYTE`] and `C` =
//! [`FIXED_BYTES`]. Why those numbers (measured, fuzz/README.md "Decoder
//! limits"): a decoded element is a 32-byte `Value`; a positional struct in
//! a list costs its whole field vector, defaults filled in, for the three
//! bytes of its required prefix (`EngineCoreOutput`: 19 fields * 32 bytes +
//! 56 for the struct, from `92 a0 90`: ~230 bytes per input byte); drift
//! paths and error paths are short strings per element. `C` covers the
//! fixed costs: default-filled roots (`SamplingParams` is 43 fields), error
//! messages and paths.
//!
//! `ENGINE_FUZZ_ALLOC` selects the mode: `strict` (the default) asserts the
//! bound above; `known` widens it by the two amplifications reported as
//! findings F1 and F2 in fuzz/README.md, so that a campaign can keep
//! searching for anything else while those wait for a decoder fix; `off`
//! measures nothing.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU8, Ordering};

/// `K`: bytes a decode may allocate per input byte.
pub const BYTES_PER_INPUT_BYTE: usize = 256;
/// `C`: bytes a decode may allocate whatever its input.
pub const FIXED_BYTES: usize = 64 * 1024;

/// A global allocator that counts live and peak bytes per thread.
pub struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

#[inline]
fn add(n: usize) {
    let _ = LIVE.try_with(|live| {
        let v = live.get() + n as isize;
        live.set(v);
        let _ = PEAK.try_with(|p| {
            if v > p.get() {
                p.set(v)
            }
        });
    });
}

#[inline]
fn sub(n: usize) {
    let _ = LIVE.try_with(|live| live.set(live.get() - n as isize));
}

// SAFETY: every call is forwarded to `System` unchanged; the counters are
// const-initialised thread locals without destructors, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            add(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            add(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        sub(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            add(new_size);
            sub(layout.size());
        }
        p
    }
}

/// Runs `f`; returns its result and the peak bytes live during the call
/// above those live before it.
pub fn measure<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let start = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(start));
    let r = f();
    let peak = PEAK.with(Cell::get) - start;
    (r, peak.max(0) as usize)
}

/// What `ENGINE_FUZZ_ALLOC` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Strict,
    Known,
    Off,
}

static MODE: AtomicU8 = AtomicU8::new(u8::MAX);

/// The mode: `Off` as well when no counting allocator is installed.
pub fn mode() -> Mode {
    let m = MODE.load(Ordering::Relaxed);
    let m = if m == u8::MAX {
        let (_, probe) = measure(|| std::hint::black_box(Box::new([0u8; 64])));
        let m = match std::env::var("ENGINE_FUZZ_ALLOC").as_deref() {
            _ if probe < 64 => 2,
            Ok("off") => 2,
            Ok("known") => 1,
            _ => 0,
        };
        MODE.store(m, Ordering::Relaxed);
        m
    } else {
        m
    };
    match m {
        0 => Mode::Strict,
        1 => Mode::Known,
        _ => Mode::Off,
    }
}

/// The most a decode of `frames` may allocate in `mode`.
pub fn bound(frames: &[&[u8]], mode: Mode) -> usize {
    let input: usize = frames.iter().map(|f| f.len()).sum();
    let strict = BYTES_PER_INPUT_BYTE.saturating_mul(input).saturating_add(FIXED_BYTES);
    match mode {
        Mode::Strict | Mode::Off => strict,
        Mode::Known => {
            // F1: every nesting level may preallocate 32 bytes per byte that
            // remains (64 levels). F2: every tensor reference (7 bytes at
            // least) may copy the largest frame.
            let payload = frames.iter().map(|f| f.len()).max().unwrap_or(0);
            let f1 = 32 * 64 * input;
            let f2 = (input / 7 + 1).saturating_mul(payload);
            strict.saturating_add(f1).saturating_add(f2)
        }
    }
}
