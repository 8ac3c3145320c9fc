//! Shape, indexing and data-movement operators: reshape and friends, slicing, gathers and
//! scatters, padding, constants, sorting and scans.

use super::{axis, one, opt, req, same, Node, OpFn};
use crate::onnx::value::{dtype_of, elem, ints, Value};
use crate::tensor::Infer;
use crate::{DType, Result, Shape, Tensor};

pub fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "Reshape" => reshape,
        "Flatten" => flatten,
        "Transpose" => transpose,
        "Squeeze" => squeeze,
        "Unsqueeze" => unsqueeze,
        "Concat" => concat,
        "Split" => split,
        "Slice" => slice,
        "Gather" => gather,
        "GatherElements" => gather_elements,
        "GatherND" => gather_nd,
        "ScatterElements" | "Scatter" => scatter_elements,
        "ScatterND" => scatter_nd,
        "Expand" => expand,
        "Tile" => tile,
        "Shape" => shape,
        "Size" => |n, i| {
            host_i64(
                vec![req(n, i, 0)?.tensor.numel() as i64],
                vec![],
                &req(n, i, 0)?.tensor,
            )
        },
        "Constant" => constant,
        "ConstantOfShape" => constant_of_shape,
        "Range" => range,
        "Dropout" => dropout,
        "Pad" => pad,
        "Trilu" => trilu,
        "OneHot" => one_hot,
        "CumSum" => |n, i| scan(n, i, false),
        "CumProd" => |n, i| scan(n, i, true),
        "TopK" => topk,
        "NonZero" => non_zero,
        "Compress" => compress,
        "EyeLike" => eye_like,
        "DepthToSpace" => depth_to_space,
        "SpaceToDepth" => space_to_depth,
        // run by the graph executor, which owns the scopes its branches read
        "If" | "Loop" | "Scan" => |n, _| Err(n.err("control flow runs only inside a graph")),
        _ => return None,
    })
}

/// A host-built i64 tensor on `like`'s device.
fn host_i64(v: Vec<i64>, shape: Vec<usize>, like: &Tensor) -> Result<Vec<Value>> {
    one(Tensor::from_vec(v, shape)?.to_device(like.device())?)
}

/// A host-built tensor of f64 values converted to `like`'s dtype and device, typed as `like`.
fn host_like(v: Vec<f64>, shape: Vec<usize>, like: &Value) -> Result<Value> {
    let t = Tensor::from_vec(v, shape)?
        .to_dtype(like.tensor.dtype())?
        .to_device(like.tensor.device())?;
    Ok(Value::typed(t, like.elem))
}

fn reshape(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let spec = if n.opset < 5 {
        n.ints("shape").unwrap_or_default()
    } else {
        ints(req(n, ins, 1)?)?
    };
    let allow_zero = n.i("allowzero", 0) != 0;
    let mut dims = Vec::with_capacity(spec.len());
    for (i, &d) in spec.iter().enumerate() {
        dims.push(match d {
            0 if !allow_zero => *x
                .dims()
                .get(i)
                .ok_or_else(|| n.err(format!("shape {spec:?}: no input dim {i} to copy")))?
                as isize,
            d if d < -1 => return Err(n.err(format!("invalid shape {spec:?}"))),
            d => d as isize,
        });
    }
    same(x.tensor.reshape(Infer(&dims))?, x)
}

fn flatten(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let r = x.dims().len();
    let a = n.i("axis", 1);
    let a = if a < 0 { a + r as i64 } else { a };
    if a < 0 || a > r as i64 {
        return Err(n.err(format!("axis {a} out of range for rank {r}")));
    }
    let outer: usize = x.dims()[..a as usize].iter().product();
    let inner: usize = x.dims()[a as usize..].iter().product();
    same(x.tensor.reshape([outer, inner])?, x)
}

fn transpose(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let r = x.dims().len();
    let perm: Vec<isize> = match n.ints("perm") {
        Some(p) => p.iter().map(|&d| d as isize).collect(),
        None => (0..r as isize).rev().collect(),
    };
    same(x.tensor.permute(&perm)?, x)
}

/// Axes from input `i` (opset >= `from`) or the `axes` attribute.
fn axes_of(n: &Node, ins: &[Option<Value>], i: usize, from: i64) -> Result<Option<Vec<i64>>> {
    if n.opset >= from {
        opt(ins, i).map(ints).transpose()
    } else {
        Ok(n.ints("axes"))
    }
}

