//! Normalisation layers: LayerNorm (fused kernel), RMSNorm, BatchNorm1d/2d.

use super::layers::{as_param, param};
use super::{init, Module};
use crate::{no_grad, DType, Error, Result, Tensor};

#[track_caller]
fn check_normalized(op: &str, x: &Tensor, shape: &[usize], p: Option<&Tensor>) -> Result<()> {
    x.check_float(op)?;
    let r = x.rank();
    if shape.is_empty() || r < shape.len() || x.dims()[r - shape.len()..] != *shape {
        return Err(Error::shape(
            op,
            format!(
                "input {} does not end with normalized_shape {:?}",
                x.shape(),
                shape
            ),
        ));
    }
    if let Some(p) = p {
        if p.dims() != shape {
            return Err(Error::shape(
                op,
                format!(
                    "weight/bias shape {} differs from normalized_shape {:?}",
                    p.shape(),
                    shape
                ),
            ));
        }
        x.check_same_dtype(op, p)?;
    }
    Ok(())
}

/// Layer normalisation over the trailing `normalized_shape` dims:
/// `(x - mean) / sqrt(var + eps) * weight + bias` (biased variance, like PyTorch).
/// One fused pass per row forward and backward.
#[track_caller]
pub fn layer_norm(
    x: &Tensor,
    normalized_shape: &[usize],
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
) -> Result<Tensor> {
    check_normalized("layer_norm", x, normalized_shape, weight)?;
    check_normalized("layer_norm", x, normalized_shape, bias)?;
    let n: usize = normalized_shape.iter().product();
    if n == 0 || x.numel() == 0 {
        return Ok(x.clone());
    }
    match x.dtype() {
        DType::F32 | DType::F64 => x.layer_norm_fused(weight, bias, n, eps),
        dt => {
            // half precision normalises in f32, as PyTorch does
            let up = |t: &Tensor| t.to_dtype(DType::F32);
            let (w, b) = (weight.map(up).transpose()?, bias.map(up).transpose()?);
            up(x)?
                .layer_norm_fused(w.as_ref(), b.as_ref(), n, eps)?
                .to_dtype(dt)
        }
    }
}

/// Root-mean-square normalisation: `x / sqrt(mean(x²) + eps) * weight` over the trailing
/// dims; `eps = None` uses the dtype's machine epsilon (PyTorch's default).
#[track_caller]
pub fn rms_norm(
    x: &Tensor,
    normalized_shape: &[usize],
    weight: Option<&Tensor>,
    eps: Option<f64>,
) -> Result<Tensor> {
    check_normalized("rms_norm", x, normalized_shape, weight)?;
    let eps = eps.unwrap_or(match x.dtype() {
        DType::F64 => f64::EPSILON,
        DType::F16 => 0.000_976_562_5,
        DType::BF16 => 0.007_812_5,
        _ => f32::EPSILON as f64,
    });
    let dims: Vec<isize> = (0..normalized_shape.len())
        .map(|i| -(i as isize) - 1)
        .collect();
    let y = x.mul(
        &x.square()?
            .mean_dims(&dims, true)?
            .add_scalar(eps)?
            .rsqrt()?,
    )?;
    match weight {
        Some(w) => y.mul(w),
        None => Ok(y),
    }
}

/// Batch normalisation over all dims but 1 (channels). While `training`, normalises with the
/// batch statistics (biased variance) and, when running buffers are given, updates them in
/// place: `running = (1 - momentum)·running + momentum·batch` with the unbiased variance.
/// Otherwise normalises with the running statistics.
#[allow(clippy::too_many_arguments)]
#[track_caller]
pub fn batch_norm(
    x: &Tensor,
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    training: bool,
    momentum: f64,
    eps: f64,
) -> Result<Tensor> {
    let stats = (running_mean, running_var);
    batch_norm_act(x, stats, (weight, bias), (training, momentum, eps), false)
}

