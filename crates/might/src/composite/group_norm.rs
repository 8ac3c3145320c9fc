//! Group and instance normalisation (`torch.nn.functional.group_norm` / `instance_norm`):
//! statistics per sample over groups of channels and all spatial positions, then a
//! per-channel affine.
//!
//! `[N, C, *]` is viewed as `[N, G, (C/G)·prod(*)]` rows, which is exactly the layout the fused
//! LayerNorm kernel normalises (one pass per row forward and backward, composed from primitives
//! on backends without it); the per-channel weight and bias are then applied as `[C, 1, ..]`
//! broadcasts. Instance norm is the special case `G = C`.

use crate::{DType, Error, Result, Tensor};

/// Checks a per-channel affine parameter: shape `[c]`, the input's dtype.
#[track_caller]
fn check_channel_param(op: &str, x: &Tensor, c: usize, p: Option<&Tensor>) -> Result<()> {
    let Some(p) = p else { return Ok(()) };
    if p.dims() != [c] {
        return Err(Error::shape(
            op,
            format!(
                "weight/bias {} must have one value per channel ({c}) of input {}",
                p.shape(),
                x.shape()
            ),
        ));
    }
    x.check_same_dtype(op, p)
}

impl Tensor {
    /// Group normalisation of `[N, C, *]`: the `C` channels split into `num_groups` groups of
    /// consecutive channels, each sample's group normalised by its own mean and (biased)
    /// variance, `(x - mean) / sqrt(var + eps)`, then `· weight[c] + bias[c]`.
    /// `C` must be divisible by `num_groups`. Half-precision inputs are normalised in f32, as
    /// PyTorch does.
    #[track_caller]
    pub fn group_norm(
        &self,
        num_groups: usize,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
    ) -> Result<Tensor> {
        self.grouped_norm("group_norm", num_groups, weight, bias, eps)
    }

    /// Instance normalisation of `[N, C, *]` with the input's own statistics: every
    /// `(sample, channel)` plane normalised separately (`group_norm` with one channel per
    /// group), then `· weight[c] + bias[c]`. Running statistics, if wanted, live in
    /// `nn::functional::instance_norm`.
    #[track_caller]
    pub fn instance_norm(
        &self,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
    ) -> Result<Tensor> {
        let c = if self.rank() >= 2 { self.dims()[1] } else { 0 };
        self.grouped_norm("instance_norm", c, weight, bias, eps)
    }

    #[track_caller]
    fn grouped_norm(
        &self,
        op: &str,
        groups: usize,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
    ) -> Result<Tensor> {
        self.check_float(op)?;
        if self.rank() < 2 {
            return Err(Error::shape(
                op,
                format!("expected input [N, C, *], got {}", self.shape()),
            ));
        }
        let (n, c) = (self.dims()[0], self.dims()[1]);
        if groups == 0 || !c.is_multiple_of(groups) {
            return Err(Error::invalid(
                op,
                format!(
                    "{c} channels of input {} cannot be split into {groups} groups",
                    self.shape()
                ),
            ));
        }
        if eps.is_nan() || eps < 0.0 {
            return Err(Error::invalid(op, format!("eps must be >= 0, got {eps}")));
        }
        check_channel_param(op, self, c, weight)?;
        check_channel_param(op, self, c, bias)?;
        if self.numel() == 0 {
            return Ok(self.clone());
        }
        let row = self.numel() / (n * groups);
        let rows = self.reshape([n, groups, row])?;
        let y = match self.dtype() {
            DType::F32 | DType::F64 => rows.layer_norm_fused(None, None, row, eps)?,
            dt => rows
                .to_dtype(DType::F32)?
                .layer_norm_fused(None, None, row, eps)?
                .to_dtype(dt)?,
        };
        let mut y = y.reshape(self.shape())?;
        // per-channel parameters as [C, 1, .., 1], broadcasting against [N, C, *]
        let mut pshape = vec![1usize; self.rank() - 1];
        pshape[0] = c;
        if let Some(w) = weight {
            y = y.mul(&w.reshape(pshape.clone())?)?;
        }
        if let Some(b) = bias {
            y = y.add(&b.reshape(pshape)?)?;
        }
        Ok(y)
    }
}
