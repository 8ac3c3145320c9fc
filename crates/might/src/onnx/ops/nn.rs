//! Neural-network operators: products, convolutions, pooling, normalisations.

use super::{axis, opt, req, same, Node, OpFn};
use crate::onnx::value::Value;
use crate::{DType, Result, Tensor};

pub fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "MatMul" => matmul,
        "Gemm" => gemm,
        "Einsum" => einsum,
        "Conv" => conv,
        "ConvTranspose" => conv_transpose,
        "MaxPool" => |n, i| pool(n, i, true, None),
        "AveragePool" => |n, i| pool(n, i, false, None),
        "LpPool" => |n, i| pool(n, i, false, Some(n.i("p", 2) as f64)),
        "GlobalAveragePool" => |n, i| global_pool(n, i, false),
        "GlobalMaxPool" => |n, i| global_pool(n, i, true),
        "BatchNormalization" => batch_norm,
        "InstanceNormalization" => instance_norm,
        "LayerNormalization" => layer_norm,
        "GroupNormalization" => group_norm,
        "RMSNormalization" => rms_norm,
        "LpNormalization" => lp_norm,
        "MeanVarianceNormalization" => mvn,
        "LRN" => lrn,
        _ => return None,
    })
}

/// Run `f` in f64 when `x` is an integer tensor (the products have no integer kernels), then
/// round back.
fn in_float(x: &Value, f: impl FnOnce(&Tensor) -> Result<Tensor>) -> Result<Tensor> {
    if x.tensor.dtype().is_float() {
        return f(&x.tensor);
    }
    f(&x.tensor.to_dtype(DType::F64)?)?
        .round()?
        .to_dtype(x.tensor.dtype())
}

fn matmul(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let (a, b) = (req(n, ins, 0)?, req(n, ins, 1)?);
    let bt = b.tensor.to_dtype(if a.tensor.dtype().is_float() {
        a.tensor.dtype()
    } else {
        DType::F64
    })?;
    same(in_float(a, |x| x.matmul(&bt))?, a)
}

fn gemm(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let (a, b) = (req(n, ins, 0)?, req(n, ins, 1)?);
    let (alpha, beta) = (n.f("alpha", 1.0) as f64, n.f("beta", 1.0) as f64);
    let ta = if n.i("transA", 0) != 0 {
        a.tensor.t()?
    } else {
        a.tensor.clone()
    };
    let c = opt(ins, 2);
    // the common case, a linear layer: one product with the bias added inside it
    if n.i("transB", 0) != 0 && alpha == 1.0 && beta == 1.0 && a.tensor.dtype().is_float() {
        if let Some(c) = c.filter(|c| c.dims().len() == 1) {
            if let Some(y) = ta.linear_fused(&b.tensor, &c.tensor)? {
                return same(y, a);
            }
        }
    }
    let tb = if n.i("transB", 0) != 0 {
        b.tensor.t()?
    } else {
        b.tensor.clone()
    };
    let mut y = in_float(&Value::typed(ta, a.elem), |x| {
        x.matmul(&tb.to_dtype(x.dtype())?)
    })?;
    if alpha != 1.0 {
        y = y.mul_scalar(alpha)?;
    }
    if let Some(c) = c {
        let c = c.tensor.to_dtype(y.dtype())?;
        y = y.add(&if beta != 1.0 { c.mul_scalar(beta)? } else { c })?;
    }
    same(y, a)
}

/// `einsum` by broadcasting: each operand's axes are laid out in one common letter order,
/// the operands multiplied, and the letters not in the output summed.
fn einsum(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let eq = n.s("equation", "");
    let ops: Vec<&Value> = ins.iter().flatten().collect();
    let first = *ops.first().ok_or_else(|| n.err("no operands"))?;
    // integer operands are contracted in floating point and rounded back
    let dt = ops
        .iter()
        .map(|v| v.tensor.dtype())
        .find(|d| d.is_float())
        .unwrap_or(DType::F64);
    let xs = ops
        .iter()
        .map(|v| v.tensor.to_dtype(dt))
        .collect::<Result<Vec<_>>>()?;
    let y = Tensor::einsum(&eq, &xs.iter().collect::<Vec<_>>())?;
    let y = if first.tensor.dtype().is_float() {
        y
    } else {
        y.round()?.to_dtype(first.tensor.dtype())?
    };
    same(y.contiguous()?, first)
}

