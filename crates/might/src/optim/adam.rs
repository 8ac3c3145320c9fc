//! Adam (L2 weight decay folded into the gradient) and AdamW (decoupled weight decay),
//! `torch.optim.Adam` / `torch.optim.AdamW`.

use super::kernel::update_param;
use super::{check_hyper, Core, Optimizer, OptimizerState, ParamGroup};
use crate::backend::OptimUpdate;
use crate::{Result, Tensor};

/// Options of [`Adam`] / [`AdamW`]. `Default` gives PyTorch's Adam defaults
/// (`lr = 1e-3, betas = (0.9, 0.999), eps = 1e-8`, no weight decay);
/// [`AdamConfig::adamw`] gives AdamW's (`weight_decay = 1e-2`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamConfig {
    pub lr: f64,
    pub betas: (f64, f64),
    pub eps: f64,
    pub weight_decay: f64,
    pub amsgrad: bool,
}

impl Default for AdamConfig {
    fn default() -> Self {
        AdamConfig {
            lr: 1e-3,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 0.0,
            amsgrad: false,
        }
    }
}

impl AdamConfig {
    /// PyTorch's AdamW defaults (weight decay 0.01).
    pub fn adamw() -> Self {
        AdamConfig {
            weight_decay: 1e-2,
            ..Default::default()
        }
    }
}

/// The shared implementation; `decoupled` picks AdamW.
struct AdamImpl {
    core: Core,
    cfg: AdamConfig,
    decoupled: bool,
}

impl AdamImpl {
    #[track_caller]
    fn new(op: &str, groups: Vec<ParamGroup>, cfg: AdamConfig, decoupled: bool) -> Result<Self> {
        check_hyper(op, "beta1", cfg.betas.0, 0.0, 1.0 - f64::EPSILON)?;
        check_hyper(op, "beta2", cfg.betas.1, 0.0, 1.0 - f64::EPSILON)?;
        check_hyper(op, "eps", cfg.eps, 0.0, f64::INFINITY)?;
        check_hyper(op, "weight_decay", cfg.weight_decay, 0.0, f64::INFINITY)?;
        Ok(AdamImpl {
            core: Core::new(op, groups, cfg.lr)?,
            cfg,
            decoupled,
        })
    }

    fn names(&self) -> &'static [&'static str] {
        if self.cfg.amsgrad {
            &["exp_avg", "exp_avg_sq", "max_exp_avg_sq"]
        } else {
            &["exp_avg", "exp_avg_sq"]
        }
    }

    fn op(&self) -> &'static str {
        if self.decoupled {
            "AdamW::step"
        } else {
            "Adam::step"
        }
    }

    fn step(&mut self) -> Result<()> {
        let _g = crate::no_grad();
        let nbufs = self.names().len();
        let op = self.op();
        for i in 0..self.core.slots.len() {
            let (lr, wd) = self.core.group_hyper(i, self.cfg.weight_decay);
            let slot = &mut self.core.slots[i];
            let Some(g) = slot.param.grad() else { continue };
            let step = slot.state.as_ref().map_or(0, |s| s.step) + 1;
            let (l2, decay) = if self.decoupled {
                (0.0, 1.0 - lr * wd)
            } else {
                (wd, 1.0)
            };
            let k = OptimUpdate::Adam {
                lr,
                beta1: self.cfg.betas.0,
                beta2: self.cfg.betas.1,
                eps: self.cfg.eps,
                l2,
                decay,
                step,
            };
            update_param(op, &slot.param, &g, &mut slot.state, nbufs, &k)?;
            if let Some(st) = &mut slot.state {
                st.step = step;
            }
        }
        Ok(())
    }
}

macro_rules! adam_like {
    ($name:ident, $decoupled:expr, $op:literal, $doc:literal) => {
        #[doc = $doc]
        pub struct $name(AdamImpl);

        impl $name {
            /// One group holding `params`.
            #[track_caller]
            pub fn new(params: Vec<Tensor>, cfg: AdamConfig) -> Result<Self> {
                Self::with_groups(vec![ParamGroup::new(params)], cfg)
            }
            /// Several parameter groups (per-group weight decay / lr scale).
            #[track_caller]
            pub fn with_groups(groups: Vec<ParamGroup>, cfg: AdamConfig) -> Result<Self> {
                Ok($name(AdamImpl::new($op, groups, cfg, $decoupled)?))
            }
            /// The parameters, in order (state index `i` is the `i`-th).
            pub fn params(&self) -> Vec<Tensor> {
                self.0.core.params()
            }
            pub fn config(&self) -> &AdamConfig {
                &self.0.cfg
            }
        }

        impl Optimizer for $name {
            fn step(&mut self) -> Result<()> {
                self.0.step()
            }
            fn zero_grad(&mut self) {
                self.0.core.zero_grad()
            }
            fn lr(&self) -> f64 {
                self.0.core.lr
            }
            fn set_lr(&mut self, lr: f64) {
                self.0.core.lr = lr;
            }
            fn state_dict(&self) -> OptimizerState {
                self.0.core.state_dict(self.0.names(), true)
            }
            #[track_caller]
            fn load_state_dict(&mut self, s: &OptimizerState) -> Result<()> {
                let names = self.0.names();
                self.0
                    .core
                    .load_state_dict(concat!($op, "::load_state_dict"), s, names, true)
            }
        }
    };
}

adam_like!(
    Adam,
    false,
    "Adam",
    "Adam with bias correction, optional AMSGrad and L2 weight decay (`d = g + wd·p`):
`m = β1·m + (1−β1)·d`, `v = β2·v + (1−β2)·d²`, (AMSGrad: `v̂ = max(v̂, v)`),
`p -= lr/(1−β1ᵗ) · m / (√v / √(1−β2ᵗ) + eps)`."
);

adam_like!(
    AdamW,
    true,
    "AdamW",
    "Adam with decoupled weight decay (Loshchilov & Hutter): `p *= 1 − lr·wd` first, then the
Adam update on the raw gradient. Use [`AdamConfig::adamw`] for PyTorch's defaults."
);
