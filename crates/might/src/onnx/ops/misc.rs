//! Smaller operators computed on the host: window functions, crops and pads to a size,
//! sequence reversal, integer (de)quantization, determinants.

use super::{axis, opt, req, same, Node, OpFn};
use crate::onnx::lowbit;
use crate::onnx::value::{dtype_of, elem, ints, Value};
use crate::{DType, Result, Shape, Tensor};

pub fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "HannWindow" => |n, i| window(n, i, 0),
        "HammingWindow" => |n, i| window(n, i, 1),
        "BlackmanWindow" => |n, i| window(n, i, 2),
        "CenterCropPad" => center_crop_pad,
        "ReverseSequence" => reverse_sequence,
        "QuantizeLinear" => quantize,
        // optionals holding tensors: a present input is the tensor itself
        "OptionalHasElement" => |_, i| {
            let has = opt(i, 0).is_some();
            let dev = opt(i, 0).map_or(crate::Device::Cpu, |v| v.tensor.device());
            Ok(vec![Value::new(Tensor::scalar(has).to_device(dev)?)])
        },
        "OptionalGetElement" => |n, i| Ok(vec![req(n, i, 0)?.clone()]),
        "DequantizeLinear" => dequantize,
        "DynamicQuantizeLinear" => dynamic_quantize,
        "Det" => det,
        _ => return None,
    })
}

fn window(n: &Node, ins: &[Option<Value>], kind: u8) -> Result<Vec<Value>> {
    let size = ints(req(n, ins, 0)?)?.first().copied().unwrap_or(0).max(0) as usize;
    crate::limits::check_alloc(n.op(), &Shape::from(size), DType::F64)?;
    let periodic = n.i("periodic", 1) != 0;
    let e = n.i("output_datatype", elem::FLOAT as i64) as i32;
    let dt = dtype_of(e).ok_or_else(|| n.err("unsupported output_datatype"))?;
    let big_n = if periodic {
        size as f64
    } else {
        size as f64 - 1.0
    };
    let pi = std::f64::consts::PI;
    let v: Vec<f64> = (0..size)
        .map(|i| {
            let x = i as f64;
            match kind {
                0 => (x * pi / big_n).sin().powi(2),
                1 => {
                    let a = 25.0 / 46.0;
                    a - (x * pi * 2.0 / big_n).cos() * (1.0 - a)
                }
                _ => {
                    0.42 - 0.5 * (x * pi * 2.0 / big_n).cos() + 0.08 * (x * pi * 4.0 / big_n).cos()
                }
            }
        })
        .collect();
    Ok(vec![Value::typed(
        Tensor::from_vec(v, [size])?.to_dtype(dt)?,
        e,
    )])
}

fn center_crop_pad(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let (x, sh) = (req(n, ins, 0)?, req(n, ins, 1)?);
    let shape = ints(sh)?;
    let r = x.dims().len();
    let axes: Vec<usize> = match n.ints("axes") {
        Some(a) => a.iter().map(|&a| axis(n, a, r)).collect::<Result<_>>()?,
        None => (0..r).collect(),
    };
    if shape.len() != axes.len() {
        return Err(n.err(format!("shape {shape:?} for {} axes", axes.len())));
    }
    let mut t = x.tensor.clone();
    for (&a, &want) in axes.iter().zip(&shape) {
        let (dim, want) = (t.dims()[a], want.max(0) as usize);
        if want < dim {
            t = t.narrow(a as isize, (dim - want) / 2, want)?;
        } else if want > dim {
            let before = (want - dim) / 2;
            let mut d = t.dims().to_vec();
            d[a] = before;
            let lo = Tensor::zeros_on(d.clone(), t.dtype(), t.device())?;
            d[a] = want - dim - before;
            let hi = Tensor::zeros_on(d, t.dtype(), t.device())?;
            t = Tensor::cat(&[lo, t, hi], a as isize)?;
        }
    }
    same(t, x)
}