/// Begin/end padding of each spatial axis from `pads`/`auto_pad` (for a conv or pool with
/// the given kernel, strides and dilations over spatial sizes `input`).
fn spatial_pads(
    n: &Node,
    input: &[usize],
    kernel: &[usize],
    strides: &[usize],
    dil: &[usize],
) -> Result<Vec<(usize, usize)>> {
    let k = input.len();
    let auto = n.s("auto_pad", "NOTSET");
    match auto.as_str() {
        "SAME_UPPER" | "SAME_LOWER" => Ok((0..k)
            .map(|i| {
                let out = input[i].div_ceil(strides[i]);
                let need = (out.saturating_sub(1)) * strides[i] + (kernel[i] - 1) * dil[i] + 1;
                let total = need.saturating_sub(input[i]);
                let small = total / 2;
                if auto == "SAME_UPPER" {
                    (small, total - small)
                } else {
                    (total - small, small)
                }
            })
            .collect()),
        "VALID" => Ok(vec![(0, 0); k]),
        _ => {
            let p = n.ints("pads").unwrap_or_else(|| vec![0; 2 * k]);
            if p.len() != 2 * k || p.iter().any(|&v| v < 0) {
                return Err(n.err(format!("pads {p:?} for {k} spatial axes")));
            }
            Ok((0..k).map(|i| (p[i] as usize, p[i + k] as usize)).collect())
        }
    }
}

/// Pad (or, with negative amounts, crop) the trailing axes of `x` with `value`.
fn pad_trailing(x: &Tensor, pads: &[(i64, i64)], value: f64) -> Result<Tensor> {
    let r = x.dims().len();
    let mut t = x.clone();
    for (k, &(b, e)) in pads.iter().enumerate() {
        let d = r - pads.len() + k;
        let len = t.dims()[d] as i64;
        let (cb, ce) = ((-b).max(0), (-e).max(0));
        if cb + ce > 0 {
            t = t.narrow(d as isize, cb as usize, (len - cb - ce).max(0) as usize)?;
        }
        let mut parts = Vec::new();
        let block = |m: i64, t: &Tensor| -> Result<Tensor> {
            let mut dims = t.dims().to_vec();
            dims[d] = m as usize;
            Tensor::full_on(dims, value, t.dtype(), t.device())
        };
        if b > 0 {
            parts.push(block(b, &t)?);
        }
        parts.push(t.clone());
        if e > 0 {
            parts.push(block(e, &t)?);
        }
        if parts.len() > 1 {
            t = Tensor::cat(&parts, d as isize)?;
        }
    }
    Ok(t)
}

fn ints_or(n: &Node, name: &str, k: usize, default: usize) -> Result<Vec<usize>> {
    match n.ints(name) {
        Some(v) if v.len() == k && v.iter().all(|&x| x > 0) => {
            Ok(v.iter().map(|&x| x as usize).collect())
        }
        Some(v) => Err(n.err(format!("{name} {v:?} for {k} spatial axes"))),
        None => Ok(vec![default; k]),
    }
}

