//! Fused ops: one backend call for what would otherwise be several passes (LayerNorm, ...).
//!
//! Each front-end asks the backend for its fused kernel; a backend without one answers `None`
//! and the op is composed from primitive ops instead, whose recorded graph gives the backward.
//! So a new backend is correct on day one and overrides only what it makes fast.

use crate::{Result, Tensor};

/// Optional operand as (storage guard, layout).
type Guarded<'a> = Option<(std::sync::RwLockReadGuard<'a, crate::Storage>, &'a crate::Layout)>;

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
                v.extend(p.grad().expect("a leaf that requires grad").to_vec::<f64>()?);
            }
            got.push(v);
        }
        for (a, b) in got[0].iter().zip(&got[1]) {
            assert!((a - b).abs() < 1e-9, "{a} vs {b}");
        }
        Ok(())
    }
}
