//! Convolution and pooling layers over the conv ops (`Tensor::conv2d`, `max_pool2d`, ...).

use super::layers::{as_param, param};
use super::{init, Module};
use crate::{DType, Error, Result, Tensor};

/// Options of [`Conv2d`] (square stride/padding/dilation; PyTorch defaults via `Default`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2dConfig {
    pub stride: usize,
    pub padding: usize,
    pub dilation: usize,
    pub groups: usize,
    pub bias: bool,
}

impl Default for Conv2dConfig {
    fn default() -> Self {
        Conv2dConfig {
            stride: 1,
            padding: 0,
            dilation: 1,
            groups: 1,
            bias: true,
        }
    }
}

/// Options of [`Conv1d`].
pub type Conv1dConfig = Conv2dConfig;

/// PyTorch's default conv init: weight and bias from U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
fn conv_params(
    op: &str,
    in_channels: usize,
    out_channels: usize,
    kernel: &[usize],
    cfg: &Conv2dConfig,
) -> Result<(Tensor, Option<Tensor>)> {
    if cfg.groups == 0
        || !in_channels.is_multiple_of(cfg.groups)
        || !out_channels.is_multiple_of(cfg.groups)
    {
        return Err(Error::invalid(
            op,
            format!(
                "in_channels {in_channels} and out_channels {out_channels} must be divisible by groups {}",
                cfg.groups
            ),
        ));
    }
    if cfg.stride == 0 || cfg.dilation == 0 || kernel.contains(&0) {
        return Err(Error::invalid(
            op,
            format!(
                "kernel {kernel:?}, stride {} and dilation {} must be positive",
                cfg.stride, cfg.dilation
            ),
        ));
    }
    let mut shape = vec![out_channels, in_channels / cfg.groups];
    shape.extend_from_slice(kernel);
    let w = param(op, &shape, DType::F32)?;
    let fan_in: usize = shape[1..].iter().product();
    let bound = 1.0 / (fan_in.max(1) as f64).sqrt();
    init::uniform(&w, -bound, bound)?;
    let b = if cfg.bias {
        let b = param(op, &[out_channels], DType::F32)?;
        init::uniform(&b, -bound, bound)?;
        Some(b)
    } else {
        None
    };
    Ok((w, b))
}

fn named(w: &Tensor, b: &Option<Tensor>) -> Vec<(String, Tensor)> {
    let mut v = vec![("weight".to_string(), w.clone())];
    if let Some(b) = b {
        v.push(("bias".to_string(), b.clone()));
    }
    v
}

/// 2-D convolution over `[N, C, H, W]`; `weight: [out, in/groups, kh, kw]`, `bias: [out]`.
pub struct Conv2d {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
    pub stride: [usize; 2],
    pub padding: [usize; 2],
    pub dilation: [usize; 2],
    pub groups: usize,
}

impl Conv2d {
    /// A `kernel × kernel` convolution with PyTorch's default init.
    #[track_caller]
    pub fn new(
        in_channels: usize,
        out_channels: usize,
        kernel: usize,
        cfg: Conv2dConfig,
    ) -> Result<Conv2d> {
        let (weight, bias) =
            conv_params("Conv2d", in_channels, out_channels, &[kernel, kernel], &cfg)?;
        Ok(Conv2d {
            weight,
            bias,
            stride: [cfg.stride; 2],
            padding: [cfg.padding; 2],
            dilation: [cfg.dilation; 2],
            groups: cfg.groups,
        })
    }

    /// Build from given tensors and per-axis settings.
    #[track_caller]
    pub fn from_weights(
        weight: Tensor,
        bias: Option<Tensor>,
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
        groups: usize,
    ) -> Result<Conv2d> {
        if weight.rank() != 4 {
            return Err(Error::shape(
                "Conv2d",
                format!(
                    "weight must be [out, in/groups, kh, kw], got {}",
                    weight.shape()
                ),
            ));
        }
        Ok(Conv2d {
            weight: as_param(weight),
            bias: bias.map(as_param),
            stride,
            padding,
            dilation,
            groups,
        })
    }
}

