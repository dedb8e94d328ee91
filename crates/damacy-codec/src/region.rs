//! Regions of an array and the N-D box arithmetic the planner, the executors and the assembler
//! share: a batch's targets (strided boxes and where their elements go in the output) and
//! [`meet`], the part of a target inside a unit. A leaf: every stage may import it.

use crate::error::{Error, Result};

/// A box of an array: a start corner and a shape, in elements.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Region {
    /// The first element along each axis.
    pub start: Vec<u64>,
    /// The extent along each axis.
    pub shape: Vec<u64>,
}

impl Region {
    /// A region from a start corner and a shape.
    #[must_use]
    pub fn new(start: Vec<u64>, shape: Vec<u64>) -> Self {
        Self { start, shape }
    }

    /// The whole of an array of the given shape.
    #[must_use]
    pub fn whole(shape: &[u64]) -> Self {
        Self { start: vec![0; shape.len()], shape: shape.to_vec() }
    }

    /// Elements in the region.
    #[must_use]
    pub fn num_elements(&self) -> u64 {
        self.shape.iter().product()
    }

    /// The exclusive end corner (saturating).
    #[must_use]
    pub fn end(&self) -> Vec<u64> {
        self.start.iter().zip(&self.shape).map(|(s, n)| s.saturating_add(*n)).collect()
    }

    /// Whether the region lies inside an array of shape `array_shape`.
    #[must_use]
    pub fn is_inside(&self, array_shape: &[u64]) -> bool {
        self.start.len() == array_shape.len()
            && self
                .start
                .iter()
                .zip(&self.shape)
                .zip(array_shape)
                .all(|((s, n), a)| s.checked_add(*n).is_some_and(|e| e <= *a))
    }

    /// The part of the region inside the array, or `None` when they do not overlap.
    #[must_use]
    pub fn clip(&self, array_shape: &[u64]) -> Option<Region> {
        let mut start = Vec::with_capacity(self.start.len());
        let mut shape = Vec::with_capacity(self.start.len());
        for ((s, n), a) in self.start.iter().zip(&self.shape).zip(array_shape) {
            let lo = (*s).min(*a);
            let hi = s.saturating_add(*n).min(*a);
            if hi <= lo {
                return None;
            }
            start.push(lo);
            shape.push(hi - lo);
        }
        Some(Region { start, shape })
    }

    /// Check rank and emptiness against an array; used before planning.
    pub(crate) fn validate(&self, array: &str, array_shape: &[u64]) -> Result<()> {
        if self.start.len() != array_shape.len() || self.shape.len() != array_shape.len() {
            return Err(Error::invalid(format!(
                "region {self} has rank {} but array {array} has rank {} (shape {array_shape:?})",
                self.start.len().max(self.shape.len()),
                array_shape.len()
            )));
        }
        if self.shape.contains(&0) {
            return Err(Error::invalid(format!("region {self} of array {array} is empty")));
        }
        Ok(())
    }
}

impl std::fmt::Display for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[")?;
        for (i, (s, n)) in self.start.iter().zip(&self.shape).enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{s}:{}", s.saturating_add(*n))?;
        }
        f.write_str("]")
    }
}

/// C-order strides (in elements) of a shape.
#[must_use]
pub fn c_strides(shape: &[u64]) -> Vec<u64> {
    let mut strides = vec![1u64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1];
    }
    strides
}

/// Visit every grid cell (of cells of `cell` elements) that a box `[lo, hi)` touches, in C order.
pub(crate) fn for_each_cell(lo: &[u64], hi: &[u64], cell: &[u64], mut f: impl FnMut(&[u64])) {
    let first: Vec<u64> = lo.iter().zip(cell).map(|(l, c)| l / c).collect();
    let last: Vec<u64> = hi.iter().zip(cell).map(|(h, c)| (h - 1) / c).collect();
    let mut idx = first.clone();
    loop {
        f(&idx);
        let mut axis = idx.len();
        loop {
            if axis == 0 {
                return;
            }
            axis -= 1;
            if idx[axis] < last[axis] {
                idx[axis] += 1;
                break;
            }
            idx[axis] = first[axis];
        }
    }
}

/// A strided box of the array and where its elements go: element `i` (a multi-index below
/// `count`) is array element `start + i·step` and output byte `dst_offset + Σ i·dst_strides`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    pub(crate) start: Vec<u64>,
    pub(crate) step: Vec<u64>,
    pub(crate) count: Vec<u64>,
    pub(crate) dst_offset: usize,
    pub(crate) dst_strides: Vec<isize>,
    /// The box of the output to fill with the fill value before units are copied, when the
    /// target was clipped to the array (the requested box, of which `count` is the part inside).
    pub(crate) padded: Option<FillBox>,
}

