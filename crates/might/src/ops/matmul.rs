//! `matmul` with `torch.matmul` semantics (1-D promotion, broadcast batch dims) and its backward.

use crate::shape::broadcast_shapes;
use crate::{Error, Result, Shape, Tensor};

/// The gradient of `rhs` in `lhs @ rhs` for the output gradient `g`.
///
/// When `rhs` is shared by every batch entry (a linear layer: `[B, T, C] @ [C, D]`), the
/// batch folds into the rows: one `[C, B·T] @ [B·T, D]` product instead of B small ones and a
/// sum over them. And when `rhs` is stored column-major (`weight.t()` of a `[D, C]` weight) the
/// product is computed as `(g^T @ lhs)^T`, so the gradient reaching the weight through the
/// transpose is already contiguous and needs no copy.
fn rhs_grad(x: &Tensor, w: &Tensor, g: &Tensor) -> Result<Tensor> {
    let rw = w.rank();
    let (k, n) = (w.dims()[rw - 2], w.dims()[rw - 1]);
    let shared = w.dims()[..rw - 2].iter().all(|&d| d == 1);
    if !shared {
        return x.transpose(-2, -1)?.matmul(g)?.sum_to(w.shape());
    }
    let rows: usize = x.dims()[..x.rank() - 1].iter().product();
    let (x2, g2) = (x.reshape([rows, k])?, g.reshape([rows, n])?);
    let st = w.strides();
    let col_major = k > 1 && st[rw - 2] == 1 && st[rw - 1] == k;
    let gw = if col_major {
        g2.t()?.matmul(&x2)?.t()?
    } else {
        x2.t()?.matmul(&g2)?
    };
    if rw == 2 {
        Ok(gw)
    } else {
        gw.reshape(w.shape())
    }
}

impl Tensor {
    /// Matrix product following `torch.matmul`: 1-D operands are promoted to matrices (and the
    /// added dim removed afterwards), leading dims broadcast as batch dims. Strided operands
    /// (e.g. transposed views) go to the GEMM as they are, without a copy.
    #[track_caller]
    pub fn matmul(&self, rhs: &Tensor) -> Result<Tensor> {
        let (ra, rb) = (self.rank(), rhs.rank());
        if ra == 0 || rb == 0 {
            return Err(Error::shape(
                "matmul",
                format!(
                    "both arguments need at least 1 dim: lhs {} vs rhs {}",
                    self.shape(),
                    rhs.shape()
                ),
            ));
        }
        match (ra, rb) {
            (1, 1) => self
                .unsqueeze(0)?
                .matmul_nd(&rhs.unsqueeze(1)?, self, rhs)?
                .reshape(()),
            (1, _) => self.unsqueeze(0)?.matmul_nd(rhs, self, rhs)?.squeeze(-2),
            (_, 1) => self.matmul_nd(&rhs.unsqueeze(1)?, self, rhs)?.squeeze(-1),
            _ => self.matmul_nd(rhs, self, rhs),
        }
    }

