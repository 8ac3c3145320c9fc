//! Fused attention front-ends: the causal softmax and `softmax(scale · q kᵀ) v`.
//!
//! Each works out where its operands live (sizes, offsets, row strides) and asks the backend
//! for the fused kernel; a backend without one answers `None`. The causal softmax then composes
//! primitive ops; the attention returns `None` and its caller (`nn`) composes `q kᵀ`, softmax
//! and `p v` itself, so a new backend is correct on day one.

use crate::backend::AttnGeom;
use crate::storage::Storage;
use crate::{DType, Error, Result, Tensor};

/// `softmax(scale · scores)` over the last dim with the causal mask applied, in one fused pass:
/// for `scores: [.., T, S]`, query `i` attends to keys `0..=i + offset` (`offset = 0` is
/// PyTorch's top-left `is_causal`; `offset = S - T` aligns the queries with the last keys, as
/// when new queries attend to a KV cache). Masked entries come out exactly 0.
///
/// Why fused: the unfused form materialises the scaled scores, the mask, its negation and the
/// masked scores, four `[.., T, S]` tensors per layer kept alive for backward; this keeps only
/// the probabilities, and its backward never touches the masked half.
#[track_caller]
pub fn causal_softmax(scores: &Tensor, scale: f64, offset: usize) -> Result<Tensor> {
    const OP: &str = "causal_softmax";
    scores.check_float(OP)?;
    if scores.rank() < 2 {
        return Err(Error::shape(
            OP,
            format!("scores must be [.., T, S], got {}", scores.shape()),
        ));
    }
    if scores.numel() == 0 {
        return Ok(scores.clone());
    }
    let dt = scores.dtype();
    if !matches!(dt, DType::F32 | DType::F64) {
        // half precision computes in f32
        return causal_softmax(&scores.to_dtype(DType::F32)?, scale, offset)?.to_dtype(dt);
    }
    let r = scores.rank();
    let (t, s) = (scores.dims()[r - 2], scores.dims()[r - 1]);
    let x = scores.detach().contiguous()?;
    let out = x
        .storage()
        .causal_softmax(x.layout(), t, s, scale, offset)?;
    let Some(out) = out else {
        return causal_softmax_composed(scores, scale, offset);
    };
    let shape = x.shape().clone();
    let y = Tensor::from_storage(out, shape.clone());
    let yd = y.detach();
    Ok(y.record("CausalSoftmaxBackward", &[scores], move || {
        Box::new(move |g: &Tensor| {
            let g = g.contiguous()?;
            let dx = g.storage().causal_softmax_backward(
                g.layout(),
                &yd.storage(),
                yd.layout(),
                t,
                s,
                scale,
                offset,
            )?;
            Ok(vec![Some(Tensor::from_storage(dx, shape.clone()))])
        })
    }))
}

/// [`causal_softmax`] from primitive ops: scale, fill the future keys with -inf, softmax
/// (every row sees key 0, so no row is all -inf and the masked entries are exactly 0).
fn causal_softmax_composed(scores: &Tensor, scale: f64, offset: usize) -> Result<Tensor> {
    let r = scores.rank();
    let (t, s) = (scores.dims()[r - 2], scores.dims()[r - 1]);
    let keep = Tensor::tri_mask(t, s, offset as i64, true)?.to_device(scores.device())?;
    scores
        .mul_scalar(scale)?
        .masked_fill(&keep.logical_not()?, f64::NEG_INFINITY)?
        .softmax(-1)
}

/// `t` itself when its last dim is contiguous (what the fused kernels read), else a copy.
fn rows_view(t: &Tensor) -> Result<Tensor> {
    let r = t.rank();
    if t.strides()[r - 1] == 1 || t.dims()[r - 1] <= 1 {
        Ok(t.clone())
    } else {
        t.contiguous()
    }
}

/// Element offsets of each `[rows, cols]` matrix of `t`, the leading dims in row-major order.
fn pair_offsets(t: &Tensor) -> Vec<usize> {
    let r = t.rank();
    let mut offs = vec![t.storage_offset()];
    for (&n, &st) in t.dims()[..r - 2].iter().zip(&t.strides()[..r - 2]) {
        offs = offs
            .iter()
            .flat_map(|&o| (0..n).map(move |i| o + i * st))
            .collect();
    }
    offs
}

