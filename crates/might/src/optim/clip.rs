//! Gradient clipping (`torch.nn.utils.clip_grad_norm_` / `clip_grad_value_`).
//!
//! Gradients are rescaled in place when the gradient tensor is owned by its parameter alone;
//! a gradient whose buffer is shared (autograd may hand the same tensor to two leaves, e.g.
//! the two operands of an `add`) is replaced by a scaled copy instead, so clipping never
//! scales one buffer twice.

use crate::{DType, Error, Result, Tensor};
use std::sync::Arc;

/// Is `g` (just fetched with `param.grad()`) referenced by that parameter's slot only, with a
/// dense buffer nobody else sees?
fn exclusively_owned(g: &Tensor) -> bool {
    // one handle in the parameter's grad slot + the local clone `g`
    Arc::strong_count(&g.0) == 2 && Arc::strong_count(&g.0.storage) == 1 && g.is_contiguous()
}

/// Sum of |x|^p (or max |x| when `p` is infinite) of a gradient, in f64: the backend's
/// one-pass reduction where it has one, else through the host.
fn grad_norm_part(g: &Tensor, p: f64) -> f64 {
    if let Ok(Some(v)) = g.storage().norm_part(g.layout(), p) {
        return v;
    }
    crate::backend::norm_part_of(&mut g.to_f64_vec().into_iter(), p)
}

/// Multiply every gradient by `c` (in place where safe).
fn scale_grads(params: &[Tensor], c: f64) -> Result<()> {
    let _ng = crate::no_grad();
    for p in params {
        let Some(g) = p.grad() else { continue };
        if exclusively_owned(&g) && matches!(g.dtype(), DType::F32 | DType::F64) {
            g.affine_(c, 0.0)?;
        } else {
            p.set_grad(Some(g.detach().mul_scalar(c)?));
        }
    }
    Ok(())
}

/// Rescale the gradients of `params` so their joint L2 norm is at most `max_norm`; returns
/// the norm before clipping. PyTorch's formula: `coef = max_norm / (total + 1e-6)`, applied
/// when `coef < 1`. Parameters without a gradient are ignored.
#[track_caller]
pub fn clip_grad_norm_(params: &[Tensor], max_norm: f64) -> Result<f64> {
    clip_grad_norm_p_(params, max_norm, 2.0)
}

/// [`clip_grad_norm_`] with any `norm_type` p ≥ 1 (`f64::INFINITY` for the max norm).
#[track_caller]
pub fn clip_grad_norm_p_(params: &[Tensor], max_norm: f64, norm_type: f64) -> Result<f64> {
    if max_norm.is_nan() || max_norm < 0.0 {
        return Err(Error::invalid(
            "clip_grad_norm_",
            format!("max_norm must be ≥ 0, got {max_norm}"),
        ));
    }
    if norm_type.is_nan() || norm_type < 1.0 {
        return Err(Error::invalid(
            "clip_grad_norm_",
            format!("norm_type must be ≥ 1 (or infinity), got {norm_type}"),
        ));
    }
    let mut total = 0.0f64;
    for p in params {
        let Some(g) = p.grad() else { continue };
        let part = grad_norm_part(&g, norm_type);
        if norm_type.is_infinite() {
            if part > total || part.is_nan() {
                total = part;
            }
        } else {
            total += part;
        }
    }
    if norm_type.is_finite() {
        total = total.powf(1.0 / norm_type);
    }
    let coef = max_norm / (total + 1e-6);
    if coef < 1.0 || coef.is_nan() {
        scale_grads(params, coef)?;
    }
    Ok(total)
}

/// Clamp every gradient element of `params` into `[-clip_value, clip_value]`.
#[track_caller]
pub fn clip_grad_value_(params: &[Tensor], clip_value: f64) -> Result<()> {
    if clip_value.is_nan() || clip_value < 0.0 {
        return Err(Error::invalid(
            "clip_grad_value_",
            format!("clip_value must be ≥ 0, got {clip_value}"),
        ));
    }
    let _ng = crate::no_grad();
    for p in params {
        let Some(g) = p.grad() else { continue };
        let c = g.detach().clamp(Some(-clip_value), Some(clip_value))?;
        if exclusively_owned(&g) {
            g.copy_(&c)?;
        } else {
            p.set_grad(Some(c));
        }
    }
    Ok(())
}
