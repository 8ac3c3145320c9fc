//! Losses. `cross_entropy` is one fused kernel (log-softmax + NLL forward, `softmax - target`
//! backward); the others are short compositions of differentiable ops.
// Row kernels index several parallel slices with one column index.
#![allow(clippy::needless_range_loop)]

use crate::backend::cpu::fused::{map_blocks, rows_per_task, with_slice, Real};
use crate::backend::cpu::rows::row_max;
use crate::backend::cpu::softmax::exp_sum;
use crate::backend::cpu::{pool, simd};
use crate::{DType, Error, Result, Tensor};

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

fn reduce(l: Tensor, r: Reduction) -> Result<Tensor> {
    match r {
        Reduction::Mean => l.mean_all(),
        Reduction::Sum => l.sum_all(),
        Reduction::None => Ok(l),
    }
}

/// Options of [`cross_entropy`] (PyTorch defaults via `Default`).
#[derive(Clone, Debug)]
pub struct CrossEntropyOptions {
    /// Per-class rescaling weights `[C]`; `Mean` then divides by the summed weights of the
    /// (non-ignored) targets, as PyTorch does.
    pub weight: Option<Tensor>,
    /// Class-index targets equal to this contribute nothing (default -100).
    pub ignore_index: i64,
    /// Mix the target with the uniform distribution: `(1 - ε)·target + ε / C`.
    pub label_smoothing: f64,
    pub reduction: Reduction,
}

impl Default for CrossEntropyOptions {
    fn default() -> Self {
        CrossEntropyOptions {
            weight: None,
            ignore_index: -100,
            label_smoothing: 0.0,
            reduction: Reduction::Mean,
        }
    }
}

/// Class dim (1) moved last, contiguous: rows of `C` logits. For rank 1 input (one sample),
/// the input itself.
fn class_last(x: &Tensor) -> Result<Tensor> {
    if x.rank() <= 2 {
        return x.detach().contiguous();
    }
    let mut perm: Vec<isize> = (0..x.rank() as isize).filter(|&d| d != 1).collect();
    perm.push(1);
    x.detach().permute(&perm)?.contiguous()
}

/// Inverse of [`class_last`] for a `[rows, C]` buffer: back to the logits' shape.
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

enum Target {
    /// Class index per row, `None` for ignored rows.
    Index(Vec<Option<usize>>),
    /// Probabilities, rows of C (class dim last).
    Prob(Tensor),
}

/// Per-row `(loss, logsumexp)` of a fused log-softmax + NLL.
fn ce_forward<T: Real>(
    x: &[T],
    c: usize,
    target: &Target,
    eps: f64,
    cw: Option<&[f64]>,
) -> Result<(Vec<f64>, Vec<T>)> {
    let rows = x.len() / c;
    let probs: Option<Vec<T>> = match target {
        Target::Prob(p) => Some(p.to_vec::<T>()?),
        Target::Index(_) => None,
    };
    let mut lse = vec![T::f(0.0); rows];
    let rpt = rows_per_task(c, rows);
    let losses = map_blocks(&mut lse, rpt, |bi, lb| {
        simd::run(
            #[inline(always)]
            || ce_forward_block(x, c, target, eps, cw, &probs, rpt, bi, lb),
        )
    });
    Ok((losses.into_iter().flatten().collect(), lse))
}

