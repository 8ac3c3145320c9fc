//! `Attention` (opset 23+: multi-head, grouped-query, KV cache, causal and sliding-window
//! masks, softcap) and the two losses, `NegativeLogLikelihoodLoss` and
//! `SoftmaxCrossEntropyLoss`.

use super::{opt, req, Node, OpFn};
use crate::onnx::value::{ints, Value};
use crate::{DType, Result, Tensor};

pub fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "Attention" => attention,
        "NegativeLogLikelihoodLoss" => |n, i| loss(n, i, false),
        "SoftmaxCrossEntropyLoss" => |n, i| loss(n, i, true),
        _ => return None,
    })
}

/// f32 for the half types (softmax and sums need the range), else the dtype itself.
fn work(dt: DType) -> DType {
    if matches!(dt, DType::F16 | DType::BF16) {
        DType::F32
    } else {
        dt
    }
}

/// `[B, S, H*D]` -> `[B, H, S, D]`.
fn split_heads(t: &Tensor, heads: usize) -> Result<Tensor> {
    let d = t.dims();
    t.reshape(vec![d[0], d[1], heads, d[2] / heads.max(1)])?
        .permute(&[0, 2, 1, 3])
}

/// `0` where allowed, `-inf` where not.
fn bias_of(allowed: &Tensor, dt: DType) -> Result<Tensor> {
    let z = Tensor::zeros_on((), dt, allowed.device())?;
    let inf = Tensor::full_on((), f64::NEG_INFINITY, dt, allowed.device())?;
    Tensor::where_(allowed, &z, &inf)
}

/// `allowed[.., i, j] = lo <= (i + offset) - j <= hi`, as a bias; `offset` per batch or one.
fn band(
    q: usize,
    kv: usize,
    offsets: &[i64],
    lo: Option<i64>,
    hi: Option<i64>,
    dt: DType,
    dev: crate::Device,
) -> Result<Tensor> {
    let mut v = Vec::with_capacity(offsets.len() * q * kv);
    for &o in offsets {
        for i in 0..q as i64 {
            for j in 0..kv as i64 {
                let diff = i + o - j;
                v.push(lo.is_none_or(|l| diff >= l) && hi.is_none_or(|h| diff <= h));
            }
        }
    }
    let shape = if offsets.len() == 1 {
        vec![q, kv]
    } else {
        vec![offsets.len(), 1, q, kv]
    };
    bias_of(&Tensor::from_vec(v, shape)?.to_device(dev)?, dt)
}

