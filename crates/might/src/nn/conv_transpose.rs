//! Transposed convolution layers over `Tensor::conv_transpose1d/2d`, with PyTorch's weight
//! layout `[in, out / groups, k...]`, init and state-dict names (`weight`, `bias`), so decoder
//! and upsampling checkpoints load as they are.

use super::layers::{as_param, param};
use super::{init, Module};
use crate::{DType, Error, Result, Tensor};

/// Options of [`ConvTranspose2d`] and [`ConvTranspose1d`] (one value for every spatial axis;
/// PyTorch defaults via `Default`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvTransposeConfig {
    pub stride: usize,
    pub padding: usize,
    pub output_padding: usize,
    pub groups: usize,
    pub dilation: usize,
    pub bias: bool,
}

impl Default for ConvTransposeConfig {
    fn default() -> Self {
        ConvTransposeConfig {
            stride: 1,
            padding: 0,
            output_padding: 0,
            groups: 1,
            dilation: 1,
            bias: true,
        }
    }
}

/// PyTorch's init: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias, where the fan-in
/// of a `[in, out/groups, k...]` weight is `out/groups * prod(k)` (its dim 1 onwards).
fn params(
    op: &str,
    in_channels: usize,
    out_channels: usize,
    kernel: &[usize],
    cfg: &ConvTransposeConfig,
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
    if cfg.output_padding >= cfg.stride.max(cfg.dilation) {
        return Err(Error::invalid(
            op,
            format!(
                "output_padding {} must be smaller than stride {} or dilation {}",
                cfg.output_padding, cfg.stride, cfg.dilation
            ),
        ));
    }
    let mut shape = vec![in_channels, out_channels / cfg.groups];
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

#[track_caller]
fn check_weight(op: &str, w: &Tensor, rank: usize) -> Result<()> {
    if w.rank() != rank {
        return Err(Error::shape(
            op,
            format!(
                "weight must be {rank}-D [in, out/groups, kernel...], got {}",
                w.shape()
            ),
        ));
    }
    Ok(())
}

/// 2-D transposed convolution over `[N, C, H, W]`; `weight: [in, out/groups, kh, kw]`.
pub struct ConvTranspose2d {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
    pub stride: [usize; 2],
    pub padding: [usize; 2],
    pub output_padding: [usize; 2],
    pub groups: usize,
    pub dilation: [usize; 2],
}

impl ConvTranspose2d {
    /// A `kernel × kernel` transposed convolution with PyTorch's default init.
    #[track_caller]
    pub fn new(
        in_channels: usize,
        out_channels: usize,
        kernel: usize,
        cfg: ConvTransposeConfig,
    ) -> Result<ConvTranspose2d> {
        let op = "ConvTranspose2d";
        let (weight, bias) = params(op, in_channels, out_channels, &[kernel, kernel], &cfg)?;
        Ok(ConvTranspose2d {
            weight,
            bias,
            stride: [cfg.stride; 2],
            padding: [cfg.padding; 2],
            output_padding: [cfg.output_padding; 2],
            groups: cfg.groups,
            dilation: [cfg.dilation; 2],
        })
    }

    /// Build from given tensors (square settings from `cfg`; set the fields for per-axis ones).
    #[track_caller]
    pub fn from_weights(
        weight: Tensor,
        bias: Option<Tensor>,
        cfg: ConvTransposeConfig,
    ) -> Result<ConvTranspose2d> {
        check_weight("ConvTranspose2d", &weight, 4)?;
        Ok(ConvTranspose2d {
            weight: as_param(weight),
            bias: bias.map(as_param),
            stride: [cfg.stride; 2],
            padding: [cfg.padding; 2],
            output_padding: [cfg.output_padding; 2],
            groups: cfg.groups,
            dilation: [cfg.dilation; 2],
        })
    }
}

impl Module for ConvTranspose2d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.conv_transpose2d(
            &self.weight,
            self.bias.as_ref(),
            self.stride,
            self.padding,
            self.output_padding,
            self.groups,
            self.dilation,
        )
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        named(&self.weight, &self.bias)
    }
}

/// 1-D transposed convolution over `[N, C, L]`; `weight: [in, out/groups, k]`.
pub struct ConvTranspose1d {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
    pub cfg: ConvTransposeConfig,
}

impl ConvTranspose1d {
    /// A width-`kernel` transposed convolution with PyTorch's default init.
    #[track_caller]
    pub fn new(
        in_channels: usize,
        out_channels: usize,
        kernel: usize,
        cfg: ConvTransposeConfig,
    ) -> Result<ConvTranspose1d> {
        let op = "ConvTranspose1d";
        let (weight, bias) = params(op, in_channels, out_channels, &[kernel], &cfg)?;
        Ok(ConvTranspose1d { weight, bias, cfg })
    }

    /// Build from given tensors.
    #[track_caller]
    pub fn from_weights(
        weight: Tensor,
        bias: Option<Tensor>,
        cfg: ConvTransposeConfig,
    ) -> Result<ConvTranspose1d> {
        check_weight("ConvTranspose1d", &weight, 3)?;
        Ok(ConvTranspose1d {
            weight: as_param(weight),
            bias: bias.map(as_param),
            cfg,
        })
    }
}

impl Module for ConvTranspose1d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let c = &self.cfg;
        x.conv_transpose1d(
            &self.weight,
            self.bias.as_ref(),
            c.stride,
            c.padding,
            c.output_padding,
            c.groups,
            c.dilation,
        )
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        named(&self.weight, &self.bias)
    }
}
