//! Scaled dot-product attention and multi-head attention (PyTorch names and mask conventions).

use super::attention_kernels::{self, Dims, Pairs};
use super::layers::{as_param, param};
use super::{functional, init, prefixed, Linear, Module};
use crate::backend::cpu::fused::{map_blocks, rows_per_task, with_slice, Real};
use crate::backend::cpu::rows::{row_dot, row_max, row_sum};
use crate::backend::cpu::{pool, simd};
use crate::{DType, Error, Result, Tensor};

/// Forward of [`causal_softmax`] on contiguous rows of `s` keys; row `r` is query
/// `r % t`, which sees keys `0..=query + offset`.
fn causal_softmax_fwd<T: Real>(x: &[T], t: usize, s: usize, scale: T, offset: usize) -> Vec<T> {
    let rows = x.len() / s;
    // masked (future) positions stay zero
    let mut y = pool::zeroed::<T>(x.len());
    let rpt = rows_per_task(s, rows);
    map_blocks(&mut y, rpt * s, |bi, yb| {
        simd::run(
            #[inline(always)]
            || {
                for (r, yr) in yb.chunks_mut(s).enumerate() {
                    let row = bi * rpt + r;
                    let valid = ((row % t) + offset + 1).min(s);
                    let (xr, yr) = (&x[row * s..row * s + valid], &mut yr[..valid]);
                    let m = row_max(xr) * scale;
                    let m = if m.is_finite() { m } else { T::f(0.0) };
                    for (o, &v) in yr.iter_mut().zip(xr) {
                        *o = (v * scale - m).exp_();
                    }
                    let inv = T::f(1.0) / row_sum(yr, |e| e);
                    for o in yr.iter_mut() {
                        *o = *o * inv;
                    }
                }
            },
        )
    });
    y
}

/// Backward of [`causal_softmax`]: `dx = scale·y·(g - Σ g·y)` on the visible keys, 0 elsewhere.
fn causal_softmax_bwd<T: Real>(
    g: &[T],
    y: &[T],
    t: usize,
    s: usize,
    scale: T,
    offset: usize,
) -> Vec<T> {
    let rows = y.len() / s;
    let mut dx = pool::zeroed::<T>(y.len());
    let rpt = rows_per_task(s, rows);
    map_blocks(&mut dx, rpt * s, |bi, db| {
        simd::run(
            #[inline(always)]
            || {
                for (r, dr) in db.chunks_mut(s).enumerate() {
                    let row = bi * rpt + r;
                    let valid = ((row % t) + offset + 1).min(s);
                    let (gr, yr) = (&g[row * s..row * s + valid], &y[row * s..row * s + valid]);
                    let dot = row_dot(gr, yr);
                    for ((o, &gv), &yv) in dr[..valid].iter_mut().zip(gr).zip(yr) {
                        *o = scale * yv * (gv - dot);
                    }
                }
            },
        )
    });
    dx
}