fn squeeze(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let r = x.dims().len();
    let axes: Vec<usize> = match axes_of(n, ins, 1, 13)? {
        Some(a) => a.iter().map(|&a| axis(n, a, r)).collect::<Result<_>>()?,
        None => (0..r).filter(|&d| x.dims()[d] == 1).collect(),
    };
    let mut dims = Vec::new();
    for (d, &s) in x.dims().iter().enumerate() {
        if axes.contains(&d) {
            if s != 1 {
                return Err(n.err(format!("cannot squeeze axis {d} of size {s}")));
            }
        } else {
            dims.push(s);
        }
    }
    same(x.tensor.reshape(dims)?, x)
}

fn unsqueeze(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let axes = axes_of(n, ins, 1, 13)?.ok_or_else(|| n.err("axes are required"))?;
    let out_rank = x.dims().len() + axes.len();
    let mut axes: Vec<usize> = axes
        .iter()
        .map(|&a| axis(n, a, out_rank))
        .collect::<Result<_>>()?;
    axes.sort_unstable();
    let mut src = x.dims().iter();
    let dims: Vec<usize> = (0..out_rank)
        .map(|d| {
            if axes.contains(&d) {
                1
            } else {
                *src.next().unwrap_or(&1)
            }
        })
        .collect();
    same(x.tensor.reshape(dims)?, x)
}

fn concat(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let first = req(n, ins, 0)?;
    let r = first.dims().len();
    let a = axis(n, n.i("axis", 0), r)?;
    let parts: Vec<Tensor> = ins.iter().flatten().map(|v| v.tensor.clone()).collect();
    same(Tensor::cat(&parts, a as isize)?, first)
}

fn split(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let a = axis(n, n.i("axis", 0), x.dims().len())?;
    let len = x.dims()[a];
    let outs = n.proto.output.len();
    let sizes: Vec<usize> = match if n.opset >= 13 {
        opt(ins, 1).map(ints).transpose()?
    } else {
        n.ints("split")
    } {
        Some(s) if !s.is_empty() => s.iter().map(|&v| v.max(0) as usize).collect(),
        _ => {
            let k = if n.has("num_outputs") {
                n.i("num_outputs", 1) as usize
            } else {
                outs
            };
            if k == 0 {
                return Err(n.err("zero outputs"));
            }
            let chunk = len.div_ceil(k);
            (0..k)
                .map(|i| chunk.min(len.saturating_sub(i * chunk)))
                .collect()
        }
    };
    if sizes.iter().sum::<usize>() != len {
        return Err(n.err(format!("split sizes {sizes:?} do not add up to {len}")));
    }
    let mut start = 0;
    let mut out = Vec::new();
    for s in sizes {
        out.push(Value::typed(x.tensor.narrow(a as isize, start, s)?, x.elem));
        start += s;
    }
    Ok(out)
}

fn slice(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let r = x.dims().len();
    let (starts, ends, axes, steps) = if n.opset < 10 {
        (
            n.ints("starts").unwrap_or_default(),
            n.ints("ends").unwrap_or_default(),
            n.ints("axes"),
            None,
        )
    } else {
        (
            ints(req(n, ins, 1)?)?,
            ints(req(n, ins, 2)?)?,
            opt(ins, 3).map(ints).transpose()?,
            opt(ins, 4).map(ints).transpose()?,
        )
    };
    let axes = axes.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err(n.err("starts, ends, axes and steps differ in length"));
    }
    let mut t = x.tensor.clone();
    for i in 0..starts.len() {
        let d = axis(n, axes[i], r)?;
        let dim = t.dims()[d] as i64;
        let step = steps[i];
        if step == 0 {
            return Err(n.err("step 0"));
        }
        let fix = |v: i64| if v < 0 { v + dim } else { v };
        let (s, e) = (
            fix(starts[i].clamp(-dim - 1, dim.max(0) + 1)),
            fix(ends[i].clamp(-dim - 1, dim + 1)),
        );
        if step > 0 {
            let (s, e) = (s.clamp(0, dim), e.clamp(0, dim));
            t = t.slice(d as isize, s as isize, e.max(s) as isize, step as usize)?;
        } else {
            let (s, e) = (s.clamp(-1, dim - 1), e.clamp(-1, dim - 1));
            let idx: Vec<i64> = (0..).map(|k| s + k * step).take_while(|&j| j > e).collect();
            let idx = Tensor::from_vec(idx.clone(), [idx.len()])?.to_device(t.device())?;
            t = t.index_select(d as isize, &idx)?;
        }
    }
    same(t, x)
}

