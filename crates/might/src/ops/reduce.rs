//! Reductions: sum, mean, max/min (+ indices), argmax/argmin, var/std, prod, logsumexp, all/any.

use crate::backend::ReduceOp;
use crate::shape::normalize_dim;
use crate::{DType, Error, Result, Shape, Tensor};

/// Which dims a reduction removes, from PyTorch-style dim arguments.
#[track_caller]
fn reduced_mask(op: &str, dims: &[isize], rank: usize) -> Result<Vec<bool>> {
    let mut m = vec![false; rank];
    for &d in dims {
        let d = normalize_dim(op, d, rank)?;
        if m[d] {
            return Err(Error::index(
                op,
                format!("dim {d} appears twice in {dims:?}"),
            ));
        }
        m[d] = true;
    }
    Ok(m)
}

/// Output shape of a reduction.
fn out_shape(dims: &[usize], mask: &[bool], keepdim: bool) -> Shape {
    Shape(
        dims.iter()
            .zip(mask)
            .filter_map(|(&d, &r)| match (r, keepdim) {
                (false, _) => Some(d),
                (true, true) => Some(1),
                (true, false) => None,
            })
            .collect(),
    )
}

fn all_dims(rank: usize) -> Vec<isize> {
    (0..rank as isize).collect()
}

impl Tensor {
    /// Sum without autograd; ints (and bool/u8) sum into int64 like PyTorch.
    #[track_caller]
    fn sum_forward(&self, mask: &[bool], keepdim: bool) -> Result<Tensor> {
        let shape = out_shape(self.dims(), mask, keepdim);
        let out = self.storage().reduce(self.layout(), mask, ReduceOp::Sum);
        Tensor::from_result(out, shape)
    }

    /// Sum over several dims.
    #[track_caller]
    pub fn sum_dims(&self, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        let mask = reduced_mask("sum", dims, self.rank())?;
        let out = self.sum_forward(&mask, keepdim)?;
        let in_shape = self.shape().clone();
        let kshape = out_shape(self.dims(), &mask, true);
        Ok(out.record("SumBackward", &[self], move || {
            Box::new(move |g| Ok(vec![Some(g.reshape(&kshape)?.broadcast_to(&in_shape)?)]))
        }))
    }

    /// Sum over one dim.
    #[track_caller]
    pub fn sum(&self, dim: isize, keepdim: bool) -> Result<Tensor> {
        self.sum_dims(&[dim], keepdim)
    }

    /// Sum of all elements (0-d).
    #[track_caller]
    pub fn sum_all(&self) -> Result<Tensor> {
        self.sum_dims(&all_dims(self.rank()), false)
    }

    /// Sum broadcast dims away so the result has `shape` (the reverse of broadcasting; used by
    /// the backward of every broadcasting op).
    #[track_caller]
    pub fn sum_to(&self, shape: &Shape) -> Result<Tensor> {
        if self.shape() == shape {
            return Ok(self.clone());
        }
        let (src, dst) = (self.dims(), shape.dims());
        if dst.len() > src.len() {
            return Err(Error::shape(
                "sum_to",
                format!("cannot reduce {src:?} to {dst:?}"),
            ));
        }
        let lead = src.len() - dst.len();
        let mut dims = vec![];
        for i in 0..src.len() {
            if i < lead || (dst[i - lead] == 1 && src[i] != 1) {
                dims.push(i as isize);
            } else if dst[i - lead] != src[i] {
                return Err(Error::shape(
                    "sum_to",
                    format!("cannot reduce {src:?} to {dst:?}"),
                ));
            }
        }
        self.sum_dims(&dims, true)?.reshape(shape)
    }

    /// Mean over several dims.
    #[track_caller]
    pub fn mean_dims(&self, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        self.check_float("mean")?;
        let mask = reduced_mask("mean", dims, self.rank())?;
        let n: usize = self
            .dims()
            .iter()
            .zip(&mask)
            .filter(|(_, &m)| m)
            .map(|(&d, _)| d)
            .product();
        self.sum_dims(dims, keepdim)?.affine(1.0 / n as f64, 0.0)
    }

    /// Mean over one dim.
    #[track_caller]
    pub fn mean(&self, dim: isize, keepdim: bool) -> Result<Tensor> {
        self.mean_dims(&[dim], keepdim)
    }

