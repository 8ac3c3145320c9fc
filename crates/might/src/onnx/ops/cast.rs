//! Element-type conversions: Cast, CastLike and BitCast, including ONNX's low-precision types
//! (float8, float4, e8m0, int4, int2), which are rounded onto their grid here and held in
//! `f32`/`i64` (see `onnx/lowbit.rs`).

use super::{req, Node, OpFn};
use crate::onnx::lowbit;
use crate::onnx::value::{dtype_of, elem, elem_name, ints, Value};
use crate::{DType, Result, Tensor};

pub fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "Cast" => cast,
        "CastLike" => cast_like,
        "BitCast" => bit_cast,
        _ => return None,
    })
}

/// Convert `x` to ONNX element type `to` (the node's `saturate` and `round_mode` attributes
/// govern the float8 types).
fn cast_to(n: &Node, x: &Value, to: i32) -> Result<Value> {
    let dt =
        dtype_of(to).ok_or_else(|| n.err(format!("cast to {} is not supported", elem_name(to))))?;
    let dev = x.tensor.device();
    let saturate = n.i("saturate", 1) != 0;
    if lowbit::is_small_float(to) {
        let v: Vec<f32> = if to == lowbit::FLOAT8E8M0 {
            let mode = n.s("round_mode", "up");
            x.tensor
                .to_f64_vec()
                .into_iter()
                .map(|f| lowbit::round_e8m0(f as f32, saturate, &mode) as f32)
                .collect()
        } else {
            x.tensor
                .to_f64_vec()
                .into_iter()
                .map(|f| lowbit::round_float(to, f, saturate) as f32)
                .collect()
        };
        let t = Tensor::from_vec(v, x.dims())?.to_device(dev)?;
        return Ok(Value::typed(t, to));
    }
    if lowbit::is_small_int(to) && x.tensor.dtype().is_float() {
        let v: Vec<i64> = x
            .tensor
            .to_f64_vec()
            .into_iter()
            .map(|f| lowbit::float_to_small_int(to, f))
            .collect();
        let t = Tensor::from_vec(v, x.dims())?.to_device(dev)?;
        return Ok(Value::typed(t, to));
    }
    let mut t = x.tensor.clone();
    if t.dtype().is_float() && dt == DType::I64 {
        // float -> integer truncates toward zero
        let v: Vec<i64> = t
            .to_f64_vec()
            .into_iter()
            .map(|f| {
                if f.is_nan() {
                    i64::MIN
                } else {
                    f.trunc() as i64
                }
            })
            .collect();
        t = Tensor::from_vec(v, t.dims())?.to_device(dev)?;
    } else if t.dtype().is_float() && dt == DType::U8 {
        let v: Vec<u8> = t
            .to_f64_vec()
            .into_iter()
            .map(|f| f.trunc() as i64 as u8)
            .collect();
        t = Tensor::from_vec(v, t.dims())?.to_device(dev)?;
    } else if t.dtype() == DType::I64 && dt == DType::U8 {
        let v: Vec<u8> = ints(x)?.into_iter().map(|f| f as u8).collect();
        t = Tensor::from_vec(v, t.dims())?.to_device(dev)?;
    } else {
        t = t.to_dtype(dt)?;
    }
    let v = Value::typed(t, to);
    Ok(Value::typed(v.narrowed()?, to))
}

fn cast(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    Ok(vec![cast_to(n, x, n.i("to", 0) as i32)?])
}

fn cast_like(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let (x, like) = (req(n, ins, 0)?, req(n, ins, 1)?);
    Ok(vec![cast_to(n, x, like.elem)?])
}

/// Byte width of a whole-byte element type (`None` for sub-byte and unsupported types).
fn width(e: i32) -> Option<usize> {
    Some(match e {
        elem::BOOL | elem::UINT8 | elem::INT8 => 1,
        elem::FLOAT16 | elem::BFLOAT16 | elem::INT16 | elem::UINT16 => 2,
        elem::FLOAT | elem::INT32 | elem::UINT32 => 4,
        elem::DOUBLE | elem::INT64 | elem::UINT64 => 8,
        _ => return None,
    })
}

