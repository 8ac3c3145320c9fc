//! Learning-rate schedules.
//!
//! A schedule is a pure function of the step: [`LrSchedule::lr_at`] returns the *factor*
//! applied to the base learning rate at step `step` (0 = before the first optimizer step;
//! PyTorch's `LambdaLR` view). Being pure, schedules compose ([`LinearWarmup::then`]), are
//! trivially resumable, and can be plotted without an optimizer. A [`Scheduler`] owns the base
//! lr and a step counter and pushes `base_lr · lr_at(step)` into any `&mut dyn Optimizer`.
//!
//! Usage mirrors PyTorch: call `opt.step()` then `sched.step(&mut opt)` each iteration.
//! [`Scheduler::for_optimizer`] sets the step-0 lr right away, as PyTorch's constructors do.
//!
//! Floors such as `CosineAnnealingLR`'s are given as factors too: PyTorch's
//! `eta_min = 1e-5` with base lr `0.1` is `min_factor = 1e-4`.

use super::Optimizer;
use crate::{Error, Result};
use std::f64::consts::PI;

/// A learning-rate factor as a function of the step.
pub trait LrSchedule: Send + Sync {
    /// Factor of the base learning rate to use at `step` (0-based).
    fn lr_at(&self, step: usize) -> f64;
}

/// Any function of the step as a schedule (PyTorch's `LambdaLR`).
pub struct LambdaLR<F>(pub F);

impl<F: Fn(usize) -> f64 + Send + Sync> LrSchedule for LambdaLR<F> {
    fn lr_at(&self, step: usize) -> f64 {
        (self.0)(step)
    }
}

impl LrSchedule for Box<dyn LrSchedule> {
    fn lr_at(&self, step: usize) -> f64 {
        (**self).lr_at(step)
    }
}

/// A constant factor (1 = the base lr).
#[derive(Clone, Copy, Debug)]
pub struct ConstantLR(pub f64);

impl LrSchedule for ConstantLR {
    fn lr_at(&self, _step: usize) -> f64 {
        self.0
    }
}

/// `gamma^(step / step_size)`: decay by `gamma` every `step_size` steps.
#[derive(Clone, Copy, Debug)]
pub struct StepLR {
    pub step_size: usize,
    pub gamma: f64,
}

impl StepLR {
    #[track_caller]
    pub fn new(step_size: usize, gamma: f64) -> Result<StepLR> {
        if step_size == 0 {
            return Err(Error::invalid("StepLR::new", "step_size must be ≥ 1"));
        }
        Ok(StepLR { step_size, gamma })
    }
}

impl LrSchedule for StepLR {
    fn lr_at(&self, step: usize) -> f64 {
        self.gamma.powi((step / self.step_size.max(1)) as i32)
    }
}

/// `gamma^(number of milestones ≤ step)`.
#[derive(Clone, Debug)]
pub struct MultiStepLR {
    pub milestones: Vec<usize>,
    pub gamma: f64,
}

impl MultiStepLR {
    pub fn new(milestones: Vec<usize>, gamma: f64) -> MultiStepLR {
        MultiStepLR { milestones, gamma }
    }
}

impl LrSchedule for MultiStepLR {
    fn lr_at(&self, step: usize) -> f64 {
        let n = self.milestones.iter().filter(|&&m| m <= step).count();
        self.gamma.powi(n as i32)
    }
}

/// `gamma^step`.
#[derive(Clone, Copy, Debug)]
pub struct ExponentialLR {
    pub gamma: f64,
}

impl ExponentialLR {
    pub fn new(gamma: f64) -> ExponentialLR {
        ExponentialLR { gamma }
    }
}

impl LrSchedule for ExponentialLR {
    fn lr_at(&self, step: usize) -> f64 {
        self.gamma.powf(step as f64)
    }
}

/// Cosine from 1 at step 0 to `min_factor` at `t_max` (PyTorch's closed form, which keeps
/// oscillating with period `2·t_max` past `t_max`).
#[derive(Clone, Copy, Debug)]
pub struct CosineAnnealingLR {
    pub t_max: usize,
    pub min_factor: f64,
}

