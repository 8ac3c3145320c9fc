//! Strided iteration without per-element index arithmetic.
//!
//! A `RowPlan` merges dimensions that are laid out back to back in *every* operand, then treats
//! the innermost remaining dimension as a "row": kernels get the start offset of each row for
//! each operand and the row's stride per operand, and run a tight (often stride-1, vectorised)
//! loop over it. The outer dimensions advance with an odometer, one carry per row.

// Loops index several per-operand arrays in lockstep; index loops read clearest here.
#![allow(clippy::needless_range_loop)]

use std::ops::Range;

#[derive(Debug, Clone)]
pub struct RowPlan<const N: usize> {
    /// Outer (non-row) dims after merging, outermost first.
    pub outer: Vec<usize>,
    /// Stride of each outer dim, per operand.
    pub outer_strides: [Vec<usize>; N],
    /// Length of a row.
    pub len: usize,
    /// Stride along the row, per operand.
    pub inner: [usize; N],
    /// Number of rows (product of `outer`); 0 when the tensor is empty.
    pub rows: usize,
}

impl<const N: usize> RowPlan<N> {
    pub fn new(dims: &[usize], strides: [&[usize]; N]) -> Self {
        let numel: usize = dims.iter().product();
        // drop size-1 dims, they never move the offset
        let mut d: Vec<usize> = Vec::with_capacity(dims.len());
        let mut s: [Vec<usize>; N] = std::array::from_fn(|_| Vec::with_capacity(dims.len()));
        for (i, &n) in dims.iter().enumerate() {
            if n != 1 {
                d.push(n);
                for k in 0..N {
                    s[k].push(strides[k][i]);
                }
            }
        }
        // merge dim i into i+1 when every operand steps over dim i+1 exactly once per step of i
        let mut i = d.len();
        while i > 1 {
            i -= 1;
            let mergeable = (0..N).all(|k| s[k][i - 1] == s[k][i] * d[i]);
            if mergeable {
                d[i - 1] *= d[i];
                d.remove(i);
                for sk in s.iter_mut() {
                    sk[i - 1] = sk[i];
                    sk.remove(i);
                }
            }
        }
        if d.is_empty() {
            return RowPlan {
                outer: vec![],
                outer_strides: std::array::from_fn(|_| vec![]),
                len: if numel == 0 { 0 } else { 1 },
                inner: [0; N],
                rows: if numel == 0 { 0 } else { 1 },
            };
        }
        let len = d.pop().unwrap();
        let inner = std::array::from_fn(|k| s[k].pop().unwrap());
        let rows = if numel == 0 { 0 } else { d.iter().product() };
        RowPlan {
            outer: d,
            outer_strides: s,
            len,
            inner,
            rows,
        }
    }

    /// Call `f(row_start_offsets)` for each row in `rows` (a sub-range, for splitting work).
    #[inline]
    pub fn for_each_row(
        &self,
        base: [usize; N],
        rows: Range<usize>,
        mut f: impl FnMut([usize; N]),
    ) {
        if rows.is_empty() {
            return;
        }
        let nd = self.outer.len();
        // position of the first row in the odometer
        let mut idx = vec![0usize; nd];
        let mut rem = rows.start;
        for j in (0..nd).rev() {
            idx[j] = rem % self.outer[j];
            rem /= self.outer[j];
        }
        let mut off = base;
        for k in 0..N {
            for j in 0..nd {
                off[k] += idx[j] * self.outer_strides[k][j];
            }
        }
        for r in rows.clone() {
            f(off);
            if r + 1 == rows.end {
                break;
            }
            // advance the odometer by one row
            let mut j = nd;
            while j > 0 {
                j -= 1;
                idx[j] += 1;
                for k in 0..N {
                    off[k] += self.outer_strides[k][j];
                }
                if idx[j] < self.outer[j] {
                    break;
                }
                for k in 0..N {
                    off[k] -= self.outer[j] * self.outer_strides[k][j];
                }
                idx[j] = 0;
            }
        }
    }

    /// Storage offsets of every element, in logical (row-major) order. For index kernels.
    pub fn for_each_offset(&self, base: [usize; N], mut f: impl FnMut([usize; N])) {
        self.for_each_row(base, 0..self.rows, |mut o| {
            for _ in 0..self.len {
                f(o);
                for k in 0..N {
                    o[k] += self.inner[k];
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_contiguous_dims() {
        let p = RowPlan::new(&[2, 3, 4], [&[12, 4, 1]]);
        assert_eq!((p.rows, p.len, p.inner), (1, 24, [1]));
    }

    #[test]
    fn transposed_visits_in_logical_order() {
        // a 2x3 matrix stored column-major
        let p = RowPlan::new(&[2, 3], [&[1, 2]]);
        let mut seen = vec![];
        p.for_each_offset([0], |[o]| seen.push(o));
        assert_eq!(seen, vec![0, 2, 4, 1, 3, 5]);
    }

    #[test]
    fn sub_range_of_rows() {
        let p = RowPlan::new(&[3, 2, 5], [&[100, 10, 1]]);
        let mut starts = vec![];
        p.for_each_row([7], 2..5, |[o]| starts.push(o));
        assert_eq!(starts, vec![7 + 100, 7 + 110, 7 + 200]);
    }
}
