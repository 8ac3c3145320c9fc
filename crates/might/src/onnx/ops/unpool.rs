//! MaxUnpool: the partial inverse of MaxPool, scattering pooled values back to the positions
//! MaxPool's `Indices` output recorded (flat indices into the whole unpooled tensor).

use super::{opt, req, Node, OpFn};
use crate::onnx::value::{ints, Value};
use crate::{Result, Shape, Tensor};

pub fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "MaxUnpool" => max_unpool,
        _ => return None,
    })
}

fn max_unpool(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let (x, idx) = (req(n, ins, 0)?, req(n, ins, 1)?);
    let xd = x.dims().to_vec();
    let r = xd.len().saturating_sub(2);
    if r == 0 || idx.dims() != xd.as_slice() {
        return Err(n.err(format!(
            "input {xd:?} and indices {:?}: expected equal shapes [N, C, D…]",
            idx.dims()
        )));
    }
    let ks = n
        .ints("kernel_shape")
        .ok_or_else(|| n.err("kernel_shape is required"))?;
    let strides = n.ints("strides").unwrap_or_else(|| vec![1; r]);
    let pads = n.ints("pads").unwrap_or_else(|| vec![0; 2 * r]);
    if ks.len() != r || strides.len() != r || pads.len() != 2 * r {
        return Err(n.err("kernel_shape, strides and pads must match the spatial rank"));
    }
    // indices address the inferred shape; an explicit output_shape pads it at the end
    let mut inferred = xd[..2].to_vec();
    for d in 0..r {
        let v = (xd[d + 2] as i64 - 1) * strides[d] - pads[d] - pads[d + r] + ks[d];
        if v < 0 {
            return Err(n.err("negative output size"));
        }
        inferred.push(v as usize);
    }
    let od: Vec<usize> = match opt(ins, 2) {
        Some(s) => {
            let s = ints(s)?;
            if s.len() != xd.len() || s.iter().zip(&inferred).any(|(&v, &i)| v < i as i64) {
                return Err(n.err(format!(
                    "output_shape {s:?} smaller than the unpooled {inferred:?}"
                )));
            }
            s.iter().map(|&v| v as usize).collect()
        }
        None => inferred.clone(),
    };
    crate::limits::check_alloc("MaxUnpool", &Shape::from(od.clone()), x.tensor.dtype())?;
    let total: usize = inferred.iter().product();
    let mut y = vec![0.0; total];
    for (v, i) in x.tensor.to_f64_vec().into_iter().zip(ints(idx)?) {
        if i < 0 || i as usize >= total {
            return Err(n.err(format!("index {i} outside the output of {total} elements")));
        }
        y[i as usize] = v;
    }
    let mut out = vec![0.0; od.iter().product()];
    let is = Shape::from(inferred.clone()).contiguous_strides();
    let os = Shape::from(od.clone()).contiguous_strides();
    for (k, &v) in y.iter().enumerate() {
        let off: usize = (0..od.len())
            .map(|d| (k / is[d]) % inferred[d] * os[d])
            .sum();
        out[off] = v;
    }
    let t = Tensor::from_vec(out, od)?
        .to_dtype(x.tensor.dtype())?
        .to_device(x.tensor.device())?;
    Ok(vec![Value::typed(t, x.elem)])
}