    /// Mean of all elements.
    #[track_caller]
    pub fn mean_all(&self) -> Result<Tensor> {
        self.mean_dims(&all_dims(self.rank()), false)
    }

    /// Values and int64 indices of the max (`max=true`) or min along one dim.
    #[track_caller]
    fn arg_ext(&self, op: &str, dim: isize, keepdim: bool, max: bool) -> Result<(Tensor, Tensor)> {
        let d = normalize_dim(op, dim, self.rank())?;
        if self.dims()[d] == 0 {
            return Err(Error::shape(
                op,
                format!("cannot reduce an empty dim {d} (shape {})", self.shape()),
            ));
        }
        let mut mask = vec![false; self.rank()];
        mask[d] = true;
        let shape = out_shape(self.dims(), &mask, keepdim);
        let (vals, idx) = self.storage().arg_reduce(self.layout(), &mask, max)?;
        let vals = Tensor::from_storage(vals, shape.clone());
        let idx = Tensor::from_storage(idx, shape);
        let (in_shape, idx_k, kd) = (self.shape().clone(), idx.clone(), keepdim);
        let vals = vals.record(
            if max { "MaxBackward" } else { "MinBackward" },
            &[self],
            move || {
                Box::new(move |g| {
                    let (g, i) = if kd {
                        (g.clone(), idx_k.clone())
                    } else {
                        (g.unsqueeze(d as isize)?, idx_k.unsqueeze(d as isize)?)
                    };
                    let z = Tensor::zeros_on(&in_shape, g.dtype(), g.device())?;
                    Ok(vec![Some(z.scatter_add(d as isize, &i, &g)?)])
                })
            },
        );
        Ok((vals, idx))
    }

    /// Max values and their indices along `dim` (`torch.max(x, dim)`).
    #[track_caller]
    pub fn max(&self, dim: isize, keepdim: bool) -> Result<(Tensor, Tensor)> {
        self.arg_ext("max", dim, keepdim, true)
    }
    /// Min values and their indices along `dim`.
    #[track_caller]
    pub fn min(&self, dim: isize, keepdim: bool) -> Result<(Tensor, Tensor)> {
        self.arg_ext("min", dim, keepdim, false)
    }
    /// Index of the max along `dim` (int64).
    #[track_caller]
    pub fn argmax(&self, dim: isize, keepdim: bool) -> Result<Tensor> {
        // indices have no gradient: skip recording the values' backward
        Ok(self.detach().arg_ext("argmax", dim, keepdim, true)?.1)
    }
    /// Index of the min along `dim` (int64).
    #[track_caller]
    pub fn argmin(&self, dim: isize, keepdim: bool) -> Result<Tensor> {
        Ok(self.detach().arg_ext("argmin", dim, keepdim, false)?.1)
    }
    /// Largest element (0-d).
    #[track_caller]
    pub fn max_all(&self) -> Result<Tensor> {
        self.flatten(0, -1)?.max(0, false).map(|r| r.0)
    }
    /// Smallest element (0-d).
    #[track_caller]
    pub fn min_all(&self) -> Result<Tensor> {
        self.flatten(0, -1)?.min(0, false).map(|r| r.0)
    }

    /// Variance over dims with Bessel-style `correction` (1 = unbiased, PyTorch's default).
    #[track_caller]
    pub fn var_dims(&self, dims: &[isize], correction: usize, keepdim: bool) -> Result<Tensor> {
        self.check_float("var")?;
        let mask = reduced_mask("var", dims, self.rank())?;
        let n: usize = self
            .dims()
            .iter()
            .zip(&mask)
            .filter(|(_, &m)| m)
            .map(|(&d, _)| d)
            .product();
        let mu = self.mean_dims(dims, true)?;
        let d = self.sub(&mu)?;
        let denom = (n as f64 - correction as f64).max(0.0);
        d.square()?
            .sum_dims(dims, keepdim)?
            .affine(1.0 / denom, 0.0)
    }
    /// Variance over one dim.
    #[track_caller]
    pub fn var(&self, dim: isize, correction: usize, keepdim: bool) -> Result<Tensor> {
        self.var_dims(&[dim], correction, keepdim)
    }
    /// Standard deviation over dims.
    #[track_caller]
    pub fn std_dims(&self, dims: &[isize], correction: usize, keepdim: bool) -> Result<Tensor> {
        self.var_dims(dims, correction, keepdim)?.sqrt()
    }
    /// Standard deviation over one dim.
    #[track_caller]
    pub fn std(&self, dim: isize, correction: usize, keepdim: bool) -> Result<Tensor> {
        self.std_dims(&[dim], correction, keepdim)
    }