fn reverse_sequence(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let (x, lens) = (req(n, ins, 0)?, req(n, ins, 1)?);
    let r = x.dims().len();
    let (ba, ta) = (
        axis(n, n.i("batch_axis", 1), r)?,
        axis(n, n.i("time_axis", 0), r)?,
    );
    let lens = ints(lens)?;
    let (nb, nt) = (x.dims()[ba], x.dims()[ta]);
    if lens.len() != nb {
        return Err(n.err(format!("{} lengths for a batch of {nb}", lens.len())));
    }
    // gather along the time axis with per-batch reversed indices
    let mut idx_dims = vec![1; r];
    idx_dims[ba] = nb;
    idx_dims[ta] = nt;
    let mut idx = vec![0i64; nb * nt];
    for (b, &l) in lens.iter().enumerate() {
        let l = l.clamp(0, nt as i64);
        for t in 0..nt as i64 {
            let src = if t < l { l - 1 - t } else { t };
            let pos = if ba < ta {
                b * nt + t as usize
            } else {
                t as usize * nb + b
            };
            idx[pos] = src;
        }
    }
    let idx = Tensor::from_vec(idx, idx_dims)?
        .to_device(x.tensor.device())?
        .broadcast_to(x.dims())?
        .contiguous()?;
    same(x.tensor.gather(ta as isize, &idx)?, x)
}

/// Per-element positions into a scale/zero-point tensor: one value, one per index along
/// `axis`, or (with `block`) one per block of `block` indices along `axis`.
fn param_index(n: &Node, x: &[usize], p: &[usize], a: usize, block: usize) -> Result<Vec<usize>> {
    let numel: usize = x.iter().product();
    let pn: usize = p.iter().product();
    if pn == 1 {
        return Ok(vec![0; numel]);
    }
    let xs = Shape::from(x).contiguous_strides();
    let mut out = Vec::with_capacity(numel);
    if block == 0 {
        if p.len() != 1 || p[0] != x[a] {
            return Err(n.err(format!("scale {p:?} for axis {a} of {x:?}")));
        }
        for i in 0..numel {
            out.push((i / xs[a]) % x[a]);
        }
        return Ok(out);
    }
    if p.len() != x.len() || p[a] != x[a].div_ceil(block) {
        return Err(n.err(format!(
            "blocked scale {p:?} for {x:?}, axis {a}, block {block}"
        )));
    }
    let ps = Shape::from(p).contiguous_strides();
    for i in 0..numel {
        let mut k = 0;
        for d in 0..x.len() {
            let c = (i / xs[d]) % x[d];
            k += if d == a { c / block } else { c } * ps[d];
        }
        out.push(k);
    }
    Ok(out)
}

fn int_range(e: i32) -> Option<(f64, f64)> {
    Some(match e {
        elem::UINT8 => (0.0, 255.0),
        elem::INT8 => (-128.0, 127.0),
        elem::UINT16 => (0.0, 65535.0),
        elem::INT16 => (-32768.0, 32767.0),
        elem::INT32 => (i32::MIN as f64, i32::MAX as f64),
        e => lowbit::int_range(e).map(|(a, b)| (a as f64, b as f64))?,
    })
}

fn quantize(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let (x, s) = (req(n, ins, 0)?, req(n, ins, 1)?);
    let zp = opt(ins, 2);
    let e = zp
        .map(|z| z.elem)
        .unwrap_or_else(|| n.i("output_dtype", elem::UINT8 as i64) as i32);
    let e = if e == 0 { elem::UINT8 } else { e };
    // float8/float4 targets: scale, then round onto the type's grid
    let small_float = lowbit::is_small_float(e) && e != lowbit::FLOAT8E8M0;
    let (lo, hi) = if small_float {
        (f64::NEG_INFINITY, f64::INFINITY)
    } else {
        int_range(e).ok_or_else(|| {
            n.err(format!(
                "quantizing to {} is not supported",
                crate::onnx::value::elem_name(e)
            ))
        })?
    };
    let saturate = n.i("saturate", 1) != 0;
    let r = x.dims().len();
    // the axis only matters for per-axis and blocked scales
    let a = if s.tensor.numel() == 1 {
        0
    } else {
        axis(n, n.i("axis", 1), r)?
    };
    let block = n.i("block_size", 0).max(0) as usize;
    let si = param_index(n, x.dims(), s.dims(), a, block)?;
    let sv = s.tensor.to_f64_vec();
    let zv = zp.map(|z| z.tensor.to_f64_vec());
    let xv = x.tensor.to_f64_vec();
    // the reference divides in the input's precision
    let f32_math = x.tensor.dtype() != DType::F64;
    let out: Vec<f64> = xv
        .iter()
        .zip(&si)
        .map(|(&v, &k)| {
            let q = if f32_math {
                (v as f32 / sv[k] as f32) as f64
            } else {
                v / sv[k]
            };
            let z = zv.as_ref().map_or(0.0, |z| z[k]);
            if small_float {
                lowbit::round_float(e, q + z, saturate)
            } else {
                (q.round_ties_even() + z).clamp(lo, hi)
            }
        })
        .collect();
    let dt = dtype_of(e).ok_or_else(|| n.err("unsupported type"))?;
    let t = Tensor::from_vec(out, x.dims())?
        .to_dtype(dt)?
        .to_device(x.tensor.device())?;
    Ok(vec![Value::typed(t, e)])
}