    /// Both operands have rank >= 2. `orig_*` are only for error messages.
    #[track_caller]
    fn matmul_nd(&self, rhs: &Tensor, orig_a: &Tensor, orig_b: &Tensor) -> Result<Tensor> {
        let (ra, rb) = (self.rank(), rhs.rank());
        let (m, k) = (self.dims()[ra - 2], self.dims()[ra - 1]);
        let (k2, n) = (rhs.dims()[rb - 2], rhs.dims()[rb - 1]);
        if k != k2 {
            return Err(Error::shape(
                "matmul",
                format!(
                    "inner dimensions differ: lhs {} vs rhs {}",
                    orig_a.shape(),
                    orig_b.shape()
                ),
            ));
        }
        self.check_same_dtype("matmul", rhs)?;
        let batch = broadcast_shapes(
            "matmul",
            &Shape(self.dims()[..ra - 2].to_vec()),
            &Shape(rhs.dims()[..rb - 2].to_vec()),
        )
        .map_err(|_| {
            Error::shape(
                "matmul",
                format!(
                    "batch dimensions cannot be broadcast: lhs {} vs rhs {}",
                    orig_a.shape(),
                    orig_b.shape()
                ),
            )
        })?;
        let mut sa = batch.0.clone();
        sa.extend([m, k]);
        let mut sb = batch.0.clone();
        sb.extend([k, n]);
        let mut so = batch.0.clone();
        so.extend([m, n]);
        crate::limits::check_alloc("matmul", &Shape(so.clone()), self.dtype())?;
        let la = self.layout().broadcast_as("matmul", &Shape(sa))?;
        let lb = rhs.layout().broadcast_as("matmul", &Shape(sb))?;
        if self.dtype() != rhs.dtype() || !self.dtype().is_float() {
            self.check_same_dtype("matmul", rhs)?;
            return Err(Error::dtype(
                "matmul",
                format!(
                    "not supported for dtype {} (use a float dtype)",
                    self.dtype()
                ),
            ));
        }
        let out = self.storage().matmul(&la, &rhs.storage(), &lb);
        let out = Tensor::from_result(out, so)?;
        let (x, w) = (self.clone(), rhs.clone());
        Ok(out.record("MmBackward", &[self, rhs], move || {
            Box::new(move |g| {
                let ga = if x.requires_grad() {
                    Some(g.matmul(&w.transpose(-2, -1)?)?.sum_to(x.shape())?)
                } else {
                    None
                };
                let gb = if w.requires_grad() {
                    Some(rhs_grad(&x, &w, g)?)
                } else {
                    None
                };
                Ok(vec![ga, gb])
            })
        }))
    }
}

impl Tensor {
    /// `self @ weight.t() + bias` for `self: [.., m, k]`, `weight: [n, k]`, `bias: [n]` (a
    /// linear layer, `torch.addmm`), the bias added inside the product (see
    /// the backend's `matmul_bias`). `None` when that does not apply (rank-1 input, other dtypes or
    /// shapes, a strided bias): the caller composes `matmul` and `add`, which also reports
    /// shape errors.
    pub(crate) fn linear_fused(&self, weight: &Tensor, bias: &Tensor) -> Result<Option<Tensor>> {
        let r = self.rank();
        let fits = r >= 2
            && weight.rank() == 2
            && bias.rank() == 1
            && weight.dims()[1] == self.dims()[r - 1]
            && bias.dims()[0] == weight.dims()[0]
            && self.dtype() == weight.dtype()
            && bias.dtype() == weight.dtype();
        if !fits {
            return Ok(None);
        }
        let (m, k, n) = (self.dims()[r - 2], self.dims()[r - 1], weight.dims()[0]);
        let wt = weight.t()?;
        let mut sa = self.dims()[..r - 2].to_vec();
        let mut sb = sa.clone();
        let mut so = sa.clone();
        sa.extend([m, k]);
        sb.extend([k, n]);
        so.extend([m, n]);
        let la = self.layout().broadcast_as("linear", &Shape(sa))?;
        let lb = wt.layout().broadcast_as("linear", &Shape(sb))?;
        let out =
            self.storage()
                .matmul_bias(&la, &wt.storage(), &lb, &bias.storage(), bias.layout())?;
        let Some(out) = out else {
            return Ok(None);
        };
        let out = Tensor::from_storage(out, so);
        let (x, w, bt) = (self.clone(), weight.clone(), bias.clone());
        Ok(Some(out.record(
            "AddmmBackward",
            &[self, weight, bias],
            move || {
                Box::new(move |g| {
                    let gx = if x.requires_grad() {
                        Some(g.matmul(&w)?)
                    } else {
                        None
                    };
                    let gw = if w.requires_grad() {
                        Some(rhs_grad(&x, &w.t()?, g)?.t()?)
                    } else {
                        None
                    };
                    let gb = if bt.requires_grad() {
                        Some(g.sum_to(bt.shape())?)
                    } else {
                        None
                    };
                    Ok(vec![gx, gw, gb])
                })
            },
        )))
    }
}
