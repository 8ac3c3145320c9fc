//! softmax / log_softmax along a dim (the row kernels live in each backend).

use crate::shape::normalize_dim;
use crate::{Result, Tensor};

impl Tensor {
    /// Move `dim` last and make contiguous (a view when `dim` is already last).
    fn dim_last(&self, d: usize) -> Result<Tensor> {
        let r = self.rank();
        if d + 1 == r {
            self.contiguous()
        } else {
            self.transpose(d as isize, -1)?.contiguous()
        }
    }

    #[track_caller]
    fn softmax_impl(&self, dim: isize, log: bool) -> Result<Tensor> {
        let op = if log { "log_softmax" } else { "softmax" };
        self.check_float(op)?;
        if self.rank() == 0 {
            return self.unsqueeze(0)?.softmax_impl(0, log)?.squeeze(0);
        }
        let d = normalize_dim(op, dim, self.rank())?;
        let x = self.detach().dim_last(d)?;
        let n = x.dims()[x.rank() - 1];
        let out = x.storage().softmax_rows(x.layout(), n, log)?;
        let Some(out) = out else {
            // the backend computes this dtype through f32
            let dt = self.dtype();
            return self
                .to_dtype(crate::DType::F32)?
                .softmax_impl(dim, log)?
                .to_dtype(dt);
        };
        let mut y = Tensor::from_storage(out, x.shape());
        if d + 1 != self.rank() {
            y = y.transpose(d as isize, -1)?;
        }
        let yd = y.detach();
        Ok(y.record(
            if log {
                "LogSoftmaxBackward"
            } else {
                "SoftmaxBackward"
            },
            &[self],
            move || Box::new(move |g| Ok(vec![Some(softmax_backward(g, &yd, d, log)?)])),
        ))
    }

    /// Softmax along `dim`.
    #[track_caller]
    pub fn softmax(&self, dim: isize) -> Result<Tensor> {
        self.softmax_impl(dim, false)
    }

    /// Log-softmax along `dim` (more accurate than `softmax().log()`).
    #[track_caller]
    pub fn log_softmax(&self, dim: isize) -> Result<Tensor> {
        self.softmax_impl(dim, true)
    }
}

/// Fused backward of softmax/log_softmax given the output `y`.
fn softmax_backward(g: &Tensor, y: &Tensor, d: usize, log: bool) -> Result<Tensor> {
    let r = y.rank();
    let (g2, y2) = (g.dim_last(d)?, y.dim_last(d)?);
    let n = y2.dims()[r - 1];
    let out = g2
        .storage()
        .softmax_backward_rows(g2.layout(), &y2.storage(), y2.layout(), n, log);
    let out = Tensor::from_result(out, y2.shape())?;
    if d + 1 != r {
        out.transpose(d as isize, -1)
    } else {
        Ok(out)
    }
}
