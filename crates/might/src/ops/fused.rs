//! Fused ops: one backend call for what would otherwise be several passes (LayerNorm, ...).
//!
//! Each front-end asks the backend for its fused kernel; a backend without one answers `None`
//! and the op is composed from primitive ops instead, whose recorded graph gives the backward.
//! So a new backend is correct on day one and overrides only what it makes fast.

use crate::backend::CeTarget;
use crate::{DType, Result, Tensor};

/// How per-element losses are combined (PyTorch's `reduction=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reduction {
    /// Average (over non-ignored targets for class-index losses).
    #[default]
    Mean,
    Sum,
    /// Keep one loss per element / sample.
    None,
}

/// A cross-entropy whose arguments are checked (by `nn::cross_entropy`): contiguous logit
/// rows `x` (`[rows, c]`, the class dim moved last) against class indices (`ids`, `None` for
/// ignored rows) or probability rows (`probs`, like `x`).
pub(crate) struct CeRows {
    pub(crate) x: Tensor,
    pub(crate) ids: Option<Vec<Option<usize>>>,
    pub(crate) probs: Option<Tensor>,
    pub(crate) c: usize,
    /// the loss's shape under `Reduction::None` (the logits' without the class dim)
    pub(crate) row_shape: Vec<usize>,
    pub(crate) eps: f64,
    pub(crate) cw: Option<Vec<f64>>,
    pub(crate) reduction: Reduction,
}

/// Optional operand as (storage guard, layout).
type Guarded<'a> = Option<(
    std::sync::RwLockReadGuard<'a, crate::Storage>,
    &'a crate::Layout,
)>;

fn guard(t: Option<&Tensor>) -> Guarded<'_> {
    t.map(|t| (t.storage(), t.layout()))
}

fn borrow<'a>(g: &'a Guarded<'_>) -> Option<(&'a crate::Storage, &'a crate::Layout)> {
    g.as_ref().map(|(s, l)| (&**s, *l))
}

impl Tensor {
    /// LayerNorm over the trailing dims holding `n` elements (checked by the caller), with
    /// `weight`/`bias` of `n` elements: `(x - mean) / sqrt(var + eps) * weight + bias`, biased
    /// variance. One fused pass per row forward and backward where the backend has it.
    pub(crate) fn layer_norm_fused(
        &self,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        n: usize,
        eps: f64,
    ) -> Result<Tensor> {
        let x = self.detach().contiguous()?;
        let w = weight.map(|w| w.detach().contiguous()).transpose()?;
        let b = bias.map(|b| b.detach().contiguous()).transpose()?;
        let fused = {
            let (gw, gb) = (guard(w.as_ref()), guard(b.as_ref()));
            x.storage()
                .layer_norm(x.layout(), borrow(&gw), borrow(&gb), n, eps)?
        };
        let Some([y, mean, rstd]) = fused else {
            return self.layer_norm_composed(weight, bias, n, eps);
        };
        let out = Tensor::from_storage(y, self.shape());
        let rows = self.numel() / n;
        let (mean, rstd) = (
            Tensor::from_storage(mean, [rows]),
            Tensor::from_storage(rstd, [rows]),
        );
        let mut inputs = vec![self];
        inputs.extend(weight);
        inputs.extend(bias);
        let (has_w, has_b) = (weight.is_some(), bias.is_some());
        let wshape = weight.map(|w| w.shape().clone());
        let bshape = bias.map(|b| b.shape().clone());
        Ok(out.record("NativeLayerNormBackward", &inputs, move || {
            Box::new(move |g: &Tensor| {
                // the gradient read in place when contiguous (a copy of it was ~5 % of the
                // backward)
                let g = g.contiguous()?;
                let [dx, dw, db] = {
                    let gw = guard(w.as_ref());
                    g.storage().layer_norm_backward(
                        g.layout(),
                        (&x.storage(), x.layout()),
                        borrow(&gw),
                        &mean.storage(),
                        &rstd.storage(),
                        n,
                    )?
                };
                let mut grads = vec![Some(Tensor::from_storage(dx, x.shape()))];
                if let (true, Some(s)) = (has_w, &wshape) {
                    grads.push(Some(Tensor::from_storage(dw, s)));
                }
                if let (true, Some(s)) = (has_b, &bshape) {
                    grads.push(Some(Tensor::from_storage(db, s)));
                }
                Ok(grads)
            })
        }))
    }