fn conv(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let (x, w) = (req(n, ins, 0)?, req(n, ins, 1)?);
    let b = opt(ins, 2).map(|b| b.tensor.clone());
    let k = x.dims().len().saturating_sub(2);
    if !(1..=2).contains(&k) || w.dims().len() != k + 2 {
        return Err(n.err(format!(
            "input {:?} with weight {:?}: 1-D and 2-D convolutions are supported",
            x.dims(),
            w.dims()
        )));
    }
    let kernel = w.dims()[2..].to_vec();
    let strides = ints_or(n, "strides", k, 1)?;
    let dil = ints_or(n, "dilations", k, 1)?;
    let pads = spatial_pads(n, &x.dims()[2..], &kernel, &strides, &dil)?;
    let groups = n.i("group", 1).max(1) as usize;
    // 1-D runs as 2-D with a height of one
    let (mut xt, mut wt) = (x.tensor.clone(), w.tensor.clone());
    let (mut s2, mut d2, mut p2) = ([1, strides[0]], [1, dil[0]], vec![(0, 0), pads[0]]);
    if k == 1 {
        xt = xt.unsqueeze(2)?;
        wt = wt.unsqueeze(2)?;
    } else {
        s2 = [strides[0], strides[1]];
        d2 = [dil[0], dil[1]];
        p2 = pads.clone();
    }
    let sym = p2.iter().all(|&(b, e)| b == e);
    let padding = if sym {
        [p2[0].0, p2[1].0]
    } else {
        let p: Vec<(i64, i64)> = p2.iter().map(|&(b, e)| (b as i64, e as i64)).collect();
        xt = pad_trailing(&xt, &p, 0.0)?;
        [0, 0]
    };
    let half = matches!(xt.dtype(), DType::F16 | DType::BF16);
    // a `Conv → Relu` or `Conv → Add [→ Relu]` the graph rewrite fused (see onnx/fuse.rs)
    let relu = n.i(crate::onnx::fuse::FUSED_RELU, 0) != 0;
    let residual = match n.i(crate::onnx::fuse::FUSED_ADD, 0) {
        0 => None,
        _ => Some(req(n, ins, 3)?.tensor.clone()),
    };
    // the output's shape (4-D), which a residual added in the kernel must have; any other
    // residual is broadcast by a separate `Add`, as the graph spelled it
    let out4 = {
        let (xd, wd) = (xt.dims(), wt.dims());
        let len = |i: usize| {
            let span = d2[i] * (wd[2 + i] - 1) + 1;
            (xd[2 + i] + 2 * padding[i]).saturating_sub(span) / s2[i] + 1
        };
        [xd[0], wd[0], len(0), len(1)]
    };
    let r4 = match &residual {
        Some(r) if k == 1 && r.rank() == 3 => Some(r.unsqueeze(2)?),
        r => r.clone(),
    };
    let run = |x: &Tensor, w: &Tensor, b: Option<&Tensor>| match (&residual, &r4) {
        (_, Some(r4)) if r4.dims() == out4 && r4.dtype() == x.dtype() => {
            x.conv2d_add(w, b, r4, s2, padding, d2, groups, relu)
        }
        (Some(r), _) => {
            let y = x.conv2d(w, b, s2, padding, d2, groups)?;
            let y = if k == 1 { y.squeeze(2)? } else { y };
            let y = y.add(&r.to_dtype(y.dtype())?)?;
            let y = if relu { y.relu()? } else { y };
            if k == 1 {
                y.unsqueeze(2)
            } else {
                Ok(y)
            }
        }
        _ if relu => x.conv2d_relu(w, b, s2, padding, d2, groups),
        _ => x.conv2d(w, b, s2, padding, d2, groups),
    };
    let mut y = if half {
        let up = |t: &Tensor| t.to_dtype(DType::F32);
        run(
            &up(&xt)?,
            &up(&wt)?,
            b.as_ref().map(up).transpose()?.as_ref(),
        )?
        .to_dtype(xt.dtype())?
    } else {
        run(&xt, &wt, b.as_ref())?
    };
    if k == 1 {
        y = y.squeeze(2)?;
    }
    same(y, x)
}

