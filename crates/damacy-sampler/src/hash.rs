//! Small, fast, keyed hashing: epoch keys and per-sample random streams.
//!
//! Everything random in a plan derives from one [`EpochKey`], a hash-mix of
//! `(seed, epoch)`. Different uses (the sample order, the group order, the
//! drop offset, random crops, …) take independent streams of the key, so they
//! never share random bits.

/// The golden-ratio increment used by `SplitMix64`.
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// The `SplitMix64` finaliser: a bijective 64-bit mix with full avalanche.
///
/// ```
/// use damacy_sampler::splitmix64;
/// assert_ne!(splitmix64(0), splitmix64(1));
/// ```
#[must_use]
#[inline]
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(GOLDEN);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Mixes two words into one, asymmetrically: `mix(a, b) != mix(b, a)` in general,
/// and in particular `mix(0, 1) != mix(1, 0)`.
#[must_use]
#[inline]
pub(crate) fn mix(a: u64, b: u64) -> u64 {
    splitmix64(splitmix64(a) ^ splitmix64(b ^ 0x6A09_E667_F3BC_C908))
}

/// Maps a uniform 64-bit word onto `0..n` with a widening multiply
/// (bias at most `n / 2^64`). Returns 0 when `n` is 0.
#[must_use]
#[inline]
pub(crate) fn reduce(word: u64, n: u64) -> u64 {
    ((u128::from(word) * u128::from(n)) >> 64) as u64
}

/// Stream tags: one per use of an epoch key.
pub(crate) mod stream {
    /// The full-shuffle sample permutation.
    pub(crate) const ORDER: u64 = 0x01;
    /// The group-order permutation (two-level shuffles, group-granular plans).
    pub(crate) const GROUP_ORDER: u64 = 0x02;
    /// The within-window sample permutations.
    pub(crate) const WINDOW: u64 = 0x03;
    /// Where `EqualLength::Drop` cuts its hole.
    pub(crate) const DROP: u64 = 0x04;
    /// The offset of a random-crop epoch's systematic sample.
    pub(crate) const CROP_PHASE: u64 = 0x05;
    /// Per-sample random streams.
    pub(crate) const SAMPLE: u64 = 0x06;
}

/// The key of one epoch: a hash-mix of `(seed, epoch)`, never `seed + epoch`.
///
/// torch's `DistributedSampler` seeds its generator with `seed + epoch`, so
/// `(seed 0, epoch 1)` and `(seed 1, epoch 0)` give the same order. Here the two
/// words are mixed asymmetrically, so every `(seed, epoch)` pair gets its own key.
///
/// ```
/// use damacy_sampler::EpochKey;
/// assert_ne!(EpochKey::new(0, 1), EpochKey::new(1, 0));
/// assert_eq!(EpochKey::new(7, 3), EpochKey::new(7, 3));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EpochKey(u64);

impl EpochKey {
    /// The key for `epoch` of a run seeded with `seed`.
    #[must_use]
    pub fn new(seed: u64, epoch: u64) -> Self {
        Self(mix(mix(seed, 0x243F_6A88_85A3_08D3), epoch))
    }

    /// The key's 64-bit value.
    #[must_use]
    pub fn value(self) -> u64 {
        self.0
    }

    /// An independent word derived from this key for the use `tag`.
    #[must_use]
    pub(crate) fn stream(self, tag: u64) -> u64 {
        mix(self.0, tag)
    }

    /// The random stream of the sample with global id `id` in this epoch.
    ///
    /// It depends only on `(seed, epoch, id)`: not on the rank, the world size,
    /// the worker count or the position of the sample in any plan. Use it for
    /// per-sample augmentation so that it survives a change of world size.
    ///
    /// ```
    /// use damacy_sampler::EpochKey;
    /// let key = EpochKey::new(42, 0);
    /// let a = key.sample_rng(17).next_u64();
    /// let b = key.sample_rng(17).next_u64();
    /// assert_eq!(a, b);
    /// assert_ne!(a, key.sample_rng(18).next_u64());
    /// ```
    #[must_use]
    pub fn sample_rng(self, id: u64) -> SampleRng {
        SampleRng { state: mix(self.stream(stream::SAMPLE), id) }
    }
}

/// A small deterministic random stream (`SplitMix64`), keyed by
/// `(seed, epoch, sample id)` through [`EpochKey::sample_rng`].
///
/// Not cryptographic. Fast and statistically good enough for crops and
/// augmentation.
#[derive(Debug, Clone)]
pub struct SampleRng {
    state: u64,
}

impl SampleRng {
    /// The next uniform 64-bit word.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN);
        splitmix64(self.state)
    }

    /// A uniform integer in `0..n` (bias at most `n / 2^64`); 0 when `n` is 0.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        reduce(self.next_u64(), n)
    }

    /// A uniform float in `[0, 1)` with 53 random bits.
    #[inline]
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_key_is_not_seed_plus_epoch() {
        assert_ne!(EpochKey::new(0, 1), EpochKey::new(1, 0));
        assert_ne!(EpochKey::new(5, 10), EpochKey::new(10, 5));
        assert_ne!(EpochKey::new(3, 4), EpochKey::new(4, 3));
        assert_ne!(EpochKey::new(0, 0), EpochKey::new(0, 1));
    }

    #[test]
    fn mix_is_asymmetric() {
        assert_ne!(mix(0, 1), mix(1, 0));
        assert_ne!(mix(2, 3), mix(3, 2));
    }

    #[test]
    fn reduce_stays_in_range() {
        for n in [1u64, 2, 3, 10, 1 << 40, u64::MAX] {
            for w in [0, 1, u64::MAX, 0x8000_0000_0000_0000, splitmix64(n)] {
                assert!(reduce(w, n) < n);
            }
        }
        assert_eq!(reduce(u64::MAX, 0), 0);
    }

    #[test]
    fn sample_rng_floats_in_unit_interval() {
        let mut rng = EpochKey::new(1, 2).sample_rng(3);
        let mut sum = 0.0;
        for _ in 0..10_000 {
            let x = rng.next_f64();
            assert!((0.0..1.0).contains(&x));
            sum += x;
        }
        let mean = sum / 10_000.0;
        assert!((mean - 0.5).abs() < 0.02, "mean {mean}");
    }

    #[test]
    fn sample_rng_below_is_roughly_uniform() {
        let mut rng = EpochKey::new(9, 9).sample_rng(0);
        let mut counts = [0u32; 6];
        for _ in 0..60_000 {
            counts[rng.below(6) as usize] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
    }
}
