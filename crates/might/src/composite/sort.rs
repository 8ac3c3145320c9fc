//! Sorting along a dim: `sort` (stable), `argsort` and `topk`. The order is found on the host
//! (a copy of the values, rows along `dim`), and the values are then picked with `gather`, so
//! the values' backward is gather's: each output gradient goes back to the element it came
//! from. NaN counts as the largest value, as in PyTorch: last ascending, first descending.

use crate::shape::normalize_dim;
use crate::{DType, Error, Result, Tensor};
use std::cmp::Ordering;

/// Stable argsort of each row of `n` consecutive values (`nan` says which values are NaN).
fn argsort_rows<T: Copy + PartialOrd>(
    vals: &[T],
    n: usize,
    descending: bool,
    nan: impl Fn(T) -> bool,
) -> Vec<i64> {
    let mut out = Vec::with_capacity(vals.len());
    if n == 0 {
        return out;
    }
    for row in vals.chunks(n) {
        let mut idx: Vec<usize> = (0..n).collect();
        // `sort_by` is stable, and reversing the comparison (not the result) keeps equal
        // elements in their original order when descending too, like torch's stable sort
        idx.sort_by(|&a, &b| {
            let (x, y) = (row[a], row[b]);
            let ord = match (nan(x), nan(y)) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                _ => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
            };
            if descending {
                ord.reverse()
            } else {
                ord
            }
        });
        out.extend(idx.into_iter().map(|i| i as i64));
    }
    out
}

impl Tensor {
    /// The int64 permutation that sorts `self` along `d` (already normalized), on self's device.
    #[track_caller]
    fn sort_permutation(&self, d: usize, descending: bool) -> Result<Tensor> {
        let last = self.rank() - 1;
        let moved = self
            .detach()
            .transpose(d as isize, last as isize)?
            .contiguous()?;
        let n = self.dims()[d];
        let idx = match self.dtype() {
            // int64 beyond 2^53 would lose order through f64
            DType::I64 => argsort_rows(&moved.to_vec::<i64>()?, n, descending, |_| false),
            _ => argsort_rows(&moved.to_f64_vec(), n, descending, f64::is_nan),
        };
        Tensor::from_vec(idx, moved.shape())?
            .transpose(d as isize, last as isize)?
            .contiguous()?
            .to_device(self.device())
    }

    /// `torch.sort(self, dim, descending, stable=True)`: the sorted values and, as int64, where
    /// each came from. Equal values keep their order; NaN sorts as the largest value.
    /// A 0-d tensor is returned as is, with index 0.
    #[track_caller]
    pub fn sort(&self, dim: isize, descending: bool) -> Result<(Tensor, Tensor)> {
        if self.rank() == 0 {
            normalize_dim("sort", dim, 1)?;
            let (v, i) = self.reshape([1])?.sort(0, descending)?;
            return Ok((v.reshape(())?, i.reshape(())?));
        }
        let d = normalize_dim("sort", dim, self.rank())?;
        let idx = self.sort_permutation(d, descending)?;
        Ok((self.gather(d as isize, &idx)?, idx))
    }

    /// `torch.argsort(self, dim, descending, stable=True)`: the indices of [`Tensor::sort`].
    #[track_caller]
    pub fn argsort(&self, dim: isize, descending: bool) -> Result<Tensor> {
        if self.rank() == 0 {
            normalize_dim("argsort", dim, 1)?;
            return Tensor::zeros_on((), DType::I64, self.device());
        }
        let d = normalize_dim("argsort", dim, self.rank())?;
        self.sort_permutation(d, descending)
    }

    /// `torch.topk(self, k, dim, largest, sorted)`: the `k` largest (or smallest) values along
    /// `dim` and their int64 indices. Ties keep their original order and NaN counts as the
    /// largest value. The result is always sorted (torch leaves the order unspecified when
    /// `sorted` is false, so a sorted result is one of the allowed answers).
    #[track_caller]
    pub fn topk(
        &self,
        k: usize,
        dim: isize,
        largest: bool,
        sorted: bool,
    ) -> Result<(Tensor, Tensor)> {
        let _ = sorted;
        if self.rank() == 0 {
            normalize_dim("topk", dim, 1)?;
            if k > 1 {
                return Err(Error::index(
                    "topk",
                    format!("k ({k}) is out of range for a 0-d tensor"),
                ));
            }
            let (v, i) = self.reshape([1])?.topk(k, 0, largest, sorted)?;
            return if k == 1 {
                Ok((v.reshape(())?, i.reshape(())?))
            } else {
                Ok((v, i))
            };
        }
        let d = normalize_dim("topk", dim, self.rank())?;
        let n = self.dims()[d];
        if k > n {
            return Err(Error::index(
                "topk",
                format!(
                    "k ({k}) is larger than dim {d} (size {n}) of shape {}",
                    self.shape()
                ),
            ));
        }
        let idx = self
            .sort_permutation(d, largest)?
            .narrow(d as isize, 0, k)?
            .contiguous()?;
        Ok((self.gather(d as isize, &idx)?, idx))
    }
}
