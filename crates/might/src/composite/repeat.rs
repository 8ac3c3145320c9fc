//! Copies of a tensor laid side by side: `repeat` / `tile` (whole tensor) and
//! `repeat_interleave` (each element in place). `repeat` is a broadcast view (`expand`) made
//! contiguous, so its backward is expand's: the copies' gradients summed.

use super::index_on;
use crate::limits::check_alloc;
use crate::shape::normalize_dim;
use crate::{Error, Result, Shape, Tensor};

impl Tensor {
    /// `torch.Tensor.repeat(*reps)`: the tensor copied `reps[i]` times along dim `i`. `reps`
    /// may be longer than the rank (the tensor then gets leading size-1 dims), not shorter.
    #[track_caller]
    pub fn repeat(&self, reps: &[usize]) -> Result<Tensor> {
        let r = self.rank();
        if reps.len() < r {
            return Err(Error::invalid(
                "repeat",
                format!(
                    "{} repeats {reps:?} for a tensor of shape {}: need at least one per dim",
                    reps.len(),
                    self.shape()
                ),
            ));
        }
        let mut dims = vec![1; reps.len() - r];
        dims.extend_from_slice(self.dims());
        let mut out = Vec::with_capacity(dims.len());
        for (&d, &k) in dims.iter().zip(reps) {
            match d.checked_mul(k) {
                Some(n) => out.push(n),
                None => {
                    return Err(Error::shape(
                        "repeat",
                        format!("{reps:?} repeats of shape {} overflow", self.shape()),
                    ))
                }
            }
        }
        let out = Shape(out);
        check_alloc("repeat", &out, self.dtype())?;
        // [d0, d1, ..] viewed as [1, d0, 1, d1, ..], expanded to [r0, d0, r1, d1, ..]
        let mut split = Vec::with_capacity(2 * dims.len());
        let mut wide = Vec::with_capacity(2 * dims.len());
        for (&d, &k) in dims.iter().zip(reps) {
            split.extend([1, d]);
            wide.extend([k, d]);
        }
        self.reshape(split)?
            .expand(wide)?
            .contiguous()?
            .reshape(out)
    }

    /// `torch.tile(self, reps)`: like [`Tensor::repeat`], but `reps` shorter than the rank is
    /// padded with leading 1s.
    #[track_caller]
    pub fn tile(&self, reps: &[usize]) -> Result<Tensor> {
        let mut full = vec![1; self.rank().saturating_sub(reps.len())];
        full.extend_from_slice(reps);
        self.repeat(&full)
    }

    /// `torch.repeat_interleave(self, repeats, dim)`: element `i` along `dim` repeated
    /// `repeats[i]` times in place (`repeats` of length 1 applies to all). With `dim` `None` the
    /// tensor is flattened first, as in torch.
    #[track_caller]
    pub fn repeat_interleave(&self, repeats: &[usize], dim: Option<isize>) -> Result<Tensor> {
        let Some(dim) = dim else {
            return self.flatten(0, -1)?.repeat_interleave(repeats, Some(0));
        };
        let d = normalize_dim("repeat_interleave", dim, self.rank().max(1))?;
        if self.rank() == 0 {
            return self.reshape([1])?.repeat_interleave(repeats, Some(0));
        }
        let n = self.dims()[d];
        if repeats.len() != 1 && repeats.len() != n {
            return Err(Error::shape(
                "repeat_interleave",
                format!(
                    "{} repeats for dim {d} of size {n} (shape {}): need 1 or {n}",
                    repeats.len(),
                    self.shape()
                ),
            ));
        }
        let total = if repeats.len() == 1 {
            repeats[0].checked_mul(n)
        } else {
            repeats.iter().try_fold(0usize, |a, &k| a.checked_add(k))
        };
        let mut shape = self.dims().to_vec();
        shape[d] = total.unwrap_or(usize::MAX);
        let shape = Shape(shape);
        if total.is_none() {
            return Err(Error::shape("repeat_interleave", "the repeats overflow"));
        }
        check_alloc("repeat_interleave", &shape, self.dtype())?;
        let ids: Vec<i64> = (0..n)
            .flat_map(|i| {
                let k = if repeats.len() == 1 {
                    repeats[0]
                } else {
                    repeats[i]
                };
                std::iter::repeat_n(i as i64, k)
            })
            .collect();
        self.index_select(d as isize, &index_on(self, ids)?)
    }
}
