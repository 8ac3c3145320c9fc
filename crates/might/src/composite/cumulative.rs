//! Cumulative sums and products along a dim (`cumsum`, `cumprod`).
//!
//! Built as a log-depth scan (Hillis–Steele): after step `k` every element holds the sum (or
//! product) of the `2^k` elements ending at it, by adding (or multiplying) a copy of itself
//! shifted by `2^(k-1)` along the dim. That is `⌈log2 n⌉` elementwise ops on every backend,
//! and the backward is the chain of those adds and multiplies. For `cumprod` this matters: a
//! gradient through multiplications never divides by the input, so it stays exact when the
//! input holds zeros (dividing the output by the input, the quick formula, would not).

use crate::shape::normalize_dim;
use crate::{DType, Result, Tensor};

impl Tensor {
    #[track_caller]
    fn scan(&self, op: &str, dim: isize, prod: bool) -> Result<Tensor> {
        let d = normalize_dim(op, dim, self.rank().max(1))?;
        // ints and bool accumulate in int64, as torch does
        let x = match self.dtype() {
            DType::Bool | DType::U8 => self.to_dtype(DType::I64)?,
            _ => self.deep_clone()?,
        };
        if self.rank() == 0 {
            return Ok(x);
        }
        let n = self.dims()[d];
        let mut acc = x;
        let mut s = 1;
        while s < n {
            let mut head_shape = acc.dims().to_vec();
            head_shape[d] = s;
            let fill = if prod { 1.0 } else { 0.0 };
            let head = Tensor::full_on(head_shape, fill, acc.dtype(), acc.device())?;
            let shifted = Tensor::cat(&[head, acc.narrow(d as isize, 0, n - s)?], d as isize)?;
            acc = if prod {
                acc.mul(&shifted)?
            } else {
                acc.add(&shifted)?
            };
            s *= 2;
        }
        Ok(acc)
    }

    /// `torch.cumsum(self, dim)`: `out[i] = self[0] + … + self[i]` along `dim`. Bool and
    /// uint8 inputs sum into int64, like torch.
    #[track_caller]
    pub fn cumsum(&self, dim: isize) -> Result<Tensor> {
        self.scan("cumsum", dim, false)
    }

    /// `torch.cumprod(self, dim)`: `out[i] = self[0] · … · self[i]` along `dim`, with a gradient
    /// that is exact at zeros. Bool and uint8 inputs multiply into int64, like torch.
    #[track_caller]
    pub fn cumprod(&self, dim: isize) -> Result<Tensor> {
        self.scan("cumprod", dim, true)
    }
}
