//! Similarity and divergence between tensors as nn pieces: `CosineSimilarity`
//! (`torch.nn.CosineSimilarity`), the `kl_div` loss and `KLDivLoss`. The work is
//! [`Tensor::cosine_similarity`] and [`Tensor::kl_div`].

use crate::{Result, Tensor};

pub use crate::composite::KlDivReduction;

/// `torch.nn.functional.cosine_similarity(x1, x2, dim, eps)`.
#[track_caller]
pub fn cosine_similarity(x1: &Tensor, x2: &Tensor, dim: isize, eps: f64) -> Result<Tensor> {
    x1.cosine_similarity(x2, dim, eps)
}

/// `torch.nn.functional.kl_div(input, target, reduction, log_target)`: `input` holds
/// log-probabilities, `target` probabilities (or log-probabilities when `log_target`).
/// `reduction` takes a [`KlDivReduction`] or a plain [`Reduction`](super::Reduction).
#[track_caller]
pub fn kl_div(
    input: &Tensor,
    target: &Tensor,
    reduction: impl Into<KlDivReduction>,
    log_target: bool,
) -> Result<Tensor> {
    input.kl_div(target, reduction.into(), log_target)
}

/// Cosine similarity along `dim` (default 1, eps 1e-8). Two inputs, so not a [`Module`]
/// (super::Module): call [`CosineSimilarity::forward`].
#[derive(Clone, Copy, Debug)]
pub struct CosineSimilarity {
    pub dim: isize,
    pub eps: f64,
}

impl Default for CosineSimilarity {
    fn default() -> Self {
        CosineSimilarity { dim: 1, eps: 1e-8 }
    }
}

impl CosineSimilarity {
    pub fn new(dim: isize, eps: f64) -> Self {
        CosineSimilarity { dim, eps }
    }

    #[track_caller]
    pub fn forward(&self, x1: &Tensor, x2: &Tensor) -> Result<Tensor> {
        x1.cosine_similarity(x2, self.dim, self.eps)
    }
}

/// The KL-divergence loss module (`torch.nn.KLDivLoss`; default reduction `Mean`, as in
/// PyTorch, though `BatchMean` is the true divergence).
#[derive(Clone, Copy, Debug, Default)]
pub struct KLDivLoss {
    pub reduction: KlDivReduction,
    pub log_target: bool,
}

impl KLDivLoss {
    pub fn new(reduction: KlDivReduction, log_target: bool) -> Self {
        KLDivLoss {
            reduction,
            log_target,
        }
    }

    #[track_caller]
    pub fn forward(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        input.kl_div(target, self.reduction, self.log_target)
    }
}