/// The little-endian bytes of one element of `v` (held as `x`) in ONNX type `e`.
fn to_bytes(e: i32, x: f64, i: i64, out: &mut Vec<u8>) {
    match e {
        elem::FLOAT => out.extend((x as f32).to_le_bytes()),
        elem::DOUBLE => out.extend(x.to_le_bytes()),
        elem::FLOAT16 => out.extend(half::f16::from_f64(x).to_bits().to_le_bytes()),
        elem::BFLOAT16 => out.extend(half::bf16::from_f64(x).to_bits().to_le_bytes()),
        elem::BOOL => out.push(u8::from(x != 0.0)),
        _ => {
            let w = width(e).unwrap_or(8);
            out.extend(&i.to_le_bytes()[..w]);
        }
    }
}

/// The value of little-endian bytes `b` read as ONNX type `e` (float, or integer as i64).
fn from_bytes(e: i32, b: &[u8]) -> (f64, i64) {
    let mut a = [0u8; 8];
    a[..b.len()].copy_from_slice(b);
    let u = u64::from_le_bytes(a);
    match e {
        elem::FLOAT => (f32::from_bits(u as u32) as f64, 0),
        elem::DOUBLE => (f64::from_bits(u), 0),
        elem::FLOAT16 => (half::f16::from_bits(u as u16).to_f64(), 0),
        elem::BFLOAT16 => (half::bf16::from_bits(u as u16).to_f64(), 0),
        elem::BOOL | elem::UINT8 | elem::UINT16 | elem::UINT32 | elem::UINT64 => {
            (u as f64, u as i64)
        }
        elem::INT8 => (0.0, u as u8 as i8 as i64),
        elem::INT16 => (0.0, u as u16 as i16 as i64),
        elem::INT32 => (0.0, u as u32 as i32 as i64),
        _ => (0.0, u as i64),
    }
}

/// Reinterpret the bytes of each element as another type of the same width.
fn bit_cast(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let to = n.i("to", 0) as i32;
    let (wf, wt) = (width(x.elem), width(to));
    let (Some(wf), Some(wt)) = (wf, wt) else {
        return Err(n.err(format!(
            "bit cast from {} to {} is not supported",
            elem_name(x.elem),
            elem_name(to)
        )));
    };
    if wf != wt {
        return Err(n.err(format!(
            "{} and {} differ in size",
            elem_name(x.elem),
            elem_name(to)
        )));
    }
    let dt = dtype_of(to).ok_or_else(|| n.err("unsupported target type"))?;
    let fv = x.tensor.to_f64_vec();
    let iv = if x.tensor.dtype().is_float() {
        vec![0; fv.len()]
    } else {
        ints(x)?
    };
    let mut bytes = Vec::with_capacity(fv.len() * wf);
    for (&f, &i) in fv.iter().zip(&iv) {
        to_bytes(x.elem, f, i, &mut bytes);
    }
    let vals: Vec<(f64, i64)> = bytes.chunks_exact(wt).map(|c| from_bytes(to, c)).collect();
    let t = match dt {
        DType::I64 => Tensor::from_vec(vals.iter().map(|v| v.1).collect::<Vec<_>>(), x.dims())?,
        DType::U8 => {
            Tensor::from_vec(vals.iter().map(|v| v.1 as u8).collect::<Vec<_>>(), x.dims())?
        }
        DType::Bool => {
            Tensor::from_vec(vals.iter().map(|v| v.1 != 0).collect::<Vec<_>>(), x.dims())?
        }
        _ => Tensor::from_vec(vals.iter().map(|v| v.0).collect::<Vec<_>>(), x.dims())?
            .to_dtype(dt)?,
    };
    Ok(vec![Value::typed(t.to_device(x.tensor.device())?, to)])
}