fn dequantize(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let (x, s) = (req(n, ins, 0)?, req(n, ins, 1)?);
    let zp = opt(ins, 2);
    let r = x.dims().len();
    // the axis only matters for per-axis and blocked scales
    let a = if s.tensor.numel() == 1 {
        0
    } else {
        axis(n, n.i("axis", 1), r)?
    };
    let block = n.i("block_size", 0).max(0) as usize;
    let si = param_index(n, x.dims(), s.dims(), a, block)?;
    let sv = s.tensor.to_f64_vec();
    let zv = zp.map(|z| z.tensor.to_f64_vec());
    let out: Vec<f32> = x
        .tensor
        .to_f64_vec()
        .iter()
        .zip(&si)
        .map(|(&v, &k)| ((v - zv.as_ref().map_or(0.0, |z| z[k])) as f32) * sv[k] as f32)
        .collect();
    let e = if n.has("output_dtype") && n.i("output_dtype", 0) != 0 {
        n.i("output_dtype", 0) as i32
    } else {
        s.elem
    };
    let dt = dtype_of(e).ok_or_else(|| n.err("unsupported output type"))?;
    let t = Tensor::from_vec(out, x.dims())?
        .to_dtype(dt)?
        .to_device(x.tensor.device())?;
    Ok(vec![Value::typed(t, e)])
}

fn dynamic_quantize(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let xv: Vec<f32> = x.tensor.to_f64_vec().iter().map(|&v| v as f32).collect();
    let (mn, mx) = xv
        .iter()
        .fold((0f32, 0f32), |(a, b), &v| (a.min(v), b.max(v)));
    let scale = (mx - mn) / 255.0;
    let zp = if scale == 0.0 {
        0.0
    } else {
        (-mn / scale).round_ties_even().clamp(0.0, 255.0)
    };
    let q: Vec<u8> = xv
        .iter()
        .map(|&v| {
            let q = if scale == 0.0 {
                0.0
            } else {
                (v / scale).round_ties_even()
            };
            (q + zp).clamp(0.0, 255.0) as u8
        })
        .collect();
    let dev = x.tensor.device();
    Ok(vec![
        Value::new(Tensor::from_vec(q, x.dims())?.to_device(dev)?),
        Value::new(Tensor::scalar(scale).to_device(dev)?),
        Value::new(Tensor::scalar(zp as u8).to_device(dev)?),
    ])
}

/// Determinant of each `[n, n]` matrix in `[.., n, n]`, by LU with partial pivoting (f64).
fn det(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let d = x.dims();
    let r = d.len();
    if r < 2 || d[r - 1] != d[r - 2] {
        return Err(n.err(format!("input {d:?}: expected [.., n, n]")));
    }
    let m = d[r - 1];
    let v = x.tensor.to_f64_vec();
    let out: Vec<f64> = v
        .chunks(m * m)
        .map(|a| {
            let mut a = a.to_vec();
            let mut det = 1.0;
            for c in 0..m {
                let p = (c..m)
                    .max_by(|&i, &j| a[i * m + c].abs().total_cmp(&a[j * m + c].abs()))
                    .unwrap_or(c);
                if a[p * m + c] == 0.0 {
                    return 0.0;
                }
                if p != c {
                    for k in 0..m {
                        a.swap(p * m + k, c * m + k);
                    }
                    det = -det;
                }
                det *= a[c * m + c];
                for i in c + 1..m {
                    let f = a[i * m + c] / a[c * m + c];
                    for k in c..m {
                        a[i * m + k] -= f * a[c * m + k];
                    }
                }
            }
            det
        })
        .collect();
    let t = Tensor::from_vec(out, &d[..r - 2])?
        .to_dtype(x.tensor.dtype())?
        .to_device(x.tensor.device())?;
    same(t, x)
}