impl Module for Conv2d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.conv2d(
            &self.weight,
            self.bias.as_ref(),
            self.stride,
            self.padding,
            self.dilation,
            self.groups,
        )
    }
    fn forward_relu(&self, x: &Tensor) -> Option<Result<Tensor>> {
        Some(x.conv2d_relu(
            &self.weight,
            self.bias.as_ref(),
            self.stride,
            self.padding,
            self.dilation,
            self.groups,
        ))
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        named(&self.weight, &self.bias)
    }
}

/// 1-D convolution over `[N, C, L]`; `weight: [out, in/groups, k]`, `bias: [out]`.
pub struct Conv1d {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
    pub stride: usize,
    pub padding: usize,
    pub dilation: usize,
    pub groups: usize,
}

impl Conv1d {
    /// A width-`kernel` convolution with PyTorch's default init.
    #[track_caller]
    pub fn new(
        in_channels: usize,
        out_channels: usize,
        kernel: usize,
        cfg: Conv1dConfig,
    ) -> Result<Conv1d> {
        let (weight, bias) = conv_params("Conv1d", in_channels, out_channels, &[kernel], &cfg)?;
        Ok(Conv1d {
            weight,
            bias,
            stride: cfg.stride,
            padding: cfg.padding,
            dilation: cfg.dilation,
            groups: cfg.groups,
        })
    }

    /// Build from given tensors.
    #[track_caller]
    pub fn from_weights(weight: Tensor, bias: Option<Tensor>, cfg: Conv1dConfig) -> Result<Conv1d> {
        if weight.rank() != 3 {
            return Err(Error::shape(
                "Conv1d",
                format!("weight must be [out, in/groups, k], got {}", weight.shape()),
            ));
        }
        Ok(Conv1d {
            weight: as_param(weight),
            bias: bias.map(as_param),
            stride: cfg.stride,
            padding: cfg.padding,
            dilation: cfg.dilation,
            groups: cfg.groups,
        })
    }
}

impl Module for Conv1d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.conv1d(
            &self.weight,
            self.bias.as_ref(),
            self.stride,
            self.padding,
            self.dilation,
            self.groups,
        )
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        named(&self.weight, &self.bias)
    }
}

macro_rules! pool {
    ($(#[$doc:meta])* $name:ident, $method:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub struct $name {
            pub kernel: [usize; 2],
            pub stride: [usize; 2],
            pub padding: [usize; 2],
        }

        impl $name {
            /// Square window `k`, stride `k` (PyTorch's default), no padding.
            pub fn new(k: usize) -> Self {
                $name { kernel: [k, k], stride: [k, k], padding: [0, 0] }
            }
            /// Square window, stride and padding.
            pub fn with_config(k: usize, stride: usize, padding: usize) -> Self {
                $name { kernel: [k, k], stride: [stride; 2], padding: [padding; 2] }
            }
        }

        impl Module for $name {
            fn forward(&self, x: &Tensor) -> Result<Tensor> {
                x.$method(self.kernel, self.stride, self.padding)
            }
            fn named_parameters(&self) -> Vec<(String, Tensor)> {
                vec![]
            }
        }
    };
}

pool!(
    /// Max pooling over `[N, C, H, W]`.
    MaxPool2d,
    max_pool2d
);
pool!(
    /// Average pooling over `[N, C, H, W]` (padding counted in the average, PyTorch's default).
    AvgPool2d,
    avg_pool2d
);

/// Average pooling to a fixed output size `[oh, ow]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdaptiveAvgPool2d {
    pub output: [usize; 2],
}

impl AdaptiveAvgPool2d {
    pub fn new(output: [usize; 2]) -> Self {
        AdaptiveAvgPool2d { output }
    }
}

impl Module for AdaptiveAvgPool2d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.adaptive_avg_pool2d(self.output)
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        vec![]
    }
}
