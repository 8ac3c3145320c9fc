//! Parameter-free activation modules (thin wrappers over the tensor ops, so they can sit in a
//! `Sequential`).

use super::Module;
use crate::{Result, Tensor};

macro_rules! activation {
    ($(#[$doc:meta])* $name:ident, |$x:ident| $body:expr $(, $extra:item)?) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default)]
        pub struct $name;

        impl Module for $name {
            fn forward(&self, $x: &Tensor) -> Result<Tensor> {
                $body
            }
            fn named_parameters(&self) -> Vec<(String, Tensor)> {
                vec![]
            }
            $($extra)?
        }
    };
}

activation!(/// `max(x, 0)`
    ReLU, |x| x.relu(), fn is_relu(&self) -> bool { true });
activation!(/// `x * sigmoid(x)` (swish)
    SiLU, |x| x.silu());
activation!(/// hyperbolic tangent
    Tanh, |x| x.tanh());
activation!(/// logistic sigmoid
    Sigmoid, |x| x.sigmoid());

/// GELU; `approximate = true` is PyTorch's `approximate='tanh'`.
#[allow(clippy::upper_case_acronyms)] // PyTorch's name
#[derive(Clone, Copy, Debug, Default)]
pub struct GELU {
    pub approximate: bool,
}

impl GELU {
    /// The exact (erf) form, PyTorch's default.
    pub fn new() -> Self {
        GELU { approximate: false }
    }
    /// The tanh approximation (GPT-2 style).
    pub fn tanh() -> Self {
        GELU { approximate: true }
    }
}

impl Module for GELU {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        if self.approximate {
            x.gelu_tanh()
        } else {
            x.gelu()
        }
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        vec![]
    }
}

/// Softmax along `dim`.
#[derive(Clone, Copy, Debug)]
pub struct Softmax {
    pub dim: isize,
}

impl Softmax {
    pub fn new(dim: isize) -> Self {
        Softmax { dim }
    }
}

impl Module for Softmax {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.softmax(self.dim)
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        vec![]
    }
}

/// Log-softmax along `dim`.
#[derive(Clone, Copy, Debug)]
pub struct LogSoftmax {
    pub dim: isize,
}

impl LogSoftmax {
    pub fn new(dim: isize) -> Self {
        LogSoftmax { dim }
    }
}

impl Module for LogSoftmax {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.log_softmax(self.dim)
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        vec![]
    }
}
