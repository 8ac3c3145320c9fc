//! Reordering along dims without changing values: `flip` (reverse) and `roll` (rotate).
//! `flip` picks the reversed rows with `index_select`, `roll` joins the two halves with
//! `cat`; both backward passes are those primitives' own.

use super::index_on;
use crate::shape::normalize_dim;
use crate::{Error, Result, Tensor};

impl Tensor {
    /// `torch.flip(self, dims)`: reverse the order of elements along each of `dims`.
    #[track_caller]
    pub fn flip(&self, dims: &[isize]) -> Result<Tensor> {
        let mut seen = vec![false; self.rank()];
        let mut out = self.deep_clone()?;
        for &dim in dims {
            let d = normalize_dim("flip", dim, self.rank())?;
            if std::mem::replace(&mut seen[d], true) {
                return Err(Error::invalid(
                    "flip",
                    format!("dim {d} appears twice in {dims:?} (shape {})", self.shape()),
                ));
            }
            let n = self.dims()[d];
            if n < 2 {
                continue;
            }
            let rev = index_on(self, (0..n as i64).rev().collect())?;
            out = out.index_select(d as isize, &rev)?;
        }
        Ok(out)
    }

    /// `torch.roll(self, shifts, dims)`: rotate elements along each dim by its shift (an
    /// element at `i` moves to `(i + shift) mod n`; negative shifts rotate the other way). With
    /// `dims` empty the tensor is rolled as if flattened, then given its shape back; `shifts`
    /// must then have one entry.
    #[track_caller]
    pub fn roll(&self, shifts: &[i64], dims: &[isize]) -> Result<Tensor> {
        if dims.is_empty() {
            if shifts.len() != 1 {
                return Err(Error::invalid(
                    "roll",
                    format!("with no dims, expected one shift, got {shifts:?}"),
                ));
            }
            return self
                .flatten(0, -1)?
                .roll(shifts, &[0])?
                .reshape(self.shape());
        }
        if shifts.len() != dims.len() {
            return Err(Error::invalid(
                "roll",
                format!("shifts {shifts:?} and dims {dims:?} differ in length"),
            ));
        }
        let mut out = self.deep_clone()?;
        for (&shift, &dim) in shifts.iter().zip(dims) {
            let d = normalize_dim("roll", dim, self.rank().max(1))?;
            if self.rank() == 0 {
                continue;
            }
            let n = self.dims()[d];
            if n == 0 {
                continue;
            }
            let s = shift.rem_euclid(n as i64) as usize;
            if s == 0 {
                continue;
            }
            let tail = out.narrow(d as isize, n - s, s)?;
            let head = out.narrow(d as isize, 0, n - s)?;
            out = Tensor::cat(&[tail, head], d as isize)?;
        }
        Ok(out)
    }
}
