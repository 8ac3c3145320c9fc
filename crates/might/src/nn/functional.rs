//! Stateless forms of the layers and the losses (`torch.nn.functional`).

pub use super::attention::scaled_dot_product_attention;
pub use super::group_norm::{group_norm, instance_norm};
pub use super::loss::{
    binary_cross_entropy_with_logits, cross_entropy, huber_loss, l1_loss, mse_loss, nll_loss,
    CrossEntropyOptions, Reduction,
};
pub use super::norm::{batch_norm, layer_norm, rms_norm};
pub use super::similarity::{cosine_similarity, kl_div, KlDivReduction};

use crate::{DType, Error, Result, Tensor};

/// `x Wᵀ + b` for `x: [.., in]`, `W: [out, in]`, `b: [out]`.
#[track_caller]
pub fn linear(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    if weight.rank() != 2 || x.rank() == 0 || x.dims()[x.rank() - 1] != weight.dims()[1] {
        return Err(Error::shape(
            "linear",
            format!(
                "input {} does not fit weight {} (expected last dim {})",
                x.shape(),
                weight.shape(),
                weight.dims().get(1).copied().unwrap_or(0)
            ),
        ));
    }
    if let Some(b) = bias {
        if let Some(y) = x.linear_fused(weight, b)? {
            return Ok(y);
        }
    }
    let y = x.matmul(&weight.t()?)?;
    match bias {
        Some(b) => y.add(b),
        None => Ok(y),
    }
}

/// Inverted dropout: while `training`, zero each element with probability `p` and scale the
/// survivors by `1/(1-p)`; otherwise return `x` unchanged. Uses the global generator.
#[track_caller]
pub fn dropout(x: &Tensor, p: f64, training: bool) -> Result<Tensor> {
    if !(0.0..=1.0).contains(&p) {
        return Err(Error::invalid(
            "dropout",
            format!("probability must be in [0, 1], got {p}"),
        ));
    }
    if !training || p == 0.0 {
        return Ok(x.clone());
    }
    if p == 1.0 {
        return x.mul_scalar(0.0);
    }
    let udt = if x.dtype() == DType::F64 {
        DType::F64
    } else {
        DType::F32
    };
    let keep = Tensor::uniform_on(x.shape().clone(), 0.0, 1.0, udt, x.device())?.ge_scalar(p)?;
    let mask = keep.to_dtype(x.dtype())?.mul_scalar(1.0 / (1.0 - p))?;
    x.mul(&mask)
}
