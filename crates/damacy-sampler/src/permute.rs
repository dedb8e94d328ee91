//! A lazy, keyed permutation of `0..n` in O(1) memory.
//!
//! A Feistel network permutes the `b`-bit words, `2^b` the next power of two at
//! or above `n`; cycle walking (apply again until the value lands below `n`)
//! restricts it to a permutation of `0..n`. Because `2^b < 2n`, a walk takes
//! fewer than two rounds of the network on average. The halves differ by at
//! most one bit, so odd `b` needs no extra walking.

use crate::hash::{mix, splitmix64};

/// Feistel rounds. Four rounds of a multiply-xorshift round function.
const ROUNDS: usize = 4;

/// A keyed bijection of `0..len`, evaluated lazily: [`apply`](Self::apply) and
/// [`inverse`](Self::inverse) cost O(1) expected time each, and the value
/// itself holds a few words whatever `len` is.
///
/// ```
/// use damacy_sampler::Permutation;
/// let p = Permutation::new(10, 42);
/// let mut seen: Vec<u64> = (0..10).map(|i| p.apply(i)).collect();
/// assert_eq!(p.inverse(p.apply(3)), 3);
/// seen.sort_unstable();
/// assert_eq!(seen, (0..10).collect::<Vec<_>>());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permutation {
    len: u64,
    lo_bits: u32,
    lo_mask: u64,
    hi_mask: u64,
    keys: [u64; ROUNDS],
}

#[inline]
fn round(v: u64, k: u64) -> u64 {
    let z = (v ^ k).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let z = (z ^ (z >> 32)).wrapping_mul(0xD6E8_FEB8_6659_FD93);
    z ^ (z >> 32)
}

impl Permutation {
    /// A permutation of `0..len` chosen by `key`. Different keys give
    /// (with overwhelming probability) different permutations.
    #[must_use]
    pub fn new(len: u64, key: u64) -> Self {
        let bits = if len <= 1 { 2 } else { (64 - (len - 1).leading_zeros()).max(2) };
        let lo_bits = bits / 2;
        let hi_bits = bits - lo_bits;
        let mut keys = [0u64; ROUNDS];
        let mut k = splitmix64(key ^ 0x5851_F42D_4C95_7F2D);
        for slot in &mut keys {
            k = mix(k, len);
            *slot = k;
        }
        Self { len, lo_bits, lo_mask: (1u64 << lo_bits) - 1, hi_mask: (1u64 << hi_bits) - 1, keys }
    }

    /// The number of elements permuted.
    #[must_use]
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the permutation is of the empty set.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    fn encrypt(&self, x: u64) -> u64 {
        let mut lo = x & self.lo_mask;
        let mut hi = x >> self.lo_bits;
        let mut r = 0;
        while r < ROUNDS {
            hi ^= round(lo, self.keys[r]) & self.hi_mask;
            lo ^= round(hi, self.keys[r + 1]) & self.lo_mask;
            r += 2;
        }
        (hi << self.lo_bits) | lo
    }

    #[inline]
    fn decrypt(&self, x: u64) -> u64 {
        let mut lo = x & self.lo_mask;
        let mut hi = x >> self.lo_bits;
        let mut r = ROUNDS;
        while r > 0 {
            r -= 2;
            lo ^= round(hi, self.keys[r + 1]) & self.lo_mask;
            hi ^= round(lo, self.keys[r]) & self.hi_mask;
        }
        (hi << self.lo_bits) | lo
    }

    /// The image of `i`. `i` must be below [`len`](Self::len); other values
    /// give an unspecified result (never a panic, never an endless loop).
    #[must_use]
    #[inline]
    pub fn apply(&self, i: u64) -> u64 {
        if self.len <= 1 || i >= self.len {
            return i;
        }
        let mut x = self.encrypt(i);
        while x >= self.len {
            x = self.encrypt(x);
        }
        x
    }

    /// The preimage of `j`: `inverse(apply(i)) == i`.
    #[must_use]
    pub fn inverse(&self, j: u64) -> u64 {
        if self.len <= 1 || j >= self.len {
            return j;
        }
        let mut x = self.decrypt(j);
        while x >= self.len {
            x = self.decrypt(x);
        }
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_bijection(n: u64, key: u64) {
        let p = Permutation::new(n, key);
        let mut seen = vec![false; n as usize];
        for i in 0..n {
            let j = p.apply(i);
            assert!(j < n, "n={n} i={i} j={j}");
            assert!(!seen[j as usize], "n={n}: {j} twice");
            seen[j as usize] = true;
            assert_eq!(p.inverse(j), i);
        }
    }

    #[test]
    fn bijection_small_and_odd_sizes() {
        for n in 0..=70 {
            check_bijection(n, n * 31 + 7);
        }
        for n in [127, 128, 129, 1000, 4095, 4096, 4097, 65_537] {
            check_bijection(n, 99);
        }
    }

    #[test]
    fn keys_give_different_orders() {
        let a = Permutation::new(1000, 1);
        let b = Permutation::new(1000, 2);
        let same = (0..1000).filter(|&i| a.apply(i) == b.apply(i)).count();
        assert!(same < 20, "{same} fixed agreements");
    }

    #[test]
    fn not_close_to_identity() {
        let p = Permutation::new(100_000, 5);
        let fixed = (0..100_000).filter(|&i| p.apply(i) == i).count();
        assert!(fixed < 20, "{fixed} fixed points");
        // Mean displacement of a random permutation is n/3.
        let disp: f64 = (0..100_000u64).map(|i| (p.apply(i) as f64 - i as f64).abs()).sum::<f64>() / 100_000.0;
        assert!((disp - 33_333.0).abs() < 2_000.0, "mean displacement {disp}");
    }

    #[test]
    fn huge_domains_do_not_overflow() {
        for n in [u64::MAX, u64::MAX / 2 + 3, 1 << 63, (1 << 40) + 1] {
            let p = Permutation::new(n, 3);
            for i in [0, 1, n / 2, n - 1] {
                let j = p.apply(i);
                assert!(j < n);
                assert_eq!(p.inverse(j), i);
            }
        }
    }
}