fn causal_softmax_typed<T: Real>(scores: &Tensor, scale: f64, offset: usize) -> Result<Tensor> {
    let r = scores.rank();
    let (t, s) = (scores.dims()[r - 2], scores.dims()[r - 1]);
    let sc = T::f(scale);
    let y = with_slice::<T, _>(scores, |xs| causal_softmax_fwd(xs, t, s, sc, offset))?;
    let shape = scores.shape().clone();
    let out = Tensor::from_vec(y, shape.clone())?;
    let yd = out.detach();
    Ok(out.record("CausalSoftmaxBackward", &[scores], move || {
        Box::new(move |g: &Tensor| {
            let gv = g.contiguous()?.to_vec::<T>()?;
            let dx = with_slice::<T, _>(&yd, |ys| causal_softmax_bwd(&gv, ys, t, s, sc, offset))?;
            Ok(vec![Some(Tensor::from_vec(dx, shape.clone())?)])
        })
    }))
}

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
    if !scores.device().is_cpu() {
        // the fused kernel reads host memory: other devices compose the same softmax
        let r = scores.rank();
        let (t, s) = (scores.dims()[r - 2], scores.dims()[r - 1]);
        let keep = Tensor::tri_mask(t, s, offset as i64, true)?.to_device(scores.device())?;
        return scores
            .mul_scalar(scale)?
            .masked_fill(&keep.logical_not()?, f64::NEG_INFINITY)?
            .softmax(-1);
    }
    match scores.dtype() {
        DType::F32 => causal_softmax_typed::<f32>(scores, scale, offset),
        DType::F64 => causal_softmax_typed::<f64>(scores, scale, offset),
        dt => {
            causal_softmax_typed::<f32>(&scores.to_dtype(DType::F32)?, scale, offset)?.to_dtype(dt)
        }
    }
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
fn heads_last<T: Real>(buf: Vec<T>, lead: &[usize], rows: usize, cols: usize) -> Result<Tensor> {
    let r = lead.len() + 2;
    let mut phys = lead.to_vec();
    if r >= 4 {
        phys.insert(r - 3, rows);
        phys.push(cols);
        Tensor::from_vec(buf, phys)?.transpose(r as isize - 3, r as isize - 2)
    } else {
        phys.extend([rows, cols]);
        Tensor::from_vec(buf, phys)
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

fn slice_of<T: Real>(s: &crate::storage::Storage) -> Result<&[T]> {
    T::slice(s.cpu()?).ok_or_else(|| Error::dtype("attention", format!("expected {}", T::DTYPE)))
}

/// The operands of a fused attention: three tensors, or one packed `[B, T, 3·C]` projection
/// output (q, k, v side by side, `heads` heads each) whose gradient comes back packed too.
enum Source<'a> {
    Separate(&'a Tensor, &'a Tensor, &'a Tensor),
    Packed(&'a Tensor, usize),
}

/// What the kernels need to find every pair: sizes, leading dims, offsets and row strides.
struct Located {
    dm: Dims,
    lead: Vec<usize>,
    offs: [Vec<usize>; 3],
    rs: (usize, usize, usize),
}

fn locate(src: &Source, offset: Option<usize>) -> Located {
    match *src {
        Source::Separate(q, k, v) => {
            let r = q.rank();
            Located {
                dm: Dims {
                    l: q.dims()[r - 2],
                    s: k.dims()[r - 2],
                    d: q.dims()[r - 1],
                    dv: v.dims()[r - 1],
                    offset,
                },
                lead: q.dims()[..r - 2].to_vec(),
                offs: [pair_offsets(q), pair_offsets(k), pair_offsets(v)],
                rs: (q.strides()[r - 2], k.strides()[r - 2], v.strides()[r - 2]),
            }
        }
        Source::Packed(qkv, heads) => {
            let (b, t, c) = (qkv.dims()[0], qkv.dims()[1], qkv.dims()[2] / 3);
            let (d, st) = (c / heads, qkv.strides());
            let base: Vec<usize> = (0..b * heads)
                .map(|i| qkv.storage_offset() + (i / heads) * st[0] + (i % heads) * d)
                .collect();
            let part = |j: usize| base.iter().map(|&o| o + j * c).collect();
            Located {
                dm: Dims {
                    l: t,
                    s: t,
                    d,
                    dv: d,
                    offset,
                },
                lead: vec![b, heads],
                offs: [part(0), part(1), part(2)],
                rs: (st[1], st[1], st[1]),
            }
        }
    }
}

fn fused_typed<T: Real>(src: Source, scale: f64, offset: Option<usize>) -> Result<Tensor> {
    match src {
        Source::Separate(q, k, v) => {
            let (q, k, v) = (rows_view(q)?, rows_view(k)?, rows_view(v)?);
            fused_on::<T>(Source::Separate(&q, &k, &v), scale, offset)
        }
        Source::Packed(qkv, heads) => {
            let qkv = rows_view(qkv)?;
            fused_on::<T>(Source::Packed(&qkv, heads), scale, offset)
        }
    }
}

/// [`fused_typed`] once every operand has contiguous rows.
fn fused_on<T: Real>(src: Source, scale: f64, offset: Option<usize>) -> Result<Tensor> {
    // the graph inputs: the three operands, or the packed one
    let inputs: Vec<Tensor> = match src {
        Source::Separate(q, k, v) => vec![q.clone(), k.clone(), v.clone()],
        Source::Packed(qkv, _) => vec![qkv.clone()],
    };
    let Located { dm, lead, offs, rs } = locate(&src, offset);
    let packed = matches!(src, Source::Packed(..));
    let (groups, per_group) = grouping(&lead);
    let sc = T::f(scale);
    let data: Vec<Tensor> = inputs.iter().map(Tensor::detach).collect();
    // operand j's storage: its own tensor, or the packed one for all three
    let which = move |j: usize| if packed { 0 } else { j };
    let (y, p) = {
        let st: Vec<_> = data.iter().map(|t| t.storage()).collect();
        let sl = |j: usize| slice_of::<T>(&st[which(j)]);
        let at = Pairs::new(groups, per_group, &offs, rs);
        attention_kernels::forward(dm, sc, (sl(0)?, sl(1)?, sl(2)?), at)
    };
    let y = heads_last(y, &lead, dm.l, dm.dv)?;
    let plen = p.len();
    let p = Tensor::from_vec(p, [plen])?;
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let packed_shape = inputs[0].shape().clone();
    Ok(
        y.record("ScaledDotProductAttentionBackward", &refs, move || {
            Box::new(move |g: &Tensor| {
                let g = rows_view(g)?;
                let g_offs = pair_offsets(&g);
                let mut bufs = {
                    let st: Vec<_> = data.iter().map(|t| t.storage()).collect();
                    let sl = |j: usize| slice_of::<T>(&st[which(j)]);
                    let (ps, gs) = (p.storage(), g.storage());
                    let at = Pairs::new(groups, per_group, &offs, rs);
                    let (pd, gd) = (slice_of::<T>(&ps)?, slice_of::<T>(&gs)?);
                    let gr = g.strides()[g.rank() - 2];
                    let ops = (sl(0)?, sl(1)?, sl(2)?);
                    attention_kernels::backward(dm, sc, ops, at, pd, (gd, &g_offs, gr), packed)
                };
                if packed {
                    let buf = bufs.pop().expect("one packed gradient");
                    return Ok(vec![Some(Tensor::from_vec(buf, packed_shape.clone())?)]);
                }
                let gv = bufs.pop().expect("three gradients");
                let gk = bufs.pop().expect("three gradients");
                let gq = bufs.pop().expect("three gradients");
                Ok(vec![
                    Some(heads_last(gq, &lead, dm.l, dm.d)?),
                    Some(heads_last(gk, &lead, dm.s, dm.d)?),
                    Some(heads_last(gv, &lead, dm.s, dm.dv)?),
                ])
            })
        }),
    )
}

/// Causal self-attention of a packed projection output `qkv: [B, T, 3·C]` (q, k and v side by
/// side, each `heads` heads of `C / heads`; a GPT block's `c_attn` output): returns
/// `[B, heads, T, C / heads]` (a view of `[B, T, C]` memory), and the backward writes the
/// gradient of `qkv` as one buffer. One projection product instead of three packs its input
/// once, and its backward is one `[.., 3C] @ [3C, C]` product instead of three and two adds.
/// `None` when it does not apply (not rank 3, `3·C` not divisible, empty, or not float).
pub(crate) fn fused_attention_packed(
    qkv: &Tensor,
    heads: usize,
    scale: f64,
    causal: Option<usize>,
) -> Result<Option<Tensor>> {
    let fits = qkv.rank() == 3
        && heads > 0
        && qkv.dims()[2].is_multiple_of(3 * heads)
        && qkv.numel() > 0
        && qkv.dtype().is_float()
        && qkv.device().is_cpu();
    if !fits {
        return Ok(None);
    }
    let src = Source::Packed(qkv, heads);
    Ok(Some(match qkv.dtype() {
        DType::F32 => fused_typed::<f32>(src, scale, causal)?,
        DType::F64 => fused_typed::<f64>(src, scale, causal)?,
        dt => {
            let q32 = qkv.to_dtype(DType::F32)?;
            fused_typed::<f32>(Source::Packed(&q32, heads), scale, causal)?.to_dtype(dt)?
        }
    }))
}

/// `softmax(scale · q kᵀ) v` in one fused kernel (forward and backward) for `q: [.., L, E]`,
/// `k: [.., S, E]`, `v: [.., S, Ev]` with the same leading dims. `causal: Some(offset)` lets
/// query `i` see keys `0..=i + offset` (see [`causal_softmax`]), `None` all keys. For rank ≥ 4
/// the output (and the inputs' gradients) come back as `[.., L, H, Ev]` buffers viewed as
/// `[.., H, L, Ev]`, so merging the heads afterwards is a free reshape.
/// Returns `None` when the kernel does not apply (different leading dims, empty operands or
/// ranks below 2): the caller falls back to the composed ops.
pub(crate) fn fused_attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    scale: f64,
    causal: Option<usize>,
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
        && k.dtype() == v.dtype()
        && q.device().is_cpu();
    if !fits {
        return Ok(None);
    }
    Ok(Some(match q.dtype() {
        DType::F32 => fused_typed::<f32>(Source::Separate(q, k, v), scale, causal)?,
        DType::F64 => fused_typed::<f64>(Source::Separate(q, k, v), scale, causal)?,
        dt if dt.is_float() => {
            let f = |t: &Tensor| t.to_dtype(DType::F32);
            let (q, k, v) = (f(q)?, f(k)?, f(v)?);
            fused_typed::<f32>(Source::Separate(&q, &k, &v), scale, causal)?.to_dtype(dt)?
        }
        _ => return Ok(None),
    }))
}

/// Turn a mask into an additive float mask: bool `true` = attend (sdpa convention) becomes 0,
/// `false` becomes -inf; float masks are added as they are.
fn additive(op: &str, mask: &Tensor, dtype: DType, true_means_keep: bool) -> Result<Tensor> {
    if mask.dtype() == DType::Bool {
        let blocked = if true_means_keep {
            mask.logical_not()?
        } else {
            mask.clone()
        };
        Tensor::zeros_on((), dtype, mask.device())?
            .broadcast_to(mask.shape().clone())?
            .masked_fill(&blocked, f64::NEG_INFINITY)
    } else if mask.dtype().is_float() {
        mask.to_dtype(dtype)
    } else {
        Err(Error::dtype(
            op,
            format!("attention mask must be bool or float, got {}", mask.dtype()),
        ))
    }
}

/// Softmax attention probabilities `softmax(q kᵀ / sqrt(E) + mask)` with dropout.
fn attention_probs(
    q: &Tensor,
    k: &Tensor,
    mask: Option<&Tensor>,
    dropout_p: f64,
    is_causal: bool,
) -> Result<Tensor> {
    let e = q.dims()[q.rank() - 1];
    let scale = 1.0 / (e as f64).sqrt();
    if is_causal && mask.is_none() {
        let p = causal_softmax(&q.matmul(&k.transpose(-2, -1)?)?, scale, 0)?;
        return functional::dropout(&p, dropout_p, dropout_p > 0.0);
    }
    let mut s = q.matmul(&k.transpose(-2, -1)?)?.mul_scalar(scale)?;
    if is_causal {
        let (l, sl) = (q.dims()[q.rank() - 2], k.dims()[k.rank() - 2]);
        let keep = Tensor::tri_mask(l, sl, 0, true)?.to_device(q.device())?;
        s = s.masked_fill(&keep.logical_not()?, f64::NEG_INFINITY)?;
    }
    if let Some(m) = mask {
        s = s.add(m)?;
    }
    let p = s.softmax(-1)?;
    functional::dropout(&p, dropout_p, dropout_p > 0.0)
}

/// `softmax(q kᵀ / sqrt(E) + mask) v` for `q: [.., L, E]`, `k: [.., S, E]`, `v: [.., S, Ev]`
/// (`torch.nn.functional.scaled_dot_product_attention`). A bool `attn_mask` marks the pairs
/// that may attend (`true`); a float one is added to the scores. `is_causal` blocks keys after
/// the query position (top-left aligned causal mask). Dropout on the probabilities uses the
/// global generator. Rows with every key masked come out NaN, as in PyTorch.
#[track_caller]
pub fn scaled_dot_product_attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    attn_mask: Option<&Tensor>,
    dropout_p: f64,
    is_causal: bool,
) -> Result<Tensor> {
    const OP: &str = "scaled_dot_product_attention";
    if q.rank() < 2 || k.rank() < 2 || v.rank() < 2 {
        return Err(Error::shape(
            OP,
            format!(
                "q, k, v need at least 2 dims, got {} {} {}",
                q.shape(),
                k.shape(),
                v.shape()
            ),
        ));
    }
    let (qe, ke) = (q.dims()[q.rank() - 1], k.dims()[k.rank() - 1]);
    let (ks, vs) = (k.dims()[k.rank() - 2], v.dims()[v.rank() - 2]);
    if qe != ke || ks != vs {
        return Err(Error::shape(
            OP,
            format!(
                "q {} and k {} must share the last dim, k and v {} the key length",
                q.shape(),
                k.shape(),
                v.shape()
            ),
        ));
    }
    if attn_mask.is_none() && dropout_p == 0.0 {
        let scale = 1.0 / (qe as f64).sqrt();
        if let Some(y) = fused_attention(q, k, v, scale, is_causal.then_some(0))? {
            return Ok(y);
        }
    }
    let mask = attn_mask
        .map(|m| additive(OP, m, q.dtype(), true))
        .transpose()?;
    attention_probs(q, k, mask.as_ref(), dropout_p, is_causal)?.matmul(v)
}

/// Options of [`MultiheadAttention`] (PyTorch defaults via `Default`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MhaConfig {
    /// Dropout on the attention probabilities while training.
    pub dropout: f64,
    /// Biases on the input and output projections.
    pub bias: bool,
    /// Inputs are `[N, L, E]` (else `[L, N, E]`, PyTorch's default).
    pub batch_first: bool,
}