    /// Product over one dim.
    #[track_caller]
    pub fn prod(&self, dim: isize, keepdim: bool) -> Result<Tensor> {
        let mask = reduced_mask("prod", &[dim], self.rank())?;
        let shape = out_shape(self.dims(), &mask, keepdim);
        if !matches!(self.dtype(), DType::F32 | DType::F64 | DType::I64) {
            return Err(Error::dtype(
                "prod",
                format!("not supported for {}", self.dtype()),
            ));
        }
        let out = self.storage().reduce(self.layout(), &mask, ReduceOp::Prod);
        let out = Tensor::from_result(out, shape)?;
        let (x, y) = (self.clone(), out.detach());
        let d = normalize_dim("prod", dim, self.rank())?;
        Ok(out.record("ProdBackward", &[self], move || {
            Box::new(move |g| {
                // d prod / d x_i = prod of the others; computed as a product over the dim with
                // x_i replaced by 1, which stays exact when some x are zero
                let (g, y) = if keepdim {
                    (g.clone(), y.clone())
                } else {
                    (g.unsqueeze(d as isize)?, y.unsqueeze(d as isize)?)
                };
                let n = x.dims()[d];
                let mut parts = Vec::with_capacity(n);
                for i in 0..n {
                    let xi = x.narrow(d as isize, i, 1)?;
                    let nz = xi.ne_scalar(0.0)?;
                    let quick = y.div(&Tensor::where_(
                        &nz,
                        &xi,
                        &Tensor::ones_on((), x.dtype(), x.device())?,
                    )?)?;
                    let others = Tensor::cat(
                        &[
                            x.narrow(d as isize, 0, i)?,
                            Tensor::ones_like(&xi)?,
                            x.narrow(d as isize, i + 1, n - i - 1)?,
                        ],
                        d as isize,
                    )?
                    .prod(d as isize, true)?;
                    parts.push(Tensor::where_(&nz, &quick, &others)?);
                }
                Ok(vec![Some(Tensor::cat(&parts, d as isize)?.mul(&g)?)])
            })
        }))
    }

    /// `log(sum(exp(x)))` along `dim`, computed stably.
    #[track_caller]
    pub fn logsumexp(&self, dim: isize, keepdim: bool) -> Result<Tensor> {
        self.check_float("logsumexp")?;
        let m = self.max(dim, true)?.0.detach();
        let finite = m.abs()?.lt_scalar(f64::INFINITY)?;
        let m = Tensor::where_(&finite, &m, &Tensor::zeros_on((), m.dtype(), m.device())?)?;
        let r = self.sub(&m)?.exp()?.sum(dim, true)?.log()?.add(&m)?;
        if keepdim {
            Ok(r)
        } else {
            r.squeeze(dim)
        }
    }

    #[track_caller]
    fn bool_reduce(&self, op: &str, dims: &[isize], keepdim: bool, any: bool) -> Result<Tensor> {
        let mask = reduced_mask(op, dims, self.rank())?;
        let shape = out_shape(self.dims(), &mask, keepdim);
        let b = if self.dtype() == DType::Bool {
            self.clone()
        } else {
            self.ne(&Tensor::zeros_on((), self.dtype(), self.device())?)?
        };
        let op = if any { ReduceOp::Any } else { ReduceOp::All };
        let out = b.storage().reduce(b.layout(), &mask, op);
        Tensor::from_result(out, shape)
    }

    /// Are all elements true (non-zero)? Over all dims.
    #[track_caller]
    pub fn all(&self) -> Result<Tensor> {
        self.bool_reduce("all", &all_dims(self.rank()), false, false)
    }
    /// Is any element true (non-zero)? Over all dims.
    #[track_caller]
    pub fn any(&self) -> Result<Tensor> {
        self.bool_reduce("any", &all_dims(self.rank()), false, true)
    }
    /// `all` along given dims.
    #[track_caller]
    pub fn all_dims(&self, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        self.bool_reduce("all", dims, keepdim, false)
    }
    /// `any` along given dims.
    #[track_caller]
    pub fn any_dims(&self, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        self.bool_reduce("any", dims, keepdim, true)
    }
}