/// Indices with negatives counted from the end of an axis of length `len`.
fn fix_indices(n: &Node, idx: &Value, len: usize) -> Result<Vec<i64>> {
    ints(idx)?
        .into_iter()
        .map(|i| {
            let j = if i < 0 { i + len as i64 } else { i };
            if j < 0 || j >= len as i64 {
                Err(n.err(format!(
                    "index {i} out of range for an axis of length {len}"
                )))
            } else {
                Ok(j)
            }
        })
        .collect()
}

fn gather(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let (x, idx) = (req(n, ins, 0)?, req(n, ins, 1)?);
    let a = axis(n, n.i("axis", 0), x.dims().len())?;
    let flat = fix_indices(n, idx, x.dims()[a])?;
    let it = Tensor::from_vec(flat.clone(), [flat.len()])?.to_device(x.tensor.device())?;
    let picked = x.tensor.index_select(a as isize, &it)?;
    let mut dims = x.dims()[..a].to_vec();
    dims.extend_from_slice(idx.dims());
    dims.extend_from_slice(&x.dims()[a + 1..]);
    same(picked.reshape(dims)?, x)
}

fn gather_elements(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let (x, idx) = (req(n, ins, 0)?, req(n, ins, 1)?);
    let a = axis(n, n.i("axis", 0), x.dims().len())?;
    let flat = fix_indices(n, idx, x.dims()[a])?;
    let it = Tensor::from_vec(flat, idx.dims())?.to_device(x.tensor.device())?;
    same(x.tensor.gather(a as isize, &it)?, x)
}

fn gather_nd(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let (x, idx) = (req(n, ins, 0)?, req(n, ins, 1)?);
    let b = n.i("batch_dims", 0) as usize;
    let (xd, id) = (x.dims(), idx.dims());
    let k = *id
        .last()
        .ok_or_else(|| n.err("indices must have rank >= 1"))?;
    if b >= id.len() || b + k > xd.len() || xd[..b] != id[..b] {
        return Err(n.err(format!(
            "indices {id:?} do not fit data {xd:?} with batch_dims {b}"
        )));
    }
    let batch: usize = xd[..b].iter().product();
    let rows_per_batch: usize = xd[b..b + k].iter().product();
    let slice: usize = xd[b + k..].iter().product();
    let iv = ints(idx)?;
    let per_batch = iv.len() / k.max(1) / batch.max(1);
    let mut rows = Vec::with_capacity(iv.len() / k.max(1));
    for (j, tuple) in iv.chunks(k.max(1)).enumerate() {
        let mut r = 0i64;
        for (m, &i) in tuple.iter().enumerate().take(k) {
            let len = xd[b + m] as i64;
            let i = if i < 0 { i + len } else { i };
            if i < 0 || i >= len {
                return Err(n.err(format!("index {i} out of range for {len}")));
            }
            r = r * len + i;
        }
        rows.push((j / per_batch.max(1)) as i64 * rows_per_batch as i64 + r);
    }
    let table = x.tensor.reshape([batch * rows_per_batch, slice])?;
    let it = Tensor::from_vec(rows.clone(), [rows.len()])?.to_device(x.tensor.device())?;
    let mut dims = id[..id.len() - 1].to_vec();
    dims.extend_from_slice(&xd[b + k..]);
    same(table.index_select(0, &it)?.reshape(dims)?, x)
}

/// Host-side scatter of `updates` into a copy of `data` at flat positions, with ONNX's
/// reductions.
fn scatter_host(n: &Node, data: &Value, pos: &[usize], upd: &[f64]) -> Result<Value> {
    let mut out = data.tensor.to_f64_vec();
    let red = n.s("reduction", "none");
    for (&p, &u) in pos.iter().zip(upd) {
        let o = &mut out[p];
        *o = match red.as_str() {
            "add" => *o + u,
            "mul" => *o * u,
            "max" => o.max(u),
            "min" => o.min(u),
            _ => u,
        };
    }
    host_like(out, data.dims().to_vec(), data)
}

