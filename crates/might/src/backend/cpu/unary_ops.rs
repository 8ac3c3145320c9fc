//! The CPU's elementwise functions of one float tensor ([`UnaryOp`]) and their derivatives.
//!
//! f32 (and f16/bf16, computed in f32) use the vectorisable approximations of [`vmath`]; f64
//! uses libm, since f64 is what gradient checks run in. Each operator is one `match` arm, so
//! the loop of every arm is compiled for its own function and vectorises.

use super::elementwise::{binary_map, unary_map, unary_map2};
use super::vmath;
use super::CpuStorage as S;
use crate::backend::UnaryOp;
use crate::{Error, Layout, Result};

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
    /// the error function
    fn erf_(self) -> Self;
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
    fn erf_(self) -> f32 {
        vmath::erf(self)
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
    #[inline(always)]
    fn erf_(self) -> f64 {
        libm::erf(self)
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

/// Map every element of a float buffer with a closure written once for all float types
/// (`f16`/`bf16` compute through `f32`). The closure captures by value (see
/// `elementwise` for why).
macro_rules! float_map {
    ($op:expr, $s:expr, $l:expr, |$x:ident| $body:expr) => {{
        let l: &Layout = $l;
        match $s {
            S::F32(v) => S::F32(unary_map(v, l, move |$x: f32| $body)),
            S::F64(v) => S::F64(unary_map(v, l, move |$x: f64| $body)),
            S::F16(v) => S::F16(unary_map(v, l, move |x: half::f16| {
                let $x = x.to_f32();
                half::f16::from_f32($body)
            })),
            S::BF16(v) => S::BF16(unary_map(v, l, move |x: half::bf16| {
                let $x = x.to_f32();
                half::bf16::from_f32($body)
            })),
            s => return Err(not_float($op, s)),
        }
    }};
}

/// Combine two float buffers of one dtype (layouts broadcast together) with a closure written
/// once for all float types.
macro_rules! float_zip {
    ($op:expr, $a:expr, $al:expr, $b:expr, $bl:expr, |$x:ident, $y:ident| $body:expr) => {{
        let (al, bl): (&Layout, &Layout) = ($al, $bl);
        match ($a, $b) {
            (S::F32(u), S::F32(v)) => {
                S::F32(binary_map(u, al, v, bl, move |$x: f32, $y: f32| $body))
            }
            (S::F64(u), S::F64(v)) => {
                S::F64(binary_map(u, al, v, bl, move |$x: f64, $y: f64| $body))
            }
            (S::F16(u), S::F16(v)) => S::F16(binary_map(
                u,
                al,
                v,
                bl,
                move |x: half::f16, y: half::f16| {
                    let ($x, $y) = (x.to_f32(), y.to_f32());
                    half::f16::from_f32($body)
                },
            )),
            (S::BF16(u), S::BF16(v)) => S::BF16(binary_map(
                u,
                al,
                v,
                bl,
                move |x: half::bf16, y: half::bf16| {
                    let ($x, $y) = (x.to_f32(), y.to_f32());
                    half::bf16::from_f32($body)
                },
            )),
            (s, _) => return Err($crate::backend::cpu::unary_ops::not_float($op, s)),
        }
    }};
}
pub(super) use float_zip;

#[track_caller]
pub(crate) fn not_float(op: &str, s: &S) -> Error {
    Error::dtype(
        op,
        format!("expected a floating-point tensor, got {}", s.dtype()),
    )
}

/// `op(x)` for every element.
pub(super) fn forward(s: &S, l: &Layout, op: UnaryOp) -> Result<S> {
    let name = op.name();
    Ok(match op {
        UnaryOp::Neg => float_map!(name, s, l, |x| -x),
        UnaryOp::Abs => float_map!(name, s, l, |x| x.abs()),
        UnaryOp::Exp => float_map!(name, s, l, |x| x.exp_()),
        UnaryOp::Log => float_map!(name, s, l, |x| x.ln()),
        UnaryOp::Log1p => float_map!(name, s, l, |x| x.ln_1p()),
        UnaryOp::Sqrt => float_map!(name, s, l, |x| x.sqrt()),
        UnaryOp::Rsqrt => float_map!(name, s, l, |x| 1.0 / x.sqrt()),
        UnaryOp::Sin => float_map!(name, s, l, |x| x.sin()),
        UnaryOp::Cos => float_map!(name, s, l, |x| x.cos()),
        UnaryOp::Tan => float_map!(name, s, l, |x| x.tan()),
        UnaryOp::Erf => float_map!(name, s, l, |x| x.erf_()),
        UnaryOp::Tanh => float_map!(name, s, l, |x| x.tanh_()),
        UnaryOp::Sigmoid => float_map!(name, s, l, |x| x.sigmoid_()),
        UnaryOp::Relu => float_map!(name, s, l, |x| if x > 0.0 { x } else { 0.0 }),
        UnaryOp::Gelu => float_map!(name, s, l, |x| x.gelu_()),
        UnaryOp::GeluTanh => float_map!(name, s, l, |x| {
            let k = x.k(SQRT_2_OVER_PI);
            0.5 * x * (1.0 + (k * (x + 0.044715 * x * x * x)).tanh_())
        }),
        UnaryOp::Silu => float_map!(name, s, l, |x| x * x.sigmoid_()),
        UnaryOp::Softplus => {
            float_map!(name, s, l, |x| if x > 20.0 { x } else { x.exp().ln_1p() })
        }
        UnaryOp::HardSwish => float_map!(name, s, l, |x| {
            let h = x + 3.0;
            let h = h.clamp(0.0, 6.0);
            x * (h / 6.0)
        }),
        UnaryOp::Square => float_map!(name, s, l, |x| x * x),
        UnaryOp::Sign => float_map!(name, s, l, |x| if x > 0.0 {
            1.0
        } else if x < 0.0 {
            -1.0
        } else {
            0.0
        }),
        UnaryOp::Floor => float_map!(name, s, l, |x| x.floor()),
        UnaryOp::Ceil => float_map!(name, s, l, |x| x.ceil()),
        UnaryOp::Round => float_map!(name, s, l, |x| x.round_ties_even()),
        // small integer powers (x², x³ of GELU's tanh form) as a product chain: vectorises,
        // where powf is a libm call per element
        UnaryOp::Powf(p) if p.fract() == 0.0 && p.abs() <= 8.0 => {
            let n = p as i32;
            float_map!(name, s, l, |x| x.powi(n))
        }
        UnaryOp::Powf(p) => float_map!(name, s, l, |x| x.powf(x.k(p))),
        UnaryOp::Clamp(lo, hi) => float_map!(name, s, l, |x| {
            let (a, b) = (x.k(lo), x.k(hi));
            if x < a {
                a
            } else if x > b {
                b
            } else {
                x
            }
        }),
        UnaryOp::Affine(mul, add) => match s {
            // integers: exact arithmetic through f64, then back
            S::I64(v) => S::I64(unary_map(v, l, |x| (x as f64 * mul + add) as i64)),
            S::U8(v) => S::U8(unary_map(v, l, |x| (x as f64 * mul + add) as u8)),
            _ => float_map!(name, s, l, |x| x * x.k(mul) + x.k(add)),
        },
    })
}

/// `g · op'(s)` with `s` the saved input or output ([`UnaryOp::backward_uses_output`]).
pub(super) fn backward(g: &S, gl: &Layout, s: &S, sl: &Layout, op: UnaryOp) -> Result<S> {
    let name = op.name();
    Ok(match op {
        UnaryOp::Neg => float_zip!(name, g, gl, s, sl, |g, _x| -g),
        UnaryOp::Abs => float_zip!(name, g, gl, s, sl, |g, x| if x > 0.0 {
            g
        } else if x < 0.0 {
            -g
        } else {
            0.0
        }),
        UnaryOp::Exp => float_zip!(name, g, gl, s, sl, |g, y| g * y),
        UnaryOp::Log => float_zip!(name, g, gl, s, sl, |g, x| g / x),
        UnaryOp::Log1p => float_zip!(name, g, gl, s, sl, |g, x| g / (1.0 + x)),
        UnaryOp::Sqrt => float_zip!(name, g, gl, s, sl, |g, y| g * 0.5 / y),
        UnaryOp::Rsqrt => float_zip!(name, g, gl, s, sl, |g, y| -0.5 * g * y * y * y),
        UnaryOp::Sin => float_zip!(name, g, gl, s, sl, |g, x| g * x.cos()),
        UnaryOp::Cos => float_zip!(name, g, gl, s, sl, |g, x| -g * x.sin()),
        UnaryOp::Tanh => float_zip!(name, g, gl, s, sl, |g, y| g * (1.0 - y * y)),
        UnaryOp::Tan => float_zip!(name, g, gl, s, sl, |g, y| g * (1.0 + y * y)),
        // 2/√π · e^{-x²}
        UnaryOp::Erf => float_zip!(name, g, gl, s, sl, |g, x| {
            g * x.k(std::f64::consts::FRAC_2_SQRT_PI) * (-(x * x)).exp_()
        }),
        UnaryOp::Sigmoid => float_zip!(name, g, gl, s, sl, |g, y| g * y * (1.0 - y)),
        UnaryOp::Relu => float_zip!(name, g, gl, s, sl, |g, y| if y > 0.0 { g } else { 0.0 }),
        UnaryOp::Gelu => float_zip!(name, g, gl, s, sl, |g, x| g * x.gelu_grad_()),
        UnaryOp::GeluTanh => float_zip!(name, g, gl, s, sl, |g, x| {
            let k = x.k(SQRT_2_OVER_PI);
            let inner = k * (x + 0.044715 * x * x * x);
            let t = inner.tanh_();
            let dinner = k * (1.0 + 3.0 * 0.044715 * x * x);
            g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * dinner)
        }),
        UnaryOp::Silu => float_zip!(name, g, gl, s, sl, |g, x| {
            let s = x.sigmoid_();
            g * (s + x * s * (1.0 - s))
        }),
        UnaryOp::Softplus => float_zip!(name, g, gl, s, sl, |g, x| if x > 20.0 {
            g
        } else {
            g * x.sigmoid_()
        }),
        UnaryOp::HardSwish => float_zip!(name, g, gl, s, sl, |g, x| if x <= -3.0 {
            0.0
        } else if x >= 3.0 {
            g
        } else {
            g * (x / 3.0 + 0.5)
        }),
        UnaryOp::Square => float_zip!(name, g, gl, s, sl, |g, x| 2.0 * g * x),
        UnaryOp::Sign | UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round => {
            float_zip!(name, g, gl, s, sl, |_g, _x| 0.0)
        }
        UnaryOp::Powf(p) => float_zip!(name, g, gl, s, sl, |g, x| {
            g * x.k(p) * x.powf(x.k(p - 1.0))
        }),
        UnaryOp::Clamp(lo, hi) => float_zip!(name, g, gl, s, sl, |g, x| {
            if x >= x.k(lo) && x <= x.k(hi) {
                g
            } else {
                0.0
            }
        }),
        UnaryOp::Affine(mul, _) => float_zip!(name, g, gl, s, sl, |g, _x| g * g.k(mul) + 0.0),
    })
}

/// `(gelu(x), gelu'(x))` from one evaluation per element, for contiguous f32/f64.
pub(super) fn with_grad(s: &S, l: &Layout, op: UnaryOp) -> Option<(S, S)> {
    let (a, b) = l.contiguous_range()?;
    if op != UnaryOp::Gelu {
        return None;
    }
    fn pair<T: FloatExt + Sync + Send + Default + 'static>(v: &[T]) -> (Vec<T>, Vec<T>) {
        unary_map2(
            v,
            #[inline(always)]
            |x: T| x.gelu_and_grad_(),
        )
    }
    match s {
        S::F32(v) => {
            let (y, d) = pair(&v[a..b]);
            Some((S::F32(y), S::F32(d)))
        }
        S::F64(v) => {
            let (y, d) = pair(&v[a..b]);
            Some((S::F64(y), S::F64(d)))
        }
        _ => None,
    }
}
