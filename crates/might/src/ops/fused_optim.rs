//! The optimizer updates as one fused op per parameter: the backend's kernel updates the
//! parameter and its state buffers in place in one pass; a backend without it gets the same
//! step composed from in-place primitive ops.

use crate::backend::OptimUpdate;
use crate::{Result, Storage, Tensor};

impl Tensor {
    /// One optimizer step of this parameter in place, from its gradient `g` (same shape) and
    /// its state buffers (contiguous, the parameter's shape, in `update`'s order). Run under
    /// `no_grad`; f32 and f64 parameters (optimizers update half precision through an f32
    /// copy).
    pub(crate) fn optimizer_update_(
        &self,
        g: &Tensor,
        state: &[Tensor],
        update: &OptimUpdate,
    ) -> Result<()> {
        let g = g.detach().to_dtype(self.dtype())?;
        let g = if g.same_storage(self) {
            g.deep_clone()?
        } else {
            g.contiguous()?
        };
        if self.layout().contiguous_range().is_none() {
            // a strided parameter (rare): update a dense copy and write it back
            let tmp = self.detach().contiguous()?;
            tmp.optimizer_update_(&g, state, update)?;
            self.copy_(&tmp)?;
            return Ok(());
        }
        let done = {
            let gs = g.storage();
            let mut guards: Vec<_> = state.iter().map(|b| b.storage_mut()).collect();
            let mut bufs: Vec<&mut Storage> = guards.iter_mut().map(|b| &mut **b).collect();
            let l = self.layout().clone();
            self.storage_mut()
                .optimizer_update(&l, (&gs, g.layout()), &mut bufs, update)?
        };
        if !done {
            self.optimizer_update_composed(&g, state, update)?;
        }
        Ok(())
    }