/// A kernel output laid out `[lead[..r-3], rows, lead[r-3], cols]`, as the logical
/// `[lead.., rows, cols]` view (a transpose; rank < 4: already in order).
fn heads_last(buf: Storage, lead: &[usize], rows: usize, cols: usize) -> Result<Tensor> {
    let r = lead.len() + 2;
    let mut phys = lead.to_vec();
    if r >= 4 {
        phys.insert(r - 3, rows);
        phys.push(cols);
        Tensor::from_storage(buf, phys).transpose(r as isize - 3, r as isize - 2)
    } else {
        phys.extend([rows, cols]);
        Ok(Tensor::from_storage(buf, phys))
    }
}

/// Groups of pairs as the kernels lay out their outputs: per group, `per_group` pairs side by
/// side (the heads of one batch entry, for `[B, H, L, D]` inputs).
fn grouping(lead: &[usize]) -> (usize, usize) {
    match lead.len() {
        n if n >= 2 => (lead[..n - 1].iter().product(), lead[n - 1]),
        _ => (lead.iter().product(), 1),
    }
}

/// Per group (batch entry), which keys may be attended: `[groups, S]` flattened (see
/// `AttnGeom::key_keep`); `None` attends to every key.
pub(crate) type Keep<'a> = Option<&'a [bool]>;