impl Default for MhaConfig {
    fn default() -> Self {
        MhaConfig {
            dropout: 0.0,
            bias: true,
            batch_first: false,
        }
    }
}

/// Multi-head attention (`torch.nn.MultiheadAttention` with equal q/k/v dims): parameters
/// `in_proj_weight [3E, E]`, `in_proj_bias [3E]`, `out_proj.weight [E, E]`, `out_proj.bias [E]`.
pub struct MultiheadAttention {
    pub embed_dim: usize,
    pub num_heads: usize,
    pub in_proj_weight: Tensor,
    pub in_proj_bias: Option<Tensor>,
    pub out_proj: Linear,
    pub config: MhaConfig,
    training: bool,
}

impl MultiheadAttention {
    /// PyTorch init: xavier-uniform `in_proj_weight`, zero biases, default Linear `out_proj`
    /// weight.
    #[track_caller]
    pub fn new(embed_dim: usize, num_heads: usize, config: MhaConfig) -> Result<Self> {
        if num_heads == 0 || !embed_dim.is_multiple_of(num_heads) {
            return Err(Error::invalid(
                "MultiheadAttention",
                format!("embed_dim {embed_dim} must be divisible by num_heads {num_heads}"),
            ));
        }
        let w = param(&[3 * embed_dim, embed_dim], DType::F32);
        init::xavier_uniform(&w, 1.0)?;
        let b = config.bias.then(|| param(&[3 * embed_dim], DType::F32));
        let out_proj = Linear::new(embed_dim, embed_dim, config.bias);
        if let Some(ob) = &out_proj.bias {
            init::zeros(ob)?;
        }
        Ok(MultiheadAttention {
            embed_dim,
            num_heads,
            in_proj_weight: w,
            in_proj_bias: b,
            out_proj,
            config,
            training: true,
        })
    }

