//! Unary float ops and their derivatives.
//!
//! f32 (and f16/bf16, computed in f32) use the vectorisable approximations of
//! [`vmath`]; f64 uses libm, since f64 is what gradient checks run in.

use crate::backend::cpu::vmath;
use crate::{map_float, zip_float, Result, Tensor};

const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
const INV_SQRT_2: f64 = std::f64::consts::FRAC_1_SQRT_2;
const INV_SQRT_2PI: f64 = 0.398_942_280_401_432_7;

/// Generic float helpers so one closure body serves f32 and f64.
pub(crate) trait FloatExt: Copy {
    /// `e^x`
    fn exp_(self) -> Self;
    /// `tanh x`
    fn tanh_(self) -> Self;
    /// `1 / (1 + e^-x)`
    fn sigmoid_(self) -> Self;
    /// exact GELU `x·Φ(x)`
    fn gelu_(self) -> Self;
    /// its derivative `Φ(x) + x·φ(x)`
    fn gelu_grad_(self) -> Self;
    /// both, from one evaluation (bit for bit the two above)
    fn gelu_and_grad_(self) -> (Self, Self);
    /// The constant `v` in this value's type (lets one closure body serve f32 and f64).
    fn k(self, v: f64) -> Self;
}
impl FloatExt for f32 {
    #[inline(always)]
    fn exp_(self) -> f32 {
        vmath::exp(self)
    }
    #[inline(always)]
    fn tanh_(self) -> f32 {
        vmath::tanh(self)
    }
    #[inline(always)]
    fn sigmoid_(self) -> f32 {
        vmath::sigmoid(self)
    }
    #[inline(always)]
    fn gelu_(self) -> f32 {
        vmath::gelu(self)
    }
    #[inline(always)]
    fn gelu_grad_(self) -> f32 {
        vmath::gelu_grad(self)
    }
    #[inline(always)]
    fn gelu_and_grad_(self) -> (f32, f32) {
        vmath::gelu_and_grad(self)
    }
    #[inline(always)]
    fn k(self, v: f64) -> f32 {
        v as f32
    }
}
impl FloatExt for f64 {
    #[inline(always)]
    fn exp_(self) -> f64 {
        self.exp()
    }
    #[inline(always)]
    fn tanh_(self) -> f64 {
        self.tanh()
    }
    #[inline(always)]
    fn sigmoid_(self) -> f64 {
        1.0 / (1.0 + (-self).exp())
    }
    // Φ(x) via erfc, not `(1 + erf(x/√2))/2`: the latter cancels to 0 for x < -8.
    #[inline(always)]
    fn gelu_(self) -> f64 {
        0.5 * self * libm::erfc(-self * INV_SQRT_2)
    }
    #[inline(always)]
    fn gelu_grad_(self) -> f64 {
        let cdf = 0.5 * libm::erfc(-self * INV_SQRT_2);
        let pdf = INV_SQRT_2PI * (-0.5 * self * self).exp();
        cdf + self * pdf
    }
    #[inline(always)]
    fn gelu_and_grad_(self) -> (f64, f64) {
        (self.gelu_(), self.gelu_grad_())
    }
    #[inline(always)]
    fn k(self, v: f64) -> f64 {
        v
    }
}