    /// LayerNorm from primitive ops (the default of backends without a fused kernel).
    fn layer_norm_composed(
        &self,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        n: usize,
        eps: f64,
    ) -> Result<Tensor> {
        let lead = self.numel() / n;
        let x = self.reshape([lead, n])?;
        let mu = x.mean(1, true)?;
        let xc = x.sub(&mu)?;
        let var = xc.square()?.mean(1, true)?;
        let mut y = xc.mul(&var.add_scalar(eps)?.rsqrt()?)?;
        if let Some(w) = weight {
            y = y.mul(&w.reshape([n])?)?;
        }
        if let Some(b) = bias {
            y = y.add(&b.reshape([n])?)?;
        }
        y.reshape(self.shape())
    }
}

/// Logit rows `[rows, c]` back to the logits' shape (the class dim from last to 1).
fn class_back(v: Tensor, shape: &[usize]) -> Result<Tensor> {
    if shape.len() <= 2 {
        return v.reshape(shape.to_vec());
    }
    let mut moved: Vec<usize> = shape.to_vec();
    let c = moved.remove(1);
    moved.push(c);
    let r = shape.len() as isize;
    let mut perm: Vec<isize> = vec![0, r - 1];
    perm.extend(1..r - 1);
    v.reshape(moved)?.permute(&perm)
}