/// [`ce_forward`] of the rows `bi * rpt ..` whose log-sum-exps are `lb`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn ce_forward_block<T: Real>(
    x: &[T],
    c: usize,
    target: &Target,
    eps: f64,
    cw: Option<&[f64]>,
    probs: &Option<Vec<T>>,
    rpt: usize,
    bi: usize,
    lb: &mut [T],
) -> Vec<f64> {
    let mut out = Vec::with_capacity(lb.len());
    for (r, l) in lb.iter_mut().enumerate() {
        let row = bi * rpt + r;
        let xr = &x[row * c..(row + 1) * c];
        let m = row_max(xr);
        let m = if m.is_finite() { m } else { T::f(0.0) };
        let s = exp_sum(xr, m);
        let lsev = m + s.ln();
        *l = lsev;
        let lse64 = lsev.d();
        let loss = match (target, probs) {
            (Target::Index(t), _) => match t[row] {
                None => 0.0,
                Some(k) => {
                    let wk = cw.map_or(1.0, |w| w[k]);
                    let mut loss = (1.0 - eps) * wk * (lse64 - xr[k].d());
                    if eps > 0.0 {
                        let sm: f64 = xr
                            .iter()
                            .enumerate()
                            .map(|(j, v)| cw.map_or(1.0, |w| w[j]) * (lse64 - v.d()))
                            .sum();
                        loss += eps / c as f64 * sm;
                    }
                    loss
                }
            },
            (Target::Prob(_), Some(p)) => {
                let pr = &p[row * c..(row + 1) * c];
                xr.iter()
                    .zip(pr)
                    .enumerate()
                    .map(|(j, (&v, &q))| {
                        let q = (1.0 - eps) * q.d() + eps / c as f64;
                        cw.map_or(1.0, |w| w[j]) * q * (lse64 - v.d())
                    })
                    .sum::<f64>()
            }
            _ => unreachable!(),
        };
        out.push(loss);
    }
    out
}

/// Gradient rows `scale[row] * (softmax - smoothed target)`, written in one pass.
fn ce_backward<T: Real>(
    x: &[T],
    lse: &[T],
    c: usize,
    target: &Target,
    eps: f64,
    cw: Option<&[f64]>,
    scale: &(dyn Fn(usize) -> f64 + Sync),
) -> Result<Vec<T>> {
    let rows = x.len() / c;
    let probs: Option<Vec<T>> = match target {
        Target::Prob(p) => Some(p.to_vec::<T>()?),
        Target::Index(_) => None,
    };
    // ignored rows stay zero
    let mut dx = pool::zeroed::<T>(x.len());
    let rpt = rows_per_task(c, rows);
    let keep = T::f(1.0 - eps);
    // class weights (ones when absent), and the smoothing mass each class receives
    let wc: Vec<T> = (0..c).map(|j| T::f(cw.map_or(1.0, |w| w[j]))).collect();
    let uni: Vec<T> = (0..c)
        .map(|j| T::f(eps / c as f64 * cw.map_or(1.0, |w| w[j])))
        .collect();
    let usum: T = uni.iter().copied().sum();
    map_blocks(&mut dx, rpt * c, |bi, db| {
        simd::run(
            #[inline(always)]
            || {
                for (r, dr) in db.chunks_mut(c).enumerate() {
                    let row = bi * rpt + r;
                    let xr = &x[row * c..(row + 1) * c];
                    let s = T::f(scale(row));
                    match (target, &probs) {
                        (Target::Index(t), _) => {
                            // d/dx_j = p_j·((1-ε)·w_k + Σ_c ε/C·w_c) - ε/C·w_j - [j = k]·(1-ε)·w_k
                            let Some(k) = t[row] else { continue };
                            let (a, l) = (keep * wc[k] + usum, lse[row]);
                            for ((d, &v), &u) in dr.iter_mut().zip(xr).zip(&uni) {
                                *d = s * ((v - l).exp_() * a - u);
                            }
                            dr[k] = dr[k] - s * keep * wc[k];
                        }
                        (Target::Prob(_), Some(p)) => {
                            let pr = &p[row * c..(row + 1) * c];
                            // weighted smoothed target w_j·q_j; d/dx_j = p_j·Σ_c w_c·q_c - w_j·q_j
                            let wq = |j: usize| wc[j] * (keep * pr[j] + T::f(eps / c as f64));
                            let total: T = (0..c).map(&wq).sum();
                            let l = lse[row];
                            for (j, (d, &v)) in dr.iter_mut().zip(xr).enumerate() {
                                *d = s * ((v - l).exp_() * total - wq(j));
                            }
                        }
                        _ => unreachable!(),
                    }
                }
            },
        )
    });
    Ok(dx)
}

