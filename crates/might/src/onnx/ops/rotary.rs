//! RotaryEmbedding (opset 23): rotate pairs of features of each head by position-dependent
//! angles from precomputed cos/sin caches (RoPE). Computed on the host in `f64`.

use super::{opt, req, Node, OpFn};
use crate::onnx::value::{ints, Value};
use crate::{Result, Tensor};

pub fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "RotaryEmbedding" => rotary,
        _ => return None,
    })
}

/// `input` is `[B, N, S, D]` or `[B, S, N·D]` (then `num_heads` says N); the caches are
/// `[max_pos, D'/2]` indexed by `position_ids [B, S]`, or `[B, S, D'/2]` without them.
fn rotary(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let x = req(n, ins, 0)?;
    let (cos, sin) = (req(n, ins, 1)?, req(n, ins, 2)?);
    let pos = opt(ins, 3).map(ints).transpose()?;
    let xd = x.dims().to_vec();
    let (b, s, h, d, four) = match xd.len() {
        4 => (xd[0], xd[2], xd[1], xd[3], true),
        3 => {
            let h = n.i("num_heads", 0);
            if h <= 0 || xd[2] % h as usize != 0 {
                return Err(n.err(format!(
                    "input {xd:?} needs num_heads dividing its last axis (got {h})"
                )));
            }
            (xd[0], xd[1], h as usize, xd[2] / h as usize, false)
        }
        _ => return Err(n.err(format!("input {xd:?}: expected rank 3 or 4"))),
    };
    let rd = match n.i("rotary_embedding_dim", 0) {
        0 => d,
        v if v > 0 && v as usize <= d && v % 2 == 0 => v as usize,
        v => return Err(n.err(format!("rotary_embedding_dim {v} for head size {d}"))),
    };
    let half = rd / 2;
    let cd = cos.dims().to_vec();
    if cd != sin.dims() || cd.last().copied() != Some(half) {
        return Err(n.err(format!(
            "cos cache {cd:?}, sin cache {:?}: last axis must be {half}",
            sin.dims()
        )));
    }
    let rows = cd[..cd.len() - 1].iter().product::<usize>();
    let row_of = |bi: usize, si: usize| -> Result<usize> {
        let r = match &pos {
            Some(p) => {
                let v = p.get(bi * s + si).copied().unwrap_or(-1);
                if v < 0 {
                    usize::MAX
                } else {
                    v as usize
                }
            }
            None if cd.len() == 2 => si,
            None => bi * s + si,
        };
        if r >= rows {
            return Err(n.err(format!("position {r} outside the {rows}-row caches")));
        }
        Ok(r)
    };
    let cv = cos.tensor.to_f64_vec();
    let sv = sin.tensor.to_f64_vec();
    let mut v = x.tensor.to_f64_vec();
    let inter = n.i("interleaved", 0) != 0;
    for bi in 0..b {
        for si in 0..s {
            let row = row_of(bi, si)?;
            for hi in 0..h {
                let base = if four {
                    ((bi * h + hi) * s + si) * d
                } else {
                    ((bi * s + si) * h + hi) * d
                };
                for k in 0..half {
                    let (i1, i2) = if inter {
                        (base + 2 * k, base + 2 * k + 1)
                    } else {
                        (base + k, base + k + half)
                    };
                    let (c, sn) = (cv[row * half + k], sv[row * half + k]);
                    let (x1, x2) = (v[i1], v[i2]);
                    v[i1] = c * x1 - sn * x2;
                    v[i2] = sn * x1 + c * x2;
                }
            }
        }
    }
    let t = Tensor::from_vec(v, xd)?
        .to_dtype(x.tensor.dtype())?
        .to_device(x.tensor.device())?;
    Ok(vec![Value::typed(t, x.elem)])
}
