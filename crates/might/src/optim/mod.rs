//! Optimizers, gradient clipping and learning-rate schedules (PyTorch's `torch.optim`).
//!
//! ```
//! use might::optim::{Optimizer, Sgd, SgdConfig};
//! use might::Tensor;
//! let w = Tensor::new(&[1.0f32, -2.0]).with_requires_grad();
//! let mut opt = Sgd::new(vec![w.clone()], SgdConfig { lr: 0.1, ..Default::default() })?;
//! w.square()?.sum_all()?.backward()?;   // grad = 2w
//! opt.step()?;                          // w -= 0.1 * 2w
//! assert_eq!(w.to_vec::<f32>()?, vec![0.8, -1.6]);
//! # Ok::<(), might::Error>(())
//! ```
//!
//! Every optimizer updates its parameters *in place* (under [`no_grad`](crate::no_grad)), so a
//! model holding the same tensors sees the new values without any copy. The update of one
//! parameter is one fused pass over the parameter, its gradient and its state buffers (f32 and
//! f64; f16/bf16 parameters are updated through an f32 copy with f32 state), split across the
//! thread pool for large tensors. Parameters whose `grad()` is `None` are skipped and their
//! state (including Adam's step count) does not advance, as in PyTorch.

mod adam;
pub mod checkpoint;
mod clip;
mod kernel;
mod rmsprop;
mod schedule;
mod sgd;

pub use adam::{Adam, AdamConfig, AdamW};
pub use checkpoint::{load_checkpoint, load_checkpoint_from_bytes, save_checkpoint, Checkpoint};
pub use clip::{clip_grad_norm_, clip_grad_norm_p_, clip_grad_value_};
pub use rmsprop::{RmsProp, RmsPropConfig};
pub use schedule::{
    ConstantLR, CosineAnnealingLR, ExponentialLR, LambdaLR, LinearWarmup, LrSchedule, MultiStepLR,
    OneCycleLR, Scheduler, StepLR, WarmupCosine,
};
pub use sgd::{Sgd, SgdConfig};

use crate::{DType, Error, Result, Tensor};
use std::collections::HashMap;

/// What every optimizer offers; lets schedulers and training loops work with
/// `&mut dyn Optimizer`.
pub trait Optimizer {
    /// Apply one update to every parameter that has a gradient.
    fn step(&mut self) -> Result<()>;
    /// Drop the gradients of all parameters (PyTorch's `set_to_none=True`, the default).
    fn zero_grad(&mut self);
    /// The base learning rate (each group uses `lr * lr_scale`).
    fn lr(&self) -> f64;
    /// Change the base learning rate (what schedulers call).
    fn set_lr(&mut self, lr: f64);
    /// The optimizer's state (per-parameter buffers and step counts, plus `lr`) so a
    /// checkpoint can save it; names follow PyTorch: `state.<i>.exp_avg`, `state.<i>.step`,
    /// where `<i>` numbers the parameters across groups in order.
    fn state_dict(&self) -> OptimizerState;
    /// Restore what [`state_dict`](Optimizer::state_dict) returned. All or nothing: on error
    /// the optimizer is unchanged.
    fn load_state_dict(&mut self, s: &OptimizerState) -> Result<()>;
}

/// Optimizer state as named tensors and named scalars (ready for a checkpoint file).
#[derive(Clone, Debug, Default)]
pub struct OptimizerState {
    pub tensors: Vec<(String, Tensor)>,
    pub scalars: Vec<(String, f64)>,
}

impl OptimizerState {
    /// Look a tensor up by name.
    pub fn tensor(&self, name: &str) -> Option<&Tensor> {
        self.tensors.iter().find(|(n, _)| n == name).map(|(_, t)| t)
    }
    /// Look a scalar up by name.
    pub fn scalar(&self, name: &str) -> Option<f64> {
        self.scalars
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v)
    }
}

/// A set of parameters sharing options: typically weights with weight decay and biases /
/// norm scales without (`weight_decay: Some(0.0)`), or a backbone trained with a smaller
/// `lr_scale`. `weight_decay: None` uses the optimizer's config value.
#[derive(Clone, Debug)]
pub struct ParamGroup {
    pub params: Vec<Tensor>,
    pub weight_decay: Option<f64>,
    pub lr_scale: f64,
}

impl ParamGroup {
    /// A group with the optimizer's weight decay and learning rate.
    pub fn new(params: Vec<Tensor>) -> Self {
        ParamGroup {
            params,
            weight_decay: None,
            lr_scale: 1.0,
        }
    }
    /// Override the weight decay for this group.
    pub fn with_weight_decay(mut self, wd: f64) -> Self {
        self.weight_decay = Some(wd);
        self
    }
    /// Scale the base learning rate for this group.
    pub fn with_lr_scale(mut self, s: f64) -> Self {
        self.lr_scale = s;
        self
    }

