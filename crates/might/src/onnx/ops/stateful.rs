//! Operators of recent sequence-model architectures (opsets 24–28): LinearAttention (linear,
//! gated, delta and gated-delta recurrences with a carried state), CausalConvWithState
//! (depthwise causal conv1d with a rolling state), TensorScatter (KV-cache writes) and SwiGLU.
//! The recurrences run step by step on the host in `f64`.

use super::{axis, opt, req, Node, OpFn};
use crate::onnx::value::{ints, Value};
use crate::{Result, Tensor};

pub fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "LinearAttention" => linear_attention,
        "CausalConvWithState" => causal_conv,
        "TensorScatter" => tensor_scatter,
        "SwiGLU" => swiglu,
        _ => return None,
    })
}

fn host(v: Vec<f64>, dims: Vec<usize>, like: &Value) -> Result<Value> {
    let t = Tensor::from_vec(v, dims)?
        .to_dtype(like.tensor.dtype())?
        .to_device(like.tensor.device())?;
    Ok(Value::typed(t, like.elem))
}

/// LinearAttention: `query [B, T, Hq·Dk]`, `key [B, T, Hkv·Dk]`, `value [B, T, Hkv·Dv]`,
/// optional `past_state [B, Hkv, Dk, Dv]`, `decay`, `beta`; out the attention output and the
/// final state. Each step: decay the state (gated), correct the value by what the state
/// already retrieves for the key (delta), add key ⊗ value, read with the query.
fn linear_attention(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let (q, k, v) = (req(n, ins, 0)?, req(n, ins, 1)?, req(n, ins, 2)?);
    let (past, decay, beta) = (opt(ins, 3), opt(ins, 4), opt(ins, 5));
    let rule = n.s("update_rule", "gated_delta");
    let (gating, delta) = match rule.as_str() {
        "linear" => (false, false),
        "gated" => (true, false),
        "delta" => (false, true),
        "gated_delta" => (true, true),
        r => return Err(n.err(format!("update_rule '{r}' is not supported"))),
    };
    let hq = n.i("q_num_heads", 0);
    let hk = n.i("kv_num_heads", 0);
    if hq <= 0 || hk <= 0 || hq % hk != 0 {
        return Err(n.err(format!(
            "q_num_heads {hq} must be a positive multiple of kv_num_heads {hk}"
        )));
    }
    let (hq, hk) = (hq as usize, hk as usize);
    let (qd, kd, vd) = (q.dims().to_vec(), k.dims().to_vec(), v.dims().to_vec());
    if qd.len() != 3 || kd.len() != 3 || vd.len() != 3 || qd[2] % hq != 0 || vd[2] % hk != 0 {
        return Err(n.err(format!(
            "query {qd:?}, key {kd:?}, value {vd:?}: expected [B, T, H·D]"
        )));
    }
    let (b, t) = (qd[0], qd[1]);
    let dk = qd[2] / hq;
    let dv = vd[2] / hk;
    if kd != [b, t, hk * dk] || vd[..2] != [b, t] {
        return Err(n.err(format!(
            "query {qd:?}, key {kd:?}, value {vd:?} do not agree"
        )));
    }
    if gating != decay.is_some() || delta != beta.is_some() {
        return Err(n.err(format!(
            "update_rule '{rule}' takes decay: {gating}, beta: {delta}"
        )));
    }
    let group = hq / hk;
    let (qv, kv, vv) = (
        q.tensor.to_f64_vec(),
        k.tensor.to_f64_vec(),
        v.tensor.to_f64_vec(),
    );
    let sdims = vec![b, hk, dk, dv];
    let mut state = match past {
        Some(p) => {
            if p.dims() != sdims.as_slice() {
                return Err(n.err(format!("past_state {:?}, expected {sdims:?}", p.dims())));
            }
            p.tensor.to_f64_vec()
        }
        None => vec![0.0; b * hk * dk * dv],
    };
    let dec = match decay {
        Some(d) => {
            let dd = d.dims();
            let per_key = match dd.last() {
                Some(&l) if l == hk => false,
                Some(&l) if l == hk * dk => true,
                _ => return Err(n.err(format!("decay {dd:?}"))),
            };
            if dd.len() != 3 || dd[..2] != [b, t] {
                return Err(n.err(format!("decay {dd:?}")));
            }
            Some((d.tensor.to_f64_vec(), per_key))
        }
        None => None,
    };
    let bet = match beta {
        Some(x) => {
            let bd = x.dims();
            if bd.len() != 3 || bd[..2] != [b, t] || !(bd[2] == hk || bd[2] == 1) {
                return Err(n.err(format!("beta {bd:?}")));
            }
            Some((x.tensor.to_f64_vec(), bd[2]))
        }
        None => None,
    };
    let s = n.f("scale", 0.0);
    let scale = if s == 0.0 {
        1.0 / (dk as f64).sqrt()
    } else {
        s as f64
    };
    let mut out = vec![0.0; b * t * hq * dv];
    for bi in 0..b {
        for ti in 0..t {
            for h in 0..hk {
                let st = &mut state[(bi * hk + h) * dk * dv..(bi * hk + h + 1) * dk * dv];
                let kt = &kv[((bi * t + ti) * hk + h) * dk..][..dk];
                let mut vt: Vec<f64> = vv[((bi * t + ti) * hk + h) * dv..][..dv].to_vec();
                if let Some((dv_, per_key)) = &dec {
                    for i in 0..dk {
                        let g = if *per_key {
                            dv_[((bi * t + ti) * hk + h) * dk + i]
                        } else {
                            dv_[(bi * t + ti) * hk + h]
                        };
                        let e = g.exp();
                        for m in 0..dv {
                            st[i * dv + m] *= e;
                        }
                    }
                }
                if let Some((bv, bl)) = &bet {
                    let bval = bv[(bi * t + ti) * bl + if *bl == 1 { 0 } else { h }];
                    for (m, x) in vt.iter_mut().enumerate() {
                        let r: f64 = (0..dk).map(|i| st[i * dv + m] * kt[i]).sum();
                        *x = bval * (*x - r);
                    }
                }
                for i in 0..dk {
                    for m in 0..dv {
                        st[i * dv + m] += kt[i] * vt[m];
                    }
                }
                for g in 0..group {
                    let hqi = h * group + g;
                    let qt = &qv[((bi * t + ti) * hq + hqi) * dk..][..dk];
                    for m in 0..dv {
                        let s: f64 = (0..dk).map(|i| qt[i] * st[i * dv + m]).sum();
                        out[((bi * t + ti) * hq + hqi) * dv + m] = scale * s;
                    }
                }
            }
        }
    }
    let state_like = past.unwrap_or(q);
    Ok(vec![
        host(out, vec![b, t, hq * dv], q)?,
        host(state, sdims, state_like)?,
    ])
}

