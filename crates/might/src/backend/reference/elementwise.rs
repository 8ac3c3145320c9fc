//! Elementwise kernels of the reference backend: casts, unary functions and their
//! derivatives, binary arithmetic, comparisons and `where`, one scalar loop each. Floats are
//! computed in f64 and rounded to the dtype once per element; integers wrap in i64.

use super::{from_f64, offsets, round, Buf, RefStorage as S};
use crate::backend::{BinaryOp, CmpOp, UnaryOp};
use crate::{DType, Error, Layout, Result};

const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
const INV_SQRT_2: f64 = std::f64::consts::FRAC_1_SQRT_2;
const INV_SQRT_2PI: f64 = 0.398_942_280_401_432_7;

#[track_caller]
pub(super) fn mismatch(op: &str, a: &S, b: &S) -> Error {
    Error::dtype(op, format!("dtypes differ: {} vs {}", a.dtype(), b.dtype()))
}

#[track_caller]
pub(super) fn unsupported(op: &str, s: &S) -> Error {
    Error::dtype(op, format!("not supported for dtype {}", s.dtype()))
}

#[track_caller]
fn not_float(op: &str, s: &S) -> Error {
    Error::dtype(
        op,
        format!("expected a floating-point tensor, got {}", s.dtype()),
    )
}

/// A cast of `s[l]` to `to`, element by element through f64 as the CPU backend converts
/// (u8 through i64, so it wraps).
pub(super) fn to_dtype(s: &S, l: &Layout, to: DType) -> S {
    let offs = offsets(l);
    if s.dtype() == to {
        return s.select(&offs);
    }
    let vals: Vec<f64> = offs.iter().map(|&o| s.get(o)).collect();
    match to {
        DType::U8 => S::f(to, vals.iter().map(|&x| x as i64 as u8 as f64).collect()),
        _ => S::from_vals(to, vals, from_f64),
    }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// `op(x)` of one element.
fn forward_one(op: UnaryOp, x: f64) -> f64 {
    match op {
        UnaryOp::Neg => -x,
        UnaryOp::Abs => x.abs(),
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Log1p => x.ln_1p(),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Rsqrt => 1.0 / x.sqrt(),
        UnaryOp::Sin => x.sin(),
        UnaryOp::Cos => x.cos(),
        UnaryOp::Tan => x.tan(),
        UnaryOp::Erf => libm::erf(x),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Sigmoid => sigmoid(x),
        UnaryOp::Relu => {
            if x > 0.0 {
                x
            } else {
                0.0
            }
        }
        UnaryOp::Gelu => 0.5 * x * libm::erfc(-x * INV_SQRT_2),
        UnaryOp::GeluTanh => 0.5 * x * (1.0 + (SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)).tanh()),
        UnaryOp::Silu => x * sigmoid(x),
        UnaryOp::Softplus => {
            if x > 20.0 {
                x
            } else {
                x.exp().ln_1p()
            }
        }
        UnaryOp::HardSwish => x * ((x + 3.0).clamp(0.0, 6.0) / 6.0),
        UnaryOp::Square => x * x,
        UnaryOp::Sign => {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                0.0
            }
        }
        UnaryOp::Floor => x.floor(),
        UnaryOp::Ceil => x.ceil(),
        UnaryOp::Round => x.round_ties_even(),
        UnaryOp::Powf(p) => x.powf(p),
        UnaryOp::Clamp(lo, hi) => {
            if x < lo {
                lo
            } else if x > hi {
                hi
            } else {
                x
            }
        }
        UnaryOp::Affine(mul, add) => x * mul + add,
    }
}

/// `g · op'(s)` of one element, `s` the saved input or output.
fn backward_one(op: UnaryOp, g: f64, s: f64) -> f64 {
    match op {
        UnaryOp::Neg => -g,
        UnaryOp::Abs => {
            if s > 0.0 {
                g
            } else if s < 0.0 {
                -g
            } else {
                0.0
            }
        }
        UnaryOp::Exp => g * s,
        UnaryOp::Log => g / s,
        UnaryOp::Log1p => g / (1.0 + s),
        UnaryOp::Sqrt => g * 0.5 / s,
        UnaryOp::Rsqrt => -0.5 * g * s * s * s,
        UnaryOp::Sin => g * s.cos(),
        UnaryOp::Cos => -g * s.sin(),
        UnaryOp::Tan => g * (1.0 + s * s),
        UnaryOp::Erf => g * std::f64::consts::FRAC_2_SQRT_PI * (-s * s).exp(),
        UnaryOp::Tanh => g * (1.0 - s * s),
        UnaryOp::Sigmoid => g * s * (1.0 - s),
        UnaryOp::Relu => {
            if s > 0.0 {
                g
            } else {
                0.0
            }
        }
        UnaryOp::Gelu => {
            let cdf = 0.5 * libm::erfc(-s * INV_SQRT_2);
            g * (cdf + s * INV_SQRT_2PI * (-0.5 * s * s).exp())
        }
        UnaryOp::GeluTanh => {
            let t = (SQRT_2_OVER_PI * (s + 0.044715 * s * s * s)).tanh();
            let dinner = SQRT_2_OVER_PI * (1.0 + 3.0 * 0.044715 * s * s);
            g * (0.5 * (1.0 + t) + 0.5 * s * (1.0 - t * t) * dinner)
        }
        UnaryOp::Silu => {
            let sg = sigmoid(s);
            g * (sg + s * sg * (1.0 - sg))
        }
        UnaryOp::Softplus => {
            if s > 20.0 {
                g
            } else {
                g * sigmoid(s)
            }
        }
        UnaryOp::HardSwish => {
            if s <= -3.0 {
                0.0
            } else if s >= 3.0 {
                g
            } else {
                g * (s / 3.0 + 0.5)
            }
        }
        UnaryOp::Square => 2.0 * g * s,
        UnaryOp::Sign | UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round => 0.0,
        UnaryOp::Powf(p) => g * p * s.powf(p - 1.0),
        UnaryOp::Clamp(lo, hi) => {
            if s >= lo && s <= hi {
                g
            } else {
                0.0
            }
        }
        UnaryOp::Affine(mul, _) => g * mul + 0.0,
    }
}