/// [`batch_norm`], then a ReLU when `relu`: in one fused op on the training path (the
/// `BatchNorm2d → ReLU` of a CNN; saves the ReLU's pass over the activations each way).
fn batch_norm_act(
    x: &Tensor,
    (running_mean, running_var): (Option<&Tensor>, Option<&Tensor>),
    (weight, bias): (Option<&Tensor>, Option<&Tensor>),
    (training, momentum, eps): (bool, f64, f64),
    relu: bool,
) -> Result<Tensor> {
    x.check_float("batch_norm")?;
    if x.rank() < 2 {
        return Err(Error::shape(
            "batch_norm",
            format!("input must be [N, C, ..], got {}", x.shape()),
        ));
    }
    let c = x.dims()[1];
    for t in [running_mean, running_var, weight, bias]
        .into_iter()
        .flatten()
    {
        if t.dims() != [c] {
            return Err(Error::shape(
                "batch_norm",
                format!(
                    "per-channel tensor has shape {}, expected [{c}] for input {}",
                    t.shape(),
                    x.shape()
                ),
            ));
        }
    }
    let same = |t: Option<&Tensor>| t.is_none_or(|t| t.dtype() == x.dtype());
    if training
        && matches!(x.dtype(), DType::F32 | DType::F64)
        && same(weight)
        && same(bias)
        && x.numel() / c.max(1) > 1
    {
        let stats = (running_mean, running_var);
        if let Some(y) = x.batch_norm_train_fused(stats, (weight, bias), (momentum, eps), relu)? {
            return Ok(y);
        }
    }
    let y = batch_norm_unfused(
        x,
        (running_mean, running_var),
        (weight, bias),
        training,
        momentum,
        eps,
    )?;
    if relu {
        y.relu()
    } else {
        Ok(y)
    }
}

/// The generic path of [`batch_norm`]: recorded elementwise ops (evaluation, other dtypes).
fn batch_norm_unfused(
    x: &Tensor,
    (running_mean, running_var): (Option<&Tensor>, Option<&Tensor>),
    (weight, bias): (Option<&Tensor>, Option<&Tensor>),
    training: bool,
    momentum: f64,
    eps: f64,
) -> Result<Tensor> {
    let c = x.dims()[1];
    let mut bshape = vec![1usize; x.rank()];
    bshape[1] = c;
    let chan = |t: &Tensor| -> Result<Tensor> { t.to_dtype(x.dtype())?.reshape(bshape.clone()) };
    if let (false, Some(rm), Some(rv)) = (training, running_mean, running_var) {
        // evaluation: fold the statistics and the affine into one per-channel scale and
        // shift, then two passes over `x` instead of four
        let mut scale = rv.to_dtype(x.dtype())?.add_scalar(eps)?.rsqrt()?;
        if let Some(w) = weight {
            scale = scale.mul(&w.to_dtype(x.dtype())?)?;
        }
        let mut shift = rm.to_dtype(x.dtype())?.mul(&scale)?.neg()?;
        if let Some(b) = bias {
            shift = shift.add(&b.to_dtype(x.dtype())?)?;
        }
        return x
            .mul(&scale.reshape(bshape.clone())?)?
            .add(&shift.reshape(bshape)?);
    }
    let dims: Vec<isize> = (0..x.rank() as isize).filter(|&d| d != 1).collect();
    let count = x.numel() / c.max(1);
    let y = {
        if count <= 1 {
            return Err(Error::invalid(
                "batch_norm",
                format!(
                    "expected more than 1 value per channel when training, got input {}",
                    x.shape()
                ),
            ));
        }
        let mean = x.mean_dims(&dims, true)?;
        let var = x.var_dims(&dims, 0, true)?;
        if training {
            let _g = no_grad();
            let unbias = count as f64 / (count as f64 - 1.0);
            if let Some(rm) = running_mean {
                let m = mean.detach().reshape([c])?.to_dtype(rm.dtype())?;
                rm.affine_(1.0 - momentum, 0.0)?.add_scaled_(&m, momentum)?;
            }
            if let Some(rv) = running_var {
                let v = var.detach().reshape([c])?.to_dtype(rv.dtype())?;
                rv.affine_(1.0 - momentum, 0.0)?
                    .add_scaled_(&v, momentum * unbias)?;
            }
        }
        x.sub(&mean)?.mul(&var.add_scalar(eps)?.rsqrt()?)?
    };
    let y = match weight {
        Some(w) => y.mul(&chan(w)?)?,
        None => y,
    };
    match bias {
        Some(b) => y.add(&chan(b)?),
        None => Ok(y),
    }
}

/// Layer normalisation module (`torch.nn.LayerNorm`): parameters `weight` (ones) and `bias`
/// (zeros) of `normalized_shape`.
pub struct LayerNorm {
    pub normalized_shape: Vec<usize>,
    pub eps: f64,
    pub weight: Option<Tensor>,
    pub bias: Option<Tensor>,
}

impl LayerNorm {
    /// Normalise the last dim of size `d`, eps 1e-5, with affine weight and bias.
    #[track_caller]
    pub fn new(d: usize) -> Result<LayerNorm> {
        LayerNorm::with_config(&[d], 1e-5, true, true)
    }