fn conv_transpose(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let (x, w) = (req(n, ins, 0)?, req(n, ins, 1)?);
    let b = opt(ins, 2).map(|b| b.tensor.clone());
    let k = x.dims().len().saturating_sub(2);
    if !(1..=2).contains(&k) || w.dims().len() != k + 2 {
        return Err(n.err(format!(
            "input {:?} with weight {:?}: 1-D and 2-D transposed convolutions are supported",
            x.dims(),
            w.dims()
        )));
    }
    let g = n.i("group", 1).max(1) as usize;
    let kernel = w.dims()[2..].to_vec();
    let s = ints_or(n, "strides", k, 1)?;
    let d = ints_or(n, "dilations", k, 1)?;
    let op = n.ints("output_padding").unwrap_or_else(|| vec![0; k]);
    let input = &x.dims()[2..];
    if input.contains(&0) {
        return Err(n.err(format!("empty input {:?}", x.dims())));
    }
    let full: Vec<i64> = (0..k)
        .map(|i| {
            (s[i] * (input[i] - 1)) as i64
                + op.get(i).copied().unwrap_or(0)
                + ((kernel[i] - 1) * d[i] + 1) as i64
        })
        .collect();
    let auto = n.s("auto_pad", "NOTSET");
    let out_shape = n
        .ints("output_shape")
        .map(|o| o[o.len().saturating_sub(k)..].to_vec());
    let pads: Vec<(i64, i64)> = if out_shape.is_some() || auto.starts_with("SAME") {
        let target: Vec<i64> =
            out_shape.unwrap_or_else(|| (0..k).map(|i| (input[i] * s[i]) as i64).collect());
        (0..k)
            .map(|i| {
                let total = full[i] - target[i];
                if total < 0 {
                    // a larger output than the kernel reaches: zeros at the end
                    (0, total)
                } else if auto == "SAME_UPPER" {
                    (total / 2, total - total / 2)
                } else {
                    (total - total / 2, total / 2)
                }
            })
            .collect()
    } else {
        let p = n.ints("pads").unwrap_or_else(|| vec![0; 2 * k]);
        if p.len() != 2 * k {
            return Err(n.err(format!("pads {p:?} for {k} spatial axes")));
        }
        (0..k).map(|i| (p[i], p[i + k])).collect()
    };
    // the full transposed convolution (no padding); then ONNX's pads crop its two ends, and
    // output_padding (or a larger output_shape) extends the end with zeros; the bias comes
    // last, so the extended positions hold it too
    let (mut xt, mut wt) = (x.tensor.clone(), w.tensor.clone());
    let (s2, d2) = if k == 1 {
        xt = xt.unsqueeze(2)?;
        wt = wt.unsqueeze(2)?;
        ([1, s[0]], [1, d[0]])
    } else {
        ([s[0], s[1]], [d[0], d[1]])
    };
    let dtype = xt.dtype();
    let half = matches!(dtype, DType::F16 | DType::BF16);
    if half {
        xt = xt.to_dtype(DType::F32)?;
        wt = wt.to_dtype(DType::F32)?;
    }
    let mut y = xt.conv_transpose2d(&wt, None, s2, [0, 0], [0, 0], g, d2)?;
    let crop: Vec<i64> = (0..k)
        .rev()
        .flat_map(|i| [-pads[i].0, op.get(i).copied().unwrap_or(0) - pads[i].1])
        .collect();
    y = y.pad(&crop, "constant", 0.0)?;
    if let Some(b) = b {
        let c = y.dims()[1];
        y = y.add(&b.to_dtype(y.dtype())?.reshape(vec![1, c, 1, 1])?)?;
    }
    if half {
        y = y.to_dtype(dtype)?;
    }
    if k == 1 {
        y = y.squeeze(2)?;
    }
    same(y, x)
}

