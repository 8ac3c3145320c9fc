//! Integer and quantized-linear arithmetic: MatMulInteger, ConvInteger, QLinearMatMul and
//! QLinearConv. The integer products are computed exactly in `f64` (through might's matmul
//! and the ONNX Conv operator), then requantized: scaled, rounded half to even, saturated.

use super::{opt, req, Node, OpFn};
use crate::onnx::value::{elem, elem_name, Value};
use crate::{DType, Result, Tensor};

pub fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "MatMulInteger" => matmul_integer,
        "ConvInteger" => conv_integer,
        "QLinearMatMul" => qlinear_matmul,
        "QLinearConv" => qlinear_conv,
        _ => return None,
    })
}

/// `x - zp` in f64 (`zp` broadcast; a per-channel 1-D `zp` of a weight goes on axis 0 when
/// `channel_first`).
fn centered(x: &Value, zp: Option<&Value>, channel_first: bool) -> Result<Tensor> {
    let t = x.tensor.to_dtype(DType::F64)?;
    let Some(z) = zp else { return Ok(t) };
    let mut zt = z.tensor.to_dtype(DType::F64)?;
    let r = x.dims().len();
    if channel_first && zt.dims().len() == 1 && zt.numel() > 1 && r > 1 {
        let mut d = vec![1usize; r];
        d[0] = zt.numel();
        zt = zt.reshape(d)?;
    }
    t.sub(&zt)
}

/// Round half to even and saturate to integer type `e`, as a tensor of that type.
fn requantize(n: &Node, v: &Tensor, e: i32) -> Result<Value> {
    let (lo, hi) = match e {
        elem::UINT8 => (0.0, 255.0),
        elem::INT8 => (-128.0, 127.0),
        elem::UINT16 => (0.0, 65535.0),
        elem::INT16 => (-32768.0, 32767.0),
        elem::INT32 => (i32::MIN as f64, i32::MAX as f64),
        _ => {
            return Err(n.err(format!(
                "quantized output of type {} is not supported",
                elem_name(e)
            )))
        }
    };
    let q: Vec<f64> = v
        .to_f64_vec()
        .into_iter()
        .map(|x| x.round_ties_even().clamp(lo, hi))
        .collect();
    let dt = if e == elem::UINT8 {
        DType::U8
    } else {
        DType::I64
    };
    let t = Tensor::from_vec(q, v.dims())?
        .to_dtype(dt)?
        .to_device(v.device())?;
    Ok(Value::typed(t, e))
}

/// An exact integer result (int32) from f64.
fn int32(v: &Tensor) -> Result<Value> {
    Ok(Value::typed(v.to_dtype(DType::I64)?, elem::INT32))
}

fn matmul_integer(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let (a, b) = (req(n, ins, 0)?, req(n, ins, 1)?);
    let a = centered(a, opt(ins, 2), false)?;
    let b = centered(b, opt(ins, 3), false)?;
    Ok(vec![int32(&a.matmul(&b)?)?])
}

/// The ONNX Conv operator on f64 operands (this node's attributes are Conv's).
fn conv_f64(n: &Node, x: Tensor, w: Tensor, bias: Option<Tensor>) -> Result<Tensor> {
    let conv = super::nn::lookup("Conv").ok_or_else(|| n.err("Conv is unavailable"))?;
    let ins = [
        Some(Value::new(x)),
        Some(Value::new(w)),
        bias.map(Value::new),
    ];
    let out = conv(n, &ins)?;
    out.into_iter()
        .next()
        .map(|v| v.tensor)
        .ok_or_else(|| n.err("Conv gave no output"))
}

fn conv_integer(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let (x, w) = (req(n, ins, 0)?, req(n, ins, 1)?);
    let xc = centered(x, opt(ins, 2), false)?;
    let wc = centered(w, opt(ins, 3), true)?;
    Ok(vec![int32(&conv_f64(n, xc, wc, None)?)?])
}

/// `a_scale * b_scale / y_scale` in the scales' own precision (as the reference does), in f64.
fn factor(s1: &Value, s2: &Value, ys: &Value) -> Result<Tensor> {
    s1.tensor
        .mul(&s2.tensor)?
        .div(&ys.tensor)?
        .to_dtype(DType::F64)
}

fn qlinear_matmul(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let a = req(n, ins, 0)?;
    let (asc, b, bsc, ys) = (
        req(n, ins, 1)?,
        req(n, ins, 3)?,
        req(n, ins, 4)?,
        req(n, ins, 6)?,
    );
    let yzp = opt(ins, 7);
    let ac = centered(a, opt(ins, 2), false)?;
    let bc = centered(b, opt(ins, 5), false)?;
    let mut d = ac.matmul(&bc)?.mul(&factor(asc, bsc, ys)?)?;
    if let Some(z) = yzp {
        d = d.add(&z.tensor.to_dtype(DType::F64)?)?;
    }
    let e = yzp.map_or(a.elem, |z| z.elem);
    Ok(vec![requantize(n, &d, e)?])
}

fn qlinear_conv(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let (xs, w, ws, ys) = (
        req(n, ins, 1)?,
        req(n, ins, 3)?,
        req(n, ins, 4)?,
        req(n, ins, 6)?,
    );
    let yzp = opt(ins, 7);
    let xc = centered(x, opt(ins, 2), false)?;
    let wc = centered(w, opt(ins, 5), true)?;
    let bias = opt(ins, 8)
        .map(|b| b.tensor.to_dtype(DType::F64))
        .transpose()?;
    let res = conv_f64(n, xc, wc, bias)?;
    let r = res.dims().len();
    let mut ws_t = ws.clone();
    if ws.tensor.numel() > 1 {
        let mut d = vec![1usize; r];
        if r < 2 {
            return Err(n.err("per-channel w_scale needs a channel axis"));
        }
        d[1] = ws.tensor.numel();
        ws_t = Value::typed(ws.tensor.reshape(d)?, ws.elem);
    }
    let mut d = res.mul(&factor(xs, &ws_t, ys)?)?;
    if let Some(z) = yzp {
        d = d.add(&z.tensor.to_dtype(DType::F64)?)?;
    }
    let e = yzp.map_or(x.elem, |z| z.elem);
    Ok(vec![requantize(n, &d, e)?])
}
