//! Elementwise operators: math, activations, comparisons, logic and bit operations.

use super::{one, opt, req, same, Node, OpFn};
use crate::onnx::value::{elem, ints, Value};
use crate::{DType, Result, Tensor};

pub fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "Add" => |n, i| arith(n, i, Tensor::add),
        "Sub" => |n, i| arith(n, i, Tensor::sub),
        "Mul" => |n, i| arith(n, i, Tensor::mul),
        "Div" => |n, i| arith(n, i, Tensor::div),
        "Pow" => pow,
        "Mod" => modulo,
        "Max" => |n, i| variadic(n, i, Tensor::maximum, false),
        "Min" => |n, i| variadic(n, i, Tensor::minimum, false),
        "Sum" => |n, i| variadic(n, i, Tensor::add, false),
        "Mean" => |n, i| variadic(n, i, Tensor::add, true),
        "Equal" => |n, i| cmp(n, i, Tensor::eq),
        "Greater" => |n, i| cmp(n, i, Tensor::gt),
        "Less" => |n, i| cmp(n, i, Tensor::lt),
        "GreaterOrEqual" => |n, i| cmp(n, i, Tensor::ge),
        "LessOrEqual" => |n, i| cmp(n, i, Tensor::le),
        "And" => |n, i| logic(n, i, |a, b| a && b),
        "Or" => |n, i| logic(n, i, |a, b| a || b),
        "Xor" => |n, i| logic(n, i, |a, b| a != b),
        "Not" => |n, i| one(req(n, i, 0)?.tensor.logical_not()?),
        "Where" => where_,
        "BitShift" => bitshift,
        "BitwiseAnd" => |n, i| bitwise(n, i, |a, b| a & b),
        "BitwiseOr" => |n, i| bitwise(n, i, |a, b| a | b),
        "BitwiseXor" => |n, i| bitwise(n, i, |a, b| a ^ b),
        "BitwiseNot" => bitwise_not,
        "Identity" => |n, i| Ok(vec![req(n, i, 0)?.clone()]),
        "Abs" => |n, i| signed_or_float(n, i, Tensor::abs, |x| x.abs()),
        "Neg" => |n, i| signed_or_float(n, i, Tensor::neg, |x| x.wrapping_neg()),
        "Sign" => |n, i| signed_or_float(n, i, Tensor::sign, |x| x.signum()),
        "Relu" => |n, i| signed_or_float(n, i, Tensor::relu, |x| x.max(0)),
        "Exp" => |n, i| float(n, i, Tensor::exp),
        "Log" => |n, i| float(n, i, Tensor::log),
        "Sqrt" => |n, i| float(n, i, Tensor::sqrt),
        "Sin" => |n, i| float(n, i, Tensor::sin),
        "Cos" => |n, i| float(n, i, Tensor::cos),
        "Tan" => |n, i| float(n, i, Tensor::tan),
        "Sinh" => |n, i| float(n, i, |x| x.exp()?.sub(&x.neg()?.exp()?)?.mul_scalar(0.5)),
        "Cosh" => |n, i| float(n, i, |x| x.exp()?.add(&x.neg()?.exp()?)?.mul_scalar(0.5)),
        "Tanh" => |n, i| float(n, i, Tensor::tanh),
        "Sigmoid" => |n, i| float(n, i, Tensor::sigmoid),
        "Softplus" => |n, i| float(n, i, softplus),
        "Softsign" => |n, i| float(n, i, Tensor::softsign),
        "Floor" => |n, i| float(n, i, Tensor::floor),
        "Ceil" => |n, i| float(n, i, Tensor::ceil),
        "Round" => |n, i| float(n, i, Tensor::round),
        "Reciprocal" => |n, i| float(n, i, |x| x.powf(-1.0)),
        "IsNaN" => |n, i| one(req(n, i, 0)?.tensor.ne(&req(n, i, 0)?.tensor)?),
        "IsInf" => is_inf,
        "Elu" => elu,
        "Selu" => selu,
        "Celu" => celu,
        "LeakyRelu" => leaky_relu,
        "ThresholdedRelu" => thresholded_relu,
        "HardSigmoid" => hard_sigmoid,
        "HardSwish" => |n, i| float(n, i, Tensor::hardswish),
        "Mish" => |n, i| float(n, i, Tensor::mish),
        "Gelu" => gelu,
        "Swish" => swish,
        "Shrink" => shrink,
        "Clip" => clip,
        "PRelu" => prelu,
        "Erf" => |n, i| float(n, i, Tensor::erf),
        "Asin" => |n, i| host_float(n, i, f64::asin),
        "Acos" => |n, i| host_float(n, i, f64::acos),
        "Atan" => |n, i| host_float(n, i, f64::atan),
        "Asinh" => |n, i| host_float(n, i, f64::asinh),
        "Acosh" => |n, i| host_float(n, i, f64::acosh),
        "Atanh" => |n, i| host_float(n, i, f64::atanh),
        _ => return None,
    })
}