fn attention(n: &Node, ins: &[Option<Value>]) -> Result<Vec<Value>> {
    let (qv, kv, vv) = (req(n, ins, 0)?, req(n, ins, 1)?, req(n, ins, 2)?);
    let (mask, past_k, past_v, nonpad) = (opt(ins, 3), opt(ins, 4), opt(ins, 5), opt(ins, 6));
    let dt = qv.tensor.dtype();
    let wt = work(dt);
    let dev = qv.tensor.device();
    let rank3 = qv.dims().len() == 3;
    let (mut q, mut k, mut v) = (
        qv.tensor.to_dtype(wt)?,
        kv.tensor.to_dtype(wt)?,
        vv.tensor.to_dtype(wt)?,
    );
    if rank3 {
        let (qh, kh) = (
            n.i("q_num_heads", 0) as usize,
            n.i("kv_num_heads", 0) as usize,
        );
        if qh == 0 || kh == 0 {
            return Err(n.err("3-D inputs need q_num_heads and kv_num_heads"));
        }
        q = split_heads(&q, qh)?;
        k = split_heads(&k, kh)?;
        v = split_heads(&v, kh)?;
    }
    if q.dims().len() != 4 || k.dims().len() != 4 || v.dims().len() != 4 {
        return Err(n.err(format!(
            "Q {:?}, K {:?}, V {:?}: expected 3-D or 4-D",
            qv.dims(),
            kv.dims(),
            vv.dims()
        )));
    }
    let batch = q.dims()[0];
    let scale = if n.has("scale") {
        n.f("scale", 1.0) as f64
    } else {
        1.0 / (q.dims()[3] as f64).sqrt()
    };
    let past_len = past_k.map(|p| p.dims().get(2).copied().unwrap_or(0));
    if let Some(p) = past_k {
        k = Tensor::cat(&[p.tensor.to_dtype(wt)?, k], 2)?;
    }
    if let Some(p) = past_v {
        v = Tensor::cat(&[p.tensor.to_dtype(wt)?, v], 2)?;
    }
    let (qs, ks) = (q.dims()[2], k.dims()[2]);
    // the additive bias: mask (padded to the key length), causal band, sliding window, padding
    let mut mask_t = match mask {
        Some(m) => {
            let mut t = m.tensor.clone();
            let have = *t.dims().last().unwrap_or(&ks);
            if have < ks {
                let mut d = t.dims().to_vec();
                *d.last_mut().expect("rank >= 1") = ks - have;
                let fill = if t.dtype() == DType::Bool {
                    0.0
                } else {
                    f64::NEG_INFINITY
                };
                let pad = Tensor::full_on(d, fill, t.dtype(), dev)?;
                t = Tensor::cat(&[t, pad], -1)?;
            }
            Some(if t.dtype() == DType::Bool {
                bias_of(&t, wt)?
            } else {
                t.to_dtype(wt)?
            })
        }
        None => None,
    };
    let offsets: Vec<i64> = match (past_len, nonpad) {
        (None, Some(np)) => ints(np)?.iter().map(|&l| l - qs as i64).collect(),
        (Some(p), _) => vec![p as i64],
        (None, None) => vec![0],
    };
    let mut bias = Tensor::zeros_on(vec![qs, ks], wt, dev)?;
    if let Some(m) = mask_t.take() {
        bias = bias.add(&m)?;
    }
    if n.i("is_causal", 0) != 0 {
        bias = bias.add(&band(qs, ks, &offsets, Some(0), None, wt, dev)?)?;
    }
    let (lw, rw) = (n.i("left_window_size", -1), n.i("right_window_size", -1));
    if lw >= 0 || rw >= 0 {
        let hi = (lw >= 0).then_some(lw);
        let lo = (rw >= 0).then_some(-rw);
        bias = bias.add(&band(qs, ks, &offsets, lo, hi, wt, dev)?)?;
    }
    if let Some(np) = nonpad {
        let lens = ints(np)?;
        let allowed: Vec<bool> = lens
            .iter()
            .flat_map(|&l| (0..ks as i64).map(move |j| j < l))
            .collect();
        let pm = Tensor::from_vec(allowed, vec![batch, 1, 1, ks])?.to_device(dev)?;
        bias = bias.add(&bias_of(&pm, wt)?)?;
    }
    let (present_k, present_v) = (k.clone(), v.clone());
    // grouped-query attention: each K/V head serves q_heads / kv_heads consecutive Q heads
    let (qh, kh) = (q.dims()[1], k.dims()[1]);
    if qh != kh && kh > 0 && qh % kh == 0 {
        let rep = qh / kh;
        let grow = |t: &Tensor| -> Result<Tensor> {
            let d = t.dims().to_vec();
            t.unsqueeze(2)?
                .broadcast_to(vec![d[0], d[1], rep, d[2], d[3]])?
                .reshape(vec![d[0], d[1] * rep, d[2], d[3]])
        };
        k = grow(&k)?;
        v = grow(&v)?;
    }
    let s = scale.sqrt();
    // half-precision inputs: round where the reference rounds (each step's result)
    let r = |t: Tensor| -> Result<Tensor> {
        if wt != dt {
            t.to_dtype(dt)?.to_dtype(wt)
        } else {
            Ok(t)
        }
    };
    let mut qk = r(r(q.mul_scalar(s)?)?.matmul(&r(k.transpose(2, 3)?.mul_scalar(s)?)?)?)?;
    let softcap = n.f("softcap", 0.0) as f64;
    if softcap > 0.0 {
        qk = qk.div_scalar(softcap)?.tanh()?.mul_scalar(softcap)?;
    }
    let mode = n.i("qk_matmul_output_mode", 0);
    let with_bias = r(qk.add(&bias)?)?;
    // a row whose every key is masked attends to nothing: zeros, not NaN
    let row_masked = bias.max(-1, true)?.0.eq_scalar(f64::NEG_INFINITY)?;
    let zero = Tensor::zeros_on((), wt, dev)?;
    let safe = Tensor::where_(&row_masked, &zero, &with_bias)?;
    let p = Tensor::where_(&row_masked, &zero, &safe.softmax(-1)?)?;
    let qk_out = match mode {
        2 => with_bias.clone(),
        3 => p.clone(),
        _ => qk,
    };
    let p = p.to_dtype(dt)?.to_dtype(wt)?;
    let mut y = p.matmul(&v)?;
    if rank3 {
        let d = y.dims().to_vec();
        y = y
            .permute(&[0, 2, 1, 3])?
            .reshape(vec![d[0], d[2], d[1] * d[3]])?;
    }
    let back = |t: Tensor, like: &Value| -> Result<Value> {
        Ok(Value::typed(t.to_dtype(like.tensor.dtype())?, like.elem))
    };
    let mut outs = vec![back(y, qv)?];
    let n_out = n.proto.output.len();
    if n_out > 1 {
        outs.push(back(present_k, kv)?);
        outs.push(back(present_v, vv)?);
    }
    if n_out > 3 {
        outs.push(back(qk_out, qv)?);
    }
    Ok(outs)
}