impl CeRows {
    fn target(&self) -> CeTarget<'_> {
        match &self.ids {
            Some(ids) => CeTarget::Index(ids),
            None => CeTarget::Prob,
        }
    }

    /// The `Mean` denominator: summed weights of the counted targets (their number
    /// unweighted).
    fn count(&self, rows: usize) -> f64 {
        match &self.ids {
            Some(t) => t
                .iter()
                .flatten()
                .map(|&k| self.cw.as_ref().map_or(1.0, |w| w[k]))
                .sum(),
            None => rows as f64,
        }
    }

    /// The loss of `logits` (f32 or f64) against `target`, recorded for autograd: one fused
    /// pass per row forward, `softmax - target` written directly backward, so no `[N, C]`
    /// log-probability tensor is kept. Backends without the fused kernel compose it.
    pub(crate) fn loss(self, logits: &Tensor, target: &Tensor) -> Result<Tensor> {
        let fused = {
            let pg = self.probs.as_ref().map(|p| p.storage());
            let probs = pg.as_deref().zip(self.probs.as_ref().map(|p| p.layout()));
            let x = self.x.storage();
            x.cross_entropy(
                self.x.layout(),
                self.c,
                self.target(),
                probs,
                self.eps,
                self.cw.as_deref(),
            )?
        };
        let Some((losses, lse)) = fused else {
            return self.composed(logits, target);
        };
        let rows = losses.len();
        let lse = Tensor::from_storage(lse, [rows]);
        let count = self.count(rows);
        let dt = logits.dtype();
        let out = match self.reduction {
            Reduction::Mean => Tensor::full((), losses.iter().sum::<f64>() / count, dt)?,
            Reduction::Sum => Tensor::full((), losses.iter().sum::<f64>(), dt)?,
            Reduction::None => Tensor::from_vec(losses, self.row_shape.clone())?.to_dtype(dt)?,
        }
        .to_device(logits.device())?;
        let (lshape, dev) = (logits.dims().to_vec(), logits.device());
        let target_grad = target.requires_grad() && self.probs.is_some();
        Ok(
            out.record("CrossEntropyBackward", &[logits, target], move || {
                Box::new(move |g: &Tensor| {
                    let gv = g.to_f64_vec();
                    let scale: Vec<f64> = match self.reduction {
                        Reduction::Mean => vec![gv[0] / count],
                        Reduction::Sum => vec![gv[0]],
                        Reduction::None => gv,
                    };
                    let dx = {
                        let pg = self.probs.as_ref().map(|p| p.storage());
                        let probs = pg.as_deref().zip(self.probs.as_ref().map(|p| p.layout()));
                        self.x.storage().cross_entropy_backward(
                            self.x.layout(),
                            &lse.storage(),
                            self.c,
                            self.target(),
                            probs,
                            self.eps,
                            self.cw.as_deref(),
                            &scale,
                        )?
                    };
                    let c = self.c;
                    let gx = class_back(Tensor::from_storage(dx, [rows, c]), &lshape)?;
                    let gt = if target_grad {
                        // d loss / d target = -(1 - ε)·w_c·log_softmax(x)·scale, the difference
                        // x - lse rounded in the logits' dtype as the kernel computes it
                        let (xs, ls) = (self.x.to_f64_vec(), lse.to_f64_vec());
                        let keep = 1.0 - self.eps;
                        let f32 = dt == DType::F32;
                        let v: Vec<f64> = xs
                            .iter()
                            .enumerate()
                            .map(|(i, &xv)| {
                                let (r, j) = (i / c, i % c);
                                let wj = self.cw.as_ref().map_or(1.0, |w| w[j]);
                                let s = if scale.len() == 1 { scale[0] } else { scale[r] };
                                let d = xv - ls[r];
                                let d = if f32 { d as f32 as f64 } else { d };
                                -keep * wj * s * d
                            })
                            .collect();
                        let v = Tensor::from_vec(v, [rows, c])?.to_dtype(dt)?;
                        Some(class_back(v.to_device(dev)?, &lshape)?)
                    } else {
                        None
                    };
                    Ok(vec![Some(gx), gt])
                })
            }),
        )
    }

    /// The same loss from primitive ops: `-Σ_j w_j·q_j·log_softmax(x)_j` per row, with `q`
    /// the smoothed target (`(1 - ε)·onehot(k) + ε/C`, or `(1 - ε)·p + ε/C`); autograd
    /// differentiates it.
    fn composed(&self, logits: &Tensor, target: &Tensor) -> Result<Tensor> {
        let (c, dt) = (self.c, logits.dtype());
        let rows = self.x.numel() / c.max(1);
        // the logits again, as rows, this time through recorded ops
        let x = if logits.rank() <= 2 {
            logits.reshape([rows, c])?
        } else {
            let mut perm: Vec<isize> = (0..logits.rank() as isize).filter(|&d| d != 1).collect();
            perm.push(1);
            logits.permute(&perm)?.reshape([rows, c])?
        };
        let logp = x.log_softmax(1)?;
        let (keep, uni) = (1.0 - self.eps, self.eps / c as f64);
        let q = match &self.ids {
            Some(ids) => {
                let mut v = vec![0.0; rows * c];
                for (r, k) in ids.iter().enumerate() {
                    if let Some(k) = k {
                        for (j, e) in v[r * c..(r + 1) * c].iter_mut().enumerate() {
                            *e = keep * f64::from(j == *k) + uni;
                        }
                    }
                }
                Tensor::from_vec(v, [rows, c])?
                    .to_dtype(dt)?
                    .to_device(logits.device())?
            }
            None => {
                let p = if target.rank() <= 2 {
                    target.reshape([rows, c])?
                } else {
                    let mut perm: Vec<isize> =
                        (0..target.rank() as isize).filter(|&d| d != 1).collect();
                    perm.push(1);
                    target.permute(&perm)?.reshape([rows, c])?
                };
                p.to_dtype(dt)?.affine(keep, uni)?
            }
        };
        let q = match &self.cw {
            Some(w) => q.mul(
                &Tensor::from_vec(w.clone(), [c])?
                    .to_dtype(dt)?
                    .to_device(logits.device())?,
            )?,
            None => q,
        };
        let losses = logp.mul(&q)?.sum(1, false)?.neg()?;
        match self.reduction {
            Reduction::Mean => losses.sum_all()?.div_scalar(self.count(rows)),
            Reduction::Sum => losses.sum_all(),
            Reduction::None => losses.reshape(self.row_shape.clone()),
        }
    }
}
impl Tensor {
    /// Training-mode BatchNorm (then a ReLU when `relu`) of an f32/f64 `[N, C, ..]` input
    /// with more than one value per channel, in two fused passes (statistics, then
    /// `x·scale + shift`) and a closed-form backward, instead of the dozen elementwise ops and
    /// their backward of the composed path: BatchNorm is memory-bound, and in a small CNN it
    /// otherwise costs as much as the convolutions. Updates the running statistics like the
    /// composed path. `None` when the backend has no fused BatchNorm (the caller composes).
    pub(crate) fn batch_norm_train_fused(
        &self,
        (running_mean, running_var): (Option<&Tensor>, Option<&Tensor>),
        (weight, bias): (Option<&Tensor>, Option<&Tensor>),
        (momentum, eps): (f64, f64),
        relu: bool,
    ) -> Result<Option<Tensor>> {
        let x = self.detach().contiguous()?;
        let c = x.dims()[1];
        let s = x.numel() / (x.dims()[0] * c).max(1);
        let count = x.numel() / c;
        let Some([mean, var]) = x.storage().batch_norm_stats(x.layout(), c, s)? else {
            return Ok(None);
        };
        let dt = x.dtype();
        let rstd: Vec<f64> = var.iter().map(|v| 1.0 / (v + eps).sqrt()).collect();
        // weight and bias as f64 (exact for f32 and f64), folded with the statistics into one
        // per-channel scale and shift in the input's dtype
        let vals = |t: Option<&Tensor>, default: f64| match t {
            Some(t) => t.to_f64_vec(),
            None => vec![default; c],
        };
        let (w, b) = (vals(weight, 1.0), vals(bias, 0.0));
        let scale: Vec<f64> = (0..c).map(|i| w[i] * rstd[i]).collect();
        let shift: Vec<f64> = (0..c).map(|i| b[i] - mean[i] * w[i] * rstd[i]).collect();
        let on_device = |v: Vec<f64>| -> Result<Tensor> {
            Tensor::from_vec(v, [c])?
                .to_dtype(dt)?
                .to_device(self.device())
        };
        let (scale, shift) = (on_device(scale)?, on_device(shift)?);
        let y =
            x.storage()
                .channel_affine(x.layout(), &scale.storage(), &shift.storage(), s, relu)?;
        let Some(y) = y else { return Ok(None) };
        let y = Tensor::from_storage(y, self.shape());
        {
            let _g = crate::no_grad();
            let unbias = count as f64 / (count as f64 - 1.0);
            if let Some(rm) = running_mean {
                let m = Tensor::from_vec(mean.clone(), [c])?
                    .to_dtype(rm.dtype())?
                    .to_device(rm.device())?;
                rm.affine_(1.0 - momentum, 0.0)?.add_scaled_(&m, momentum)?;
            }
            if let Some(rv) = running_var {
                let v = Tensor::from_vec(var, [c])?
                    .to_dtype(rv.dtype())?
                    .to_device(rv.device())?;
                rv.affine_(1.0 - momentum, 0.0)?
                    .add_scaled_(&v, momentum * unbias)?;
            }
        }
        let mut inputs = vec![self];
        inputs.extend(weight);
        inputs.extend(bias);
        let ws = weight
            .map(|w| w.detach().to_dtype(dt)?.contiguous())
            .transpose()?;
        let (has_w, has_b) = (weight.is_some(), bias.is_some());
        let name = if relu {
            "NativeBatchNormReluBackward"
        } else {
            "NativeBatchNormBackward"
        };
        Ok(Some(y.record(name, &inputs, move || {
            Box::new(move |g: &Tensor| {
                let g = g.contiguous()?;
                let [dx, dw, db] = {
                    let wg = ws.as_ref().map(|w| w.storage());
                    let (sg, hg) = (scale.storage(), shift.storage());
                    let gate = relu.then_some((&*sg, &*hg));
                    g.storage().batch_norm_backward(
                        g.layout(),
                        (&x.storage(), x.layout()),
                        wg.as_deref(),
                        (&mean, &rstd),
                        s,
                        gate,
                    )?
                };
                let mut grads = vec![Some(Tensor::from_storage(dx, x.shape()))];
                if has_w {
                    grads.push(Some(Tensor::from_storage(dw, [c])));
                }
                if has_b {
                    grads.push(Some(Tensor::from_storage(db, [c])));
                }
                Ok(grads)
            })
        })))
    }
}