/// Max, average or (with `lp = Some(p)`) p-norm pooling.
fn pool(n: &Node, ins: &[Option<Value>], max: bool, lp: Option<f64>) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let k = x.dims().len().saturating_sub(2);
    let kernel = ints_or(n, "kernel_shape", k, 0)?;
    if k == 0 || kernel.contains(&0) {
        return Err(n.err("kernel_shape is required"));
    }
    let strides = ints_or(n, "strides", k, 1)?;
    let dil = ints_or(n, "dilations", k, 1)?;
    let pads = spatial_pads(n, &x.dims()[2..], &kernel, &strides, &dil)?;
    let ceil = n.i("ceil_mode", 0) != 0;
    let include_pad = n.i("count_include_pad", 0) != 0;
    let input = x.dims()[2..].to_vec();
    let mut out = Vec::with_capacity(k);
    for i in 0..k {
        let span = (kernel[i] - 1) * dil[i] + 1;
        let padded = input[i] + pads[i].0 + pads[i].1;
        if padded < span {
            return Err(n.err(format!(
                "kernel {kernel:?} larger than the padded input {input:?}"
            )));
        }
        let num = padded - span;
        let mut o = if ceil {
            num.div_ceil(strides[i])
        } else {
            num / strides[i]
        } + 1;
        // a window may not start in the end padding
        if ceil && (o - 1) * strides[i] >= input[i] + pads[i].0 {
            o -= 1;
        }
        out.push(o);
    }
    let simple = k == 2
        && !ceil
        && dil.iter().all(|&d| d == 1)
        && pads.iter().all(|&(b, e)| b == e)
        && pads.iter().zip(&kernel).all(|(&(p, _), &kk)| p <= kk / 2);
    if simple
        && lp.is_none()
        && n.proto.output.len() < 2
        && (max || include_pad || pads.iter().all(|&(b, _)| b == 0))
        && x.tensor.dtype().is_float()
    {
        let (kk, ss, pp) = (
            [kernel[0], kernel[1]],
            [strides[0], strides[1]],
            [pads[0].0, pads[1].0],
        );
        let y = if max {
            x.tensor.max_pool2d(kk, ss, pp)?
        } else {
            x.tensor.avg_pool2d(kk, ss, pp)?
        };
        return same(y, x);
    }
    // general: the maximum (or sum) of one strided slice per kernel offset
    let reach: Vec<(i64, i64)> = (0..k)
        .map(|i| {
            let need = (out[i] - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1;
            (
                pads[i].0 as i64,
                need as i64 - input[i] as i64 - pads[i].0 as i64,
            )
        })
        .collect();
    let t = if x.tensor.dtype().is_float() {
        x.tensor.clone()
    } else {
        x.tensor.to_dtype(DType::F64)?
    };
    let t = match lp {
        Some(p) => t.abs()?.powf(p)?,
        None => t,
    };
    let fill = if max { f64::NEG_INFINITY } else { 0.0 };
    let xp = pad_trailing(&t, &reach, fill)?;
    let mut offsets = vec![vec![]];
    for &kk in &kernel {
        offsets = offsets
            .into_iter()
            .flat_map(|o: Vec<usize>| {
                (0..kk).map(move |j| {
                    let mut o = o.clone();
                    o.push(j);
                    o
                })
            })
            .collect();
    }
    let window = |src: &Tensor, off: &[usize]| -> Result<Tensor> {
        let mut v = src.clone();
        for i in 0..k {
            let st = off[i] * dil[i];
            v = v.slice(
                (2 + i) as isize,
                st as isize,
                (st + (out[i] - 1) * strides[i] + 1) as isize,
                strides[i],
            )?;
        }
        Ok(v)
    };
    let mut acc: Option<Tensor> = None;
    for off in &offsets {
        let v = window(&xp, off)?;
        acc = Some(match acc {
            None => v,
            Some(a) => {
                if max {
                    a.maximum(&v)?
                } else {
                    a.add(&v)?
                }
            }
        });
    }
    let mut y = acc.ok_or_else(|| n.err("empty kernel"))?;
    if let Some(p) = lp {
        y = y.powf(1.0 / p)?;
    } else if !max {
        // divisor: the window's cells inside the input (and the pads, with count_include_pad)
        let mut ones_shape = vec![1, 1];
        ones_shape.extend_from_slice(&input);
        let ones = Tensor::ones_on(ones_shape, y.dtype(), y.device())?;
        let counted: Vec<(i64, i64)> = if include_pad {
            pads.iter().map(|&(b, e)| (b as i64, e as i64)).collect()
        } else {
            vec![(0, 0); k]
        };
        let c1 = pad_trailing(&ones, &counted, 1.0)?;
        let rest: Vec<(i64, i64)> = (0..k)
            .map(|i| (reach[i].0 - counted[i].0, reach[i].1 - counted[i].1))
            .collect();
        let cp = pad_trailing(&c1, &rest, 0.0)?;
        let mut cnt: Option<Tensor> = None;
        for off in &offsets {
            let v = window(&cp, off)?;
            cnt = Some(match cnt {
                None => v,
                Some(a) => a.add(&v)?,
            });
        }
        y = y.div(&cnt.ok_or_else(|| n.err("empty kernel"))?)?;
    }
    let y = if x.tensor.dtype().is_float() {
        y
    } else {
        y.to_dtype(x.tensor.dtype())?
    };
    let mut outs = vec![Value::typed(y.clone(), x.elem)];
    if max && n.proto.output.len() > 1 {
        outs.push(Value::new(pool_indices(
            n, x, &y, &kernel, &strides, &dil, &pads, &out,
        )?));
    }
    Ok(outs)
}

