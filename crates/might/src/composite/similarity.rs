//! `torch.nn.functional.cosine_similarity`: the cosine of the angle between two tensors along
//! a dim, after broadcasting them together.
//!
//! Computed as PyTorch does, `Σ (x1 / max(‖x1‖, eps)) · (x2 / max(‖x2‖, eps))`, each input
//! divided by its own norm first (more stable than dividing the dot product, and bounded by
//! 1). The clamp to `eps` acts on the value only: PyTorch applies it in place under
//! `no_grad`, so the gradient flows as if the norm were unclamped, and the norm of a zero
//! vector passes a zero gradient. Both are reproduced here.

use crate::shape::broadcast_shapes;
use crate::{no_grad, Error, Result, Tensor};

const OP: &str = "cosine_similarity";

impl Tensor {
    /// `‖x‖₂` along `dim` (kept), with a zero gradient where the norm is zero (rather than
    /// the `0 · ∞` of `sqrt` at 0), as `torch.linalg.vector_norm`'s backward gives.
    fn norm_keepdim(&self, dim: isize) -> Result<Tensor> {
        let s = self.square()?.sum_dims(&[dim], true)?;
        let pos = s.gt_scalar(0.0)?;
        let one = Tensor::full_on((), 1.0, s.dtype(), s.device())?;
        let zero = Tensor::full_on((), 0.0, s.dtype(), s.device())?;
        let root = Tensor::where_(&pos, &s, &one)?.sqrt()?;
        Tensor::where_(&pos, &root, &zero)
    }

    /// `self / max(‖self‖, eps)` along `dim`, the clamp seen by the value only.
    fn unit_along(&self, dim: isize, eps: f64) -> Result<Tensor> {
        let n = self.norm_keepdim(dim)?;
        let lift = {
            let _g = no_grad();
            n.clamp(Some(eps), None)?.sub(&n)?
        };
        self.div(&n.add(&lift)?)
    }

    /// Cosine similarity of `self` and `other` along `dim` (`torch.nn.functional.
    /// cosine_similarity(x1, x2, dim, eps)`; PyTorch's defaults are `dim = 1`, `eps = 1e-8`).
    /// The inputs broadcast together; the result drops `dim`.
    #[track_caller]
    pub fn cosine_similarity(&self, other: &Tensor, dim: isize, eps: f64) -> Result<Tensor> {
        self.check_float(OP)?;
        self.check_same_dtype(OP, other)?;
        if eps.is_nan() || eps < 0.0 {
            return Err(Error::invalid(OP, format!("eps must be >= 0, got {eps}")));
        }
        let shape = broadcast_shapes(OP, self.shape(), other.shape())?;
        let r = shape.rank() as isize;
        let d = if dim < 0 { dim + r } else { dim };
        if r == 0 || d < 0 || d >= r {
            return Err(Error::index(
                OP,
                format!(
                    "dim {dim} out of range for inputs {} and {} (broadcast {shape})",
                    self.shape(),
                    other.shape()
                ),
            ));
        }
        let a = self.broadcast_to(&shape)?;
        let b = other.broadcast_to(&shape)?;
        a.unit_along(d, eps)?
            .mul(&b.unit_along(d, eps)?)?
            .sum_dims(&[d], false)
    }
}
