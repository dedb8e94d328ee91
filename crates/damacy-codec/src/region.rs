//! Regions of an array and the N-D box arithmetic the planner and assembler share.

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

/// Copy the box `[lo, hi)` (array coordinates) from a C-order source block whose origin is
/// `src_origin` and shape `src_shape` into a C-order destination block (origin `dst_origin`,
/// shape `dst_shape`), row by row along the last axis. `copy_row(src_elem, dst_elem, n)`
/// moves `n` elements.
pub(crate) fn copy_box(
    lo: &[u64],
    hi: &[u64],
    src_origin: &[u64],
    src_shape: &[u64],
    dst_origin: &[u64],
    dst_shape: &[u64],
    mut copy_row: impl FnMut(usize, usize, usize),
) {
    let rank = lo.len();
    if rank == 0 {
        copy_row(0, 0, 1);
        return;
    }
    let src_strides = c_strides(src_shape);
    let dst_strides = c_strides(dst_shape);
    let row = (hi[rank - 1] - lo[rank - 1]) as usize;
    let mut idx = lo.to_vec();
    loop {
        let mut s = 0u64;
        let mut d = 0u64;
        for a in 0..rank {
            s += (idx[a] - src_origin[a]) * src_strides[a];
            d += (idx[a] - dst_origin[a]) * dst_strides[a];
        }
        copy_row(s as usize, d as usize, row);
        let mut axis = rank - 1;
        loop {
            if axis == 0 {
                return;
            }
            axis -= 1;
            idx[axis] += 1;
            if idx[axis] < hi[axis] {
                break;
            }
            idx[axis] = lo[axis];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn copy_box_rows() {
        // A 4x4 source at origin (2,2); copy [3,5)x[2,4) into a 3x3 destination at (3,2).
        let src: Vec<u32> = (0..16).collect();
        let mut dst = vec![99u32; 9];
        copy_box(&[3, 2], &[5, 4], &[2, 2], &[4, 4], &[3, 2], &[3, 3], |s, d, n| {
            dst[d..d + n].copy_from_slice(&src[s..s + n]);
        });
        assert_eq!(dst, vec![4, 5, 99, 8, 9, 99, 99, 99, 99]);
    }
}