/// MaxPool's second output: for each output, the flat index (over the whole input, or
/// column-major within each plane with `storage_order = 1`) of the element chosen.
#[allow(clippy::too_many_arguments)]
fn pool_indices(
    n: &Node,
    x: &Value,
    y: &Tensor,
    kernel: &[usize],
    strides: &[usize],
    dil: &[usize],
    pads: &[(usize, usize)],
    out: &[usize],
) -> Result<Tensor> {
    let xv = x.tensor.to_f64_vec();
    let yv = y.to_f64_vec();
    let d = x.dims();
    let k = kernel.len();
    let planes = d[0] * d[1];
    let input = &d[2..];
    let plane: usize = input.iter().product();
    let oplane: usize = out.iter().product();
    let col_major = n.i("storage_order", 0) != 0;
    let mut idx = vec![0i64; yv.len()];
    for p in 0..planes {
        for o in 0..oplane {
            let mut oc = vec![0; k];
            let mut r = o;
            for i in (0..k).rev() {
                oc[i] = r % out[i];
                r /= out[i];
            }
            let target = yv[p * oplane + o];
            let total: usize = kernel.iter().product();
            'win: for w in 0..total {
                let mut r = w;
                let mut pos = 0usize;
                let mut cm = 0usize;
                let mut cm_stride = 1usize;
                let mut coords = vec![0; k];
                for i in (0..k).rev() {
                    coords[i] = r % kernel[i];
                    r /= kernel[i];
                }
                for i in 0..k {
                    let c = (oc[i] * strides[i] + coords[i] * dil[i]) as i64 - pads[i].0 as i64;
                    if c < 0 || c >= input[i] as i64 {
                        continue 'win;
                    }
                    pos = pos * input[i] + c as usize;
                }
                for i in 0..k {
                    let c = (oc[i] * strides[i] + coords[i] * dil[i]) - pads[i].0;
                    cm += c * cm_stride;
                    cm_stride *= input[i];
                }
                if xv[p * plane + pos] == target {
                    idx[p * oplane + o] = (p * plane + if col_major { cm } else { pos }) as i64;
                    break;
                }
            }
        }
    }
    Tensor::from_vec(idx, y.dims())?.to_device(y.device())
}

fn global_pool(n: &Node, ins: &[Option<Value>], max: bool) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let r = x.dims().len();
    let mut t = x.tensor.clone();
    if max {
        for d in (2..r).rev() {
            t = t.max(d as isize, true)?.0;
        }
    } else {
        let dims: Vec<isize> = (2..r as isize).collect();
        t = t.mean_dims(&dims, true)?;
    }
    same(t, x)
}

/// A per-channel vector (`[C]`) shaped to broadcast against `[N, C, ...]` of rank `r`.
fn per_channel(t: &Tensor, r: usize, dt: DType) -> Result<Tensor> {
    let mut sh = vec![1; r];
    sh[1] = t.numel();
    t.to_dtype(dt)?.reshape(sh)
}

