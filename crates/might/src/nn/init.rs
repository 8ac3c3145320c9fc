//! Parameter initialisers, in place, with PyTorch's fan and gain conventions
//! (`torch.nn.init`). All of them write under `no_grad`, so they work on parameters.

use crate::{no_grad, Error, Result, Tensor};

/// Which fan `kaiming_*` scales by: `FanIn` keeps forward activations' variance,
/// `FanOut` keeps backward gradients'.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FanMode {
    FanIn,
    FanOut,
}

/// The nonlinearity that follows a layer (chooses the gain).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nonlinearity {
    Linear,
    Sigmoid,
    Tanh,
    Relu,
    LeakyRelu,
    Selu,
}

/// Recommended gain (`torch.nn.init.calculate_gain`); `param` is the leaky-ReLU slope.
pub fn calculate_gain(nl: Nonlinearity, param: f64) -> f64 {
    match nl {
        Nonlinearity::Linear | Nonlinearity::Sigmoid => 1.0,
        Nonlinearity::Tanh => 5.0 / 3.0,
        Nonlinearity::Relu => 2f64.sqrt(),
        Nonlinearity::LeakyRelu => (2.0 / (1.0 + param * param)).sqrt(),
        Nonlinearity::Selu => 0.75,
    }
}

/// `(fan_in, fan_out)` of a weight: dim 1 and dim 0 times the receptive field (the product of
/// the remaining dims), as PyTorch computes them for Linear `[out, in]` and Conv
/// `[out, in/groups, k..]` weights.
#[track_caller]
pub fn calculate_fan_in_and_fan_out(t: &Tensor) -> Result<(usize, usize)> {
    if t.rank() < 2 {
        return Err(Error::shape(
            "init",
            format!(
                "fan in and fan out need a tensor with at least 2 dims, got {}",
                t.shape()
            ),
        ));
    }
    let receptive: usize = t.dims()[2..].iter().product();
    Ok((t.dims()[1] * receptive, t.dims()[0] * receptive))
}

fn fan(t: &Tensor, mode: FanMode) -> Result<usize> {
    let (i, o) = calculate_fan_in_and_fan_out(t)?;
    Ok(match mode {
        FanMode::FanIn => i,
        FanMode::FanOut => o,
    })
}

fn check_float(t: &Tensor) -> Result<()> {
    if !t.dtype().is_float() {
        return Err(Error::dtype(
            "init",
            format!("can only initialise float tensors, got {}", t.dtype()),
        ));
    }
    Ok(())
}

/// Fill with samples of U(low, high) from the global generator.
#[track_caller]
pub fn uniform(t: &Tensor, low: f64, high: f64) -> Result<()> {
    check_float(t)?;
    let _g = no_grad();
    t.copy_(&Tensor::uniform_on(
        t.shape().clone(),
        low,
        high,
        t.dtype(),
        t.device(),
    )?)?;
    Ok(())
}

/// Fill with samples of N(mean, std²).
#[track_caller]
pub fn normal(t: &Tensor, mean: f64, std: f64) -> Result<()> {
    check_float(t)?;
    let _g = no_grad();
    t.copy_(&Tensor::normal_on(
        t.shape().clone(),
        mean,
        std,
        t.dtype(),
        t.device(),
    )?)?;
    Ok(())
}

/// Fill with a constant.
#[track_caller]
pub fn constant(t: &Tensor, v: f64) -> Result<()> {
    let _g = no_grad();
    t.fill_(v)?;
    Ok(())
}

/// Fill with zeros.
#[track_caller]
pub fn zeros(t: &Tensor) -> Result<()> {
    constant(t, 0.0)
}

/// Fill with ones.
#[track_caller]
pub fn ones(t: &Tensor) -> Result<()> {
    constant(t, 1.0)
}

/// Glorot uniform: U(-a, a) with `a = gain * sqrt(6 / (fan_in + fan_out))`.
#[track_caller]
pub fn xavier_uniform(t: &Tensor, gain: f64) -> Result<()> {
    let (i, o) = calculate_fan_in_and_fan_out(t)?;
    let a = gain * (6.0 / (i + o) as f64).sqrt();
    uniform(t, -a, a)
}

/// Glorot normal: N(0, std²) with `std = gain * sqrt(2 / (fan_in + fan_out))`.
#[track_caller]
pub fn xavier_normal(t: &Tensor, gain: f64) -> Result<()> {
    let (i, o) = calculate_fan_in_and_fan_out(t)?;
    normal(t, 0.0, gain * (2.0 / (i + o) as f64).sqrt())
}

/// He uniform: U(-b, b) with `b = gain * sqrt(3 / fan)`; `a` is the leaky-ReLU slope (used when
/// `nl` is `LeakyRelu`). `a = sqrt(5)`, `FanIn`, `LeakyRelu` is PyTorch's default for Linear and
/// Conv weights and gives `b = 1 / sqrt(fan_in)`.
#[track_caller]
pub fn kaiming_uniform(t: &Tensor, a: f64, mode: FanMode, nl: Nonlinearity) -> Result<()> {
    let f = fan(t, mode)?;
    let b = 3f64.sqrt() * calculate_gain(nl, a) / (f as f64).sqrt();
    uniform(t, -b, b)
}

/// He normal: N(0, std²) with `std = gain / sqrt(fan)`.
#[track_caller]
pub fn kaiming_normal(t: &Tensor, a: f64, mode: FanMode, nl: Nonlinearity) -> Result<()> {
    let f = fan(t, mode)?;
    normal(t, 0.0, calculate_gain(nl, a) / (f as f64).sqrt())
}
