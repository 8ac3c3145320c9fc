//! Unary float ops and their derivatives. The functions themselves are named
//! [`UnaryOp`] values, computed by the backend (forward and `g · f'`).

use crate::backend::UnaryOp;
use crate::shape::broadcast_shapes;
use crate::{Result, Tensor};

/// A differentiable unary op whose backward is the backend's `g · op'(saved)`.
macro_rules! unary {
    ($(#[$doc:meta])* $name:ident, $bname:literal, $op:expr) => {
        $(#[$doc])*
        #[track_caller]
        pub fn $name(&self) -> Result<Tensor> {
            self.unary_op($op, $bname)
        }
    };
}

impl Tensor {
    /// Forward of a float unary op (no autograd).
    #[track_caller]
    fn unary_forward(&self, op: UnaryOp) -> Result<Tensor> {
        self.check_float(op.name())?;
        Tensor::from_result(self.storage().unary(self.layout(), op), self.shape())
    }

    /// `g · op'(saved)`, `saved` the op's input or output (see
    /// [`UnaryOp::backward_uses_output`]), not recorded.
    #[track_caller]
    pub(crate) fn unary_grad(g: &Tensor, saved: &Tensor, op: UnaryOp) -> Result<Tensor> {
        let name = op.name();
        g.check_float(name)?;
        g.check_same_dtype(name, saved)?;
        let shape = broadcast_shapes(name, g.shape(), saved.shape())?;
        let gl = g.layout().broadcast_as(name, &shape)?;
        let sl = saved.layout().broadcast_as(name, &shape)?;
        let out = g.storage().unary_backward(&gl, &saved.storage(), &sl, op);
        Tensor::from_result(out, shape)
    }

    #[track_caller]
    fn unary_op(&self, op: UnaryOp, backward: &'static str) -> Result<Tensor> {
        let out = self.unary_forward(op)?;
        let saved = if op.backward_uses_output() {
            out.detach()
        } else {
            self.clone()
        };
        Ok(out.record(backward, &[self], move || {
            Box::new(move |g: &Tensor| {
                let gx = match op {
                    // composed from recorded ops, as they always were
                    UnaryOp::Neg => g.neg()?,
                    UnaryOp::Exp => g.mul(&saved)?,
                    UnaryOp::Log => g.div(&saved)?,
                    UnaryOp::Affine(mul, _) => g.affine(mul, 0.0)?,
                    _ => Tensor::unary_grad(g, &saved, op)?,
                };
                Ok(vec![Some(gx)])
            })
        }))
    }

    unary!(/// `-x`
        neg, "NegBackward", UnaryOp::Neg);
    unary!(/// `|x|`
        abs, "AbsBackward", UnaryOp::Abs);
    unary!(/// `e^x`
        exp, "ExpBackward", UnaryOp::Exp);
    unary!(/// natural log
        log, "LogBackward", UnaryOp::Log);
    unary!(/// `ln(1 + x)`, accurate near 0
        log1p, "Log1pBackward", UnaryOp::Log1p);
    unary!(/// square root
        sqrt, "SqrtBackward", UnaryOp::Sqrt);
    unary!(/// `1 / sqrt(x)`
        rsqrt, "RsqrtBackward", UnaryOp::Rsqrt);
    unary!(/// sine
        sin, "SinBackward", UnaryOp::Sin);
    unary!(/// cosine
        cos, "CosBackward", UnaryOp::Cos);
    unary!(/// tangent
        tan, "TanBackward", UnaryOp::Tan);
    unary!(/// the error function
        erf, "ErfBackward", UnaryOp::Erf);
    unary!(/// hyperbolic tangent
        tanh, "TanhBackward", UnaryOp::Tanh);
    unary!(/// logistic sigmoid `1 / (1 + e^-x)`
        sigmoid, "SigmoidBackward", UnaryOp::Sigmoid);
    unary!(/// `max(x, 0)`
        relu, "ReluBackward", UnaryOp::Relu);
    unary!(/// GELU, tanh approximation (`approximate='tanh'`)
        gelu_tanh, "GeluBackward", UnaryOp::GeluTanh);
    unary!(/// SiLU / swish `x * sigmoid(x)`
        silu, "SiluBackward", UnaryOp::Silu);
    unary!(/// softplus `ln(1 + e^x)` (linear above 20, like PyTorch)
        softplus, "SoftplusBackward", UnaryOp::Softplus);
    unary!(/// `x · relu6(x + 3) / 6` (`torch.nn.functional.hardswish`), one pass; its gradient
        /// is PyTorch's `x/3 + 1/2` strictly inside `(-3, 3)`, 0 at and below `-3`, 1 at and
        /// above `3`
        hardswish, "HardswishBackward", UnaryOp::HardSwish);
    unary!(/// `x * x`
        square, "PowBackward", UnaryOp::Square);

    /// Sign (-1, 0, 1); gradient zero.
    #[track_caller]
    pub fn sign(&self) -> Result<Tensor> {
        self.unary_forward(UnaryOp::Sign)
    }
    /// Round down; gradient zero.
    #[track_caller]
    pub fn floor(&self) -> Result<Tensor> {
        self.unary_forward(UnaryOp::Floor)
    }
    /// Round up; gradient zero.
    #[track_caller]
    pub fn ceil(&self) -> Result<Tensor> {
        self.unary_forward(UnaryOp::Ceil)
    }
    /// Round half to even (like PyTorch); gradient zero.
    #[track_caller]
    pub fn round(&self) -> Result<Tensor> {
        self.unary_forward(UnaryOp::Round)
    }

    /// `x^p` for a scalar exponent.
    #[track_caller]
    pub fn powf(&self, p: f64) -> Result<Tensor> {
        self.unary_op(UnaryOp::Powf(p), "PowBackward")
    }

    /// Clamp into `[min, max]` (either bound optional). Gradient passes where not clamped.
    #[track_caller]
    pub fn clamp(&self, min: Option<f64>, max: Option<f64>) -> Result<Tensor> {
        let (lo, hi) = (
            min.unwrap_or(f64::NEG_INFINITY),
            max.unwrap_or(f64::INFINITY),
        );
        self.unary_op(UnaryOp::Clamp(lo, hi), "ClampBackward")
    }

    /// `x * mul + add`, the kernel behind every scalar arithmetic op. Integer tensors compute
    /// exactly through f64 and are not differentiable.
    #[track_caller]
    pub fn affine(&self, mul: f64, add: f64) -> Result<Tensor> {
        let op = UnaryOp::Affine(mul, add);
        if self.dtype().is_int() {
            return Tensor::from_result(self.storage().unary(self.layout(), op), self.shape());
        }
        self.unary_op(op, "AffineBackward")
    }

    pub fn add_scalar(&self, v: f64) -> Result<Tensor> {
        self.affine(1.0, v)
    }
    pub fn sub_scalar(&self, v: f64) -> Result<Tensor> {
        self.affine(1.0, -v)
    }
    pub fn mul_scalar(&self, v: f64) -> Result<Tensor> {
        self.affine(v, 0.0)
    }
    pub fn div_scalar(&self, v: f64) -> Result<Tensor> {
        self.affine(1.0 / v, 0.0)
    }
}

impl Tensor {
    /// GELU, exact form `x * Φ(x)` (PyTorch's default).
    ///
    /// While recording for autograd the backend may compute the derivative in the same
    /// evaluation ([`unary_with_grad`](crate::backend::BackendStorage::unary_with_grad)), since
    /// both need `e^{-x²/2}` and the Gaussian tail ratio: the backward is then one multiply.
    /// (Evaluating the derivative again in the backward cost as much as the forward: ~2 ms of
    /// a small GPT's training step at one thread.) The price is one more buffer of the input's
    /// size while the graph lives (char-GPT peak RSS +8 MB).
    #[track_caller]
    pub fn gelu(&self) -> Result<Tensor> {
        self.check_float("gelu")?;
        if crate::autograd::is_grad_enabled() && self.requires_grad() {
            let x = self.detach().contiguous()?;
            let fused = x.storage().unary_with_grad(x.layout(), UnaryOp::Gelu)?;
            if let Some((y, d)) = fused {
                let out = Tensor::from_storage(y, self.shape());
                let d = Tensor::from_storage(d, self.shape());
                return Ok(out.record("GeluBackward", &[self], move || {
                    Box::new(move |g: &Tensor| Ok(vec![Some(g.mul(&d)?)]))
                }));
            }
        }
        self.unary_op(UnaryOp::Gelu, "GeluBackward")
    }
}