fn batch_norm(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let (scale, bias, mean, var) = (
        req(n, ins, 1)?,
        req(n, ins, 2)?,
        req(n, ins, 3)?,
        req(n, ins, 4)?,
    );
    let eps = n.f("epsilon", 1e-5) as f64;
    let (r, dt) = (x.dims().len().max(2), x.tensor.dtype());
    let training = n.i("training_mode", 0) != 0;
    let (m, v) = if training {
        // statistics of this batch (biased variance), per channel
        let dims: Vec<isize> = (0..r as isize).filter(|&d| d != 1).collect();
        let bm = x.tensor.mean_dims(&dims, true)?;
        let bv = x.tensor.sub(&bm)?.square()?.mean_dims(&dims, true)?;
        (bm, bv)
    } else {
        (
            per_channel(&mean.tensor, r, dt)?,
            per_channel(&var.tensor, r, dt)?,
        )
    };
    let inv = v
        .add_scalar(eps)?
        .rsqrt()?
        .mul(&per_channel(&scale.tensor, r, dt)?)?;
    let shift = per_channel(&bias.tensor, r, dt)?.sub(&m.mul(&inv)?)?;
    let mut outs = vec![Value::typed(x.tensor.mul(&inv)?.add(&shift)?, x.elem)];
    if training && n.proto.output.len() > 1 {
        let mom = n.f("momentum", 0.9) as f64;
        let c = mean.dims().to_vec();
        let rm = mean.tensor.mul_scalar(mom)?.add(
            &m.reshape(c.clone())?
                .to_dtype(mean.tensor.dtype())?
                .mul_scalar(1.0 - mom)?,
        )?;
        let rv = var.tensor.mul_scalar(mom)?.add(
            &v.reshape(c)?
                .to_dtype(var.tensor.dtype())?
                .mul_scalar(1.0 - mom)?,
        )?;
        outs.push(Value::typed(rm, mean.elem));
        outs.push(Value::typed(rv, var.elem));
    }
    Ok(outs)
}

/// `(x - mean) / sqrt(var + eps)` over `dims` (biased variance).
fn instance_norm(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let (x, s, b) = (req(n, ins, 0)?, req(n, ins, 1)?, req(n, ins, 2)?);
    let eps = n.f("epsilon", 1e-5) as f64;
    let dt = x.tensor.dtype();
    let (s, b) = (s.tensor.to_dtype(dt)?, b.tensor.to_dtype(dt)?);
    same(x.tensor.instance_norm(Some(&s), Some(&b), eps)?, x)
}

fn layer_norm(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let scale = req(n, ins, 1)?;
    let bias = opt(ins, 2);
    let r = x.dims().len();
    let a = axis(n, n.i("axis", -1), r)?;
    let eps = n.f("epsilon", 1e-5) as f64;
    let norm = &x.dims()[a..];
    let dt = x.tensor.dtype();
    let want_stats = n.proto.output.len() > 1;
    if !want_stats && scale.dims() == norm && bias.is_none_or(|b| b.dims() == norm) && dt.is_float()
    {
        let s = scale.tensor.to_dtype(dt)?;
        let b = bias.map(|b| b.tensor.to_dtype(dt)).transpose()?;
        return same(
            crate::nn::functional::layer_norm(&x.tensor, norm, Some(&s), b.as_ref(), eps)?,
            x,
        );
    }
    // stash_type 1: statistics in float32 (f64 stays f64)
    let work = if dt == DType::F64 {
        DType::F64
    } else {
        DType::F32
    };
    let xt = x.tensor.to_dtype(work)?;
    let dims: Vec<isize> = (a as isize..r as isize).collect();
    let mean = xt.mean_dims(&dims, true)?;
    let c = xt.sub(&mean)?;
    let inv = c
        .square()?
        .mean_dims(&dims, true)?
        .add_scalar(eps)?
        .rsqrt()?;
    let mut y = c.mul(&inv)?.mul(&scale.tensor.to_dtype(work)?)?;
    if let Some(b) = bias {
        y = y.add(&b.tensor.to_dtype(work)?)?;
    }
    let mut outs = vec![Value::typed(y.to_dtype(dt)?, x.elem)];
    if want_stats {
        outs.push(Value::new(mean));
        outs.push(Value::new(inv));
    }
    Ok(outs)
}