    /// Build from given tensors (e.g. f64 copies for gradient checks, or loaded weights).
    #[track_caller]
    pub fn from_weights(
        num_heads: usize,
        in_proj_weight: Tensor,
        in_proj_bias: Option<Tensor>,
        out_proj: Linear,
        config: MhaConfig,
    ) -> Result<Self> {
        let e = out_proj.out_features();
        if in_proj_weight.dims() != [3 * e, e] || num_heads == 0 || !e.is_multiple_of(num_heads) {
            return Err(Error::shape(
                "MultiheadAttention",
                format!(
                    "in_proj_weight {} must be [3E, E] with E = {e} divisible by {num_heads} heads",
                    in_proj_weight.shape()
                ),
            ));
        }
        Ok(MultiheadAttention {
            embed_dim: e,
            num_heads,
            in_proj_weight: as_param(in_proj_weight),
            in_proj_bias: in_proj_bias.map(as_param),
            out_proj,
            config,
            training: true,
        })
    }

    fn project(&self, x: &Tensor, i: usize) -> Result<Tensor> {
        let e = self.embed_dim;
        let w = self.in_proj_weight.narrow(0, i * e, e)?;
        let b = self
            .in_proj_bias
            .as_ref()
            .map(|b| b.narrow(0, i * e, e))
            .transpose()?;
        functional::linear(x, &w, b.as_ref())
    }