impl CosineAnnealingLR {
    #[track_caller]
    pub fn new(t_max: usize, min_factor: f64) -> Result<CosineAnnealingLR> {
        if t_max == 0 {
            return Err(Error::invalid(
                "CosineAnnealingLR::new",
                "t_max must be ≥ 1",
            ));
        }
        Ok(CosineAnnealingLR { t_max, min_factor })
    }
}

fn cos_anneal(from: f64, to: f64, pct: f64) -> f64 {
    to + (from - to) / 2.0 * ((PI * pct).cos() + 1.0)
}

impl LrSchedule for CosineAnnealingLR {
    fn lr_at(&self, step: usize) -> f64 {
        cos_anneal(1.0, self.min_factor, step as f64 / self.t_max.max(1) as f64)
    }
}

/// Linear ramp from `start_factor` to 1 over `warmup_steps` steps (PyTorch's `LinearLR` with
/// `end_factor = 1`); afterwards 1, or `after.lr_at(step - warmup_steps)` when composed with
/// [`then`](LinearWarmup::then) (PyTorch's `SequentialLR`).
pub struct LinearWarmup {
    pub start_factor: f64,
    pub warmup_steps: usize,
    after: Option<Box<dyn LrSchedule>>,
}

impl LinearWarmup {
    pub fn new(start_factor: f64, warmup_steps: usize) -> LinearWarmup {
        LinearWarmup {
            start_factor,
            warmup_steps,
            after: None,
        }
    }
    /// Continue with `next` once the warm-up is over (its step 0 is the first step after).
    pub fn then(mut self, next: impl LrSchedule + 'static) -> LinearWarmup {
        self.after = Some(Box::new(next));
        self
    }
}

impl LrSchedule for LinearWarmup {
    fn lr_at(&self, step: usize) -> f64 {
        if step < self.warmup_steps {
            let t = step as f64 / self.warmup_steps as f64;
            return self.start_factor + (1.0 - self.start_factor) * t;
        }
        match &self.after {
            Some(s) => s.lr_at(step - self.warmup_steps),
            None => 1.0,
        }
    }
}

/// The one-cycle policy (PyTorch's `OneCycleLR`, two phases, cosine annealing): from
/// `1/div_factor` up to 1 (the base lr is the peak, PyTorch's `max_lr`) over the first
/// `pct_start` of `total_steps`, then down to `1/(div_factor·final_div_factor)`.
#[derive(Clone, Copy, Debug)]
pub struct OneCycleLR {
    pub total_steps: usize,
    pub pct_start: f64,
    pub div_factor: f64,
    pub final_div_factor: f64,
}

impl OneCycleLR {
    /// PyTorch's defaults: `pct_start = 0.3, div_factor = 25, final_div_factor = 1e4`.
    #[track_caller]
    pub fn new(total_steps: usize) -> Result<OneCycleLR> {
        OneCycleLR::with_options(total_steps, 0.3, 25.0, 1e4)
    }

    #[track_caller]
    pub fn with_options(
        total_steps: usize,
        pct_start: f64,
        div_factor: f64,
        final_div_factor: f64,
    ) -> Result<OneCycleLR> {
        let op = "OneCycleLR::new";
        if total_steps < 2 {
            return Err(Error::invalid(
                op,
                format!("total_steps must be ≥ 2, got {total_steps}"),
            ));
        }
        if !(pct_start > 0.0 && pct_start < 1.0) {
            return Err(Error::invalid(
                op,
                format!("pct_start must be in (0, 1), got {pct_start}"),
            ));
        }
        let up_end = pct_start * total_steps as f64 - 1.0;
        if !(up_end > 0.0 && up_end < (total_steps - 1) as f64) {
            return Err(Error::invalid(
                op,
                format!(
                    "pct_start {pct_start} leaves an empty phase with total_steps {total_steps}"
                ),
            ));
        }
        if !(div_factor > 0.0 && final_div_factor > 0.0) {
            return Err(Error::invalid(
                op,
                "div_factor and final_div_factor must be > 0",
            ));
        }
        Ok(OneCycleLR {
            total_steps,
            pct_start,
            div_factor,
            final_div_factor,
        })
    }
}