fn binary_ins<'v>(n: &Node, ins: &'v [Option<Value>]) -> Result<(&'v Value, &'v Value)> {
    Ok((req(n, ins, 0)?, req(n, ins, 1)?))
}

fn arith(
    n: &Node,
    ins: &[Option<Value>],
    f: fn(&Tensor, &Tensor) -> Result<Tensor>,
) -> Result<Vec<Value>> {
    let (a, b) = binary_ins(n, ins)?;
    let out = Value::typed(f(&a.tensor, &b.tensor)?, a.elem);
    // integer results wrap in their own width (int32 + int32 stays int32)
    Ok(vec![Value::typed(out.narrowed()?, a.elem)])
}

fn variadic(
    n: &Node,
    ins: &[Option<Value>],
    f: fn(&Tensor, &Tensor) -> Result<Tensor>,
    mean: bool,
) -> Result<Vec<Value>> {
    let first = req(n, ins, 0)?;
    let mut acc = first.tensor.clone();
    let mut count = 1;
    for v in ins.iter().skip(1).flatten() {
        acc = f(&acc, &v.tensor)?;
        count += 1;
    }
    if mean {
        acc = acc.div_scalar(count as f64)?;
    }
    same(acc, first)
}

fn cmp(
    n: &Node,
    ins: &[Option<Value>],
    f: fn(&Tensor, &Tensor) -> Result<Tensor>,
) -> Result<Vec<Value>> {
    let (a, b) = binary_ins(n, ins)?;
    one(f(&a.tensor, &b.tensor)?)
}

fn logic(n: &Node, ins: &[Option<Value>], f: impl Fn(bool, bool) -> bool) -> Result<Vec<Value>> {
    let (a, b) = binary_ins(n, ins)?;
    let shape = crate::broadcast_shapes(n.op(), a.tensor.shape(), b.tensor.shape())?;
    let x = a.tensor.broadcast_to(&shape)?.to_vec::<bool>()?;
    let y = b.tensor.broadcast_to(&shape)?.to_vec::<bool>()?;
    let v: Vec<bool> = x.iter().zip(&y).map(|(&p, &q)| f(p, q)).collect();
    one(Tensor::from_vec(v, shape)?.to_device(a.tensor.device())?)
}

fn where_(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let c = req(n, ins, 0)?;
    let (a, b) = (req(n, ins, 1)?, req(n, ins, 2)?);
    same(Tensor::where_(&c.tensor, &a.tensor, &b.tensor)?, a)
}

/// Integer ops computed exactly on the host, then narrowed to the ONNX type.
fn int_map2(n: &Node, ins: &[Option<Value>], f: impl Fn(i64, i64) -> i64) -> Result<Vec<Value>> {
    let (a, b) = binary_ins(n, ins)?;
    let shape = crate::broadcast_shapes(n.op(), a.tensor.shape(), b.tensor.shape())?;
    let x = ints(&Value::typed(a.tensor.broadcast_to(&shape)?, a.elem))?;
    let y = ints(&Value::typed(b.tensor.broadcast_to(&shape)?, b.elem))?;
    let v: Vec<i64> = x.iter().zip(&y).map(|(&p, &q)| f(p, q)).collect();
    let t = Tensor::from_vec(v, shape)?.to_dtype(a.tensor.dtype())?;
    let out = Value::typed(t, a.elem);
    Ok(vec![Value::typed(out.narrowed()?, a.elem)])
}

fn unsigned_bits(e: i32) -> u32 {
    match e {
        elem::UINT8 => 8,
        elem::UINT16 => 16,
        elem::UINT32 => 32,
        _ => 64,
    }
}

fn bitshift(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let left = n.s("direction", "") == "LEFT";
    let e = req(n, ins, 0)?.elem;
    let signed = matches!(e, elem::INT8 | elem::INT16 | elem::INT32 | elem::INT64);
    let bits = match e {
        elem::INT8 => 8,
        elem::INT16 => 16,
        elem::INT32 => 32,
        _ => unsigned_bits(e),
    };
    let mask = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    int_map2(n, ins, move |x, s| {
        let out_of_range = s < 0 || s >= bits as i64;
        if signed && !left {
            // arithmetic: the sign fills in
            return if out_of_range {
                if x < 0 {
                    -1
                } else {
                    0
                }
            } else {
                x >> s
            };
        }
        if out_of_range {
            return 0;
        }
        let x = x as u64 & mask;
        let r = if left { x << s } else { x >> s };
        (r & mask) as i64
    })
}

