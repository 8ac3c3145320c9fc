//! Parameter-free resampling layers: `Upsample`, the extra pools (`MaxPool1d`,
//! `AdaptiveMaxPool2d`) and the padding layers (`ZeroPad2d`, `ReflectionPad2d`,
//! `ReplicationPad2d`), each a thin holder of its config over the tensor method of the same
//! PyTorch name, so a model definition reads like its PyTorch original.

use super::Module;
use crate::{Result, Tensor};

/// `torch.nn.Upsample`: resize by a fixed `size` or `scale_factor` (see
/// [`Tensor::interpolate`] for the modes).
#[derive(Clone, Debug, PartialEq)]
pub struct Upsample {
    pub size: Option<Vec<usize>>,
    pub scale_factor: Option<Vec<f64>>,
    pub mode: String,
    pub align_corners: Option<bool>,
}

impl Upsample {
    /// Scale every spatial dim by `scale` with `mode` (PyTorch's default mode is `nearest`).
    pub fn scale(scale: f64, mode: &str) -> Upsample {
        Upsample {
            size: None,
            scale_factor: Some(vec![scale]),
            mode: mode.to_string(),
            align_corners: None,
        }
    }

    /// Resize the spatial dims to `size` with `mode`.
    pub fn size(size: &[usize], mode: &str) -> Upsample {
        Upsample {
            size: Some(size.to_vec()),
            scale_factor: None,
            mode: mode.to_string(),
            align_corners: None,
        }
    }

    /// Set `align_corners` (linear and cubic modes only).
    pub fn align_corners(mut self, on: bool) -> Upsample {
        self.align_corners = Some(on);
        self
    }
}

impl Module for Upsample {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.interpolate(
            self.size.as_deref(),
            self.scale_factor.as_deref(),
            &self.mode,
            self.align_corners,
        )
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        vec![]
    }
}

/// `torch.nn.MaxPool1d` over `[N, C, L]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaxPool1d {
    pub kernel: usize,
    pub stride: usize,
    pub padding: usize,
    pub dilation: usize,
    pub ceil_mode: bool,
}

impl MaxPool1d {
    /// Window `k`, stride `k` (PyTorch's default), no padding or dilation.
    pub fn new(k: usize) -> MaxPool1d {
        MaxPool1d {
            kernel: k,
            stride: k,
            padding: 0,
            dilation: 1,
            ceil_mode: false,
        }
    }
}

impl Module for MaxPool1d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.max_pool1d(
            self.kernel,
            self.stride,
            self.padding,
            self.dilation,
            self.ceil_mode,
        )
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        vec![]
    }
}

/// `torch.nn.AdaptiveMaxPool2d`: max pooling to a fixed output size `[oh, ow]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdaptiveMaxPool2d {
    pub output: [usize; 2],
}

impl AdaptiveMaxPool2d {
    pub fn new(output: [usize; 2]) -> AdaptiveMaxPool2d {
        AdaptiveMaxPool2d { output }
    }
}

impl Module for AdaptiveMaxPool2d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(x.adaptive_max_pool2d(self.output)?.0)
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        vec![]
    }
}

macro_rules! pad2d {
    ($(#[$doc:meta])* $name:ident, $mode:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub struct $name {
            /// `[left, right, top, bottom]`.
            pub padding: [i64; 4],
        }

        impl $name {
            /// The same amount on all four sides.
            pub fn new(p: i64) -> Self {
                $name { padding: [p; 4] }
            }
            /// `[left, right, top, bottom]`.
            pub fn with_sides(padding: [i64; 4]) -> Self {
                $name { padding }
            }
        }

        impl Module for $name {
            fn forward(&self, x: &Tensor) -> Result<Tensor> {
                x.pad(&self.padding, $mode, 0.0)
            }
            fn named_parameters(&self) -> Vec<(String, Tensor)> {
                vec![]
            }
        }
    };
}

pad2d!(
    /// `torch.nn.ZeroPad2d`: zeros around the last two dims (negative amounts crop).
    ZeroPad2d,
    "constant"
);
pad2d!(
    /// `torch.nn.ReflectionPad2d`: mirror the last two dims without repeating the edge.
    ReflectionPad2d,
    "reflect"
);
pad2d!(
    /// `torch.nn.ReplicationPad2d`: repeat the edge rows and columns.
    ReplicationPad2d,
    "replicate"
);