macro_rules! unary {
    ($(#[$doc:meta])* $name:ident, $bname:literal, |$x:ident| $fwd:expr, backward($g:ident, $xi:ident, $y:ident) $bwd:expr) => {
        $(#[$doc])*
        #[track_caller]
        pub fn $name(&self) -> Result<Tensor> {
            let out = map_float!(stringify!($name), self, |$x| $fwd)?;
            let x = self.clone();
            let y = out.detach();
            Ok(out.record($bname, &[self], move || {
                Box::new(move |$g: &Tensor| {
                    let ($xi, $y) = (&x, &y);
                    let _ = ($xi, $y);
                    Ok(vec![Some($bwd?)])
                })
            }))
        }
    };
}

impl Tensor {
    unary!(/// `-x`
        neg, "NegBackward", |x| -x, backward(g, _x, _y) g.neg());
    unary!(/// `|x|`
        abs, "AbsBackward", |x| x.abs(),
        backward(g, x, _y) zip_float!("abs", g, x, |g, x| if x > 0.0 { g } else if x < 0.0 { -g } else { 0.0 }));
    unary!(/// `e^x`
        exp, "ExpBackward", |x| x.exp_(), backward(g, _x, y) g.mul(y));
    unary!(/// natural log
        log, "LogBackward", |x| x.ln(), backward(g, x, _y) g.div(x));
    unary!(/// `ln(1 + x)`, accurate near 0
        log1p, "Log1pBackward", |x| x.ln_1p(),
        backward(g, x, _y) zip_float!("log1p", g, x, |g, x| g / (1.0 + x)));
    unary!(/// square root
        sqrt, "SqrtBackward", |x| x.sqrt(),
        backward(g, _x, y) zip_float!("sqrt", g, y, |g, y| g * 0.5 / y));
    unary!(/// `1 / sqrt(x)`
        rsqrt, "RsqrtBackward", |x| 1.0 / x.sqrt(),
        backward(g, _x, y) zip_float!("rsqrt", g, y, |g, y| -0.5 * g * y * y * y));
    unary!(/// sine
        sin, "SinBackward", |x| x.sin(),
        backward(g, x, _y) zip_float!("sin", g, x, |g, x| g * x.cos()));
    unary!(/// cosine
        cos, "CosBackward", |x| x.cos(),
        backward(g, x, _y) zip_float!("cos", g, x, |g, x| -g * x.sin()));
    unary!(/// hyperbolic tangent
        tanh, "TanhBackward", |x| x.tanh_(),
        backward(g, _x, y) zip_float!("tanh", g, y, |g, y| g * (1.0 - y * y)));
    unary!(/// logistic sigmoid `1 / (1 + e^-x)`
        sigmoid, "SigmoidBackward", |x| x.sigmoid_(),
        backward(g, _x, y) zip_float!("sigmoid", g, y, |g, y| g * y * (1.0 - y)));
    unary!(/// `max(x, 0)`
        relu, "ReluBackward", |x| if x > 0.0 { x } else { 0.0 },
        backward(g, _x, y) zip_float!("relu", g, y, |g, y| if y > 0.0 { g } else { 0.0 }));
    unary!(/// GELU, tanh approximation (`approximate='tanh'`)
    gelu_tanh, "GeluBackward", |x| {
        let k = x.k(SQRT_2_OVER_PI);
        0.5 * x * (1.0 + (k * (x + 0.044715 * x * x * x)).tanh_())
    },
    backward(g, x, _y) zip_float!("gelu_tanh", g, x, |g, x| {
        let k = x.k(SQRT_2_OVER_PI);
        let inner = k * (x + 0.044715 * x * x * x);
        let t = inner.tanh_();
        let dinner = k * (1.0 + 3.0 * 0.044715 * x * x);
        g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * dinner)
    }));
    unary!(/// SiLU / swish `x * sigmoid(x)`
    silu, "SiluBackward", |x| x * x.sigmoid_(),
    backward(g, x, _y) zip_float!("silu", g, x, |g, x| {
        let s = x.sigmoid_();
        g * (s + x * s * (1.0 - s))
    }));
    unary!(/// softplus `ln(1 + e^x)` (linear above 20, like PyTorch)
        softplus, "SoftplusBackward", |x| if x > 20.0 { x } else { x.exp().ln_1p() },
        backward(g, x, _y) zip_float!("softplus", g, x, |g, x| if x > 20.0 { g } else { g * x.sigmoid_() }));
    unary!(/// `x * x`
        square, "PowBackward", |x| x * x,
        backward(g, x, _y) zip_float!("square", g, x, |g, x| 2.0 * g * x));

    /// Sign (-1, 0, 1); gradient zero.
    #[track_caller]
    pub fn sign(&self) -> Result<Tensor> {
        map_float!("sign", self, |x| if x > 0.0 {
            1.0
        } else if x < 0.0 {
            -1.0
        } else {
            0.0
        })
    }
    /// Round down; gradient zero.
    #[track_caller]
    pub fn floor(&self) -> Result<Tensor> {
        map_float!("floor", self, |x| x.floor())
    }
    /// Round up; gradient zero.
    #[track_caller]
    pub fn ceil(&self) -> Result<Tensor> {
        map_float!("ceil", self, |x| x.ceil())
    }
    /// Round half to even (like PyTorch); gradient zero.
    #[track_caller]
    pub fn round(&self) -> Result<Tensor> {
        map_float!("round", self, |x| x.round_ties_even())
    }

    /// `x^p` for a scalar exponent.
    #[track_caller]
    pub fn powf(&self, p: f64) -> Result<Tensor> {
        let out = map_float!("pow", self, |x| x.powf(x.k(p)))?;
        let x = self.clone();
        Ok(out.record("PowBackward", &[self], move || {
            Box::new(move |g| {
                Ok(vec![Some(zip_float!("pow", g, &x, |g, x| {
                    g * x.k(p) * x.powf(x.k(p - 1.0))
                })?)])
            })
        }))
    }

    /// Clamp into `[min, max]` (either bound optional). Gradient passes where not clamped.
    #[track_caller]
    pub fn clamp(&self, min: Option<f64>, max: Option<f64>) -> Result<Tensor> {
        let (lo, hi) = (
            min.unwrap_or(f64::NEG_INFINITY),
            max.unwrap_or(f64::INFINITY),
        );
        let out = map_float!("clamp", self, |x| {
            let (l, h) = (x.k(lo), x.k(hi));
            if x < l {
                l
            } else if x > h {
                h
            } else {
                x
            }
        })?;
        let x = self.clone();
        Ok(out.record("ClampBackward", &[self], move || {
            Box::new(move |g| {
                Ok(vec![Some(zip_float!("clamp", g, &x, |g, x| {
                    if x >= x.k(lo) && x <= x.k(hi) {
                        g
                    } else {
                        0.0
                    }
                })?)])
            })
        }))
    }

    /// `x * mul + add`, the kernel behind every scalar arithmetic op.
    #[track_caller]
    pub fn affine(&self, mul: f64, add: f64) -> Result<Tensor> {
        if !self.dtype().is_float() {
            return self.int_scalar_op("affine", mul, add);
        }
        let out = map_float!("affine", self, |x| x * x.k(mul) + x.k(add))?;
        Ok(out.record("AffineBackward", &[self], move || {
            Box::new(move |g| Ok(vec![Some(g.affine(mul, 0.0)?)]))
        }))
    }

    /// Integer tensors: exact arithmetic through f64 then back.
    #[track_caller]
    fn int_scalar_op(&self, op: &str, mul: f64, add: f64) -> Result<Tensor> {
        use crate::backend::cpu::{elementwise::unary_map, CpuStorage as S};
        let s = self.storage();
        let l = self.layout();
        let out = match s.cpu() {
            S::I64(v) => S::I64(unary_map(v, l, |x| (x as f64 * mul + add) as i64)),
            S::U8(v) => S::U8(unary_map(v, l, |x| (x as f64 * mul + add) as u8)),
            _ => {
                return Err(crate::Error::dtype(
                    op,
                    format!("not supported for dtype {}", self.dtype()),
                ))
            }
        };
        drop(s);
        Ok(Tensor::from_cpu(out, self.shape()))
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
    /// While recording for autograd (f32, f64) the derivative comes out of the same
    /// evaluation, since both need `e^{-x²/2}` and the Gaussian tail ratio: the backward is
    /// one multiply. (Evaluating the derivative again in the backward cost as much as the
    /// forward: ~2 ms of a small GPT's training step at one thread.) The price is one more
    /// buffer of the input's size while the graph lives (char-GPT peak RSS +8 MB).
    #[track_caller]
    pub fn gelu(&self) -> Result<Tensor> {
        let fused = crate::autograd::is_grad_enabled()
            && self.requires_grad()
            && matches!(self.dtype(), crate::DType::F32 | crate::DType::F64);
        if fused {
            let (out, d) = self.gelu_with_grad()?;
            return Ok(out.record("GeluBackward", &[self], move || {
                Box::new(move |g: &Tensor| Ok(vec![Some(g.mul(&d)?)]))
            }));
        }
        let out = map_float!("gelu", self, |x| x.gelu_())?;
        let x = self.clone();
        Ok(out.record("GeluBackward", &[self], move || {
            Box::new(move |g: &Tensor| {
                Ok(vec![Some(
                    zip_float!("gelu", g, &x, |g, x| g * x.gelu_grad_())?
                )])
            })
        }))
    }

    /// `(gelu(x), gelu'(x))` of an f32 or f64 tensor, neither recorded.
    fn gelu_with_grad(&self) -> Result<(Tensor, Tensor)> {
        use crate::backend::cpu::{elementwise::unary_map2, CpuStorage as S};
        let x = self.detach().contiguous()?;
        let (a, b) = x.layout().contiguous_range().expect("made contiguous");
        let s = x.storage();
        // one evaluation per element, both results
        fn pair<T: FloatExt + Sync + Send + Default + 'static>(v: &[T]) -> (Vec<T>, Vec<T>) {
            unary_map2(
                v,
                #[inline(always)]
                |x: T| x.gelu_and_grad_(),
            )
        }
        let (y, d) = match s.cpu() {
            S::F32(v) => {
                let (y, d) = pair(&v[a..b]);
                (S::F32(y), S::F32(d))
            }
            S::F64(v) => {
                let (y, d) = pair(&v[a..b]);
                (S::F64(y), S::F64(d))
            }
            _ => unreachable!("gelu_with_grad: f32 and f64 only"),
        };
        drop(s);
        Ok((
            Tensor::from_cpu(y, self.shape()),
            Tensor::from_cpu(d, self.shape()),
        ))
    }
}