/// CausalConvWithState: depthwise conv1d of `input [B, C, L]` with `weight [C, 1, K]`, the
/// `K - 1` steps before it taken from `past_state` (zeros without); out the (optionally
/// SiLU-activated) result and the last `K - 1` steps as the next state.
fn causal_conv(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let (x, w) = (req(n, ins, 0)?, req(n, ins, 1)?);
    let (bias, past) = (opt(ins, 2), opt(ins, 3));
    let (xd, wd) = (x.dims().to_vec(), w.dims().to_vec());
    if xd.len() != 3 || wd.len() != 3 || wd[0] != xd[1] || wd[1] != 1 || wd[2] == 0 {
        return Err(n.err(format!(
            "input {xd:?}, weight {wd:?}: expected [B, C, L] and [C, 1, K]"
        )));
    }
    let act = n.s("activation", "none");
    let silu = match act.as_str() {
        "none" => false,
        "silu" | "swish" => true,
        a => return Err(n.err(format!("activation '{a}' is not supported"))),
    };
    let (b, c, l, k) = (xd[0], xd[1], xd[2], wd[2]);
    let pl = k - 1 + l;
    let xv = x.tensor.to_f64_vec();
    let wv = w.tensor.to_f64_vec();
    let bv = bias.map(|v| v.tensor.to_f64_vec());
    if bv.as_ref().is_some_and(|v| v.len() != c) {
        return Err(n.err("bias must have one value per channel"));
    }
    let pv = match past {
        Some(p) => {
            if p.dims() != [b, c, k - 1] {
                return Err(n.err(format!(
                    "past_state {:?}, expected {:?}",
                    p.dims(),
                    [b, c, k - 1]
                )));
            }
            p.tensor.to_f64_vec()
        }
        None => vec![0.0; b * c * (k - 1)],
    };
    let mut out = vec![0.0; b * c * l];
    let mut next = vec![0.0; b * c * (k - 1)];
    for bi in 0..b {
        for ci in 0..c {
            let row = bi * c + ci;
            let padded: Vec<f64> = pv[row * (k - 1)..(row + 1) * (k - 1)]
                .iter()
                .chain(&xv[row * l..(row + 1) * l])
                .copied()
                .collect();
            for ti in 0..l {
                let mut s: f64 = (0..k).map(|j| wv[ci * k + j] * padded[ti + j]).sum();
                if let Some(bv) = &bv {
                    s += bv[ci];
                }
                if silu {
                    s /= 1.0 + (-s).exp();
                }
                out[row * l + ti] = s;
            }
            next[row * (k - 1)..(row + 1) * (k - 1)].copy_from_slice(&padded[pl - (k - 1)..]);
        }
    }
    Ok(vec![
        host(out, xd.clone(), x)?,
        host(next, vec![b, c, k - 1], x)?,
    ])
}