/// Cross-entropy between logits `[N, C]` / `[N, C, d1, ..]` / `[C]` and either int64 class
/// indices (`[N]` / `[N, d1, ..]` / `[]`) or class probabilities of the logits' shape
/// (`torch.nn.functional.cross_entropy`).
///
/// Fused: one pass per row computes the log-sum-exp and the loss; the recorded backward writes
/// `softmax - target` directly, so no `[N, C]` log-probability tensor is kept for autograd.
#[track_caller]
pub fn cross_entropy(
    logits: &Tensor,
    target: &Tensor,
    opts: &CrossEntropyOptions,
) -> Result<Tensor> {
    const OP: &str = "cross_entropy";
    logits.check_float(OP)?;
    if logits.rank() == 0 {
        return Err(Error::shape(
            OP,
            "logits must have a class dim, got a scalar",
        ));
    }
    if !(0.0..=1.0).contains(&opts.label_smoothing) {
        return Err(Error::invalid(
            OP,
            format!(
                "label_smoothing must be in [0, 1], got {}",
                opts.label_smoothing
            ),
        ));
    }
    let cdim = if logits.rank() == 1 { 0 } else { 1 };
    let c = logits.dims()[cdim];
    let mut row_shape = logits.dims().to_vec();
    row_shape.remove(cdim);
    if let Some(w) = &opts.weight {
        if w.dims() != [c] || !w.dtype().is_float() {
            return Err(Error::shape(
                OP,
                format!(
                    "class weight must be a float [{c}] tensor, got {} {}",
                    w.dtype(),
                    w.shape()
                ),
            ));
        }
    }
    let x = class_last(logits)?;
    let tgt = if target.dtype() == DType::I64 {
        if target.dims() != row_shape.as_slice() {
            return Err(Error::shape(
                OP,
                format!(
                    "class-index target shape {} does not match logits {} (expected {:?})",
                    target.shape(),
                    logits.shape(),
                    row_shape
                ),
            ));
        }
        let ids = target
            .to_vec::<i64>()?
            .into_iter()
            .map(|t| {
                if t == opts.ignore_index {
                    Ok(None)
                } else if t < 0 || t as usize >= c {
                    Err(Error::index(
                        OP,
                        format!("target {t} is out of bounds for {c} classes"),
                    ))
                } else {
                    Ok(Some(t as usize))
                }
            })
            .collect::<Result<Vec<_>>>()?;
        Target::Index(ids)
    } else if target.dtype().is_float() {
        if target.dims() != logits.dims() {
            return Err(Error::shape(
                OP,
                format!(
                    "probability target shape {} differs from logits {}",
                    target.shape(),
                    logits.shape()
                ),
            ));
        }
        Target::Prob(class_last(&target.to_dtype(logits.dtype())?)?)
    } else {
        return Err(Error::dtype(
            OP,
            format!(
                "target must be int64 class indices or float probabilities, got {}",
                target.dtype()
            ),
        ));
    };
    match logits.dtype() {
        DType::F32 => ce_typed::<f32>(logits, target, x, tgt, c, row_shape, opts),
        DType::F64 => ce_typed::<f64>(logits, target, x, tgt, c, row_shape, opts),
        dt => {
            let t = if target.dtype().is_float() {
                target.to_dtype(DType::F32)?
            } else {
                target.clone()
            };
            cross_entropy(&logits.to_dtype(DType::F32)?, &t, opts)?.to_dtype(dt)
        }
    }
}