fn group_norm(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let (x, s, b) = (req(n, ins, 0)?, req(n, ins, 1)?, req(n, ins, 2)?);
    let g = n.i("num_groups", 0);
    let d = x.dims();
    if g <= 0 || d.len() < 2 || d[1] % g as usize != 0 {
        return Err(n.err(format!("{g} groups for input {d:?}")));
    }
    let (g, c) = (g as usize, d[1]);
    let eps = n.f("epsilon", 1e-5) as f64;
    let dt = x.tensor.dtype();
    // opset 18 gives one scale per group, opset 21 one per channel
    let per_channel = |t: &Tensor| -> Result<Tensor> {
        let t = t.to_dtype(dt)?;
        if t.numel() == g && g != c {
            t.reshape(vec![g, 1])?
                .broadcast_to(vec![g, c / g])?
                .reshape(vec![c])
        } else {
            t.reshape(vec![t.numel()])
        }
    };
    let (s, b) = (per_channel(&s.tensor)?, per_channel(&b.tensor)?);
    same(x.tensor.group_norm(g, Some(&s), Some(&b), eps)?, x)
}

fn rms_norm(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let (x, s) = (req(n, ins, 0)?, req(n, ins, 1)?);
    let r = x.dims().len();
    let a = axis(n, n.i("axis", -1), r)?;
    let eps = n.f("epsilon", 1e-5) as f64;
    let dt = x.tensor.dtype();
    let work = if dt == DType::F64 {
        DType::F64
    } else {
        DType::F32
    };
    let xt = x.tensor.to_dtype(work)?;
    let dims: Vec<isize> = (a as isize..r as isize).collect();
    let inv = xt
        .square()?
        .mean_dims(&dims, true)?
        .add_scalar(eps)?
        .rsqrt()?;
    let y = xt.mul(&inv)?.mul(&s.tensor.to_dtype(work)?)?;
    same(y.to_dtype(dt)?, x)
}

fn lp_norm(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let a = axis(n, n.i("axis", -1), x.dims().len())? as isize;
    let norm = match n.i("p", 2) {
        1 => x.tensor.abs()?.sum(a, true)?,
        2 => x.tensor.square()?.sum(a, true)?.sqrt()?,
        p => return Err(n.err(format!("p = {p} (1 or 2)"))),
    };
    // a zero vector stays zero
    let zero = norm.eq_scalar(0.0)?;
    let safe = Tensor::where_(
        &zero,
        &Tensor::ones_on((), norm.dtype(), norm.device())?,
        &norm,
    )?;
    same(x.tensor.div(&safe)?, x)
}

fn mvn(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let r = x.dims().len();
    let axes = n.ints("axes").unwrap_or_else(|| vec![0, 2, 3]);
    let dims: Vec<isize> = axes
        .iter()
        .map(|&a| axis(n, a, r).map(|v| v as isize))
        .collect::<Result<_>>()?;
    let mean = x.tensor.mean_dims(&dims, true)?;
    let c = x.tensor.sub(&mean)?;
    let std = c.square()?.mean_dims(&dims, true)?.sqrt()?;
    same(c.div(&std.add_scalar(1e-9)?)?, x)
}

fn lrn(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let (alpha, beta, bias) = (
        n.f("alpha", 1e-4) as f64,
        n.f("beta", 0.75) as f64,
        n.f("bias", 1.0) as f64,
    );
    let size = n.i("size", 0).max(1) as usize;
    let d = x.dims();
    if d.len() < 3 {
        return Err(n.err("input must be [N, C, ...]"));
    }
    let sq = x.tensor.square()?;
    let (lo, hi) = ((size - 1) / 2, size - 1 - (size - 1) / 2);
    // pad the channel axis, then add `size` shifted copies
    let r = d.len();
    let mut pads = vec![(0i64, 0i64); r - 1];
    pads[0] = (lo as i64, hi as i64);
    let p = pad_trailing(&sq, &pads, 0.0)?;
    let mut acc = p.narrow(1, 0, d[1])?;
    for s in 1..size {
        acc = acc.add(&p.narrow(1, s, d[1])?)?;
    }
    let den = acc
        .mul_scalar(alpha / size as f64)?
        .add_scalar(bias)?
        .powf(beta)?;
    same(x.tensor.div(&den)?, x)
}