    /// The usual transformer / CNN split: parameters of rank ≥ 2 (weight matrices, conv
    /// kernels) decay with `weight_decay`; rank ≤ 1 ones (biases, LayerNorm/BatchNorm scales)
    /// do not. Order within each group follows `named`.
    pub fn decay_split(named: &[(String, Tensor)], weight_decay: f64) -> Vec<ParamGroup> {
        let (decay, no): (Vec<_>, Vec<_>) = named.iter().partition(|(_, t)| t.rank() >= 2);
        vec![
            ParamGroup::new(decay.into_iter().map(|(_, t)| t.clone()).collect())
                .with_weight_decay(weight_decay),
            ParamGroup::new(no.into_iter().map(|(_, t)| t.clone()).collect())
                .with_weight_decay(0.0),
        ]
    }
}

/// Per-parameter state: step count and the optimizer's buffers (in the optimizer's name
/// order), tensors on the parameter's device in the compute dtype (f64 for f64 parameters,
/// f32 otherwise), each owning its storage (updated in place).
#[derive(Debug)]
pub(crate) struct ParamState {
    pub(crate) step: u64,
    pub(crate) bufs: Vec<Tensor>,
}

pub(crate) struct Slot {
    pub(crate) param: Tensor,
    pub(crate) group: usize,
    pub(crate) state: Option<ParamState>,
}

pub(crate) struct GroupOpts {
    pub(crate) weight_decay: Option<f64>,
    pub(crate) lr_scale: f64,
}

/// What all optimizers share: the parameters, their groups and state, the base lr.
pub(crate) struct Core {
    pub(crate) slots: Vec<Slot>,
    pub(crate) groups: Vec<GroupOpts>,
    pub(crate) lr: f64,
}

/// dtype of state buffers for a parameter dtype.
pub(crate) fn state_dtype(p: DType) -> DType {
    if p == DType::F64 {
        DType::F64
    } else {
        DType::F32
    }
}

#[track_caller]
pub(crate) fn check_hyper(op: &str, name: &str, v: f64, lo: f64, hi: f64) -> Result<()> {
    if !(v >= lo && v <= hi) {
        return Err(Error::invalid(
            op,
            format!("{name} = {v} is out of range [{lo}, {hi}]"),
        ));
    }
    Ok(())
}

impl Core {
    #[track_caller]
    pub(crate) fn new(op: &str, groups: Vec<ParamGroup>, lr: f64) -> Result<Core> {
        check_hyper(op, "lr", lr, 0.0, f64::INFINITY)?;
        let mut seen = std::collections::HashSet::new();
        let mut slots = Vec::new();
        let mut gopts = Vec::new();
        for (gi, g) in groups.into_iter().enumerate() {
            check_hyper(op, "lr_scale", g.lr_scale, 0.0, f64::INFINITY)?;
            if let Some(wd) = g.weight_decay {
                check_hyper(op, "weight_decay", wd, 0.0, f64::INFINITY)?;
            }
            for p in g.params {
                if !matches!(
                    p.dtype(),
                    DType::F32 | DType::F64 | DType::F16 | DType::BF16
                ) {
                    return Err(Error::dtype(
                        op,
                        format!(
                            "parameter {} of group {gi} has dtype {} (shape {}); optimizers \
                             update floating-point tensors only",
                            slots.len(),
                            p.dtype(),
                            p.shape()
                        ),
                    ));
                }
                if !seen.insert(p.id()) {
                    return Err(Error::invalid(
                        op,
                        format!(
                            "parameter of shape {} appears twice (group {gi}); each parameter \
                             may be given once",
                            p.shape()
                        ),
                    ));
                }
                slots.push(Slot {
                    param: p,
                    group: gi,
                    state: None,
                });
            }
            gopts.push(GroupOpts {
                weight_decay: g.weight_decay,
                lr_scale: g.lr_scale,
            });
        }
        Ok(Core {
            slots,
            groups: gopts,
            lr,
        })
    }

    pub(crate) fn params(&self) -> Vec<Tensor> {
        self.slots.iter().map(|s| s.param.clone()).collect()
    }

    pub(crate) fn zero_grad(&self) {
        for s in &self.slots {
            s.param.zero_grad();
        }
    }

    /// (lr, weight decay) of a slot's group.
    pub(crate) fn group_hyper(&self, slot: usize, default_wd: f64) -> (f64, f64) {
        let g = &self.groups[self.slots[slot].group];
        (self.lr * g.lr_scale, g.weight_decay.unwrap_or(default_wd))
    }