fn ce_typed<T: Real>(
    logits: &Tensor,
    target: &Tensor,
    x: Tensor,
    tgt: Target,
    c: usize,
    row_shape: Vec<usize>,
    opts: &CrossEntropyOptions,
) -> Result<Tensor> {
    let eps = opts.label_smoothing;
    let cw: Option<Vec<f64>> = opts.weight.as_ref().map(|w| w.to_f64_vec());
    let (losses, lse) = with_slice::<T, _>(&x, |xs| ce_forward(xs, c, &tgt, eps, cw.as_deref()))??;
    // the `Mean` denominator: summed weights of the counted targets (their number unweighted)
    let count: f64 = match &tgt {
        Target::Index(t) => t
            .iter()
            .flatten()
            .map(|&k| cw.as_ref().map_or(1.0, |w| w[k]))
            .sum(),
        Target::Prob(_) => losses.len() as f64,
    };
    let dt = logits.dtype();
    let out = match opts.reduction {
        Reduction::Mean => Tensor::full((), losses.iter().sum::<f64>() / count, dt)?,
        Reduction::Sum => Tensor::full((), losses.iter().sum::<f64>(), dt)?,
        Reduction::None => Tensor::from_vec(
            losses.iter().map(|&v| T::f(v)).collect::<Vec<T>>(),
            row_shape,
        )?,
    };
    let reduction = opts.reduction;
    let lshape = logits.dims().to_vec();
    let target_grad = target.requires_grad() && matches!(tgt, Target::Prob(_));
    Ok(
        out.record("CrossEntropyBackward", &[logits, target], move || {
            Box::new(move |g: &Tensor| {
                let gv = g.to_f64_vec();
                let scale: Box<dyn Fn(usize) -> f64 + Send + Sync> = match reduction {
                    Reduction::Mean => {
                        let s = gv[0] / count;
                        Box::new(move |_| s)
                    }
                    Reduction::Sum => {
                        let s = gv[0];
                        Box::new(move |_| s)
                    }
                    Reduction::None => Box::new(move |r| gv[r]),
                };
                let dx = with_slice::<T, _>(&x, |xs| {
                    ce_backward(xs, &lse, c, &tgt, eps, cw.as_deref(), &*scale)
                })??;
                let rows = lse.len();
                let gx = class_back(Tensor::from_vec(dx, [rows, c])?, &lshape)?;
                let gt = if target_grad {
                    // d loss / d target = -(1 - ε)·w_c·log_softmax(x)·scale
                    let xs = x.to_vec::<T>()?;
                    let keep = 1.0 - eps;
                    let v: Vec<T> = xs
                        .iter()
                        .enumerate()
                        .map(|(i, &xv)| {
                            let (r, j) = (i / c, i % c);
                            let wj = cw.as_ref().map_or(1.0, |w| w[j]);
                            T::f(-keep * wj * scale(r) * (xv - lse[r]).d())
                        })
                        .collect();
                    Some(class_back(Tensor::from_vec(v, [rows, c])?, &lshape)?)
                } else {
                    None
                };
                Ok(vec![Some(gx), gt])
            })
        }),
    )
}