/// `NegativeLogLikelihoodLoss` on log-probabilities, or `SoftmaxCrossEntropyLoss` on scores
/// (which also returns the log-probabilities).
fn loss(n: &Node, ins: &[Option<Value>], from_scores: bool) -> Result<Vec<Value>> {
    let (x, target) = (req(n, ins, 0)?, req(n, ins, 1)?);
    let weight = opt(ins, 2);
    let dt = x.tensor.dtype();
    let wt = work(dt);
    let dev = x.tensor.device();
    let d = x.dims().to_vec();
    if d.len() < 2 {
        return Err(n.err(format!("input {d:?}: expected [N, C, ...]")));
    }
    let c = d[1];
    let xt = x.tensor.to_dtype(wt)?;
    let logp = if from_scores { xt.log_softmax(1)? } else { xt };
    let ignore = n.has("ignore_index").then(|| n.i("ignore_index", 0));
    let t = ints(target)?;
    let mut idx = Vec::with_capacity(t.len());
    let mut keep = Vec::with_capacity(t.len());
    for &v in &t {
        let ignored = ignore == Some(v);
        if !ignored && (v < 0 || v >= c as i64) {
            return Err(n.err(format!("target {v} out of range for {c} classes")));
        }
        idx.push(if ignored { 0 } else { v });
        keep.push(!ignored);
    }
    let tdims = target.dims().to_vec();
    let mut gdims = tdims.clone();
    gdims.insert(1, 1);
    let it = Tensor::from_vec(idx.clone(), gdims)?.to_device(dev)?;
    let picked = logp.gather(1, &it)?.squeeze(1)?;
    let mut w = Tensor::from_vec(keep.clone(), tdims.clone())?
        .to_device(dev)?
        .to_dtype(wt)?;
    if let Some(wv) = weight {
        let per = wv
            .tensor
            .to_dtype(wt)?
            .index_select(0, &Tensor::from_vec(idx, [t.len()])?.to_device(dev)?)?;
        w = w.mul(&per.reshape(tdims)?)?;
    }
    let l = picked.neg()?.mul(&w)?;
    let out = match n.s("reduction", "mean").as_str() {
        "none" => l,
        "sum" => l.sum_all()?,
        _ => l.sum_all()?.div(&w.sum_all()?)?,
    };
    let mut outs = vec![Value::typed(out.to_dtype(dt)?, x.elem)];
    if from_scores && n.proto.output.len() > 1 {
        outs.push(Value::typed(logp.to_dtype(dt)?, x.elem));
    }
    Ok(outs)
}