/// The float-typed bounds and factors of `op` as the dtype holds them (the CPU converts
/// them to f32 for f32/f16/bf16 tensors).
fn op_in(op: UnaryOp, dt: DType) -> UnaryOp {
    if dt == DType::F64 {
        return op;
    }
    let k = |v: f64| v as f32 as f64;
    match op {
        UnaryOp::Powf(p) => UnaryOp::Powf(k(p)),
        UnaryOp::Clamp(lo, hi) => UnaryOp::Clamp(k(lo), k(hi)),
        UnaryOp::Affine(m, a) => UnaryOp::Affine(k(m), k(a)),
        op => op,
    }
}

pub(super) fn unary(s: &S, l: &Layout, op: UnaryOp) -> Result<S> {
    let dt = s.dtype();
    if let UnaryOp::Affine(mul, add) = op {
        // integers: exact arithmetic through f64, then back (u8 saturates)
        match dt {
            DType::I64 => {
                let v = offsets(l)
                    .into_iter()
                    .map(|o| (s.get_i(o) as f64 * mul + add) as i64);
                return Ok(S::i64(v.collect()));
            }
            DType::U8 => {
                let v = offsets(l)
                    .into_iter()
                    .map(|o| (s.get(o) * mul + add) as u8 as f64);
                return Ok(S::f(dt, v.collect()));
            }
            _ => {}
        }
    }
    if !dt.is_float() {
        return Err(not_float(op.name(), s));
    }
    let op = op_in(op, dt);
    let v = offsets(l)
        .iter()
        .map(|&o| forward_one(op, s.get(o)))
        .collect();
    Ok(S::from_vals(dt, v, round))
}

pub(super) fn unary_backward(g: &S, gl: &Layout, s: &S, sl: &Layout, op: UnaryOp) -> Result<S> {
    let dt = g.dtype();
    if !dt.is_float() || s.dtype() != dt {
        return Err(not_float(op.name(), if dt.is_float() { s } else { g }));
    }
    let op = op_in(op, dt);
    let (go, so) = (offsets(gl), offsets(sl));
    let v = go
        .iter()
        .zip(&so)
        .map(|(&a, &b)| backward_one(op, g.get(a), s.get(b)))
        .collect();
    Ok(S::from_vals(dt, v, round))
}

/// Integer arithmetic: wrapping in i64 (u8 keeps the low byte, which is u8's wrapping
/// result), division by zero gives 0, powers clamp the exponent into `[0, 64]`.
fn int_op(op: BinaryOp, a: i64, b: i64) -> i64 {
    match op {
        BinaryOp::Add => a.wrapping_add(b),
        BinaryOp::Sub => a.wrapping_sub(b),
        BinaryOp::Mul => a.wrapping_mul(b),
        BinaryOp::Div => {
            if b == 0 {
                0
            } else {
                a.wrapping_div(b)
            }
        }
        BinaryOp::Pow => a.wrapping_pow(b.clamp(0, 64) as u32),
        BinaryOp::Maximum => a.max(b),
        BinaryOp::Minimum => a.min(b),
        _ => unreachable!("float-only operators are checked first"),
    }
}

/// Float arithmetic (NaN wins in maximum/minimum, like PyTorch).
fn float_op(op: BinaryOp, a: f64, b: f64) -> f64 {
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Pow => a.powf(b),
        BinaryOp::Maximum => {
            if a.is_nan() || a > b {
                a
            } else {
                b
            }
        }
        BinaryOp::Minimum => {
            if a.is_nan() || a < b {
                a
            } else {
                b
            }
        }
        BinaryOp::BceWithLogits => a.max(0.0) - a * b + (-a.abs()).exp().ln_1p(),
        BinaryOp::MaximumGradWeight | BinaryOp::MinimumGradWeight => {
            let sgn = if op == BinaryOp::MaximumGradWeight {
                1.0
            } else {
                -1.0
            };
            let d = (a - b) * sgn;
            if d > 0.0 {
                1.0
            } else if d < 0.0 {
                0.0
            } else {
                0.5
            }
        }
    }
}

