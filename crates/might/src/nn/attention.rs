//! Scaled dot-product attention and multi-head attention (PyTorch names and mask conventions).
//! The fused kernels behind them are asked for through `ops::attention`; where a backend has
//! none, the attention composes `q kᵀ`, softmax and `p v`.

use super::layers::{as_param, param};
use super::{functional, init, prefixed, Linear, Module};
pub use crate::ops::attention::causal_softmax;
use crate::ops::attention::fused_attention;
use crate::{DType, Error, Result, Tensor};

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
        if let Some(y) = fused_attention(q, k, v, scale, is_causal.then_some(0), None)? {
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
        let e3 = embed_dim.saturating_mul(3); // (too large: refused by `param`)
        let w = param("MultiheadAttention", &[e3, embed_dim], DType::F32)?;
        init::xavier_uniform(&w, 1.0)?;
        let b = match config.bias {
            true => Some(param("MultiheadAttention", &[e3], DType::F32)?),
            false => None,
        };
        let out_proj = Linear::new(embed_dim, embed_dim, config.bias)?;
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

/// `softmax(scale · q kᵀ + padding) v` for `q: [B, H, L, D]`, `k: [B, H, S, D]`,
/// `v: [B, H, S, Dv]` with a key padding mask: `key_keep[b * S + j]` says whether batch entry
/// `b` may attend to key `j` (`None`: every key), as transformers' `attention_mask`.
/// `causal: Some(o)` lets query `i` see keys `0..=i + o`. A masked key's score gets the dtype's
/// lowest value added, as transformers does, so a query whose keys are all masked averages
/// them instead of giving NaN. Runs the fused kernel where the backend has one (the
/// probabilities never leave it), else composes the ops.
#[track_caller]
pub fn masked_attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    scale: f64,
    causal: Option<usize>,
    key_keep: Option<&[bool]>,
) -> Result<Tensor> {
    const OP: &str = "masked_attention";
    if q.rank() != 4 || k.rank() != 4 || v.rank() != 4 {
        return Err(Error::shape(
            OP,
            format!(
                "q, k, v must be [B, H, L, D], got {} {} {}",
                q.shape(),
                k.shape(),
                v.shape()
            ),
        ));
    }
    let (b, s) = (k.dims()[0], k.dims()[2]);
    if let Some(keep) = key_keep {
        if keep.len() != b * s {
            return Err(Error::shape(
                OP,
                format!(
                    "key mask has {} entries, keys {} need [B, S] = [{b}, {s}]",
                    keep.len(),
                    k.shape()
                ),
            ));
        }
    }
    if let Some(y) = fused_attention(q, k, v, scale, causal, key_keep)? {
        return average_fully_masked(y, v, causal, key_keep);
    }
    let mut scores = q.matmul(&k.transpose(-2, -1)?)?.mul_scalar(scale)?;
    if let Some(keep) = key_keep {
        let lowest = match q.dtype() {
            DType::F64 => f64::MIN,
            DType::F16 => half::f16::MIN.to_f64(),
            DType::BF16 => half::bf16::MIN.to_f64(),
            _ => f32::MIN as f64,
        };
        let bias: Vec<f64> = keep.iter().map(|&k| if k { 0.0 } else { lowest }).collect();
        let bias = Tensor::from_vec(bias, [b, 1, 1, s])?
            .to_dtype(q.dtype())?
            .to_device(q.device())?;
        scores = scores.add(&bias)?;
    }
    if let Some(o) = causal {
        let l = q.dims()[2];
        let visible = Tensor::tri_mask(l, s, o as i64, true)?.to_device(q.device())?;
        scores = scores.masked_fill(&visible.logical_not()?, f64::NEG_INFINITY)?;
    }
    average_fully_masked(scores.softmax(-1)?.matmul(v)?, v, causal, key_keep)
}

/// transformers masks causally hidden keys with the same lowest value as padding, so a query
/// that sees only padding (a left-padded row's pad positions) averages *every* value, future
/// ones included. With a causal mask the kernels averaged the visible ones; put the mean of all
/// values in those rows (`y: [B, H, L, Dv]`, `v: [B, H, S, Dv]`).
pub(crate) fn average_fully_masked(
    y: Tensor,
    v: &Tensor,
    causal: Option<usize>,
    key_keep: Option<&[bool]>,
) -> Result<Tensor> {
    let (Some(offset), Some(keep)) = (causal, key_keep) else {
        return Ok(y);
    };
    let (b, l, s) = (y.dims()[0], y.dims()[2], v.dims()[2]);
    // row i of entry e sees keys 0..=i + offset: fully masked before the first kept key
    let rows: Vec<bool> = keep
        .chunks_exact(s)
        .flat_map(|kb| {
            let first = kb.iter().position(|&k| k).unwrap_or(usize::MAX);
            (0..l).map(move |i| first > i + offset)
        })
        .collect();
    if !rows.contains(&true) {
        return Ok(y);
    }
    let cond = Tensor::from_vec(rows, [b, 1, l, 1])?.to_device(y.device())?;
    Tensor::where_(&cond, &v.mean(2, true)?, &y)
}

/// A `[B, S]` attention mask (bool, or numbers: nonzero attends) as the flat `key_keep` of
/// [`masked_attention`]. Reads the mask on the host.
#[track_caller]
pub fn key_keep_from_mask(mask: &Tensor) -> Result<Vec<bool>> {
    if mask.rank() != 2 {
        return Err(Error::shape(
            "attention_mask",
            format!("must be [batch, keys], got {}", mask.shape()),
        ));
    }
    let m = mask.to_dtype(DType::F32)?.to_vec::<f32>()?;
    Ok(m.into_iter().map(|m| m != 0.0).collect())
}