    /// `[N, L, E]` -> `[N, H, L, D]`.
    fn heads(&self, x: &Tensor) -> Result<Tensor> {
        let (n, l) = (x.dims()[0], x.dims()[1]);
        let h = self.num_heads;
        x.reshape([n, l, h, self.embed_dim / h])?.transpose(1, 2)
    }

    /// Attention of `query` over `key`/`value`. `key_padding_mask: [N, S]` and a bool
    /// `attn_mask: [L, S]` or `[N·H, L, S]` mark with `true` the positions NOT to attend (the
    /// `nn.MultiheadAttention` convention); float masks are added. Returns the output and,
    /// when `need_weights`, the attention probabilities averaged over heads `[N, L, S]`.
    #[track_caller]
    pub fn forward_attn(
        &self,
        query: &Tensor,
        key: &Tensor,
        value: &Tensor,
        key_padding_mask: Option<&Tensor>,
        need_weights: bool,
        attn_mask: Option<&Tensor>,
    ) -> Result<(Tensor, Option<Tensor>)> {
        const OP: &str = "MultiheadAttention";
        let unbatched = query.rank() == 2;
        let prep = |t: &Tensor| -> Result<Tensor> {
            let t = if unbatched {
                t.unsqueeze(1)?
            } else {
                t.clone()
            };
            if t.rank() != 3 || t.dims()[2] != self.embed_dim {
                return Err(Error::shape(
                    OP,
                    format!(
                        "inputs must be [L, N, E] / [N, L, E] / [L, E] with E = {}, got {}",
                        self.embed_dim,
                        t.shape()
                    ),
                ));
            }
            if self.config.batch_first && !unbatched {
                Ok(t)
            } else {
                t.transpose(0, 1)
            }
        };
        let (q, k, v) = (prep(query)?, prep(key)?, prep(value)?);
        let (n, l, s) = (q.dims()[0], q.dims()[1], k.dims()[1]);
        if k.dims()[0] != n || v.dims()[..2] != k.dims()[..2] {
            return Err(Error::shape(
                OP,
                format!(
                    "query {}, key {}, value {} disagree on batch or key length",
                    query.shape(),
                    key.shape(),
                    value.shape()
                ),
            ));
        }
        let (qh, kh, vh) = (
            self.heads(&self.project(&q, 0)?)?,
            self.heads(&self.project(&k, 1)?)?,
            self.heads(&self.project(&v, 2)?)?,
        );
        let h = self.num_heads;
        let mut mask: Option<Tensor> = None;
        if let Some(m) = attn_mask {
            let m = additive(OP, m, q.dtype(), false)?;
            let m = match m.rank() {
                2 => m,
                3 => m.reshape([n, h, l, s])?,
                _ => {
                    return Err(Error::shape(
                        OP,
                        format!("attn_mask must be [L, S] or [N*H, L, S], got {}", m.shape()),
                    ))
                }
            };
            mask = Some(m);
        }
        if let Some(kp) = key_padding_mask {
            let kp = if unbatched {
                kp.unsqueeze(0)?
            } else {
                kp.clone()
            };
            if kp.dims() != [n, s] {
                return Err(Error::shape(
                    OP,
                    format!(
                        "key_padding_mask must be [N, S] = [{n}, {s}], got {}",
                        kp.shape()
                    ),
                ));
            }
            let kp = additive(OP, &kp, q.dtype(), false)?.reshape([n, 1, 1, s])?;
            mask = Some(match mask {
                Some(m) => m.add(&kp)?,
                None => kp,
            });
        }
        let p_drop = if self.training {
            self.config.dropout
        } else {
            0.0
        };
        let probs = attention_probs(&qh, &kh, mask.as_ref(), p_drop, false)?;
        let o = probs
            .matmul(&vh)?
            .transpose(1, 2)?
            .reshape([n, l, self.embed_dim])?;
        let mut o = self.out_proj.forward(&o)?;
        if unbatched {
            o = o.squeeze(0)?;
        } else if !self.config.batch_first {
            o = o.transpose(0, 1)?;
        }
        let w = if need_weights {
            let w = probs.mean(1, false)?;
            Some(if unbatched { w.squeeze(0)? } else { w })
        } else {
            None
        };
        Ok((o, w))
    }
}

impl Module for MultiheadAttention {
    /// Self-attention without masks.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(self.forward_attn(x, x, x, None, false, None)?.0)
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        let mut v = vec![("in_proj_weight".to_string(), self.in_proj_weight.clone())];
        if let Some(b) = &self.in_proj_bias {
            v.push(("in_proj_bias".to_string(), b.clone()));
        }
        v.extend(prefixed("out_proj", self.out_proj.named_parameters()));
        v
    }
    fn train(&mut self, mode: bool) {
        self.training = mode;
    }
    fn is_training(&self) -> bool {
        self.training
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
                    fused_attention_packed(&qkv, h, 0.3, Some(0))?
                } else {
                    let part = |i: usize| -> Result<Tensor> {
                        qkv.narrow(2, i * c, c)?
                            .reshape([b, t, h, d])?
                            .transpose(1, 2)
                    };
                    fused_attention(&part(0)?, &part(1)?, &part(2)?, 0.3, Some(0))?
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