fn scatter_elements(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let (x, idx, upd) = (req(n, ins, 0)?, req(n, ins, 1)?, req(n, ins, 2)?);
    let r = x.dims().len();
    let a = axis(n, n.i("axis", 0), r)?;
    let iv = fix_indices(n, idx, x.dims()[a])?;
    let id = idx.dims();
    let strides = Shape::from(x.dims()).contiguous_strides();
    let mut pos = Vec::with_capacity(iv.len());
    let mut coord = vec![0usize; id.len()];
    for &i in &iv {
        let mut p = 0;
        for d in 0..r {
            p += if d == a { i as usize } else { coord[d] } * strides[d];
        }
        pos.push(p);
        for d in (0..id.len()).rev() {
            coord[d] += 1;
            if coord[d] < id[d] {
                break;
            }
            coord[d] = 0;
        }
    }
    Ok(vec![scatter_host(n, x, &pos, &upd.tensor.to_f64_vec())?])
}

fn scatter_nd(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let (x, idx, upd) = (req(n, ins, 0)?, req(n, ins, 1)?, req(n, ins, 2)?);
    let xd = x.dims();
    let k = *idx
        .dims()
        .last()
        .ok_or_else(|| n.err("indices must have rank >= 1"))?;
    if k > xd.len() {
        return Err(n.err("index tuples longer than the data's rank"));
    }
    let slice: usize = xd[k..].iter().product();
    let strides = Shape::from(xd).contiguous_strides();
    let mut pos = Vec::new();
    for tuple in ints(idx)?.chunks(k.max(1)) {
        let mut base = 0usize;
        for (m, &i) in tuple.iter().enumerate().take(k) {
            let len = xd[m] as i64;
            let i = if i < 0 { i + len } else { i };
            if i < 0 || i >= len {
                return Err(n.err(format!("index {i} out of range for {len}")));
            }
            base += i as usize * strides[m];
        }
        pos.extend(base..base + slice);
    }
    Ok(vec![scatter_host(n, x, &pos, &upd.tensor.to_f64_vec())?])
}

fn expand(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let dims: Vec<usize> = ints(req(n, ins, 1)?)?
        .iter()
        .map(|&d| d.max(0) as usize)
        .collect();
    let target = crate::broadcast_shapes("Expand", x.tensor.shape(), &Shape::from(dims))?;
    same(x.tensor.broadcast_to(&target)?.contiguous()?, x)
}

fn tile(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let reps = ints(req(n, ins, 1)?)?;
    if reps.len() != x.dims().len() || reps.iter().any(|&r| r < 0) {
        return Err(n.err(format!(
            "repeats {reps:?} do not fit rank {}",
            x.dims().len()
        )));
    }
    let reps: Vec<usize> = reps.iter().map(|&r| r as usize).collect();
    same(x.tensor.tile(&reps)?, x)
}

fn shape(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let r = x.dims().len() as i64;
    let fix = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
    let (s, e) = (fix(n.i("start", 0)), fix(n.i("end", r)));
    let v: Vec<i64> = x.dims()[s..e.max(s)].iter().map(|&d| d as i64).collect();
    let len = v.len();
    host_i64(v, vec![len], &x.tensor)
}

fn constant(n: &Node, _ins: &[Option<Value>]) -> Result<Vec<Value>> {
    if let Some(v) = n.tensor("value")? {
        return Ok(vec![v]);
    }
    if n.has("value_float") {
        return one(Tensor::scalar(n.f("value_float", 0.0)));
    }
    if let Some(v) = n.floats("value_floats") {
        return one(Tensor::from_vec(v.clone(), [v.len()])?);
    }
    if n.has("value_int") {
        return one(Tensor::scalar(n.i("value_int", 0)));
    }
    if let Some(v) = n.ints("value_ints") {
        return one(Tensor::from_vec(v.clone(), [v.len()])?);
    }
    Err(n.err("no value of a supported kind (sparse and string constants are not supported)"))
}