fn bitwise(n: &Node, ins: &[Option<Value>], f: fn(i64, i64) -> i64) -> Result<Vec<Value>> {
    let a = req(n, ins, 0)?;
    if a.tensor.dtype() == DType::Bool {
        return logic(n, ins, move |p, q| f(p as i64, q as i64) != 0);
    }
    int_map2(n, ins, f)
}

fn bitwise_not(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let a = req(n, ins, 0)?;
    if a.tensor.dtype() == DType::Bool {
        return one(a.tensor.logical_not()?);
    }
    let v: Vec<i64> = ints(a)?.into_iter().map(|x| !x).collect();
    let t = Tensor::from_vec(v, a.dims())?.to_dtype(a.tensor.dtype())?;
    let out = Value::typed(t, a.elem);
    Ok(vec![Value::typed(out.narrowed()?, a.elem)])
}

fn pow(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let (a, b) = binary_ins(n, ins)?;
    if a.tensor.dtype().is_float() {
        // a scalar exponent (GELU's x³, RMS norms' x²) is one unary pass
        if b.tensor.numel() == 1 && b.dims().len() <= a.dims().len() {
            let p = b.tensor.to_f64_vec()[0];
            let y = if p == 2.0 {
                a.tensor.square()?
            } else {
                a.tensor.powf(p)?
            };
            return same(
                y.reshape(crate::broadcast_shapes(
                    "Pow",
                    a.tensor.shape(),
                    b.tensor.shape(),
                )?)?,
                a,
            );
        }
        let e = b.tensor.to_dtype(a.tensor.dtype())?;
        return same(a.tensor.pow(&e)?, a);
    }
    let shape = crate::broadcast_shapes("Pow", a.tensor.shape(), b.tensor.shape())?;
    let x = a.tensor.broadcast_to(&shape)?.to_f64_vec();
    let y = b.tensor.broadcast_to(&shape)?.to_f64_vec();
    let v: Vec<i64> = x.iter().zip(&y).map(|(p, q)| p.powf(*q) as i64).collect();
    let t = Tensor::from_vec(v, shape)?.to_dtype(a.tensor.dtype())?;
    Ok(vec![Value::typed(
        Value::typed(t, a.elem).narrowed()?,
        a.elem,
    )])
}

fn modulo(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let (a, b) = binary_ins(n, ins)?;
    let fmod = n.i("fmod", 0) != 0;
    if a.tensor.dtype().is_float() {
        let shape = crate::broadcast_shapes("Mod", a.tensor.shape(), b.tensor.shape())?;
        let x = a.tensor.broadcast_to(&shape)?.to_f64_vec();
        let y = b.tensor.broadcast_to(&shape)?.to_f64_vec();
        let v: Vec<f64> = x
            .iter()
            .zip(&y)
            .map(|(&p, &q)| {
                let r = p % q;
                if !fmod && r != 0.0 && (r < 0.0) != (q < 0.0) {
                    r + q
                } else {
                    r
                }
            })
            .collect();
        let t = Tensor::from_vec(v, shape)?.to_dtype(a.tensor.dtype())?;
        return same(t, a);
    }
    int_map2(n, ins, move |p, q| {
        if q == 0 {
            return 0;
        }
        let r = p.wrapping_rem(q);
        if !fmod && r != 0 && (r < 0) != (q < 0) {
            r + q
        } else {
            r
        }
    })
}

/// A float op; float16/bfloat16 compute in f32 and round once at the end, as the ONNX
/// reference does.
fn float(
    n: &Node,
    ins: &[Option<Value>],
    f: impl Fn(&Tensor) -> Result<Tensor>,
) -> Result<Vec<Value>> {
    let a = req(n, ins, 0)?;
    let dt = a.tensor.dtype();
    if matches!(dt, DType::F16 | DType::BF16) {
        return same(f(&a.tensor.to_dtype(DType::F32)?)?.to_dtype(dt)?, a);
    }
    same(f(&a.tensor)?, a)
}

fn signed_or_float(
    n: &Node,
    ins: &[Option<Value>],
    f: fn(&Tensor) -> Result<Tensor>,
    g: fn(i64) -> i64,
) -> Result<Vec<Value>> {
    let a = req(n, ins, 0)?;
    if a.tensor.dtype().is_float() {
        return same(f(&a.tensor)?, a);
    }
    let v: Vec<i64> = ints(a)?.into_iter().map(g).collect();
    let t = Tensor::from_vec(v, a.dims())?.to_dtype(a.tensor.dtype())?;
    Ok(vec![Value::typed(
        Value::typed(t, a.elem).narrowed()?,
        a.elem,
    )])
}

/// A float function without a tensor op, computed on the host in f64 (inference only).
fn host_float(n: &Node, ins: &[Option<Value>], f: fn(f64) -> f64) -> Result<Vec<Value>> {
    let a = req(n, ins, 0)?;
    let v: Vec<f64> = a.tensor.to_f64_vec().into_iter().map(f).collect();
    let t = Tensor::from_vec(v, a.dims())?
        .to_dtype(a.tensor.dtype())?
        .to_device(a.tensor.device())?;
    same(t, a)
}

