//! Pointwise activations beyond the backend's own (`relu`, `gelu`, `silu`, `softplus`,
//! `hardswish`...): PyTorch's `leaky_relu`, `elu`, `selu`, `celu`, `hardtanh`, `relu6`,
//! `hardsigmoid`, `mish`, `softsign` and `logsigmoid`, composed from `where_`, `clamp` and the
//! unary primitives so their gradients come from autograd. (`hardswish` was composed here
//! too; it is a backend op now: four passes over the activations were a quarter of
//! MobileNet-v3's run.)
//!
//! Where a function has a kink, the composition is chosen so the gradient *at* the kink is
//! PyTorch's: `leaky_relu`/`elu`/`selu`/`celu` take the negative branch's slope at 0
//! (`x > 0 ? 1 : f'(x)`), `hardtanh`/`relu6`/`hardsigmoid` pass nothing at their bounds
//! (strict `min < x < max`). Branches that are not taken are clamped first
//! (`exp(min(x, 0))`) so a large `x` never puts `0 · inf = NaN` into a gradient.

use crate::{Error, Result, Tensor};

/// SELU's constants (Klambauer et al. 2017), as PyTorch spells them.
const SELU_ALPHA: f64 = 1.673_263_242_354_377_3;
const SELU_SCALE: f64 = 1.050_700_987_355_480_5;

#[track_caller]
fn finite(op: &str, name: &str, v: f64) -> Result<()> {
    if v.is_finite() {
        Ok(())
    } else {
        Err(Error::invalid(
            op,
            format!("{name} must be finite, got {v}"),
        ))
    }
}

impl Tensor {
    /// `x` where `x > 0`, else `neg(x)`: the shared shape of the ELU family and leaky ReLU.
    /// The gradient at exactly 0 is the negative branch's, as in PyTorch.
    fn positive_or(&self, neg: &Tensor) -> Result<Tensor> {
        Tensor::where_(&self.gt_scalar(0.0)?, self, neg)
    }

    /// `alpha · (exp(x / scale) - 1)` on the non-positive part of `x` (the input clamped to
    /// `<= 0`, so the untaken branch of a large positive input stays finite).
    fn elu_negative(&self, alpha: f64, scale: f64) -> Result<Tensor> {
        self.clamp(None, Some(0.0))?
            .mul_scalar(1.0 / scale)?
            .exp()?
            .affine(alpha, -alpha)
    }

    /// `x` for `x > 0`, `negative_slope · x` otherwise (`torch.nn.functional.leaky_relu`).
    #[track_caller]
    pub fn leaky_relu(&self, negative_slope: f64) -> Result<Tensor> {
        self.check_float("leaky_relu")?;
        finite("leaky_relu", "negative_slope", negative_slope)?;
        self.positive_or(&self.mul_scalar(negative_slope)?)
    }

    /// `x` for `x > 0`, `alpha · (eˣ - 1)` otherwise (`torch.nn.functional.elu`).
    #[track_caller]
    pub fn elu(&self, alpha: f64) -> Result<Tensor> {
        self.check_float("elu")?;
        finite("elu", "alpha", alpha)?;
        self.positive_or(&self.elu_negative(alpha, 1.0)?)
    }

    /// `scale · elu(x, alpha)` with the self-normalising constants
    /// `alpha ≈ 1.6733`, `scale ≈ 1.0507` (`torch.nn.functional.selu`).
    #[track_caller]
    pub fn selu(&self) -> Result<Tensor> {
        self.check_float("selu")?;
        self.positive_or(&self.elu_negative(SELU_ALPHA, 1.0)?)?
            .mul_scalar(SELU_SCALE)
    }

    /// `x` for `x > 0`, `alpha · (e^{x/alpha} - 1)` otherwise (`torch.nn.functional.celu`);
    /// `alpha` must be non-zero.
    #[track_caller]
    pub fn celu(&self, alpha: f64) -> Result<Tensor> {
        self.check_float("celu")?;
        finite("celu", "alpha", alpha)?;
        if alpha == 0.0 {
            return Err(Error::invalid("celu", "alpha must be non-zero, got 0"));
        }
        self.positive_or(&self.elu_negative(alpha, alpha)?)
    }

    /// `x` clamped into `[min_val, max_val]` (`torch.nn.functional.hardtanh`). Unlike
    /// [`clamp`](Tensor::clamp), the gradient is zero at the bounds themselves (PyTorch's
    /// `hardtanh_backward` passes it only for `min < x < max`).
    #[track_caller]
    pub fn hardtanh(&self, min_val: f64, max_val: f64) -> Result<Tensor> {
        self.check_float("hardtanh")?;
        finite("hardtanh", "min_val", min_val)?;
        finite("hardtanh", "max_val", max_val)?;
        if min_val > max_val {
            return Err(Error::invalid(
                "hardtanh",
                format!("min_val {min_val} must not exceed max_val {max_val}"),
            ));
        }
        let lo = Tensor::full_on((), min_val, self.dtype(), self.device())?;
        let hi = Tensor::full_on((), max_val, self.dtype(), self.device())?;
        let upper = Tensor::where_(&self.ge_scalar(max_val)?, &hi, self)?;
        Tensor::where_(&self.le_scalar(min_val)?, &lo, &upper)
    }

    /// `min(max(x, 0), 6)` (`torch.nn.functional.relu6`): `hardtanh(0, 6)`, gradient zero
    /// at 0 and at 6.
    #[track_caller]
    pub fn relu6(&self) -> Result<Tensor> {
        self.check_float("relu6")?;
        self.hardtanh(0.0, 6.0)
    }

    /// `relu6(x + 3) / 6` (`torch.nn.functional.hardsigmoid`); gradient `1/6` strictly
    /// inside `(-3, 3)`, zero elsewhere.
    #[track_caller]
    pub fn hardsigmoid(&self) -> Result<Tensor> {
        self.check_float("hardsigmoid")?;
        // shifted first, as PyTorch computes it, so the value is exactly 0 at -3 on every
        // backend (`x/6 + 1/2` can round to -1e-8 there)
        self.add_scalar(3.0)?.hardtanh(0.0, 6.0)?.div_scalar(6.0)
    }

    /// `x · tanh(softplus(x))` (`torch.nn.functional.mish`).
    #[track_caller]
    pub fn mish(&self) -> Result<Tensor> {
        self.check_float("mish")?;
        self.mul(&self.softplus()?.tanh()?)
    }

    /// `x / (1 + |x|)` (`torch.nn.functional.softsign`; gradient `1` at 0 as there).
    #[track_caller]
    pub fn softsign(&self) -> Result<Tensor> {
        self.check_float("softsign")?;
        self.div(&self.abs()?.add_scalar(1.0)?)
    }

    /// `log(sigmoid(x)) = -softplus(-x)` (`torch.nn.functional.logsigmoid`), computed without
    /// overflow for inputs of either sign.
    #[track_caller]
    pub fn logsigmoid(&self) -> Result<Tensor> {
        self.check_float("logsigmoid")?;
        self.neg()?.softplus()?.neg()
    }
}