fn constant_of_shape(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let dims: Vec<usize> = ints(req(n, ins, 0)?)?
        .iter()
        .map(|&d| d.max(0) as usize)
        .collect();
    let (val, e) = match n.tensor("value")? {
        Some(v) => (
            v.tensor.to_f64_vec().first().copied().unwrap_or(0.0),
            v.elem,
        ),
        None => (0.0, elem::FLOAT),
    };
    let dt = dtype_of(e).ok_or_else(|| n.err("unsupported value type"))?;
    Ok(vec![Value::typed(Tensor::full(dims, val, dt)?, e)])
}

fn range(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let s = req(n, ins, 0)?;
    let scalar = |i| -> Result<f64> {
        req(n, ins, i)?
            .tensor
            .to_f64_vec()
            .first()
            .copied()
            .ok_or_else(|| n.err("empty scalar"))
    };
    let (start, limit, delta) = (scalar(0)?, scalar(1)?, scalar(2)?);
    if delta == 0.0 {
        return Err(n.err("delta 0"));
    }
    let count = ((limit - start) / delta).ceil().max(0.0);
    crate::limits::check_alloc("Range", &Shape::from(count as usize), s.tensor.dtype())?;
    let v: Vec<f64> = (0..count as usize)
        .map(|i| start + i as f64 * delta)
        .collect();
    let len = v.len();
    Ok(vec![host_like(v, vec![len], s)?])
}

fn dropout(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    // inference: the identity (training_mode = true would need a seed ONNX leaves open)
    let x = req(n, ins, 0)?;
    if let Some(t) = opt(ins, 2) {
        if t.tensor.to_f64_vec().first().copied().unwrap_or(0.0) != 0.0 {
            let ratio = opt(ins, 1).map(|r| r.tensor.to_f64_vec()[0]).unwrap_or(0.5);
            if ratio != 0.0 {
                return Err(n.err("training_mode with a non-zero ratio is not supported"));
            }
        }
    }
    let mut out = vec![x.clone()];
    if n.proto.output.len() > 1 {
        out.push(Value::new(
            Tensor::full(x.dims(), 1.0, DType::Bool)?.to_device(x.tensor.device())?,
        ));
    }
    Ok(out)
}

fn pad(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let r = x.dims().len();
    let (pads, value) = if n.opset < 11 {
        (n.ints("pads").unwrap_or_default(), n.f("value", 0.0) as f64)
    } else {
        let v = opt(ins, 2)
            .and_then(|v| v.tensor.to_f64_vec().first().copied())
            .unwrap_or(0.0);
        (ints(req(n, ins, 1)?)?, v)
    };
    let axes: Vec<usize> = match opt(ins, 3) {
        Some(a) => ints(a)?
            .iter()
            .map(|&a| axis(n, a, r))
            .collect::<Result<_>>()?,
        None => (0..r).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return Err(n.err(format!("{} pads for {} axes", pads.len(), axes.len())));
    }
    let mode = n.s("mode", "constant");
    let mut t = x.tensor.clone();
    for (k, &d) in axes.iter().enumerate() {
        let (b, e) = (pads[k], pads[k + axes.len()]);
        // negative pads crop
        let len = t.dims()[d] as i64;
        let (cb, ce) = ((-b).max(0), (-e).max(0));
        if cb + ce > len {
            return Err(n.err(format!("pads {pads:?} crop more than axis {d} holds")));
        }
        if cb + ce > 0 {
            t = t.narrow(d as isize, cb as usize, (len - cb - ce) as usize)?;
        }
        let (b, e, len) = (b.max(0), e.max(0), t.dims()[d] as i64);
        if b == 0 && e == 0 {
            continue;
        }
        if len == 0 && mode != "constant" {
            return Err(n.err(format!("{mode} padding of an empty axis")));
        }
        let mut idx = Vec::new();
        let mut inside = Vec::new();
        for j in -b..len + e {
            let (i, ok) = match mode.as_str() {
                "reflect" => {
                    let p = 2 * (len - 1).max(1);
                    let m = j.rem_euclid(p);
                    (
                        if len == 1 {
                            0
                        } else if m < len {
                            m
                        } else {
                            p - m
                        },
                        true,
                    )
                }
                "edge" => (j.clamp(0, len - 1), true),
                "wrap" => (j.rem_euclid(len), true),
                _ => (j.clamp(0, (len - 1).max(0)), (0..len).contains(&j)),
            };
            idx.push(i);
            inside.push(ok);
        }
        let n_out = idx.len();
        if len == 0 {
            let mut dims = t.dims().to_vec();
            dims[d] = n_out;
            t = Tensor::full_on(dims, value, t.dtype(), t.device())?;
            continue;
        }
        let it = Tensor::from_vec(idx, [n_out])?.to_device(t.device())?;
        let picked = t.index_select(d as isize, &it)?;
        if mode == "constant" {
            let mut mdims = vec![1; t.dims().len()];
            mdims[d] = n_out;
            let mask = Tensor::from_vec(inside, mdims)?.to_device(t.device())?;
            let fill = Tensor::full_on((), value, t.dtype(), t.device())?;
            t = Tensor::where_(&mask, &picked, &fill)?;
        } else {
            t = picked;
        }
    }
    same(t, x)
}