    /// The same step from in-place primitive ops (the default of backends without the fused
    /// kernel).
    fn optimizer_update_composed(
        &self,
        g: &Tensor,
        state: &[Tensor],
        update: &OptimUpdate,
    ) -> Result<()> {
        let p = self;
        let with_decay = |wd: f64| -> Result<Tensor> {
            if wd != 0.0 {
                g.add(&p.mul_scalar(wd)?)
            } else {
                Ok(g.clone())
            }
        };
        match *update {
            OptimUpdate::Sgd {
                lr,
                weight_decay,
                momentum,
                dampening,
                nesterov,
                first,
            } => {
                let mut d = with_decay(weight_decay)?;
                if let [buf] = state {
                    if first {
                        buf.copy_(&d)?;
                    } else {
                        buf.affine_(momentum, 0.0)?
                            .add_scaled_(&d, 1.0 - dampening)?;
                    }
                    d = if nesterov {
                        d.add(&buf.mul_scalar(momentum)?)?
                    } else {
                        buf.clone()
                    };
                }
                p.add_scaled_(&d, -lr)?;
            }
            OptimUpdate::Adam {
                lr,
                beta1,
                beta2,
                eps,
                l2,
                decay,
                step,
            } => {
                if decay != 1.0 {
                    p.affine_(decay, 0.0)?;
                }
                let d = with_decay(l2)?;
                let (m, v) = (&state[0], &state[1]);
                m.add_scaled_(&d.sub(m)?, 1.0 - beta1)?;
                v.affine_(beta2, 0.0)?
                    .add_scaled_(&d.square()?, 1.0 - beta2)?;
                let vv = match state.get(2) {
                    Some(vmax) => {
                        vmax.copy_(&vmax.maximum(v)?)?;
                        vmax
                    }
                    None => v,
                };
                let step = step as f64;
                let (bc1, bc2) = (1.0 - beta1.powf(step), 1.0 - beta2.powf(step));
                let denom = vv.sqrt()?.div_scalar(bc2.sqrt())?.add_scalar(eps)?;
                p.add_scaled_(&m.div(&denom)?, -lr / bc1)?;
            }
            OptimUpdate::RmsProp {
                lr,
                weight_decay,
                alpha,
                eps,
                momentum,
            } => {
                let d = with_decay(weight_decay)?;
                let sq = &state[0];
                let (buf, ga) = match state.len() {
                    1 => (None, None),
                    2 if momentum > 0.0 => (Some(&state[1]), None),
                    2 => (None, Some(&state[1])),
                    _ => (Some(&state[1]), Some(&state[2])),
                };
                sq.affine_(alpha, 0.0)?
                    .add_scaled_(&d.square()?, 1.0 - alpha)?;
                let avg = match ga {
                    Some(ga) => {
                        ga.add_scaled_(&d.sub(ga)?, 1.0 - alpha)?;
                        sq.sub(&ga.square()?)?.sqrt()?.add_scalar(eps)?
                    }
                    None => sq.sqrt()?.add_scalar(eps)?,
                };
                match buf {
                    Some(b) => {
                        b.affine_(momentum, 0.0)?.add_(&d.div(&avg)?)?;
                        p.add_scaled_(b, -lr)?;
                    }
                    None => {
                        p.add_scaled_(&d.div(&avg)?, -lr)?;
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::backend::OptimUpdate;
    use crate::{DType, Tensor};

    /// Three steps of every update, fused and composed, agree (f64).
    #[test]
    fn composed_updates_match_fused() -> crate::Result<()> {
        let _g = crate::no_grad();
        let cases: Vec<(Vec<OptimUpdate>, usize)> = vec![
            (
                (0..3)
                    .map(|i| OptimUpdate::Sgd {
                        lr: 0.1,
                        weight_decay: 0.01,
                        momentum: 0.9,
                        dampening: 0.1,
                        nesterov: true,
                        first: i == 0,
                    })
                    .collect(),
                1,
            ),
            (
                (1..4)
                    .map(|step| OptimUpdate::Adam {
                        lr: 0.01,
                        beta1: 0.9,
                        beta2: 0.999,
                        eps: 1e-8,
                        l2: 0.0,
                        decay: 1.0 - 0.01 * 0.1,
                        step,
                    })
                    .collect(),
                3,
            ),
            (
                (1..4)
                    .map(|step| OptimUpdate::Adam {
                        lr: 0.01,
                        beta1: 0.8,
                        beta2: 0.99,
                        eps: 1e-8,
                        l2: 0.05,
                        decay: 1.0,
                        step,
                    })
                    .collect(),
                2,
            ),
            (
                vec![
                    OptimUpdate::RmsProp {
                        lr: 0.01,
                        weight_decay: 0.02,
                        alpha: 0.9,
                        eps: 1e-8,
                        momentum: 0.5,
                    };
                    3
                ],
                3,
            ),
            (
                vec![
                    OptimUpdate::RmsProp {
                        lr: 0.01,
                        weight_decay: 0.0,
                        alpha: 0.99,
                        eps: 1e-8,
                        momentum: 0.0,
                    };
                    3
                ],
                1,
            ),
        ];
        for (steps, nbufs) in cases {
            let mut got = vec![];
            for fused in [true, false] {
                crate::manual_seed(3);
                let p = Tensor::randn([5, 7], DType::F64)?;
                let state: Vec<Tensor> = (0..nbufs)
                    .map(|_| Tensor::zeros([5, 7], DType::F64))
                    .collect::<crate::Result<_>>()?;
                for u in &steps {
                    let g = Tensor::randn([5, 7], DType::F64)?;
                    if fused {
                        p.optimizer_update_(&g, &state, u)?;
                    } else {
                        p.optimizer_update_composed(&g, &state, u)?;
                    }
                }
                let mut v = p.to_vec::<f64>()?;
                for s in &state {
                    v.extend(s.to_vec::<f64>()?);
                }
                got.push(v);
            }
            for (a, b) in got[0].iter().zip(&got[1]) {
                assert!(
                    (a - b).abs() < 1e-12 * (1.0 + a.abs()),
                    "{steps:?}: {a} vs {b}"
                );
            }
        }
        Ok(())
    }
}
