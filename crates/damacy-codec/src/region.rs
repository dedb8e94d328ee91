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
}