fn softplus(x: &Tensor) -> Result<Tensor> {
    // ONNX's softplus has no threshold: ln(1 + e^x) = max(x, 0) + ln(1 + e^-|x|)
    x.relu()?.add(&x.abs()?.neg()?.exp()?.log1p()?)
}

fn elu(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let alpha = n.f("alpha", 1.0) as f64;
    float(n, ins, |x| x.elu(alpha))
}

/// `gamma · elu(x, alpha)`: PyTorch's `selu` when the attributes are its constants (ONNX's
/// defaults, in f32), any other SELU-shaped function otherwise.
fn selu(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let alpha = n.f("alpha", 1.673_263_2) as f64;
    let gamma = n.f("gamma", 1.050_701) as f64;
    float(n, ins, |x| x.elu(alpha)?.mul_scalar(gamma))
}

fn celu(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let alpha = n.f("alpha", 1.0) as f64;
    float(n, ins, |x| x.celu(alpha))
}

fn leaky_relu(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let alpha = n.f("alpha", 0.01) as f64;
    float(n, ins, |x| x.leaky_relu(alpha))
}

fn thresholded_relu(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let alpha = n.f("alpha", 1.0) as f64;
    float(n, ins, |x| {
        let z = Tensor::zeros_on((), x.dtype(), x.device())?;
        Tensor::where_(&x.gt_scalar(alpha)?, x, &z)
    })
}

fn hard_sigmoid(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let alpha = n.f("alpha", 0.2) as f64;
    let beta = n.f("beta", 0.5) as f64;
    float(n, ins, |x| {
        x.affine(alpha, beta)?.clamp(Some(0.0), Some(1.0))
    })
}

fn gelu(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    if n.s("approximate", "none") == "tanh" {
        float(n, ins, Tensor::gelu_tanh)
    } else {
        float(n, ins, Tensor::gelu)
    }
}

fn swish(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let alpha = n.f("alpha", 1.0) as f64;
    float(n, ins, |x| x.mul(&x.mul_scalar(alpha)?.sigmoid()?))
}

fn shrink(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let bias = n.f("bias", 0.0) as f64;
    let lambd = n.f("lambd", 0.5) as f64;
    let a = req(n, ins, 0)?;
    let x = a.tensor.to_dtype(DType::F64)?;
    let z = Tensor::zeros_on((), DType::F64, x.device())?;
    let lo = Tensor::where_(&x.lt_scalar(-lambd)?, &x.add_scalar(bias)?, &z)?;
    let y = Tensor::where_(&x.gt_scalar(lambd)?, &x.sub_scalar(bias)?, &lo)?;
    same(y.to_dtype(a.tensor.dtype())?, a)
}

fn clip(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let a = req(n, ins, 0)?;
    let bound = |i: usize, attr: &str| -> Result<Option<f64>> {
        if n.opset < 11 {
            return Ok(if n.has(attr) {
                Some(n.f(attr, 0.0) as f64)
            } else {
                None
            });
        }
        Ok(match opt(ins, i) {
            Some(v) => Some(
                v.tensor
                    .to_f64_vec()
                    .first()
                    .copied()
                    .ok_or_else(|| n.err("empty bound"))?,
            ),
            None => None,
        })
    };
    let (lo, hi) = (bound(1, "min")?, bound(2, "max")?);
    if a.tensor.dtype().is_float() {
        return same(a.tensor.clamp(lo, None)?.clamp(None, hi)?, a);
    }
    let v: Vec<i64> = ints(a)?
        .into_iter()
        .map(|x| {
            let x = lo.map_or(x, |l| x.max(l as i64));
            hi.map_or(x, |h| x.min(h as i64))
        })
        .collect();
    same(
        Tensor::from_vec(v, a.dims())?.to_dtype(a.tensor.dtype())?,
        a,
    )
}

fn prelu(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let (a, s) = binary_ins(n, ins)?;
    let slope = s.tensor.to_dtype(a.tensor.dtype())?;
    let x = &a.tensor;
    let z = Tensor::zeros_on((), x.dtype(), x.device())?;
    let neg = Tensor::where_(&x.lt(&z)?, &x.mul(&slope)?, x)?;
    same(neg, a)
}

fn is_inf(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let a = req(n, ins, 0)?;
    let (pos, neg) = (
        n.i("detect_positive", 1) != 0,
        n.i("detect_negative", 1) != 0,
    );
    let v: Vec<bool> = a
        .tensor
        .to_f64_vec()
        .into_iter()
        .map(|x| (pos && x == f64::INFINITY) || (neg && x == f64::NEG_INFINITY))
        .collect();
    one(Tensor::from_vec(v, a.dims())?)
}