fn trilu(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let k = opt(ins, 1)
        .map(ints)
        .transpose()?
        .and_then(|v| v.first().copied())
        .unwrap_or(0);
    let t = if n.i("upper", 1) != 0 {
        x.tensor.triu(k)?
    } else {
        x.tensor.tril(k)?
    };
    same(t, x)
}

fn one_hot(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let (idx, depth, values) = (req(n, ins, 0)?, req(n, ins, 1)?, req(n, ins, 2)?);
    let depth = depth
        .tensor
        .to_f64_vec()
        .first()
        .copied()
        .ok_or_else(|| n.err("empty depth"))? as i64;
    if depth <= 0 {
        return Err(n.err(format!("depth {depth}")));
    }
    let vals = values.tensor.to_f64_vec();
    let (off, on) = (
        vals[0],
        *vals.get(1).ok_or_else(|| n.err("values needs [off, on]"))?,
    );
    let r = idx.dims().len();
    let a = axis(n, n.i("axis", -1), r + 1)?;
    let iv = idx.tensor.to_f64_vec();
    let outer: usize = idx.dims()[..a].iter().product();
    let inner: usize = idx.dims()[a..].iter().product();
    let d = depth as usize;
    crate::limits::check_alloc(
        "OneHot",
        &Shape::from(vec![outer, d, inner]),
        values.tensor.dtype(),
    )?;
    let mut out = vec![off; outer * d * inner];
    for o in 0..outer {
        for i in 0..inner {
            let mut k = iv[o * inner + i] as i64;
            if k < 0 {
                k += depth;
            }
            if (0..depth).contains(&k) {
                out[(o * d + k as usize) * inner + i] = on;
            }
        }
    }
    let mut dims = idx.dims()[..a].to_vec();
    dims.push(d);
    dims.extend_from_slice(&idx.dims()[a..]);
    Ok(vec![host_like(out, dims, values)?])
}

/// CumSum / CumProd along an axis, with `exclusive` and `reverse`.
fn scan(n: &Node, ins: &[Option<Value>], prod: bool) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let a = axis(
        n,
        ints(req(n, ins, 1)?)?.first().copied().unwrap_or(0),
        x.dims().len(),
    )?;
    let (excl, rev) = (n.i("exclusive", 0) != 0, n.i("reverse", 0) != 0);
    let len = x.dims()[a];
    let dt = x.tensor.dtype();
    // half floats accumulate in f32; ints in int64 (the composite ops' own rule), then the
    // result takes the input's dtype again
    let mut t = match dt {
        DType::F16 | DType::BF16 => x.tensor.to_dtype(DType::F32)?,
        _ => x.tensor.clone(),
    };
    if len == 0 {
        return same(x.tensor.clone(), x);
    }
    let ax = [a as isize];
    if rev {
        t = t.flip(&ax)?;
    }
    t = if prod {
        t.cumprod(a as isize)?
    } else {
        t.cumsum(a as isize)?
    };
    if excl {
        // shifted by one along the axis, the identity first
        let mut head = t.dims().to_vec();
        head[a] = 1;
        let unit = Tensor::full_on(head, if prod { 1.0 } else { 0.0 }, t.dtype(), t.device())?;
        t = Tensor::cat(&[unit, t.narrow(a as isize, 0, len - 1)?], a as isize)?;
    }
    if rev {
        t = t.flip(&ax)?;
    }
    same(t.to_dtype(dt)?, x)
}

