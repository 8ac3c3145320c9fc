//! GroupNorm and InstanceNorm1d/2d (`torch.nn.GroupNorm`, `torch.nn.InstanceNorm1d/2d`) and
//! the functional `instance_norm` with PyTorch's optional running statistics. The
//! normalisation itself is [`Tensor::group_norm`] / [`Tensor::instance_norm`].

use super::layers::{as_param, param};
use super::norm::batch_norm;
use super::{init, Module};
use crate::{no_grad, DType, Error, Result, Tensor};

/// A per-channel parameter of `c` values set to `v`.
fn channel_param(op: &str, c: usize, v: f64, grad: bool) -> Result<Tensor> {
    let p = param(op, &[c], DType::F32)?;
    init::constant(&p, v)?;
    p.requires_grad_(grad);
    Ok(p)
}

/// `torch.nn.functional.group_norm(input, num_groups, weight, bias, eps)`.
#[track_caller]
pub fn group_norm(
    x: &Tensor,
    num_groups: usize,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
) -> Result<Tensor> {
    x.group_norm(num_groups, weight, bias, eps)
}

/// `torch.nn.functional.instance_norm`: with `use_input_stats`, each `(sample, channel)`
/// plane of `[N, C, *]` is normalised by its own statistics and the running buffers, when
/// given, move towards the batch average of those (`running = (1 - momentum)·running +
/// momentum·stat`, unbiased variance); without, the running statistics normalise (both
/// required).
#[allow(clippy::too_many_arguments)]
#[track_caller]
pub fn instance_norm(
    x: &Tensor,
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    use_input_stats: bool,
    momentum: f64,
    eps: f64,
) -> Result<Tensor> {
    const OP: &str = "instance_norm";
    if !use_input_stats {
        if running_mean.is_none() || running_var.is_none() {
            return Err(Error::invalid(
                OP,
                "running_mean and running_var are required when use_input_stats is false",
            ));
        }
        if x.rank() < 3 {
            return Err(Error::shape(
                OP,
                format!("expected input [N, C, *], got {}", x.shape()),
            ));
        }
        return batch_norm(x, running_mean, running_var, weight, bias, false, 0.0, eps);
    }
    let y = x.instance_norm(weight, bias, eps)?;
    let count: usize = x.dims()[2..].iter().product();
    if count <= 1 {
        return Err(Error::invalid(
            OP,
            format!(
                "expected more than 1 spatial element when training, got input {}",
                x.shape()
            ),
        ));
    }
    if running_mean.is_some() || running_var.is_some() {
        let c = x.dims()[1];
        for t in [running_mean, running_var].into_iter().flatten() {
            if t.dims() != [c] {
                return Err(Error::shape(
                    OP,
                    format!(
                        "running statistics {} must have one value per channel of input {}",
                        t.shape(),
                        x.shape()
                    ),
                ));
            }
        }
        let _g = no_grad();
        let spatial: Vec<isize> = (2..x.rank() as isize).collect();
        if let Some(rm) = running_mean {
            let m = x.mean_dims(&spatial, false)?.mean(0, false)?;
            rm.affine_(1.0 - momentum, 0.0)?
                .add_scaled_(&m.to_dtype(rm.dtype())?, momentum)?;
        }
        if let Some(rv) = running_var {
            let v = x.var_dims(&spatial, 1, false)?.mean(0, false)?;
            rv.affine_(1.0 - momentum, 0.0)?
                .add_scaled_(&v.to_dtype(rv.dtype())?, momentum)?;
        }
    }
    Ok(y)
}

/// Group normalisation module (`torch.nn.GroupNorm`): `num_channels` split into `num_groups`,
/// with per-channel `weight` (ones) and `bias` (zeros) when `affine`.
pub struct GroupNorm {
    pub num_groups: usize,
    pub num_channels: usize,
    pub eps: f64,
    pub weight: Option<Tensor>,
    pub bias: Option<Tensor>,
}

impl GroupNorm {
    /// eps 1e-5, affine.
    #[track_caller]
    pub fn new(num_groups: usize, num_channels: usize) -> Result<GroupNorm> {
        GroupNorm::with_config(num_groups, num_channels, 1e-5, true)
    }

    #[track_caller]
    pub fn with_config(
        num_groups: usize,
        num_channels: usize,
        eps: f64,
        affine: bool,
    ) -> Result<GroupNorm> {
        if num_groups == 0 || !num_channels.is_multiple_of(num_groups) {
            return Err(Error::invalid(
                "GroupNorm",
                format!("num_channels {num_channels} must be divisible by num_groups {num_groups}"),
            ));
        }
        Ok(GroupNorm {
            num_groups,
            num_channels,
            eps,
            weight: affine
                .then(|| channel_param("GroupNorm", num_channels, 1.0, true))
                .transpose()?,
            bias: affine
                .then(|| channel_param("GroupNorm", num_channels, 0.0, true))
                .transpose()?,
        })
    }

    /// Replace the affine parameters (any float dtype; e.g. f64 for gradient checks).
    #[track_caller]
    pub fn set_affine(&mut self, weight: Option<Tensor>, bias: Option<Tensor>) -> Result<()> {
        for t in weight.iter().chain(bias.iter()) {
            if t.dims() != [self.num_channels] {
                return Err(Error::shape(
                    "GroupNorm",
                    format!("expected [{}], got {}", self.num_channels, t.shape()),
                ));
            }
        }
        self.weight = weight.map(as_param);
        self.bias = bias.map(as_param);
        Ok(())
    }
}