/// A box of the output: byte offset, extent and byte strides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FillBox {
    pub(crate) dst_offset: usize,
    pub(crate) count: Vec<u64>,
    pub(crate) dst_strides: Vec<isize>,
}

impl Target {
    /// The output box of the whole target (padding included).
    pub(crate) fn fill_box(&self) -> FillBox {
        self.padded.clone().unwrap_or_else(|| FillBox {
            dst_offset: self.dst_offset,
            count: self.count.clone(),
            dst_strides: self.dst_strides.clone(),
        })
    }
}

/// Where a target meets a unit: along each axis, the first target index inside the unit, how
/// many, and the element of the unit it starts at.
/// Inline up to [`INLINE_RANK`] axes: no heap allocation per unit and target on the read path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Meet {
    pub(crate) first: Axes<u64>,
    pub(crate) count: Axes<u64>,
    pub(crate) src_start: Axes<u64>,
}

/// Arrays of at most this rank keep per-axis scratch values inline (on the stack).
pub(crate) const INLINE_RANK: usize = 8;

/// Per-axis values, inline up to [`INLINE_RANK`] axes.
pub(crate) type Axes<T> = smallvec::SmallVec<[T; INLINE_RANK]>;

/// The part of target `t` inside the unit with origin `origin` and shape `shape`.
#[allow(clippy::many_single_char_names)] // the arithmetic reads as the formula in the doc
pub(crate) fn meet(t: &Target, origin: &[u64], shape: &[u64]) -> Option<Meet> {
    let rank = t.start.len();
    let mut m = Meet {
        first: Axes::with_capacity(rank),
        count: Axes::with_capacity(rank),
        src_start: Axes::with_capacity(rank),
    };
    for a in 0..rank {
        let (st, step, n, o, s) = (t.start[a], t.step[a], t.count[a], origin[a], shape[a]);
        if o + s <= st {
            return None;
        }
        let lo = if o > st { (o - st).div_ceil(step) } else { 0 };
        let hi = n.min((o + s - st).div_ceil(step));
        if lo >= hi {
            return None;
        }
        m.first.push(lo);
        m.count.push(hi - lo);
        m.src_start.push(st + lo * step - o);
    }
    Some(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(start: &[u64], step: &[u64], count: &[u64]) -> Target {
        Target {
            start: start.to_vec(),
            step: step.to_vec(),
            count: count.to_vec(),
            dst_offset: 0,
            dst_strides: vec![0; start.len()],
            padded: None,
        }
    }

    /// A meet along one axis.
    fn met_1d(first: u64, count: u64, src_start: u64) -> Meet {
        let one = |v| smallvec::smallvec![v];
        Meet { first: one(first), count: one(count), src_start: one(src_start) }
    }

    #[test]
    fn meets_with_steps() {
        // Elements 3, 6, 9, 12, 15 along one axis; a unit covering [8, 16).
        let t = target(&[3], &[3], &[5]);
        assert_eq!(meet(&t, &[8], &[8]), Some(met_1d(2, 3, 1)));
        assert_eq!(meet(&t, &[16], &[8]), None);
        assert_eq!(meet(&t, &[0], &[3]), None, "element 3 lies in the next unit");
        // Step larger than the unit: a unit between two selected elements is not met.
        let sparse = target(&[0], &[10], &[3]);
        assert_eq!(meet(&sparse, &[4], &[4]), None);
        assert_eq!(meet(&sparse, &[8], &[4]), Some(met_1d(1, 1, 2)));
    }

    #[test]
    fn meets_plain_boxes() {
        let t = target(&[3, 7], &[1, 1], &[6, 2]);
        let m = meet(&t, &[4, 8], &[4, 4]).unwrap();
        assert_eq!(
            m,
            Meet {
                first: smallvec::smallvec![1, 1],
                count: smallvec::smallvec![4, 1],
                src_start: smallvec::smallvec![0, 0]
            }
        );
    }

    #[test]
    fn clip_and_inside() {
        let r = Region::new(vec![5, 0], vec![10, 4]);
        assert!(!r.is_inside(&[10, 10]));
        assert_eq!(r.clip(&[10, 10]), Some(Region::new(vec![5, 0], vec![5, 4])));
        assert_eq!(Region::new(vec![12, 0], vec![2, 2]).clip(&[10, 10]), None);
        assert!(Region::new(vec![0, 0], vec![10, 10]).is_inside(&[10, 10]));
    }

    #[test]
    fn cells_touched() {
        let mut cells = Vec::new();
        for_each_cell(&[3, 7], &[9, 9], &[4, 4], |c| cells.push(c.to_vec()));
        assert_eq!(cells, vec![vec![0, 1], vec![0, 2], vec![1, 1], vec![1, 2], vec![2, 1], vec![2, 2]]);
    }
}