    /// Full control: `elementwise_affine` adds `weight`, and `bias` (if also true) adds `bias`.
    #[track_caller]
    pub fn with_config(
        normalized_shape: &[usize],
        eps: f64,
        elementwise_affine: bool,
        bias: bool,
    ) -> Result<LayerNorm> {
        let mk = |v: f64| -> Result<Tensor> {
            let p = param("LayerNorm", normalized_shape, DType::F32)?;
            init::constant(&p, v)?;
            Ok(p)
        };
        Ok(LayerNorm {
            normalized_shape: normalized_shape.to_vec(),
            eps,
            weight: elementwise_affine.then(|| mk(1.0)).transpose()?,
            bias: (elementwise_affine && bias).then(|| mk(0.0)).transpose()?,
        })
    }

    /// Build from given parameters (their shape is the normalized shape).
    #[track_caller]
    pub fn from_weights(weight: Tensor, bias: Option<Tensor>, eps: f64) -> Result<LayerNorm> {
        if let Some(b) = &bias {
            if b.dims() != weight.dims() {
                return Err(Error::shape(
                    "LayerNorm",
                    format!("weight {} and bias {} differ", weight.shape(), b.shape()),
                ));
            }
        }
        Ok(LayerNorm {
            normalized_shape: weight.dims().to_vec(),
            eps,
            weight: Some(as_param(weight)),
            bias: bias.map(as_param),
        })
    }
}

impl Module for LayerNorm {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        layer_norm(
            x,
            &self.normalized_shape,
            self.weight.as_ref(),
            self.bias.as_ref(),
            self.eps,
        )
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        let mut v = vec![];
        if let Some(w) = &self.weight {
            v.push(("weight".to_string(), w.clone()));
        }
        if let Some(b) = &self.bias {
            v.push(("bias".to_string(), b.clone()));
        }
        v
    }
}

/// RMS normalisation module (`torch.nn.RMSNorm`): `weight` (ones) of `normalized_shape`.
pub struct RMSNorm {
    pub normalized_shape: Vec<usize>,
    pub eps: Option<f64>,
    pub weight: Option<Tensor>,
}

impl RMSNorm {
    /// Normalise the last dim of size `d`, default eps, with a weight.
    #[track_caller]
    pub fn new(d: usize) -> Result<RMSNorm> {
        RMSNorm::with_config(&[d], None, true)
    }

    #[track_caller]
    pub fn with_config(
        normalized_shape: &[usize],
        eps: Option<f64>,
        affine: bool,
    ) -> Result<RMSNorm> {
        let weight = match affine {
            true => {
                let p = param("RMSNorm", normalized_shape, DType::F32)?;
                init::ones(&p)?;
                Some(p)
            }
            false => None,
        };
        Ok(RMSNorm {
            normalized_shape: normalized_shape.to_vec(),
            eps,
            weight,
        })
    }

    /// Build from a given weight.
    pub fn from_weight(weight: Tensor, eps: Option<f64>) -> RMSNorm {
        RMSNorm {
            normalized_shape: weight.dims().to_vec(),
            eps,
            weight: Some(as_param(weight)),
        }
    }
}

impl Module for RMSNorm {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        rms_norm(x, &self.normalized_shape, self.weight.as_ref(), self.eps)
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        self.weight
            .iter()
            .map(|w| ("weight".to_string(), w.clone()))
            .collect()
    }
}

/// Shared state of BatchNorm1d/2d.
pub struct BatchNorm {
    pub num_features: usize,
    pub eps: f64,
    /// `None`: cumulative moving average (factor `1 / num_batches_tracked`).
    pub momentum: Option<f64>,
    pub weight: Option<Tensor>,
    pub bias: Option<Tensor>,
    pub running_mean: Tensor,
    pub running_var: Tensor,
    pub num_batches_tracked: Tensor,
    training: bool,
}

impl BatchNorm {
    #[track_caller]
    fn new(op: &str, c: usize) -> Result<BatchNorm> {
        let mk = |v: f64, grad: bool| -> Result<Tensor> {
            let p = param(op, &[c], DType::F32)?;
            init::constant(&p, v)?;
            p.requires_grad_(grad);
            Ok(p)
        };
        Ok(BatchNorm {
            num_features: c,
            eps: 1e-5,
            momentum: Some(0.1),
            weight: Some(mk(1.0, true)?),
            bias: Some(mk(0.0, true)?),
            running_mean: mk(0.0, false)?,
            running_var: mk(1.0, false)?,
            num_batches_tracked: Tensor::scalar(0i64),
            training: true,
        })
    }