fn affine_params(w: &Option<Tensor>, b: &Option<Tensor>) -> Vec<(String, Tensor)> {
    let mut v = vec![];
    if let Some(w) = w {
        v.push(("weight".to_string(), w.clone()));
    }
    if let Some(b) = b {
        v.push(("bias".to_string(), b.clone()));
    }
    v
}

impl Module for GroupNorm {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        if x.rank() < 2 || x.dims()[1] != self.num_channels {
            return Err(Error::shape(
                "GroupNorm",
                format!(
                    "expected input [N, {}, *], got {}",
                    self.num_channels,
                    x.shape()
                ),
            ));
        }
        x.group_norm(
            self.num_groups,
            self.weight.as_ref(),
            self.bias.as_ref(),
            self.eps,
        )
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        affine_params(&self.weight, &self.bias)
    }
}

/// Shared state of InstanceNorm1d/2d.
pub struct InstanceNorm {
    pub num_features: usize,
    pub eps: f64,
    pub momentum: f64,
    pub weight: Option<Tensor>,
    pub bias: Option<Tensor>,
    /// With `track_running_stats`: `running_mean`, `running_var`, `num_batches_tracked`.
    pub running: Option<(Tensor, Tensor, Tensor)>,
    training: bool,
}

impl InstanceNorm {
    #[track_caller]
    fn new(op: &str, c: usize, eps: f64, momentum: f64, affine: bool, track: bool) -> Result<Self> {
        Ok(InstanceNorm {
            num_features: c,
            eps,
            momentum,
            weight: affine
                .then(|| channel_param(op, c, 1.0, true))
                .transpose()?,
            bias: affine
                .then(|| channel_param(op, c, 0.0, true))
                .transpose()?,
            running: track
                .then(|| -> Result<_> {
                    Ok((
                        channel_param(op, c, 0.0, false)?,
                        channel_param(op, c, 1.0, false)?,
                        Tensor::scalar(0i64),
                    ))
                })
                .transpose()?,
            training: true,
        })
    }

    /// `rank` is the batched rank (3 for 1d, 4 for 2d); one less is an unbatched input.
    fn forward_checked(&self, op: &str, x: &Tensor, rank: usize) -> Result<Tensor> {
        let unbatched = x.rank() + 1 == rank;
        if (x.rank() != rank && !unbatched)
            || x.dims()[usize::from(!unbatched)] != self.num_features
        {
            return Err(Error::shape(
                op,
                format!(
                    "expected a {}-d or {}-d input with {} channels, got {}",
                    rank,
                    rank - 1,
                    self.num_features,
                    x.shape()
                ),
            ));
        }
        let xb = if unbatched {
            x.unsqueeze(0)?
        } else {
            x.clone()
        };
        let use_input_stats = self.training || self.running.is_none();
        let (rm, rv) = match &self.running {
            Some((m, v, n)) => {
                if self.training {
                    let _g = no_grad();
                    n.fill_((n.to_scalar::<i64>()? + 1) as f64)?;
                }
                (Some(m), Some(v))
            }
            None => (None, None),
        };
        let y = instance_norm(
            &xb,
            rm,
            rv,
            self.weight.as_ref(),
            self.bias.as_ref(),
            use_input_stats,
            self.momentum,
            self.eps,
        )?;
        if unbatched {
            y.squeeze(0)
        } else {
            Ok(y)
        }
    }
}

macro_rules! instancenorm {
    ($(#[$doc:meta])* $name:ident, $op:literal, $rank:expr) => {
        $(#[$doc])*
        pub struct $name(pub InstanceNorm);

        impl $name {
            /// PyTorch's defaults: eps 1e-5, momentum 0.1, no affine, no running stats.
            #[track_caller]
            pub fn new(num_features: usize) -> Result<Self> {
                Self::with_config(num_features, 1e-5, 0.1, false, false)
            }

            #[track_caller]
            pub fn with_config(
                num_features: usize,
                eps: f64,
                momentum: f64,
                affine: bool,
                track_running_stats: bool,
            ) -> Result<Self> {
                let n = InstanceNorm::new($op, num_features, eps, momentum, affine, track_running_stats)?;
                Ok($name(n))
            }
        }

        impl std::ops::Deref for $name {
            type Target = InstanceNorm;
            fn deref(&self) -> &InstanceNorm {
                &self.0
            }
        }

        impl Module for $name {
            fn forward(&self, x: &Tensor) -> Result<Tensor> {
                self.0.forward_checked($op, x, $rank)
            }
            fn named_parameters(&self) -> Vec<(String, Tensor)> {
                affine_params(&self.0.weight, &self.0.bias)
            }
            fn named_buffers(&self) -> Vec<(String, Tensor)> {
                match &self.0.running {
                    Some((m, v, n)) => vec![
                        ("running_mean".to_string(), m.clone()),
                        ("running_var".to_string(), v.clone()),
                        ("num_batches_tracked".to_string(), n.clone()),
                    ],
                    None => vec![],
                }
            }
            fn train(&mut self, mode: bool) {
                self.0.training = mode;
            }
            fn is_training(&self) -> bool {
                self.0.training
            }
        }
    };
}

instancenorm!(
    /// Instance normalisation of `[N, C, L]` (or unbatched `[C, L]`) inputs
    /// (`torch.nn.InstanceNorm1d`).
    InstanceNorm1d,
    "InstanceNorm1d",
    3
);
instancenorm!(
    /// Instance normalisation of `[N, C, H, W]` (or unbatched `[C, H, W]`) inputs
    /// (`torch.nn.InstanceNorm2d`).
    InstanceNorm2d,
    "InstanceNorm2d",
    4
);
