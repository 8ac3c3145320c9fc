//! Reductions over several dims at once where the core has one dim: `logsumexp_dims` and
//! `prod_dims`. Both are chains of the single-dim reductions (whose backward they reuse;
//! `prod`'s stays exact with zeros in the input).

use crate::shape::normalize_dim;
use crate::{Error, Result, Tensor};

/// Distinct dims, normalized and in increasing order; an empty list means every dim.
#[track_caller]
fn reduce_dims(op: &str, dims: &[isize], rank: usize) -> Result<Vec<usize>> {
    if dims.is_empty() {
        return Ok((0..rank).collect());
    }
    let mut out = Vec::with_capacity(dims.len());
    for &d in dims {
        let d = normalize_dim(op, d, rank)?;
        if out.contains(&d) {
            return Err(Error::index(
                op,
                format!("dim {d} appears twice in {dims:?}"),
            ));
        }
        out.push(d);
    }
    out.sort_unstable();
    Ok(out)
}

/// Drop the (size-1) `dims` of a keepdim result, highest first so the others stay put.
#[track_caller]
fn squeeze_dims(mut t: Tensor, dims: &[usize]) -> Result<Tensor> {
    for &d in dims.iter().rev() {
        t = t.squeeze(d as isize)?;
    }
    Ok(t)
}

impl Tensor {
    /// `torch.logsumexp(self, dims, keepdim)`: `log(sum(exp(x)))` over all of `dims` (every dim
    /// when empty), computed stably by subtracting the maximum first.
    #[track_caller]
    pub fn logsumexp_dims(&self, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        if !self.dtype().is_float() {
            return Err(Error::dtype(
                "logsumexp",
                format!("expected a float tensor, got {}", self.dtype()),
            ));
        }
        let ds = reduce_dims("logsumexp", dims, self.rank())?;
        if let Some(&d) = ds.iter().find(|&&d| self.dims()[d] == 0) {
            return Err(Error::shape(
                "logsumexp",
                format!("dim {d} of shape {} is empty", self.shape()),
            ));
        }
        // the shift is a constant for the gradient; infinite maxima shift by 0 instead, so
        // that inf - inf does not turn a row of -inf (or one +inf) into NaN
        let mut m = self.detach();
        for &d in &ds {
            m = m.max(d as isize, true)?.0;
        }
        let finite = m.abs()?.lt_scalar(f64::INFINITY)?;
        let m = Tensor::where_(&finite, &m, &Tensor::zeros_on((), m.dtype(), m.device())?)?;
        let sd: Vec<isize> = ds.iter().map(|&d| d as isize).collect();
        let r = self.sub(&m)?.exp()?.sum_dims(&sd, true)?.log()?.add(&m)?;
        if keepdim {
            Ok(r)
        } else {
            squeeze_dims(r, &ds)
        }
    }

    /// The product over all of `dims` (every dim when empty); differentiable, with a gradient
    /// that stays exact when the input has zeros. Float and int64 tensors.
    #[track_caller]
    pub fn prod_dims(&self, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        let ds = reduce_dims("prod", dims, self.rank())?;
        let mut r = self.clone();
        for &d in &ds {
            r = r.prod(d as isize, true)?;
        }
        if ds.is_empty() {
            // a 0-d tensor: nothing to reduce, but still a new tensor
            r = r.deep_clone()?;
        }
        if keepdim {
            Ok(r)
        } else {
            squeeze_dims(r, &ds)
        }
    }
}