    /// Export state: buffers named by `names` (the optimizer's active buffers), the step
    /// count when `with_step`, and the base `lr`.
    pub(crate) fn state_dict(&self, names: &[&str], with_step: bool) -> OptimizerState {
        let mut out = OptimizerState::default();
        out.scalars.push(("lr".into(), self.lr));
        for (i, slot) in self.slots.iter().enumerate() {
            let Some(st) = &slot.state else { continue };
            if with_step {
                out.scalars
                    .push((format!("state.{i}.step"), st.step as f64));
            }
            for (name, buf) in names.iter().zip(&st.bufs) {
                // a copy: the live buffer keeps changing with every step. A copy that fails
                // (a device out of memory) leaves the entry out, so loading this state
                // reports it missing instead of aliasing the live buffer.
                let Ok(t) = buf.deep_clone() else { continue };
                out.tensors.push((format!("state.{i}.{name}"), t.detach()));
            }
        }
        out
    }

    /// Import state (see [`Core::state_dict`]); strict about unknown names, missing buffers
    /// and shapes so a checkpoint of another model or optimizer is refused, not half-loaded.
    #[track_caller]
    pub(crate) fn load_state_dict(
        &mut self,
        op: &str,
        s: &OptimizerState,
        names: &[&str],
        with_step: bool,
    ) -> Result<()> {
        let n = self.slots.len();
        let parse = |key: &str| -> Option<(usize, String)> {
            let rest = key.strip_prefix("state.")?;
            let (i, name) = rest.split_once('.')?;
            let i: usize = i.parse().ok()?;
            (i < n).then(|| (i, name.to_string()))
        };
        let mut bufs: HashMap<usize, Vec<Option<Tensor>>> = HashMap::new();
        let mut steps: HashMap<usize, u64> = HashMap::new();
        let mut lr = None;
        for (key, t) in &s.tensors {
            let Some((i, name)) = parse(key) else {
                return Err(Error::invalid(
                    op,
                    format!("unexpected state tensor {key:?} (optimizer has {n} parameters)"),
                ));
            };
            let Some(bi) = names.iter().position(|&b| b == name) else {
                return Err(Error::invalid(
                    op,
                    format!("unexpected state tensor {key:?}; this optimizer keeps {names:?}"),
                ));
            };
            let p = &self.slots[i].param;
            if t.shape() != p.shape() {
                return Err(Error::shape(
                    op,
                    format!(
                        "state tensor {key:?} has shape {}, parameter {i} has shape {}",
                        t.shape(),
                        p.shape()
                    ),
                ));
            }
            if !t.dtype().is_float() {
                return Err(Error::dtype(
                    op,
                    format!("state tensor {key:?} has dtype {}", t.dtype()),
                ));
            }
            // a fresh contiguous copy in the state dtype, on the parameter's device
            let storage = t
                .detach()
                .to_dtype(state_dtype(p.dtype()))?
                .to_device(p.device())?
                .deep_clone()?;
            bufs.entry(i).or_insert_with(|| vec![None; names.len()])[bi] = Some(storage);
        }
        for (key, v) in &s.scalars {
            if key == "lr" {
                check_hyper(op, "lr", *v, 0.0, f64::INFINITY)?;
                lr = Some(*v);
                continue;
            }
            match parse(key) {
                Some((i, name)) if name == "step" && with_step => {
                    if !(*v >= 0.0 && v.fract() == 0.0) {
                        return Err(Error::invalid(
                            op,
                            format!("{key:?} = {v} is not a step count"),
                        ));
                    }
                    steps.insert(i, *v as u64);
                }
                _ => {
                    return Err(Error::invalid(
                        op,
                        format!("unexpected state scalar {key:?}"),
                    ))
                }
            }
        }
        let mut new_states: Vec<Option<ParamState>> = (0..n).map(|_| None).collect();
        for (i, new) in new_states.iter_mut().enumerate() {
            let b = bufs.remove(&i);
            let st = steps.remove(&i);
            if b.is_none() && st.is_none() {
                continue;
            }
            let b = b.unwrap_or_else(|| vec![None; names.len()]);
            let mut full = Vec::with_capacity(names.len());
            for (name, x) in names.iter().zip(b) {
                match x {
                    Some(x) => full.push(x),
                    None => {
                        return Err(Error::invalid(
                            op,
                            format!("state of parameter {i} lacks \"state.{i}.{name}\""),
                        ))
                    }
                }
            }
            let step = match st {
                Some(v) => v,
                None if with_step => {
                    return Err(Error::invalid(
                        op,
                        format!("state of parameter {i} lacks \"state.{i}.step\""),
                    ))
                }
                None => 0,
            };
            *new = Some(ParamState { step, bufs: full });
        }
        for (slot, st) in self.slots.iter_mut().zip(new_states) {
            slot.state = st;
        }
        if let Some(lr) = lr {
            self.lr = lr;
        }
        Ok(())
    }
}