fn topk(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let k = if n.opset < 10 {
        n.i("k", 0)
    } else {
        ints(req(n, ins, 1)?)?.first().copied().unwrap_or(0)
    };
    let a = axis(n, n.i("axis", -1), x.dims().len())?;
    let largest = n.i("largest", 1) != 0;
    let d = x.dims();
    if k < 0 || k as usize > d[a] {
        return Err(n.err(format!("k = {k} for an axis of length {}", d[a])));
    }
    let (vals, it) = x.tensor.topk(k as usize, a as isize, largest, true)?;
    Ok(vec![Value::typed(vals, x.elem), Value::new(it)])
}

fn non_zero(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let d = x.dims();
    let v = x.tensor.to_f64_vec();
    let hits: Vec<usize> = (0..v.len()).filter(|&i| v[i] != 0.0).collect();
    let r = d.len().max(1);
    let mut out = vec![0i64; r * hits.len()];
    let strides = Shape::from(d).contiguous_strides();
    for (c, &h) in hits.iter().enumerate() {
        for k in 0..d.len() {
            out[k * hits.len() + c] = ((h / strides[k]) % d[k]) as i64;
        }
    }
    host_i64(out, vec![d.len(), hits.len()], &x.tensor)
}

fn compress(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let (x, c) = (req(n, ins, 0)?, req(n, ins, 1)?);
    let cond = c.tensor.to_f64_vec();
    let (t, a) = if n.has("axis") {
        (x.tensor.clone(), axis(n, n.i("axis", 0), x.dims().len())?)
    } else {
        (x.tensor.flatten(0, -1)?, 0)
    };
    let len = t.dims()[a];
    let keep: Vec<i64> = (0..len.min(cond.len()))
        .filter(|&i| cond[i] != 0.0)
        .map(|i| i as i64)
        .collect();
    let it = Tensor::from_vec(keep.clone(), [keep.len()])?.to_device(t.device())?;
    same(t.index_select(a as isize, &it)?, x)
}

fn eye_like(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let d = x.dims();
    if d.len() != 2 {
        return Err(n.err("input must be 2-D"));
    }
    let e = if n.has("dtype") {
        n.i("dtype", 1) as i32
    } else {
        x.elem
    };
    let k = n.i("k", 0);
    let mut v = vec![0.0; d[0] * d[1]];
    for i in 0..d[0] as i64 {
        let j = i + k;
        if (0..d[1] as i64).contains(&j) {
            v[i as usize * d[1] + j as usize] = 1.0;
        }
    }
    let dt = dtype_of(e).ok_or_else(|| n.err("unsupported dtype"))?;
    let t = Tensor::from_vec(v, d)?
        .to_dtype(dt)?
        .to_device(x.tensor.device())?;
    Ok(vec![Value::typed(t, e)])
}

fn depth_to_space(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let b = n.i("blocksize", 0) as usize;
    let d = x.dims();
    if d.len() != 4 || b == 0 || d[1] % (b * b) != 0 {
        return Err(n.err(format!("input {d:?} and blocksize {b}")));
    }
    let (nn, c, h, w) = (d[0], d[1], d[2], d[3]);
    let oc = c / (b * b);
    let t = if n.s("mode", "DCR") == "CRD" {
        x.tensor
            .reshape([nn, oc, b, b, h, w])?
            .permute(&[0, 1, 4, 2, 5, 3])?
    } else {
        x.tensor
            .reshape([nn, b, b, oc, h, w])?
            .permute(&[0, 3, 4, 1, 5, 2])?
    };
    same(t.reshape([nn, oc, h * b, w * b])?, x)
}

fn space_to_depth(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let b = n.i("blocksize", 0) as usize;
    let d = x.dims();
    if d.len() != 4 || b == 0 || d[2] % b != 0 || d[3] % b != 0 {
        return Err(n.err(format!("input {d:?} and blocksize {b}")));
    }
    let (nn, c, h, w) = (d[0], d[1], d[2], d[3]);
    let perm: &[isize] = if n.s("mode", "DCR") == "CRD" {
        &[0, 1, 3, 5, 2, 4]
    } else {
        &[0, 3, 5, 1, 2, 4]
    };
    let t = x
        .tensor
        .reshape([nn, c, h / b, b, w / b, b])?
        .permute(perm)?;
    same(t.reshape([nn, c * b * b, h / b, w / b])?, x)
}
