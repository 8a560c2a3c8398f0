//! The deterministic pseudo-random source of the tests and the fuzz
//! seeds: xorshift64 (Marsaglia's 13/7/17 triple) from a seed spread by
//! the golden-ratio multiplier. Not for anything but reproducible test
//! input: the same seed gives the same stream on every platform, forever
//! (fuzz seeds written from it are committed).

/// A xorshift64 stream.
#[derive(Debug, Clone)]
pub struct XorShift {
    state: u64,
}

impl XorShift {
    /// The stream of `seed` (any seed, zero included).
    pub fn new(seed: u64) -> XorShift {
        XorShift { state: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1 }
    }

    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state = x;
        x
    }

    /// The next byte (bits 24..32 of the next word).
    pub fn next_u8(&mut self) -> u8 {
        (self.next_u64() >> 24) as u8
    }

    /// A number below `n` (0 when `n` is 0); slightly biased, which a
    /// test input does not mind.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// A fair coin.
    pub fn coin(&mut self) -> bool {
        self.next_u64() & (1 << 40) != 0
    }

    /// `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u8()).collect()
    }

    /// `n` token ids below `vocab`.
    pub fn token_ids(&mut self, n: usize, vocab: u32) -> Vec<i64> {
        (0..n).map(|_| self.below(u64::from(vocab)) as i64).collect()
    }
}

/// `n` pseudo-random bytes of `seed`: the first `n` bytes of
/// [`XorShift::new`]`(seed)` (the generator input of the fuzz crate's
/// `roundtrip` seeds).
pub fn pseudo_random_bytes(seed: u64, n: usize) -> Vec<u8> {
    XorShift::new(seed).bytes(n)
}