#[cfg(test)]
mod tests {
    use crate::{DType, Tensor};

    /// The composed default matches the fused kernel in values and gradients (f64).
    #[test]
    fn layer_norm_composed_matches_fused() -> crate::Result<()> {
        crate::manual_seed(7);
        let x = Tensor::randn([3, 2, 5], DType::F64)?.with_requires_grad();
        let w = Tensor::randn([2, 5], DType::F64)?.with_requires_grad();
        let b = Tensor::randn([2, 5], DType::F64)?.with_requires_grad();
        let g = Tensor::randn([3, 2, 5], DType::F64)?;
        let mut got = vec![];
        for fused in [true, false] {
            let y = if fused {
                x.layer_norm_fused(Some(&w), Some(&b), 10, 1e-5)?
            } else {
                x.layer_norm_composed(Some(&w), Some(&b), 10, 1e-5)?
            };
            for p in [&x, &w, &b] {
                p.zero_grad();
            }
            y.mul(&g)?.sum_all()?.backward()?;
            let mut v = y.to_vec::<f64>()?;
            for p in [&x, &w, &b] {
                v.extend(
                    p.grad()
                        .expect("a leaf that requires grad")
                        .to_vec::<f64>()?,
                );
            }
            got.push(v);
        }
        for (a, b) in got[0].iter().zip(&got[1]) {
            assert!((a - b).abs() < 1e-9, "{a} vs {b}");
        }
        Ok(())
    }

