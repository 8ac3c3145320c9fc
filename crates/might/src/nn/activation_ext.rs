//! The remaining PyTorch activation modules (`nn.LeakyReLU`, `nn.ELU`, `nn.SELU`, `nn.CELU`,
//! `nn.Hardtanh`, `nn.ReLU6`, `nn.Mish`, `nn.Hardswish`, `nn.Hardsigmoid`, `nn.Softsign`,
//! `nn.LogSigmoid`): configuration only, the work is the tensor methods of the same names.

use super::Module;
use crate::{Result, Tensor};

macro_rules! stateless {
    ($(#[$doc:meta])* $name:ident, |$x:ident| $body:expr) => {
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
        }
    };
}

/// A module with one scalar setting, its PyTorch default and a constructor taking it.
macro_rules! configured {
    ($(#[$doc:meta])* $name:ident { $field:ident = $default:expr }, |$s:ident, $x:ident| $body:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug)]
        pub struct $name {
            pub $field: f64,
        }

        impl $name {
            pub fn new($field: f64) -> Self {
                $name { $field }
            }
        }

        impl Default for $name {
            fn default() -> Self {
                $name { $field: $default }
            }
        }

        impl Module for $name {
            fn forward(&self, $x: &Tensor) -> Result<Tensor> {
                let $s = self;
                $body
            }
            fn named_parameters(&self) -> Vec<(String, Tensor)> {
                vec![]
            }
        }
    };
}

configured!(
    /// `x` for `x > 0`, else `negative_slope · x` (default slope 0.01).
    LeakyReLU { negative_slope = 0.01 }, |s, x| x.leaky_relu(s.negative_slope)
);
configured!(
    /// `x` for `x > 0`, else `alpha · (eˣ - 1)` (default alpha 1).
    #[allow(clippy::upper_case_acronyms)] // PyTorch's name
    ELU { alpha = 1.0 }, |s, x| x.elu(s.alpha)
);
configured!(
    /// `x` for `x > 0`, else `alpha · (e^{x/alpha} - 1)` (default alpha 1).
    #[allow(clippy::upper_case_acronyms)] // PyTorch's name
    CELU { alpha = 1.0 }, |s, x| x.celu(s.alpha)
);
stateless!(
    /// Scaled ELU with the self-normalising constants.
    #[allow(clippy::upper_case_acronyms)] // PyTorch's name
    SELU, |x| x.selu()
);
stateless!(
    /// `min(max(x, 0), 6)`.
    ReLU6, |x| x.relu6()
);
stateless!(
    /// `x · tanh(softplus(x))`.
    Mish, |x| x.mish()
);
stateless!(
    /// `x · relu6(x + 3) / 6`.
    Hardswish, |x| x.hardswish()
);
stateless!(
    /// `relu6(x + 3) / 6`.
    Hardsigmoid, |x| x.hardsigmoid()
);
stateless!(
    /// `x / (1 + |x|)`.
    Softsign, |x| x.softsign()
);
stateless!(
    /// `log(sigmoid(x))`.
    LogSigmoid, |x| x.logsigmoid()
);

/// `x` clamped into `[min_val, max_val]` (defaults -1 and 1).
#[derive(Clone, Copy, Debug)]
pub struct Hardtanh {
    pub min_val: f64,
    pub max_val: f64,
}

impl Hardtanh {
    pub fn new(min_val: f64, max_val: f64) -> Self {
        Hardtanh { min_val, max_val }
    }
}

impl Default for Hardtanh {
    fn default() -> Self {
        Hardtanh::new(-1.0, 1.0)
    }
}

impl Module for Hardtanh {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.hardtanh(self.min_val, self.max_val)
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        vec![]
    }
}