/// TensorScatter: write `update` into `past_cache` along `axis` starting, per batch entry,
/// at `write_indices` (wrapping around in `circular` mode).
fn tensor_scatter(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let (cache, upd) = (req(n, ins, 0)?, req(n, ins, 1)?);
    let (cd, ud) = (cache.dims().to_vec(), upd.dims().to_vec());
    let r = cd.len();
    let a = axis(n, n.i("axis", -2), r)?;
    let circular = match n.s("mode", "linear").as_str() {
        "linear" => false,
        "circular" => true,
        m => return Err(n.err(format!("mode '{m}' is not supported"))),
    };
    if a == 0
        || ud.len() != r
        || (0..r).any(|i| {
            if i == a {
                ud[i] > cd[i]
            } else {
                ud[i] != cd[i]
            }
        })
    {
        return Err(n.err(format!("cache {cd:?}, update {ud:?}, axis {a}")));
    }
    let wi = match opt(ins, 2) {
        Some(w) => ints(w)?,
        None => vec![0; cd[0]],
    };
    if wi.len() != cd[0] {
        return Err(n.err(format!("{} write indices for batch {}", wi.len(), cd[0])));
    }
    let mut cv = cache.tensor.to_f64_vec();
    let uv = upd.tensor.to_f64_vec();
    let outer: usize = cd[..a].iter().product();
    let inner: usize = cd[a + 1..].iter().product();
    let per_batch = outer / cd[0].max(1);
    let (max_len, len) = (cd[a], ud[a]);
    for o in 0..outer {
        let start = wi[o / per_batch.max(1)];
        for s in 0..len {
            let mut p = start + s as i64;
            if circular {
                p = p.rem_euclid(max_len as i64);
            }
            if p < 0 || p as usize >= max_len {
                return Err(n.err(format!("write position {p} outside the cache of {max_len}")));
            }
            let dst = (o * max_len + p as usize) * inner;
            let src = (o * len + s) * inner;
            cv[dst..dst + inner].copy_from_slice(&uv[src..src + inner]);
        }
    }
    Ok(vec![host(cv, cd, cache)?])
}

/// SwiGLU: `a · sigmoid(alpha · a) · b` (same shapes, no broadcasting).
fn swiglu(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let (a, b) = (req(n, ins, 0)?, req(n, ins, 1)?);
    if a.dims() != b.dims() {
        return Err(n.err(format!("a {:?} and b {:?} differ", a.dims(), b.dims())));
    }
    let alpha = n.f("alpha", 1.0) as f64;
    let out: Vec<f64> = a
        .tensor
        .to_f64_vec()
        .into_iter()
        .zip(b.tensor.to_f64_vec())
        .map(|(x, y)| x / (1.0 + (-alpha * x).exp()) * y)
        .collect();
    Ok(vec![host(out, a.dims().to_vec(), a)?])
}
