//! Stochastic gradient descent with momentum, dampening, Nesterov and L2 weight decay
//! (`torch.optim.SGD`).

use super::kernel::update_param;
use super::{check_hyper, Core, Optimizer, OptimizerState, ParamGroup};
use crate::backend::OptimUpdate;
use crate::{Error, Result, Tensor};

/// Options of [`Sgd`]; defaults are PyTorch's (`lr = 1e-3`, everything else off).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SgdConfig {
    pub lr: f64,
    pub momentum: f64,
    pub dampening: f64,
    pub nesterov: bool,
    pub weight_decay: f64,
}

impl Default for SgdConfig {
    fn default() -> Self {
        SgdConfig {
            lr: 1e-3,
            momentum: 0.0,
            dampening: 0.0,
            nesterov: false,
            weight_decay: 0.0,
        }
    }
}

/// SGD as in PyTorch:
/// `d = g + wd·p`; with momentum `buf = μ·buf + (1−dampening)·d` (`buf = d` on the first
/// step), then `d = d + μ·buf` (Nesterov) or `d = buf`; finally `p -= lr·d`.
pub struct Sgd {
    core: Core,
    cfg: SgdConfig,
}

impl Sgd {
    /// One group holding `params`.
    #[track_caller]
    pub fn new(params: Vec<Tensor>, cfg: SgdConfig) -> Result<Sgd> {
        Sgd::with_groups(vec![ParamGroup::new(params)], cfg)
    }

    /// Several parameter groups (per-group weight decay / lr scale).
    #[track_caller]
    pub fn with_groups(groups: Vec<ParamGroup>, cfg: SgdConfig) -> Result<Sgd> {
        let op = "Sgd::new";
        check_hyper(op, "momentum", cfg.momentum, 0.0, f64::INFINITY)?;
        check_hyper(
            op,
            "dampening",
            cfg.dampening,
            f64::NEG_INFINITY,
            f64::INFINITY,
        )?;
        check_hyper(op, "weight_decay", cfg.weight_decay, 0.0, f64::INFINITY)?;
        if cfg.nesterov && (cfg.momentum <= 0.0 || cfg.dampening != 0.0) {
            return Err(Error::invalid(
                op,
                format!(
                    "Nesterov momentum requires momentum > 0 and dampening = 0 (got momentum \
                     {}, dampening {})",
                    cfg.momentum, cfg.dampening
                ),
            ));
        }
        Ok(Sgd {
            core: Core::new(op, groups, cfg.lr)?,
            cfg,
        })
    }

    /// The parameters, in order (state index `i` is the `i`-th).
    pub fn params(&self) -> Vec<Tensor> {
        self.core.params()
    }

    pub fn config(&self) -> &SgdConfig {
        &self.cfg
    }

    fn buf_names(&self) -> &'static [&'static str] {
        if self.cfg.momentum != 0.0 {
            &["momentum_buffer"]
        } else {
            &[]
        }
    }
}

impl Optimizer for Sgd {
    fn step(&mut self) -> Result<()> {
        let _g = crate::no_grad();
        let nbufs = self.buf_names().len();
        for i in 0..self.core.slots.len() {
            let (lr, wd) = self.core.group_hyper(i, self.cfg.weight_decay);
            let slot = &mut self.core.slots[i];
            let Some(g) = slot.param.grad() else { continue };
            let k = OptimUpdate::Sgd {
                lr,
                weight_decay: wd,
                momentum: self.cfg.momentum,
                dampening: self.cfg.dampening,
                nesterov: self.cfg.nesterov,
                first: slot.state.is_none(),
            };
            update_param("Sgd::step", &slot.param, &g, &mut slot.state, nbufs, &k)?;
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
        self.core.state_dict(self.buf_names(), false)
    }
    #[track_caller]
    fn load_state_dict(&mut self, s: &OptimizerState) -> Result<()> {
        let names = self.buf_names();
        self.core
            .load_state_dict("Sgd::load_state_dict", s, names, false)
    }
}
