//! Where position `p` of an order lands: a flat (optionally permuted) order of
//! sample ids, or a windowed order over a sequence of groups.

use crate::hash::{EpochKey, mix};
use crate::permute::Permutation;
use crate::space::{GroupLevel, SampleSpace};

/// A sequence of groups: `j ↦ order(start + j·step)`, `order` a permutation of
/// the space's groups or the identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GroupSeq {
    pub(crate) order: Option<Permutation>,
    pub(crate) start: u64,
    pub(crate) step: u64,
    pub(crate) count: u64,
}

impl GroupSeq {
    #[inline]
    pub(crate) fn group(&self, j: u64) -> u64 {
        let x = self.start + j * self.step;
        self.order.as_ref().map_or(x, |p| p.apply(x))
    }
}

/// Groups in sequence, cut into windows of `window` groups; samples are
/// shuffled within each window when `salt` is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Windowed {
    pub(crate) seq: GroupSeq,
    pub(crate) window: u64,
    pub(crate) level: GroupLevel,
    pub(crate) salt: Option<u64>,
}

/// How layout positions map to sample ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Layout {
    /// Position `p` is id `perm(p)` (or `p`).
    Flat(Option<Permutation>),
    /// Positions run through the groups of a sequence, window by window.
    Windowed(Windowed),
}

/// The window a [`Windowed`] layout looked at last: sequential access costs
/// O(1) amortised per sample, plus O(window) per window.
#[derive(Debug, Clone, Default)]
pub(crate) struct Cursor {
    loaded: bool,
    win: u64,
    start: u64,
    len: u64,
    /// `prefix[k]`: samples in the window's groups before group `k`.
    prefix: Vec<u64>,
    /// First id of each of the window's groups.
    first: Vec<u64>,
    perm: Option<Permutation>,
}

impl Windowed {
    fn load<S: SampleSpace + ?Sized>(&self, space: &S, key: EpochKey, cur: &mut Cursor, win: u64, start: u64) {
        cur.loaded = true;
        cur.win = win;
        cur.start = start;
        cur.prefix.clear();
        cur.first.clear();
        cur.prefix.push(0);
        let lo = win.saturating_mul(self.window).min(self.seq.count);
        let hi = lo.saturating_add(self.window).min(self.seq.count);
        let mut total = 0;
        for j in lo..hi {
            let r = space.group_range(self.level, self.seq.group(j), key);
            total += r.end - r.start;
            cur.first.push(r.start);
            cur.prefix.push(total);
        }
        cur.len = total;
        cur.perm = self.salt.map(|s| Permutation::new(total, mix(s, win)));
    }

    /// The id at position `p`, or `None` when `p` is past the end.
    pub(crate) fn locate<S: SampleSpace + ?Sized>(
        &self,
        space: &S,
        key: EpochKey,
        p: u64,
        cur: &mut Cursor,
    ) -> Option<u64> {
        if !cur.loaded || p < cur.start {
            self.load(space, key, cur, 0, 0);
        }
        while p >= cur.start + cur.len {
            let next = cur.win + 1;
            if next.saturating_mul(self.window) >= self.seq.count {
                return None;
            }
            let start = cur.start + cur.len;
            self.load(space, key, cur, next, start);
        }
        let off = p - cur.start;
        let off = cur.perm.as_ref().map_or(off, |perm| perm.apply(off));
        let k = cur.prefix.partition_point(|&x| x <= off) - 1;
        Some(cur.first[k] + (off - cur.prefix[k]))
    }
}