/// Negative log-likelihood of log-probabilities `[N, C, ..]` (or `[C]`) at int64 targets,
/// skipping `ignore_index`; `Mean` averages over the non-ignored targets.
#[track_caller]
pub fn nll_loss(
    input: &Tensor,
    target: &Tensor,
    reduction: Reduction,
    ignore_index: i64,
) -> Result<Tensor> {
    const OP: &str = "nll_loss";
    input.check_float(OP)?;
    if target.dtype() != DType::I64 {
        return Err(Error::dtype(
            OP,
            format!("target must be int64, got {}", target.dtype()),
        ));
    }
    if input.rank() == 0 {
        return Err(Error::shape(
            OP,
            "input must have a class dim, got a scalar",
        ));
    }
    let cdim = if input.rank() == 1 { 0 } else { 1 };
    let c = input.dims()[cdim] as i64;
    let mut row_shape = input.dims().to_vec();
    row_shape.remove(cdim);
    if target.dims() != row_shape.as_slice() {
        return Err(Error::shape(
            OP,
            format!(
                "target shape {} does not match input {}",
                target.shape(),
                input.shape()
            ),
        ));
    }
    let tv = target.to_vec::<i64>()?;
    if let Some(&bad) = tv.iter().find(|&&t| t != ignore_index && (t < 0 || t >= c)) {
        return Err(Error::index(
            OP,
            format!("target {bad} is out of bounds for {c} classes"),
        ));
    }
    let valid: Vec<bool> = tv.iter().map(|&t| t != ignore_index).collect();
    let count = valid.iter().filter(|&&v| v).count();
    let safe: Vec<i64> = tv
        .iter()
        .map(|&t| if t == ignore_index { 0 } else { t })
        .collect();
    let idx = Tensor::from_vec(safe, row_shape.clone())?.unsqueeze(cdim as isize)?;
    let picked = input.gather(cdim as isize, &idx)?.squeeze(cdim as isize)?;
    let mask = Tensor::from_vec(valid, row_shape)?;
    let zero = Tensor::zeros((), input.dtype())?;
    let l = Tensor::where_(&mask, &picked.neg()?, &zero)?;
    match reduction {
        Reduction::Mean => l.sum_all()?.div_scalar(count as f64),
        Reduction::Sum => l.sum_all(),
        Reduction::None => Ok(l),
    }
}

#[track_caller]
fn check_pair(op: &str, a: &Tensor, b: &Tensor) -> Result<()> {
    a.check_float(op)?;
    if a.dims() != b.dims() {
        return Err(Error::shape(
            op,
            format!("input {} and target {} differ", a.shape(), b.shape()),
        ));
    }
    a.check_same_dtype(op, b)
}

/// Mean squared error `(input - target)²`.
#[track_caller]
pub fn mse_loss(input: &Tensor, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
    check_pair("mse_loss", input, target)?;
    reduce(input.sub(target)?.square()?, reduction)
}

/// Mean absolute error `|input - target|`.
#[track_caller]
pub fn l1_loss(input: &Tensor, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
    check_pair("l1_loss", input, target)?;
    reduce(input.sub(target)?.abs()?, reduction)
}

/// Huber loss: `0.5·d²` for `|d| <= delta`, else `delta·(|d| - 0.5·delta)`.
#[track_caller]
pub fn huber_loss(
    input: &Tensor,
    target: &Tensor,
    delta: f64,
    reduction: Reduction,
) -> Result<Tensor> {
    check_pair("huber_loss", input, target)?;
    if delta <= 0.0 {
        return Err(Error::invalid(
            "huber_loss",
            format!("delta must be positive, got {delta}"),
        ));
    }
    let d = input.sub(target)?;
    let a = d.abs()?;
    let quad = d.square()?.mul_scalar(0.5)?;
    let lin = a.affine(delta, -0.5 * delta * delta)?;
    let l = Tensor::where_(&a.le_scalar(delta)?, &quad, &lin)?;
    reduce(l, reduction)
}

/// Binary cross-entropy on logits, computed stably as
/// `max(x, 0) - x·y + log(1 + e^{-|x|})`; gradient `sigmoid(x) - y` (and `-x` for the target).
#[track_caller]
pub fn binary_cross_entropy_with_logits(
    input: &Tensor,
    target: &Tensor,
    reduction: Reduction,
) -> Result<Tensor> {
    const OP: &str = "binary_cross_entropy_with_logits";
    check_pair(OP, input, target)?;
    let l = input.bce_with_logits_elementwise(target)?;
    let (xd, yd) = (input.detach(), target.detach());
    let l = l.record(
        "BinaryCrossEntropyWithLogitsBackward",
        &[input, target],
        move || {
            Box::new(move |g: &Tensor| {
                let s = xd.sigmoid()?.sub(&yd)?;
                Ok(vec![Some(g.mul(&s)?), Some(g.mul(&xd.neg()?)?)])
            })
        },
    );
    reduce(l, reduction)
}
