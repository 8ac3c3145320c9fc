//! Reverse-mode automatic differentiation.
//!
//! The whole idea on one screen:
//! - every op that has an input requiring grad records a [`Node`] in its output: the inputs and
//!   a closure mapping the output's gradient to the inputs' gradients;
//! - `loss.backward()` sorts the graph topologically, walks it from the loss back to the leaves,
//!   sums the gradients flowing into each tensor, and adds the total into each leaf's `.grad()`;
//! - each node is taken out of its tensor as it is processed, so the activations it saved are
//!   freed during the backward pass, not after it (unless `retain_graph` is asked for).
//!
//! Leaves accumulate: calling `backward` twice without `zero_grad` adds the two gradients, as in
//! PyTorch. Ops run inside [`no_grad`] record nothing.

mod engine;

pub use crate::gradcheck::{self, gradcheck, GradCheck};
pub use engine::{backward_with, BackwardOptions};

use crate::{Result, Tensor};
use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Maps the gradient of a node's output to the gradients of its inputs (`None` = no gradient).
pub type BackwardFn = dyn Fn(&Tensor) -> Result<Vec<Option<Tensor>>> + Send + Sync;

/// One recorded operation.
pub struct Node {
    pub(crate) name: &'static str,
    pub(crate) inputs: Vec<Tensor>,
    pub(crate) backward: Box<BackwardFn>,
}

thread_local! {
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// Is gradient recording on (on this thread)?
pub fn is_grad_enabled() -> bool {
    GRAD_ENABLED.with(|c| c.get())
}

/// Guard returned by [`no_grad`]: recording resumes when it is dropped.
pub struct GradModeGuard {
    prev: bool,
}

impl Drop for GradModeGuard {
    fn drop(&mut self) {
        GRAD_ENABLED.with(|c| c.set(self.prev));
    }
}

/// Stop recording for as long as the returned guard lives (`torch.no_grad()`).
pub fn no_grad() -> GradModeGuard {
    set_grad_enabled(false)
}

/// Turn recording on or off until the guard drops.
pub fn set_grad_enabled(on: bool) -> GradModeGuard {
    let prev = GRAD_ENABLED.with(|c| c.replace(on));
    GradModeGuard { prev }
}

impl Tensor {
    /// Attach a backward closure to `self` (a fresh op output) if any input needs a gradient.
    /// The closure is only built when needed.
    pub(crate) fn record<F>(self, name: &'static str, inputs: &[&Tensor], backward: F) -> Tensor
    where
        F: FnOnce() -> Box<BackwardFn>,
    {
        if !is_grad_enabled() || !inputs.iter().any(|t| t.requires_grad()) {
            return self;
        }
        let node = Node {
            name,
            inputs: inputs.iter().map(|&t| t.clone()).collect(),
            backward: backward(),
        };
        *self.0.node.lock().unwrap() = Some(Arc::new(node));
        self.0.requires_grad.store(true, Ordering::Relaxed);
        self
    }

    /// Does this tensor take part in gradient computation?
    pub fn requires_grad(&self) -> bool {
        self.0.requires_grad.load(Ordering::Relaxed)
    }

    /// Mark a leaf as needing a gradient (`requires_grad_()` in PyTorch). Returns `self` for
    /// chaining.
    pub fn requires_grad_(&self, on: bool) -> &Tensor {
        self.0.requires_grad.store(on, Ordering::Relaxed);
        self
    }

    /// Builder form: `Tensor::randn(..)?.with_requires_grad()`.
    pub fn with_requires_grad(self) -> Tensor {
        self.0.requires_grad.store(true, Ordering::Relaxed);
        self
    }

    /// A leaf is a tensor not produced by a recorded op.
    pub fn is_leaf(&self) -> bool {
        self.0.node.lock().unwrap().is_none()
    }

    /// Name of the op that produced this tensor (`grad_fn` in PyTorch).
    pub fn grad_fn(&self) -> Option<&'static str> {
        self.0.node.lock().unwrap().as_ref().map(|n| n.name)
    }

    /// The same data, cut out of the graph.
    pub fn detach(&self) -> Tensor {
        self.with_layout(self.layout().clone())
    }

    /// The gradient accumulated by `backward`, if any.
    pub fn grad(&self) -> Option<Tensor> {
        self.0.grad.lock().unwrap().clone()
    }

    /// Replace the accumulated gradient.
    pub fn set_grad(&self, g: Option<Tensor>) {
        *self.0.grad.lock().unwrap() = g;
    }

    /// Forget the accumulated gradient (PyTorch's `set_to_none=True` behaviour).
    pub fn zero_grad(&self) {
        self.set_grad(None);
    }

    /// Backpropagate from a scalar: fills `.grad()` of every leaf that requires grad.
    #[track_caller]
    pub fn backward(&self) -> Result<()> {
        backward_with(self, None, BackwardOptions::default())
    }

    /// Backpropagate with an explicit gradient of this tensor (for non-scalar outputs).
    #[track_caller]
    pub fn backward_with_grad(&self, grad: &Tensor) -> Result<()> {
        backward_with(self, Some(grad), BackwardOptions::default())
    }
}