impl LrSchedule for OneCycleLR {
    fn lr_at(&self, step: usize) -> f64 {
        let initial = 1.0 / self.div_factor;
        let min = initial / self.final_div_factor;
        let up_end = self.pct_start * self.total_steps as f64 - 1.0;
        let down_end = (self.total_steps - 1) as f64;
        let s = (step as f64).min(down_end);
        if s <= up_end {
            cos_anneal(initial, 1.0, s / up_end)
        } else {
            cos_anneal(1.0, min, (s - up_end) / (down_end - up_end))
        }
    }
}

/// Linear warm-up from 0 to 1 over `warmup_steps`, then cosine decay to `min_factor` at
/// `total_steps` (and `min_factor` afterwards): the usual transformer recipe.
#[derive(Clone, Copy, Debug)]
pub struct WarmupCosine {
    pub warmup_steps: usize,
    pub total_steps: usize,
    pub min_factor: f64,
}

impl WarmupCosine {
    #[track_caller]
    pub fn new(warmup_steps: usize, total_steps: usize, min_factor: f64) -> Result<WarmupCosine> {
        if total_steps <= warmup_steps {
            return Err(Error::invalid(
                "WarmupCosine::new",
                format!("total_steps ({total_steps}) must exceed warmup_steps ({warmup_steps})"),
            ));
        }
        Ok(WarmupCosine {
            warmup_steps,
            total_steps,
            min_factor,
        })
    }
}

impl LrSchedule for WarmupCosine {
    fn lr_at(&self, step: usize) -> f64 {
        if step < self.warmup_steps {
            return step as f64 / self.warmup_steps as f64;
        }
        let span = (self.total_steps - self.warmup_steps) as f64;
        let t = ((step - self.warmup_steps) as f64 / span).min(1.0);
        cos_anneal(1.0, self.min_factor, t)
    }
}

/// Drives an optimizer's learning rate from a schedule: `lr = base_lr · schedule.lr_at(step)`.
pub struct Scheduler {
    base_lr: f64,
    step: usize,
    schedule: Box<dyn LrSchedule>,
}

impl Scheduler {
    /// A scheduler at step 0. Call [`apply`](Scheduler::apply) once before training (or use
    /// [`for_optimizer`](Scheduler::for_optimizer)) so the first step uses `lr_at(0)`.
    pub fn new(base_lr: f64, schedule: impl LrSchedule + 'static) -> Scheduler {
        Scheduler {
            base_lr,
            step: 0,
            schedule: Box::new(schedule),
        }
    }

    /// Take the base lr from `opt` and set its step-0 lr now (what PyTorch's schedulers do on
    /// construction).
    pub fn for_optimizer(
        opt: &mut dyn Optimizer,
        schedule: impl LrSchedule + 'static,
    ) -> Scheduler {
        let s = Scheduler::new(opt.lr(), schedule);
        s.apply(opt);
        s
    }

    /// Advance one step and set the optimizer's lr (call after `opt.step()`).
    pub fn step(&mut self, opt: &mut dyn Optimizer) {
        self.step += 1;
        self.apply(opt);
    }

    /// Set the optimizer's lr for the current step.
    pub fn apply(&self, opt: &mut dyn Optimizer) {
        opt.set_lr(self.get_lr());
    }

    /// The lr for the current step.
    pub fn get_lr(&self) -> f64 {
        self.base_lr * self.schedule.lr_at(self.step)
    }

    /// Steps taken so far (save it in a checkpoint; restore with `set_step`).
    pub fn current_step(&self) -> usize {
        self.step
    }

    /// Jump to `step` (resuming); call [`apply`](Scheduler::apply) afterwards.
    pub fn set_step(&mut self, step: usize) {
        self.step = step;
    }

    pub fn base_lr(&self) -> f64 {
        self.base_lr
    }
}
