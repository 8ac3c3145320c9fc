//! Losses. `cross_entropy` is one fused kernel (log-softmax + NLL forward, `softmax - target`
//! backward); the others are short compositions of differentiable ops.

use crate::ops::fused::CeRows;
use crate::{DType, Error, Result, Tensor};

pub use crate::ops::fused::Reduction;

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
    if c == 0 {
        return Err(Error::shape(
            OP,
            format!("logits {} have no classes", logits.shape()),
        ));
    }
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
    let (ids, probs) = if target.dtype() == DType::I64 {
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
        (Some(ids), None)
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
        (None, Some(class_last(&target.to_dtype(logits.dtype())?)?))
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
        DType::F32 | DType::F64 => {
            let cw: Option<Vec<f64>> = opts.weight.as_ref().map(|w| w.to_f64_vec());
            let rows = CeRows {
                x,
                ids,
                probs,
                c,
                row_shape,
                eps: opts.label_smoothing,
                cw,
                reduction: opts.reduction,
            };
            rows.loss(logits, target)
        }
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
    let idx = Tensor::from_vec(safe, row_shape.clone())?
        .to_device(input.device())?
        .unsqueeze(cdim as isize)?;
    let picked = input.gather(cdim as isize, &idx)?.squeeze(cdim as isize)?;
    let mask = Tensor::from_vec(valid, row_shape)?.to_device(input.device())?;
    let zero = Tensor::zeros_on((), input.dtype(), input.device())?;
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