    /// The composed cross-entropy matches the fused kernel: class indices with weights,
    /// smoothing and an ignored row, and probability targets (whose gradient also flows), for
    /// every reduction, in values and gradients (f64).
    #[test]
    fn cross_entropy_composed_matches_fused() -> crate::Result<()> {
        use super::{CeRows, Reduction};
        crate::manual_seed(11);
        let logits = Tensor::randn([3, 4, 2], DType::F64)?.with_requires_grad();
        let probs = Tensor::rand([3, 4, 2], DType::F64)?.with_requires_grad();
        let ids = Tensor::from_vec(vec![0i64, 3, 1, 2, 2, 0], [3, 2])?;
        let rows_of = |t: &Tensor| t.detach().permute(&[0, 2, 1])?.contiguous();
        for reduction in [Reduction::Mean, Reduction::Sum, Reduction::None] {
            for prob in [false, true] {
                let mut got = vec![];
                for fused in [true, false] {
                    for p in [&logits, &probs] {
                        p.zero_grad();
                    }
                    let ce = CeRows {
                        x: rows_of(&logits)?,
                        ids: (!prob)
                            .then(|| vec![Some(0), Some(3), None, Some(2), Some(2), Some(0)]),
                        probs: prob.then(|| rows_of(&probs)).transpose()?,
                        c: 4,
                        row_shape: vec![3, 2],
                        eps: 0.1,
                        cw: Some(vec![0.5, 1.0, 2.0, 1.5]),
                        reduction,
                    };
                    let target = if prob { &probs } else { &ids };
                    let l = if fused {
                        ce.loss(&logits, target)?
                    } else {
                        ce.composed(&logits, target)?
                    };
                    let n = l.numel();
                    let w = Tensor::arange(1.0, n as f64 + 1.0, 1.0, DType::F64)?
                        .reshape(l.shape())?
                        .div_scalar(n as f64)?;
                    l.mul(&w)?.sum_all()?.backward()?;
                    let mut v = l.to_vec::<f64>()?;
                    v.extend(logits.grad().expect("logits grad").to_vec::<f64>()?);
                    if prob {
                        v.extend(probs.grad().expect("target grad").to_vec::<f64>()?);
                    }
                    got.push(v);
                }
                assert_eq!(got[0].len(), got[1].len());
                for (a, b) in got[0].iter().zip(&got[1]) {
                    assert!(
                        (a - b).abs() < 1e-9,
                        "{reduction:?} prob={prob}: {a} vs {b}"
                    );
                }
            }
        }
        Ok(())
    }
}
