//! WGSL source of the GPU kernels, assembled from a shared prelude and per-op expressions.
//!
//! Every kernel reads its sizes, scalars and layouts from binding 0, `prm: array<u32>`:
//! `prm[0]` is the number of threads (or workgroups) that do work, `prm[1..]` are slots
//! holding scalars or the position in `prm` of a layout description `[ndim, dims..,
//! strides.., offset]`. `loc(at, i)` turns the logical (row-major) index `i` of the layout
//! at `prm[at]` into a buffer index, so every kernel reads strided views (transposes,
//! broadcasts, slices) without copies. Elements are 32-bit: f32, i32 (int64 tensors) or u32
//! (u8 and bool).

use crate::backend::{BinaryOp, UnaryOp};
use crate::DType;

/// Bindings, the layout walk and the flat thread index shared by every kernel.
pub(crate) const PRELUDE: &str = r#"
@group(0) @binding(0) var<storage, read> prm: array<u32>;

fn loc(at: u32, i: u32) -> u32 {
    let nd = prm[at];
    var rem = i;
    var off = prm[at + 1u + 2u * nd];
    var d = nd;
    loop {
        if (d == 0u) { break; }
        d = d - 1u;
        let dim = prm[at + 1u + d];
        let st = prm[at + 1u + nd + d];
        off = off + (rem % dim) * st;
        rem = rem / dim;
    }
    return off;
}

fn slot(k: u32) -> u32 { return prm[1u + k]; }
fn fslot(k: u32) -> f32 { return bitcast<f32>(prm[1u + k]); }
// inf and NaN from their bits: through a function, because Tint (Chrome's WGSL compiler)
// rejects a constant expression whose value is not finite
fn f32_bits_(b: u32) -> f32 { return bitcast<f32>(b); }
"#;

/// f32 helpers of the unary functions WGSL lacks or defines loosely.
pub(crate) const MATH: &str = r#"
fn erfc_(x: f32) -> f32 {
    // Numerical Recipes' Chebyshev fit, relative error < 1.2e-7
    let z = abs(x);
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418
        + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587
        + t * (-0.82215223 + t * 0.17087277)))))))));
    if (x >= 0.0) { return r; }
    return 2.0 - r;
}
fn erf_(x: f32) -> f32 {
    // odd Taylor series near 0 (1 - erfc would lose the relative accuracy there)
    let z = x * x;
    if (abs(x) < 0.5) {
        return x * 1.1283791671 * (1.0 + z * (-0.3333333333 + z * (0.1 + z * (-0.0238095238
            + z * (0.0046296296 + z * (-0.0007575758 + z * 0.0001068376))))));
    }
    return 1.0 - erfc_(x);
}
fn log1p_(x: f32) -> f32 {
    let u = 1.0 + x;
    if (u == 1.0) { return x; }
    if (u == x) { return log(u); }
    return log(u) * x / (u - 1.0);
}
fn tanh_(x: f32) -> f32 {
    let e = exp(-2.0 * abs(x));
    let t = (1.0 - e) / (1.0 + e);
    if (x < 0.0) { return -t; }
    return t;
}
fn sigmoid_(x: f32) -> f32 { return 1.0 / (1.0 + exp(-x)); }
// on the bits: drivers may compile float comparisons as if NaN did not exist
fn is_nan_(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn powf_(x: f32, p: f32) -> f32 {
    if (p == 0.0) { return 1.0; }
    if (x == 0.0) {
        if (p > 0.0) { return 0.0; }
        return f32_bits_(0x7f800000u);
    }
    if (x < 0.0) {
        if (p != floor(p)) { return f32_bits_(0x7fc00000u); }
        let r = pow(-x, p);
        if (abs(p % 2.0) == 1.0) { return -r; }
        return r;
    }
    return pow(x, p);
}
fn gelu_tanh_(x: f32) -> f32 {
    return 0.5 * x * (1.0 + tanh_(0.7978845608 * (x + 0.044715 * x * x * x)));
}
"#;

/// The WGSL element type holding `dt` on the GPU.
pub(crate) fn ty(dt: DType) -> &'static str {
    match dt {
        DType::I64 => "i32",
        DType::U8 | DType::Bool => "u32",
        _ => "f32",
    }
}

/// `op(x)` in f32 (its scalars are in slots 0 and 1).
pub(crate) fn unary_f(op: UnaryOp) -> &'static str {
    match op {
        UnaryOp::Neg => "-x",
        UnaryOp::Abs => "abs(x)",
        UnaryOp::Exp => "exp(x)",
        UnaryOp::Log => "log(x)",
        UnaryOp::Log1p => "log1p_(x)",
        UnaryOp::Sqrt => "sqrt(x)",
        UnaryOp::Rsqrt => "1.0 / sqrt(x)",
        UnaryOp::Sin => "sin(x)",
        UnaryOp::Cos => "cos(x)",
        UnaryOp::Tan => "tan(x)",
        UnaryOp::Erf => "erf_(x)",
        UnaryOp::Tanh => "tanh_(x)",
        UnaryOp::Sigmoid => "sigmoid_(x)",
        UnaryOp::Relu => "select(0.0, x, x > 0.0)",
        UnaryOp::Gelu => "0.5 * x * erfc_(-x * 0.70710678118)",
        UnaryOp::GeluTanh => "gelu_tanh_(x)",
        UnaryOp::Silu => "x * sigmoid_(x)",
        UnaryOp::Softplus => "select(log1p_(exp(x)), x, x > 20.0)",
        UnaryOp::HardSwish => "x * (clamp(x + 3.0, 0.0, 6.0) / 6.0)",
        UnaryOp::Square => "x * x",
        UnaryOp::Sign => "select(select(0.0, -1.0, x < 0.0), 1.0, x > 0.0)",
        UnaryOp::Floor => "floor(x)",
        UnaryOp::Ceil => "ceil(x)",
        UnaryOp::Round => "round(x)",
        UnaryOp::Powf(_) => "powf_(x, fslot(0u))",
        UnaryOp::Clamp(..) => {
            "select(select(x, fslot(1u), x > fslot(1u)), fslot(0u), x < fslot(0u))"
        }
        UnaryOp::Affine(..) => "x * fslot(0u) + fslot(1u)",
    }
}