/// `op(a[al], b[bl])` for every element, as `(f64 results, i64 results)` of the dtype.
fn binary_vals(a: &S, al: &Layout, b: &S, bl: &Layout, op: BinaryOp) -> Result<S> {
    let float_only = matches!(
        op,
        BinaryOp::BceWithLogits | BinaryOp::MaximumGradWeight | BinaryOp::MinimumGradWeight
    );
    let dt = a.dtype();
    if float_only && !dt.is_float() {
        return Err(not_float(op.name(), a));
    }
    if dt != b.dtype() {
        return Err(if float_only {
            not_float(op.name(), a)
        } else {
            mismatch(op.name(), a, b)
        });
    }
    if dt == DType::Bool {
        return Err(Error::dtype(
            op.name(),
            "arithmetic is not defined for bool tensors",
        ));
    }
    let pairs = offsets(al).into_iter().zip(offsets(bl));
    Ok(match dt {
        DType::I64 => S::i64(
            pairs
                .map(|(x, y)| int_op(op, a.get_i(x), b.get_i(y)))
                .collect(),
        ),
        DType::U8 => S::f(
            dt,
            pairs
                .map(|(x, y)| int_op(op, a.get_i(x), b.get_i(y)) as u8 as f64)
                .collect(),
        ),
        _ => S::from_vals(
            dt,
            pairs
                .map(|(x, y)| float_op(op, a.get(x), b.get(y)))
                .collect(),
            round,
        ),
    })
}

pub(super) fn binary(a: &S, al: &Layout, b: &S, bl: &Layout, op: BinaryOp) -> Result<S> {
    binary_vals(a, al, b, bl, op)
}

/// `a[al] = op(a[al], b[bl])`.
pub(super) fn binary_inplace(
    a: &mut S,
    al: &Layout,
    b: &S,
    bl: &Layout,
    op: BinaryOp,
) -> Result<()> {
    if matches!(
        op,
        BinaryOp::BceWithLogits | BinaryOp::MaximumGradWeight | BinaryOp::MinimumGradWeight
    ) {
        return Err(Error::invalid(op.name(), "has no in-place form"));
    }
    let r = binary_vals(a, al, b, bl, op)?;
    for (j, o) in offsets(al).into_iter().enumerate() {
        a.set_from(o, &r, j);
    }
    Ok(())
}

/// `dst[dl] = src[sl]`.
pub(super) fn assign(dst: &mut S, dl: &Layout, src: &S, sl: &Layout) -> Result<()> {
    if dst.dtype() != src.dtype() {
        return Err(mismatch("copy_", dst, src));
    }
    for (o, s) in offsets(dl).into_iter().zip(offsets(sl)) {
        dst.set_from(o, src, s);
    }
    Ok(())
}

pub(super) fn cmp(a: &S, al: &Layout, b: &S, bl: &Layout, op: CmpOp) -> Result<S> {
    if a.dtype() != b.dtype() {
        return Err(mismatch("compare", a, b));
    }
    let pairs = offsets(al).into_iter().zip(offsets(bl));
    let v = match (&a.buf, &b.buf) {
        (Buf::I(u), Buf::I(w)) => pairs.map(|(x, y)| test(op, u[x], w[y])).collect(),
        (Buf::F(u), Buf::F(w)) => pairs.map(|(x, y)| test(op, u[x], w[y])).collect(),
        _ => unreachable!("one dtype, one representation"),
    };
    Ok(S::f(DType::Bool, v))
}

/// One IEEE comparison (NaN compares false, `ne` true), as 0/1.
fn test<T: PartialOrd>(op: CmpOp, x: T, y: T) -> f64 {
    let r = match op {
        CmpOp::Eq => x == y,
        CmpOp::Ne => x != y,
        CmpOp::Lt => x < y,
        CmpOp::Le => x <= y,
        CmpOp::Gt => x > y,
        CmpOp::Ge => x >= y,
    };
    r as u8 as f64
}

pub(super) fn where_cond(c: &S, cl: &Layout, a: &S, al: &Layout, b: &S, bl: &Layout) -> Result<S> {
    if c.dtype() != DType::Bool {
        return Err(Error::dtype("where", "condition must be bool"));
    }
    if a.dtype() != b.dtype() {
        return Err(mismatch("where", a, b));
    }
    let (co, ao, bo) = (offsets(cl), offsets(al), offsets(bl));
    let mut out = a.select(&ao);
    for (j, &o) in co.iter().enumerate() {
        if c.get(o) == 0.0 {
            out.set_from(j, b, bo[j]);
        }
    }
    Ok(out)
}
