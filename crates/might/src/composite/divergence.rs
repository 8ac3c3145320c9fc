//! `torch.nn.functional.kl_div`: the Kullback-Leibler divergence of a target distribution from
//! the input's, the input given as log-probabilities.
//!
//! Pointwise `target · (log target - input)` (with `0 · log 0 = 0`, PyTorch's `xlogy`), or
//! `e^target · (target - input)` when the target is itself given in log space. PyTorch's
//! `batchmean` reduction (the sum over the batch's first dim divided by its size) is the one
//! that matches the mathematical definition, hence a reduction type of its own here.

use crate::ops::fused::Reduction;
use crate::shape::broadcast_shapes;
use crate::{Result, Tensor};

/// How [`Tensor::kl_div`] combines the pointwise terms (PyTorch's `reduction=` strings).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KlDivReduction {
    /// One term per element.
    None,
    Sum,
    /// Mean over all elements (PyTorch's default, though not the true divergence).
    #[default]
    Mean,
    /// Sum divided by the size of the first dim: the per-sample divergence.
    BatchMean,
}

impl From<Reduction> for KlDivReduction {
    fn from(r: Reduction) -> Self {
        match r {
            Reduction::None => KlDivReduction::None,
            Reduction::Sum => KlDivReduction::Sum,
            Reduction::Mean => KlDivReduction::Mean,
        }
    }
}

impl Tensor {
    /// KL divergence with `self` the log-probabilities of the model and `target` the
    /// reference distribution (probabilities, or log-probabilities when `log_target`);
    /// `torch.nn.functional.kl_div(input, target, reduction=.., log_target=..)`. The two
    /// broadcast together. Differentiable in both. A zero target contributes zero (and, unlike
    /// PyTorch's NaN, gradient `-input` to the target there).
    #[track_caller]
    pub fn kl_div(
        &self,
        target: &Tensor,
        reduction: KlDivReduction,
        log_target: bool,
    ) -> Result<Tensor> {
        const OP: &str = "kl_div";
        self.check_float(OP)?;
        self.check_same_dtype(OP, target)?;
        broadcast_shapes(OP, self.shape(), target.shape())?;
        let l = if log_target {
            target.exp()?.mul(&target.sub(self)?)?
        } else {
            // xlogy(t, t): 0 where t == 0 (a negative target still gives NaN, as in PyTorch)
            let zero_t = target.eq_scalar(0.0)?;
            let one = Tensor::full_on((), 1.0, target.dtype(), target.device())?;
            let zero = Tensor::full_on((), 0.0, target.dtype(), target.device())?;
            let safe = Tensor::where_(&zero_t, &one, target)?;
            let xlogx = Tensor::where_(&zero_t, &zero, &target.mul(&safe.log()?)?)?;
            xlogx.sub(&target.mul(self)?)?
        };
        match reduction {
            KlDivReduction::None => Ok(l),
            KlDivReduction::Sum => l.sum_all(),
            KlDivReduction::Mean => l.mean_all(),
            KlDivReduction::BatchMean => {
                let n = if self.rank() == 0 { 1 } else { self.dims()[0] };
                l.sum_all()?.div_scalar(n as f64)
            }
        }
    }
}