/// `g · op'(s)` in f32, `s` the saved input (or output, see `backward_uses_output`).
pub(crate) fn unary_backward_f(op: UnaryOp) -> &'static str {
    match op {
        UnaryOp::Neg => "-g",
        UnaryOp::Abs => "select(select(0.0, -g, s < 0.0), g, s > 0.0)",
        UnaryOp::Exp => "g * s",
        UnaryOp::Log => "g / s",
        UnaryOp::Log1p => "g / (1.0 + s)",
        UnaryOp::Sqrt => "g * 0.5 / s",
        UnaryOp::Rsqrt => "-0.5 * g * s * s * s",
        UnaryOp::Sin => "g * cos(s)",
        UnaryOp::Cos => "-g * sin(s)",
        UnaryOp::Tan => "g * (1.0 + s * s)",
        UnaryOp::Erf => "g * 1.1283791671 * exp(-s * s)",
        UnaryOp::Tanh => "g * (1.0 - s * s)",
        UnaryOp::Sigmoid => "g * s * (1.0 - s)",
        UnaryOp::Relu => "select(0.0, g, s > 0.0)",
        UnaryOp::Gelu => {
            "g * (0.5 * erfc_(-s * 0.70710678118) + s * 0.39894228040 * exp(-0.5 * s * s))"
        }
        UnaryOp::GeluTanh => {
            "g * (0.5 * (1.0 + tanh_(0.7978845608 * (s + 0.044715 * s * s * s))) + 0.5 * s \
             * (1.0 - tanh_(0.7978845608 * (s + 0.044715 * s * s * s)) * tanh_(0.7978845608 \
             * (s + 0.044715 * s * s * s))) * 0.7978845608 * (1.0 + 3.0 * 0.044715 * s * s))"
        }
        UnaryOp::Silu => "g * (sigmoid_(s) + s * sigmoid_(s) * (1.0 - sigmoid_(s)))",
        UnaryOp::Softplus => "select(g * sigmoid_(s), g, s > 20.0)",
        UnaryOp::HardSwish => "select(select(g * (s / 3.0 + 0.5), g, s >= 3.0), 0.0, s <= -3.0)",
        UnaryOp::Square => "2.0 * g * s",
        UnaryOp::Sign | UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round => "0.0 * g",
        UnaryOp::Powf(_) => "g * fslot(0u) * powf_(s, fslot(0u) - 1.0)",
        UnaryOp::Clamp(..) => "select(0.0, g, s >= fslot(0u) && s <= fslot(1u))",
        UnaryOp::Affine(..) => "g * fslot(0u)",
    }
}

/// `op(a, b)` of f32 elements.
pub(crate) fn binary_f(op: BinaryOp) -> &'static str {
    match op {
        BinaryOp::Add => "a + b",
        BinaryOp::Sub => "a - b",
        BinaryOp::Mul => "a * b",
        BinaryOp::Div => "a / b",
        BinaryOp::Pow => "powf_(a, b)",
        BinaryOp::Maximum => "select(b, a, is_nan_(a) || a > b)",
        BinaryOp::Minimum => "select(b, a, is_nan_(a) || a < b)",
        BinaryOp::BceWithLogits => "max(a, 0.0) - a * b + log1p_(exp(-abs(a)))",
        BinaryOp::MaximumGradWeight => "select(select(0.5, 0.0, a - b < 0.0), 1.0, a - b > 0.0)",
        BinaryOp::MinimumGradWeight => "select(select(0.5, 0.0, b - a < 0.0), 1.0, b - a > 0.0)",
    }
}

/// `op(a, b)` of i32 elements (wrapping; division by zero gives 0).
pub(crate) fn binary_i(op: BinaryOp) -> &'static str {
    match op {
        BinaryOp::Add => "a + b",
        BinaryOp::Sub => "a - b",
        BinaryOp::Mul => "a * b",
        BinaryOp::Div => "select(a / select(b, 1, b == 0), 0, b == 0)",
        BinaryOp::Pow => "ipow_(a, b)",
        BinaryOp::Maximum => "max(a, b)",
        BinaryOp::Minimum => "min(a, b)",
        _ => "a",
    }
}

/// Integer power by squaring, the exponent clamped into `[0, 64]` (wrapping).
pub(crate) const IPOW: &str = r#"
fn ipow_(a: i32, b: i32) -> i32 {
    var e = u32(clamp(b, 0, 64));
    var base = a;
    var r = 1;
    loop {
        if (e == 0u) { break; }
        if ((e & 1u) == 1u) { r = r * base; }
        base = base * base;
        e = e >> 1u;
    }
    return r;
}
"#;