/// The operands of a fused attention: three tensors, or one packed `[B, T, 3·C]` projection
/// output (q, k, v side by side, `heads` heads each) whose gradient comes back packed too.
enum Source<'a> {
    Separate(&'a Tensor, &'a Tensor, &'a Tensor),
    Packed(&'a Tensor, usize),
}

/// The geometry of every pair, and the leading dims of q.
fn locate(src: &Source, scale: f64, causal: Option<usize>, keep: Keep) -> (AttnGeom, Vec<usize>) {
    let key_keep = keep.map(<[bool]>::to_vec);
    match *src {
        Source::Separate(q, k, v) => {
            let r = q.rank();
            let lead = q.dims()[..r - 2].to_vec();
            let (groups, per_group) = grouping(&lead);
            let geom = AttnGeom {
                l: q.dims()[r - 2],
                s: k.dims()[r - 2],
                d: q.dims()[r - 1],
                dv: v.dims()[r - 1],
                causal,
                scale,
                groups,
                per_group,
                offsets: [pair_offsets(q), pair_offsets(k), pair_offsets(v)],
                row_strides: [q.strides()[r - 2], k.strides()[r - 2], v.strides()[r - 2]],
                packed: false,
                key_keep,
            };
            (geom, lead)
        }
        Source::Packed(qkv, heads) => {
            let (b, t, c) = (qkv.dims()[0], qkv.dims()[1], qkv.dims()[2] / 3);
            let (d, st) = (c / heads, qkv.strides());
            let base: Vec<usize> = (0..b * heads)
                .map(|i| qkv.storage_offset() + (i / heads) * st[0] + (i % heads) * d)
                .collect();
            let part = |j: usize| base.iter().map(|&o| o + j * c).collect();
            let geom = AttnGeom {
                l: t,
                s: t,
                d,
                dv: d,
                causal,
                scale,
                groups: b,
                per_group: heads,
                offsets: [part(0), part(1), part(2)],
                row_strides: [st[1]; 3],
                packed: true,
                key_keep,
            };
            (geom, vec![b, heads])
        }
    }
}

/// The fused attention of f32/f64 operands whose rows may still be strided: `None` when the
/// backend has no fused kernel for them.
fn fused_rows(
    src: Source,
    scale: f64,
    causal: Option<usize>,
    keep: Keep,
) -> Result<Option<Tensor>> {
    match src {
        Source::Separate(q, k, v) => {
            let (q, k, v) = (rows_view(q)?, rows_view(k)?, rows_view(v)?);
            fused_on(Source::Separate(&q, &k, &v), scale, causal, keep)
        }
        Source::Packed(qkv, heads) => {
            let qkv = rows_view(qkv)?;
            fused_on(Source::Packed(&qkv, heads), scale, causal, keep)
        }
    }
}

/// [`fused_rows`] once every operand has contiguous rows.
fn fused_on(src: Source, scale: f64, causal: Option<usize>, keep: Keep) -> Result<Option<Tensor>> {
    // the graph inputs: the three operands, or the packed one
    let inputs: Vec<Tensor> = match src {
        Source::Separate(q, k, v) => vec![q.clone(), k.clone(), v.clone()],
        Source::Packed(qkv, _) => vec![qkv.clone()],
    };
    let (geom, lead) = locate(&src, scale, causal, keep);
    let packed = geom.packed;
    let data: Vec<Tensor> = inputs.iter().map(Tensor::detach).collect();
    // operand j's storage: its own tensor, or the packed one for all three
    let which = move |j: usize| if packed { 0 } else { j };
    let out = {
        let st: Vec<_> = data.iter().map(|t| t.storage()).collect();
        let at = |j: usize| &*st[which(j)];
        at(0).attention(at(1), at(2), &geom)?
    };
    let Some((y, saved)) = out else {
        return Ok(None);
    };
    let y = heads_last(y, &lead, geom.l, geom.dv)?;
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let packed_shape = inputs[0].shape().clone();
    Ok(Some(y.record(
        "ScaledDotProductAttentionBackward",
        &refs,
        move || {
            Box::new(move |g: &Tensor| {
                let g = rows_view(g)?;
                let g_offs = pair_offsets(&g);
                let gr = g.strides()[g.rank() - 2];
                let mut bufs = {
                    let st: Vec<_> = data.iter().map(|t| t.storage()).collect();
                    let at = |j: usize| &*st[which(j)];
                    let gs = g.storage();
                    at(0).attention_backward(at(1), at(2), &saved, &gs, &g_offs, gr, &geom)?
                };
                let mut next = || {
                    bufs.pop().ok_or_else(|| {
                        Error::invalid(
                            "attention_backward",
                            "the backend returned too few gradients",
                        )
                    })
                };
                if packed {
                    return Ok(vec![Some(Tensor::from_storage(
                        next()?,
                        packed_shape.clone(),
                    ))]);
                }
                let (gv, gk, gq) = (next()?, next()?, next()?);
                Ok(vec![
                    Some(heads_last(gq, &lead, geom.l, geom.d)?),
                    Some(heads_last(gk, &lead, geom.s, geom.d)?),
                    Some(heads_last(gv, &lead, geom.s, geom.dv)?),
                ])
            })
        },
    )))
}

/// Causal self-attention of a packed projection output `qkv: [B, T, 3·C]` (q, k and v side by
/// side, each `heads` heads of `C / heads`; a GPT block's `c_attn` output): returns
/// `[B, heads, T, C / heads]` (a view of `[B, T, C]` memory), and the backward writes the
/// gradient of `qkv` as one buffer. One projection product instead of three packs its input
/// once, and its backward is one `[.., 3C] @ [3C, C]` product instead of three and two adds.
/// `None` when it does not apply (not rank 3, `3·C` not divisible, empty, or not float) or the
/// backend has no fused attention: the caller composes the ops.
pub(crate) fn fused_attention_packed(
    qkv: &Tensor,
    heads: usize,
    scale: f64,
    causal: Option<usize>,
    keep: Keep,
) -> Result<Option<Tensor>> {
    let fits = qkv.rank() == 3
        && heads > 0
        && qkv.dims()[2].is_multiple_of(3 * heads)
        && qkv.numel() > 0
        && qkv.dtype().is_float();
    if !fits {
        return Ok(None);
    }
    match qkv.dtype() {
        DType::F32 | DType::F64 => fused_rows(Source::Packed(qkv, heads), scale, causal, keep),
        dt => {
            let q32 = qkv.to_dtype(DType::F32)?;
            fused_rows(Source::Packed(&q32, heads), scale, causal, keep)?
                .map(|y| y.to_dtype(dt))
                .transpose()
        }
    }
}

/// `softmax(scale · q kᵀ) v` in one fused kernel (forward and backward) for `q: [.., L, E]`,
/// `k: [.., S, E]`, `v: [.., S, Ev]` with the same leading dims. `causal: Some(offset)` lets
/// query `i` see keys `0..=i + offset` (see [`causal_softmax`]), `None` all keys. For rank ≥ 4
/// the output (and the inputs' gradients) come back as `[.., L, H, Ev]` buffers viewed as
/// `[.., H, L, Ev]`, so merging the heads afterwards is a free reshape.
/// Returns `None` when the kernel does not apply (different leading dims, empty operands,
/// ranks below 2, or a backend without it): the caller falls back to the composed ops.
pub(crate) fn fused_attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    scale: f64,
    causal: Option<usize>,
    keep: Keep,
) -> Result<Option<Tensor>> {
    let r = q.rank();
    let fits = r >= 2
        && k.rank() == r
        && v.rank() == r
        && q.dims()[..r - 2] == k.dims()[..r - 2]
        && k.dims()[..r - 1] == v.dims()[..r - 1]
        && q.dims()[r - 1] == k.dims()[r - 1]
        && q.numel() > 0
        && k.numel() > 0
        && v.numel() > 0
        && q.dtype() == k.dtype()
        && k.dtype() == v.dtype();
    if !fits {
        return Ok(None);
    }
    match q.dtype() {
        DType::F32 | DType::F64 => fused_rows(Source::Separate(q, k, v), scale, causal, keep),
        dt if dt.is_float() => {
            let f = |t: &Tensor| t.to_dtype(DType::F32);
            let (q, k, v) = (f(q)?, f(k)?, f(v)?);
            fused_rows(Source::Separate(&q, &k, &v), scale, causal, keep)?
                .map(|y| y.to_dtype(dt))
                .transpose()
        }
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The packed entry (one `[B, T, 3C]` operand, its gradient written as one buffer) gives
    /// what the three-operand kernel gives on `narrow`ed views of it: output and gradient.
    #[test]
    fn packed_qkv_matches_separate_operands() -> Result<()> {
        for dt in [DType::F32, DType::F64] {
            let (b, t, h, d) = (2, 7, 3, 5);
            let c = h * d;
            let qkv = Tensor::randn([b, t, 3 * c], dt)?.with_requires_grad();
            let w = Tensor::randn([b, h, t, d], dt)?;
            let mut got = Vec::new();
            for packed in [true, false] {
                qkv.zero_grad();
                let y = if packed {
                    fused_attention_packed(&qkv, h, 0.3, Some(0), None)?
                } else {
                    let part = |i: usize| -> Result<Tensor> {
                        qkv.narrow(2, i * c, c)?
                            .reshape([b, t, h, d])?
                            .transpose(1, 2)
                    };
                    fused_attention(&part(0)?, &part(1)?, &part(2)?, 0.3, Some(0), None)?
                }
                .expect("the fused kernel applies");
                y.mul(&w)?.sum_all()?.backward()?;
                got.push((y.to_f64_vec(), qkv.grad().expect("a gradient").to_f64_vec()));
            }
            let tol = if dt == DType::F32 { 1e-5 } else { 1e-12 };
            for (name, a, e) in [("y", &got[0].0, &got[1].0), ("grad", &got[0].1, &got[1].1)] {
                for (x, z) in a.iter().zip(e.iter()) {
                    assert!(
                        (x - z).abs() <= tol * (1.0 + z.abs()),
                        "{dt:?} {name}: {x} vs {z}"
                    );
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod composed_tests {
    use super::*;

    /// The composed causal softmax (what a backend without the fused kernel runs) gives what
    /// the fused one gives: values and gradients, with and without a key offset.
    #[test]
    fn composed_causal_softmax_matches_fused() -> Result<()> {
        for offset in [0, 2] {
            let x = Tensor::randn([2, 5, 7], DType::F64)?.with_requires_grad();
            let w = Tensor::randn([2, 5, 7], DType::F64)?;
            let mut got = Vec::new();
            for fused in [true, false] {
                x.zero_grad();
                let y = if fused {
                    causal_softmax(&x, 0.7, offset)?
                } else {
                    causal_softmax_composed(&x, 0.7, offset)?
                };
                y.mul(&w)?.sum_all()?.backward()?;
                got.push((y.to_f64_vec(), x.grad().expect("a gradient").to_f64_vec()));
            }
            for (a, e) in got[0]
                .0
                .iter()
                .zip(&got[1].0)
                .chain(got[0].1.iter().zip(&got[1].1))
            {
                assert!((a - e).abs() <= 1e-12, "offset {offset}: {a} vs {e}");
            }
            // the masked entries are exactly 0 on both paths (query 0 sees keys 0..=offset)
            assert_eq!(got[0].0[offset + 1], 0.0);
            assert_eq!(got[1].0[offset + 1], 0.0);
        }
        Ok(())
    }
}
