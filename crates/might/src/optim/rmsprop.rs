//! RMSprop (`torch.optim.RMSprop`): divide the gradient by a running RMS of its recent
//! magnitudes; optionally centered (subtract the running mean first) and with momentum.

use super::kernel::update_param;
use super::{check_hyper, Core, Optimizer, OptimizerState, ParamGroup};
use crate::backend::OptimUpdate;
use crate::{Result, Tensor};

/// Options of [`RmsProp`]; defaults are PyTorch's (`lr = 1e-2, alpha = 0.99, eps = 1e-8`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RmsPropConfig {
    pub lr: f64,
    pub alpha: f64,
    pub eps: f64,
    pub weight_decay: f64,
    pub momentum: f64,
    pub centered: bool,
}

impl Default for RmsPropConfig {
    fn default() -> Self {
        RmsPropConfig {
            lr: 1e-2,
            alpha: 0.99,
            eps: 1e-8,
            weight_decay: 0.0,
            momentum: 0.0,
            centered: false,
        }
    }
}

/// RMSprop as in PyTorch: `d = g + wd·p`, `sq = α·sq + (1−α)·d²`,
/// `avg = √(sq − ga²) + eps` with `ga = α·ga + (1−α)·d` when centered (else `√sq + eps`);
/// with momentum `buf = μ·buf + d/avg; p -= lr·buf`, else `p -= lr·d/avg`.
pub struct RmsProp {
    core: Core,
    cfg: RmsPropConfig,
}

impl RmsProp {
    /// One group holding `params`.
    #[track_caller]
    pub fn new(params: Vec<Tensor>, cfg: RmsPropConfig) -> Result<RmsProp> {
        RmsProp::with_groups(vec![ParamGroup::new(params)], cfg)
    }

    /// Several parameter groups (per-group weight decay / lr scale).
    #[track_caller]
    pub fn with_groups(groups: Vec<ParamGroup>, cfg: RmsPropConfig) -> Result<RmsProp> {
        let op = "RmsProp::new";
        check_hyper(op, "alpha", cfg.alpha, 0.0, f64::INFINITY)?;
        check_hyper(op, "eps", cfg.eps, 0.0, f64::INFINITY)?;
        check_hyper(op, "momentum", cfg.momentum, 0.0, f64::INFINITY)?;
        check_hyper(op, "weight_decay", cfg.weight_decay, 0.0, f64::INFINITY)?;
        Ok(RmsProp {
            core: Core::new(op, groups, cfg.lr)?,
            cfg,
        })
    }

    /// The parameters, in order (state index `i` is the `i`-th).
    pub fn params(&self) -> Vec<Tensor> {
        self.core.params()
    }

    pub fn config(&self) -> &RmsPropConfig {
        &self.cfg
    }

    fn names(&self) -> &'static [&'static str] {
        match (self.cfg.momentum > 0.0, self.cfg.centered) {
            (false, false) => &["square_avg"],
            (true, false) => &["square_avg", "momentum_buffer"],
            (false, true) => &["square_avg", "grad_avg"],
            (true, true) => &["square_avg", "momentum_buffer", "grad_avg"],
        }
    }
}

impl Optimizer for RmsProp {
    fn step(&mut self) -> Result<()> {
        let _g = crate::no_grad();
        let nbufs = self.names().len();
        for i in 0..self.core.slots.len() {
            let (lr, wd) = self.core.group_hyper(i, self.cfg.weight_decay);
            let slot = &mut self.core.slots[i];
            let Some(g) = slot.param.grad() else { continue };
            let k = OptimUpdate::RmsProp {
                lr,
                weight_decay: wd,
                alpha: self.cfg.alpha,
                eps: self.cfg.eps,
                momentum: self.cfg.momentum,
            };
            update_param("RmsProp::step", &slot.param, &g, &mut slot.state, nbufs, &k)?;
            if let Some(st) = &mut slot.state {
                st.step += 1;
            }
        }
        Ok(())
    }
    fn zero_grad(&mut self) {
        self.core.zero_grad()
    }
    fn lr(&self) -> f64 {
        self.core.lr
    }
    fn set_lr(&mut self, lr: f64) {
        self.core.lr = lr;
    }
    fn state_dict(&self) -> OptimizerState {
        self.core.state_dict(self.names(), true)
    }
    #[track_caller]
    fn load_state_dict(&mut self, s: &OptimizerState) -> Result<()> {
        let names = self.names();
        self.core
            .load_state_dict("RmsProp::load_state_dict", s, names, true)
    }
}
