//! Typed losses: the batch of the predictions and of the targets is one const parameter, so
//! a batch mismatch (or regression targets of another shape) is a compile error; each
//! returns a scalar [`Tensor0`] to call `backward()` on. The dynamic fused losses underneath.

use super::tensor::{wrap_res, Tensor0, Tensor1, Tensor2, Tensor3};
use super::Typed;
use crate::nn::functional::{self, CrossEntropyOptions, Reduction};
use crate::{Result, WithDType};

/// Mean cross-entropy of logits `[B, C]` against class ids `[B]`
/// (`nn::functional::cross_entropy` with default options).
#[track_caller]
pub fn cross_entropy<const B: usize, const C: usize, E: WithDType>(
    logits: &Tensor2<B, C, E>,
    targets: &Tensor1<B, i64>,
) -> Result<Tensor0<E>> {
    cross_entropy_with(logits, targets, &CrossEntropyOptions::default())
}

/// Cross-entropy with options (label smoothing, ignore index, reduction `Mean` or `Sum`).
#[track_caller]
pub fn cross_entropy_with<const B: usize, const C: usize, E: WithDType>(
    logits: &Tensor2<B, C, E>,
    targets: &Tensor1<B, i64>,
    opts: &CrossEntropyOptions,
) -> Result<Tensor0<E>> {
    wrap_res(functional::cross_entropy(
        logits.as_dyn(),
        targets.as_dyn(),
        opts,
    ))
}

/// Mean next-token cross-entropy of sequence logits `[B, T, V]` against ids `[B, T]`: the
/// rows are flattened to `[B·T, V]` first, exactly as `models::Gpt::forward_with_loss` does.
#[track_caller]
pub fn cross_entropy_seq<const B: usize, const T: usize, const V: usize, E: WithDType>(
    logits: &Tensor3<B, T, V, E>,
    targets: &Tensor2<B, T, i64>,
) -> Result<Tensor0<E>> {
    let n = targets.as_dyn().numel();
    wrap_res(functional::cross_entropy(
        &logits.as_dyn().reshape([n, V])?,
        &targets.as_dyn().reshape([n])?,
        &CrossEntropyOptions::default(),
    ))
}

/// Mean negative log-likelihood of log-probabilities `[B, C]` at class ids `[B]`.
#[track_caller]
pub fn nll_loss<const B: usize, const C: usize, E: WithDType>(
    log_probs: &Tensor2<B, C, E>,
    targets: &Tensor1<B, i64>,
) -> Result<Tensor0<E>> {
    wrap_res(functional::nll_loss(
        log_probs.as_dyn(),
        targets.as_dyn(),
        Reduction::Mean,
        -100,
    ))
}

/// Mean squared error between two tensors of one typed shape.
#[track_caller]
pub fn mse_loss<T: Typed>(input: &T, target: &T) -> Result<Tensor0<T::Elem>> {
    wrap_res(functional::mse_loss(
        input.as_dyn(),
        target.as_dyn(),
        Reduction::Mean,
    ))
}

/// Mean absolute error between two tensors of one typed shape.
#[track_caller]
pub fn l1_loss<T: Typed>(input: &T, target: &T) -> Result<Tensor0<T::Elem>> {
    wrap_res(functional::l1_loss(
        input.as_dyn(),
        target.as_dyn(),
        Reduction::Mean,
    ))
}