    /// The forward of the module (`relu`: then a ReLU, fused when training).
    fn forward_checked(&self, op: &str, x: &Tensor, ranks: &[usize], relu: bool) -> Result<Tensor> {
        if !ranks.contains(&x.rank()) || x.dims()[1] != self.num_features {
            return Err(Error::shape(
                op,
                format!(
                    "expected a {:?}-d input with {} channels in dim 1, got {}",
                    ranks,
                    self.num_features,
                    x.shape()
                ),
            ));
        }
        let mut momentum = self.momentum.unwrap_or(0.0);
        if self.training {
            let _g = no_grad();
            let n = self.num_batches_tracked.to_scalar::<i64>()? + 1;
            self.num_batches_tracked.fill_(n as f64)?;
            if self.momentum.is_none() {
                momentum = 1.0 / n as f64;
            }
        }
        batch_norm_act(
            x,
            (Some(&self.running_mean), Some(&self.running_var)),
            (self.weight.as_ref(), self.bias.as_ref()),
            (self.training, momentum, self.eps),
            relu,
        )
    }

    fn params(&self) -> Vec<(String, Tensor)> {
        let mut v = vec![];
        if let Some(w) = &self.weight {
            v.push(("weight".to_string(), w.clone()));
        }
        if let Some(b) = &self.bias {
            v.push(("bias".to_string(), b.clone()));
        }
        v
    }

    fn buffers(&self) -> Vec<(String, Tensor)> {
        vec![
            ("running_mean".to_string(), self.running_mean.clone()),
            ("running_var".to_string(), self.running_var.clone()),
            (
                "num_batches_tracked".to_string(),
                self.num_batches_tracked.clone(),
            ),
        ]
    }

    /// Replace the affine parameters (e.g. f64 copies for gradient checks).
    #[track_caller]
    fn set_affine(&mut self, weight: Option<Tensor>, bias: Option<Tensor>) -> Result<()> {
        for t in weight.iter().chain(bias.iter()) {
            if t.dims() != [self.num_features] {
                return Err(Error::shape(
                    "BatchNorm",
                    format!("expected [{}], got {}", self.num_features, t.shape()),
                ));
            }
        }
        self.weight = weight.map(as_param);
        self.bias = bias.map(as_param);
        Ok(())
    }
}

macro_rules! batchnorm {
    ($(#[$doc:meta])* $name:ident, $op:literal, $ranks:expr) => {
        $(#[$doc])*
        pub struct $name(pub BatchNorm);

        impl $name {
            /// `num_features` channels, eps 1e-5, momentum 0.1, affine, running stats.
            #[track_caller]
            pub fn new(num_features: usize) -> Result<Self> {
                Ok($name(BatchNorm::new($op, num_features)?))
            }

            /// Same, with a chosen eps and momentum (`None`: cumulative average).
            #[track_caller]
            pub fn with_config(num_features: usize, eps: f64, momentum: Option<f64>) -> Result<Self> {
                let mut b = BatchNorm::new($op, num_features)?;
                b.eps = eps;
                b.momentum = momentum;
                Ok($name(b))
            }

            /// Replace the affine parameters (any float dtype; e.g. f64 for gradcheck).
            #[track_caller]
            pub fn set_affine(&mut self, weight: Option<Tensor>, bias: Option<Tensor>) -> Result<()> {
                self.0.set_affine(weight, bias)
            }
        }

        impl std::ops::Deref for $name {
            type Target = BatchNorm;
            fn deref(&self) -> &BatchNorm {
                &self.0
            }
        }

        impl Module for $name {
            fn forward(&self, x: &Tensor) -> Result<Tensor> {
                self.0.forward_checked($op, x, &$ranks, false)
            }
            fn forward_relu(&self, x: &Tensor) -> Option<Result<Tensor>> {
                Some(self.0.forward_checked($op, x, &$ranks, true))
            }
            fn named_parameters(&self) -> Vec<(String, Tensor)> {
                self.0.params()
            }
            fn named_buffers(&self) -> Vec<(String, Tensor)> {
                self.0.buffers()
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

batchnorm!(
    /// Batch normalisation of `[N, C]` or `[N, C, L]` inputs (`torch.nn.BatchNorm1d`).
    BatchNorm1d,
    "BatchNorm1d",
    [2, 3]
);
batchnorm!(
    /// Batch normalisation of `[N, C, H, W]` inputs (`torch.nn.BatchNorm2d`).
    BatchNorm2d,
    "BatchNorm2d",
    [4]
);
