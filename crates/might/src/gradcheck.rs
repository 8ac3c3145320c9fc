//! `gradcheck`: compare analytic gradients with central finite differences (in f64). A
//! testing tool built on the ops and the engine (not part of them, so outside the core; also
//! reachable as `might::autograd::gradcheck`).

use crate::{DType, Error, ErrorKind, Result, Tensor};

/// Tolerances and step of a gradient check.
#[derive(Clone, Copy, Debug)]
pub struct GradCheck {
    pub eps: f64,
    pub atol: f64,
    pub rtol: f64,
}

impl Default for GradCheck {
    fn default() -> Self {
        GradCheck {
            eps: 1e-6,
            atol: 1e-5,
            rtol: 1e-4,
        }
    }
}

/// Check the gradients of `f` at `inputs` (f64 tensors; all get `requires_grad`). The output is
/// reduced to a scalar with fixed pseudo-random weights so every output element matters.
/// Returns an error naming the input, element, analytic and numeric values on mismatch.
pub fn gradcheck(
    f: impl Fn(&[Tensor]) -> Result<Tensor>,
    inputs: &[Tensor],
    opts: GradCheck,
) -> Result<()> {
    let inputs: Vec<Tensor> = inputs
        .iter()
        .map(|t| {
            Ok(t.to_dtype(DType::F64)?
                .deep_clone()?
                .detach()
                .with_requires_grad())
        })
        .collect::<Result<_>>()?;
    let out = f(&inputs)?;
    let n_out = out.numel();
    // fixed weights 0.5, 1.1, 1.7, ... wrapped, so the projection is not symmetric
    let w: Vec<f64> = (0..n_out)
        .map(|i| 0.5 + ((i * 7) % 11) as f64 * 0.3)
        .collect();
    let w = Tensor::from_vec(w, out.shape())?.to_device(out.device())?;
    let scalar = |o: &Tensor| -> Result<f64> { o.to_dtype(DType::F64)?.mul(&w)?.sum_all()?.item() };
    out.to_dtype(DType::F64)?.mul(&w)?.sum_all()?.backward()?;
    for (k, x) in inputs.iter().enumerate() {
        let analytic = match x.grad() {
            Some(g) => g.to_f64_vec(),
            None => vec![0.0; x.numel()],
        };
        let base = x.to_vec::<f64>()?;
        for i in 0..x.numel() {
            let eval = |delta: f64| -> Result<f64> {
                let _g = crate::no_grad();
                let mut v = base.clone();
                v[i] += delta;
                let xs: Vec<Tensor> = inputs
                    .iter()
                    .enumerate()
                    .map(|(j, t)| {
                        if j == k {
                            Tensor::from_vec(v.clone(), t.shape())?.to_device(t.device())
                        } else {
                            Ok(t.detach())
                        }
                    })
                    .collect::<Result<_>>()?;
                scalar(&f(&xs)?)
            };
            let numeric = (eval(opts.eps)? - eval(-opts.eps)?) / (2.0 * opts.eps);
            let a = analytic[i];
            if (a - numeric).abs() > opts.atol + opts.rtol * numeric.abs() {
                return Err(Error::new(
                    ErrorKind::Autograd,
                    "gradcheck",
                    format!(
                        "input {k} (shape {}) element {i}: analytic {a:.8e} vs numeric {numeric:.8e}",
                        x.shape()
                    ),
                ));
            }
        }
    }
    Ok(())
}
