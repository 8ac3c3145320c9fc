//! GPT-2 (`GPT2LMHeadModel`) as the Hugging Face Hub stores it: learned token and position
//! embeddings, pre-LayerNorm blocks of causal self-attention and an MLP, a final LayerNorm and
//! an LM head (tied to the token embedding unless `tie_word_embeddings` is false).
//!
//! GPT-2's linear layers are `Conv1D`s whose weights are stored `[in, out]`, the transpose of
//! `nn.Linear`; they are used through transposed views, never copied. Checkpoints name their
//! tensors with the `transformer.` prefix (`GPT2LMHeadModel`) or without it (`GPT2Model`, the
//! original `gpt2` upload); both load. Padded batches work as in transformers: an
//! `attention_mask` `[B, S]` hides the padding keys and `position_ids` place each row's tokens.

use super::config::{Activation, HfConfig};
use super::generate::{sample_logits, SampleConfig};
use super::kv_cache::{self, KvCache};
use super::weights::Weights;
use crate::nn::{
    average_fully_masked, functional, key_keep_from_mask, masked_attention, LayerNorm, Module,
};
use crate::ops::attention::fused_attention_packed;
use crate::{no_grad, DType, Device, Error, Generator, Result, Tensor};

/// GPT-2's `config.json` fields (transformers' defaults where a field is absent).
#[derive(Clone, Debug, PartialEq)]
pub struct Gpt2Config {
    pub vocab_size: usize,
    /// Longest sequence (rows of the position embedding).
    pub n_positions: usize,
    pub n_embd: usize,
    pub n_layer: usize,
    pub n_head: usize,
    /// Width of the MLP (`n_inner`, default `4 · n_embd`).
    pub n_inner: usize,
    /// `activation_function` (default `gelu_new`).
    pub activation: Activation,
    pub layer_norm_epsilon: f64,
    /// The LM head is the token embedding (default true).
    pub tie_word_embeddings: bool,
    /// Divide scores by `sqrt(head dim)` (default true).
    pub scale_attn_weights: bool,
    /// Also divide layer `i`'s scores by `i + 1` (default false).
    pub scale_attn_by_inverse_layer_idx: bool,
    pub bos_token_id: Option<usize>,
    /// Generation stops at this token.
    pub eos_token_id: Option<usize>,
}

impl Gpt2Config {
    /// The 124M-parameter GPT-2 (`gpt2` on the Hub).
    pub fn gpt2_124m() -> Gpt2Config {
        Gpt2Config {
            vocab_size: 50257,
            n_positions: 1024,
            n_embd: 768,
            n_layer: 12,
            n_head: 12,
            n_inner: 3072,
            activation: Activation::GeluTanh,
            layer_norm_epsilon: 1e-5,
            tie_word_embeddings: true,
            scale_attn_weights: true,
            scale_attn_by_inverse_layer_idx: false,
            bos_token_id: Some(50256),
            eos_token_id: Some(50256),
        }
    }

    /// Read the fields of a `config.json`.
    #[track_caller]
    pub fn from_config(c: &HfConfig) -> Result<Gpt2Config> {
        let n_embd = c.usize("n_embd", Some(768))?;
        let cfg = Gpt2Config {
            vocab_size: c.usize("vocab_size", Some(50257))?,
            n_positions: c.usize("n_positions", Some(1024))?,
            n_embd,
            n_layer: c.usize("n_layer", Some(12))?,
            n_head: c.usize("n_head", Some(12))?,
            n_inner: c.opt_usize("n_inner")?.unwrap_or(4 * n_embd),
            activation: Activation::from_name(&c.str("activation_function", "gelu_new")?)?,
            layer_norm_epsilon: c.f64("layer_norm_epsilon", 1e-5)?,
            tie_word_embeddings: c.bool("tie_word_embeddings", true)?,
            scale_attn_weights: c.bool("scale_attn_weights", true)?,
            scale_attn_by_inverse_layer_idx: c.bool("scale_attn_by_inverse_layer_idx", false)?,
            bos_token_id: c.opt_usize("bos_token_id")?,
            eos_token_id: c.opt_usize("eos_token_id")?,
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// Reject sizes the model cannot be built with.
    #[track_caller]
    pub fn validate(&self) -> Result<()> {
        let c = self;
        let sizes = [c.vocab_size, c.n_positions, c.n_embd, c.n_head, c.n_inner];
        if sizes.contains(&0) || !c.n_embd.is_multiple_of(c.n_head) {
            return Err(Error::invalid(
                "Gpt2Config",
                format!(
                    "vocab_size, n_positions, n_embd, n_head and n_inner must be positive and \
                     n_embd divisible by n_head: {c:?}"
                ),
            ));
        }
        if c.layer_norm_epsilon.is_nan() || c.layer_norm_epsilon <= 0.0 {
            return Err(Error::invalid(
                "Gpt2Config",
                format!(
                    "layer_norm_epsilon must be positive, got {}",
                    c.layer_norm_epsilon
                ),
            ));
        }
        Ok(())
    }
}

/// A Conv1D's weight `[in, out]` as the `[out, in]` Linear weight (a transposed view) + bias.
struct Proj {
    weight: Tensor,
    bias: Tensor,
}

impl Proj {
    fn load(w: &Weights, inp: usize, out: usize) -> Result<Proj> {
        Ok(Proj {
            weight: w.get("weight", &[inp, out])?.t()?,
            bias: w.get("bias", &[out])?,
        })
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        functional::linear(x, &self.weight, Some(&self.bias))
    }
}

struct Block {
    ln_1: LayerNorm,
    c_attn: Proj,
    c_proj: Proj,
    ln_2: LayerNorm,
    c_fc: Proj,
    mlp_proj: Proj,
}

/// `GPT2LMHeadModel`; see the module docs.
pub struct Gpt2 {
    pub config: Gpt2Config,
    wte: Tensor,
    wpe: Tensor,
    h: Vec<Block>,
    ln_f: LayerNorm,
    /// `[vocab, n_embd]`: `wte` itself when tied.
    lm_head: Tensor,
}

fn layer_norm(w: &Weights, n: usize, eps: f64) -> Result<LayerNorm> {
    LayerNorm::from_weights(w.get("weight", &[n])?, Some(w.get("bias", &[n])?), eps)
}

impl Gpt2 {
    /// Build from a checkpoint's tensors (with or without the `transformer.` prefix; an
    /// `lm_head.weight` is used when the head is untied and ignored when tied).
    #[track_caller]
    pub fn load(config: Gpt2Config, weights: &Weights) -> Result<Gpt2> {
        config.validate()?;
        let c = config.n_embd;
        let t = if weights.contains("transformer.wte.weight") {
            weights.pp("transformer")
        } else {
            weights.clone()
        };
        let eps = config.layer_norm_epsilon;
        let mut h = Vec::with_capacity(config.n_layer);
        for i in 0..config.n_layer {
            let b = t.pp(format!("h.{i}"));
            h.push(Block {
                ln_1: layer_norm(&b.pp("ln_1"), c, eps)?,
                c_attn: Proj::load(&b.pp("attn.c_attn"), c, 3 * c)?,
                c_proj: Proj::load(&b.pp("attn.c_proj"), c, c)?,
                ln_2: layer_norm(&b.pp("ln_2"), c, eps)?,
                c_fc: Proj::load(&b.pp("mlp.c_fc"), c, config.n_inner)?,
                mlp_proj: Proj::load(&b.pp("mlp.c_proj"), config.n_inner, c)?,
            });
        }
        let wte = t.get("wte.weight", &[config.vocab_size, c])?;
        let lm_head = if config.tie_word_embeddings {
            wte.clone()
        } else {
            weights.get("lm_head.weight", &[config.vocab_size, c])?
        };
        Ok(Gpt2 {
            wpe: t.get("wpe.weight", &[config.n_positions, c])?,
            ln_f: layer_norm(&t.pp("ln_f"), c, eps)?,
            wte,
            h,
            lm_head,
            config,
        })
    }

    /// The model's device.
    pub fn device(&self) -> Device {
        self.wte.device()
    }

    /// The model's dtype.
    pub fn dtype(&self) -> DType {
        self.wte.dtype()
    }

    /// Logits `[B, T, vocab]` for int64 `input_ids: [B, T]`, as `model(input_ids,
    /// attention_mask=..., position_ids=...).logits` in transformers. `attention_mask: [B, T]`
    /// (nonzero = a real token) hides padding keys; `position_ids: [B, T]` default to
    /// `0..T`.
    #[track_caller]
    pub fn forward(
        &self,
        input_ids: &Tensor,
        attention_mask: Option<&Tensor>,
        position_ids: Option<&Tensor>,
    ) -> Result<Tensor> {
        self.run(input_ids, attention_mask, position_ids, None)
    }

    /// An empty cache for `batch` sequences.
    pub fn new_cache(&self, batch: usize) -> Result<KvCache> {
        let c = &self.config;
        let shape = [batch, c.n_head, c.n_positions, c.n_embd / c.n_head];
        KvCache::zeros(c.n_layer, shape, self.dtype(), self.device())
    }

    /// Logits of `input_ids: [B, T]` continuing the positions already in `cache`, then append
    /// their keys and values (no gradients). `attention_mask`, when given, covers the cached
    /// and the new positions: `[B, cache.len() + T]`.
    #[track_caller]
    pub fn forward_cached(
        &self,
        input_ids: &Tensor,
        attention_mask: Option<&Tensor>,
        position_ids: Option<&Tensor>,
        cache: &mut KvCache,
    ) -> Result<Tensor> {
        let _g = no_grad();
        if input_ids.rank() != 2 || !cache.fits(self.h.len(), input_ids.dims()[0]) {
            return Err(Error::shape(
                "Gpt2::forward_cached",
                format!(
                    "the cache does not fit this model and input_ids {}",
                    input_ids.shape()
                ),
            ));
        }
        let out = self.run(input_ids, attention_mask, position_ids, Some(cache))?;
        cache.len += input_ids.dims()[1];
        Ok(out)
    }

    fn run(
        &self,
        ids: &Tensor,
        mask: Option<&Tensor>,
        pos: Option<&Tensor>,
        mut cache: Option<&mut KvCache>,
    ) -> Result<Tensor> {
        const OP: &str = "Gpt2";
        let past = cache.as_ref().map_or(0, |c| c.len);
        if ids.dtype() != DType::I64 || ids.rank() != 2 || ids.dims()[1] == 0 {
            return Err(Error::shape(
                OP,
                format!(
                    "input_ids must be non-empty int64 [B, T], got {} {}",
                    ids.dtype(),
                    ids.shape()
                ),
            ));
        }
        let (b, t) = (ids.dims()[0], ids.dims()[1]);
        if past + t > self.config.n_positions {
            return Err(Error::shape(
                OP,
                format!(
                    "{t} tokens after {past} cached ones exceed n_positions {}",
                    self.config.n_positions
                ),
            ));
        }
        let keep = match mask {
            Some(m) if m.dims() != [b, past + t] => {
                return Err(Error::shape(
                    OP,
                    format!(
                        "attention_mask {} must be [batch, cached + new] = [{b}, {}]",
                        m.shape(),
                        past + t
                    ),
                ))
            }
            Some(m) => Some(key_keep_from_mask(m)?),
            None => None,
        };
        let pos = match pos {
            Some(p) if p.dims() != [b, t] => {
                return Err(Error::shape(
                    OP,
                    format!("position_ids {} must be [{b}, {t}]", p.shape()),
                ))
            }
            Some(p) => p.to_dtype(DType::I64)?.to_device(self.device())?,
            None => Tensor::arange(past as f64, (past + t) as f64, 1.0, DType::I64)?
                .reshape([1, t])?
                .to_device(self.device())?,
        };
        let ids = ids.to_device(self.device())?;
        let mut x =
            Tensor::embedding(&ids, &self.wte)?.add(&Tensor::embedding(&pos, &self.wpe)?)?;
        for (i, blk) in self.h.iter().enumerate() {
            let kv = cache.as_deref_mut().map(|c| (&c.layers[i], past));
            let a = self.attention(i, blk, &blk.ln_1.forward(&x)?, kv, keep.as_deref())?;
            x = x.add(&a)?;
            let m = blk.c_fc.forward(&blk.ln_2.forward(&x)?)?;
            let m = self.config.activation.forward(&m)?;
            x = x.add(&blk.mlp_proj.forward(&m)?)?;
        }
        self.ln_f.forward(&x)?.matmul(&self.lm_head.t()?)
    }

    /// Causal self-attention of `x: [B, T, C]` in layer `layer`; with a cache, the new keys and
    /// values are written at positions `past..past + T` and the queries see all of them.
    fn attention(
        &self,
        layer: usize,
        blk: &Block,
        x: &Tensor,
        kv: Option<(&(Tensor, Tensor), usize)>,
        keep: Option<&[bool]>,
    ) -> Result<Tensor> {
        let (b, t, c) = (x.dims()[0], x.dims()[1], x.dims()[2]);
        let h = self.config.n_head;
        let d = c / h;
        let mut scale = 1.0;
        if self.config.scale_attn_weights {
            scale /= (d as f64).sqrt();
        }
        if self.config.scale_attn_by_inverse_layer_idx {
            scale /= (layer + 1) as f64;
        }
        let qkv = blk.c_attn.forward(x)?;
        if kv.is_none() {
            // one packed [B, T, 3C] operand: the fused kernel reads q, k, v inside it
            if let Some(y) = fused_attention_packed(&qkv, h, scale, Some(0), keep)? {
                let y = match keep {
                    Some(_) => {
                        let v = qkv
                            .narrow(2, 2 * c, c)?
                            .reshape([b, t, h, d])?
                            .transpose(1, 2)?;
                        average_fully_masked(y, &v, Some(0), keep)?
                    }
                    None => y,
                };
                return blk.c_proj.forward(&y.transpose(1, 2)?.reshape([b, t, c])?);
            }
        }
        let part = |i: usize| -> Result<Tensor> {
            qkv.narrow(2, i * c, c)?
                .reshape([b, t, h, d])?
                .transpose(1, 2)
        };
        let (q, mut k, mut v) = (part(0)?, part(1)?, part(2)?);
        let mut offset = 0;
        if let Some((layer, past)) = kv {
            (k, v) = kv_cache::append(layer, past, &k, &v)?;
            offset = past;
        }
        let y = masked_attention(&q, &k, &v, scale, Some(offset), keep)?;
        blk.c_proj.forward(&y.transpose(1, 2)?.reshape([b, t, c])?)
    }

    /// Continue `prompt` (token ids) by up to `max_new_tokens` tokens drawn with `cfg` from
    /// `gen` (temperature 0: greedy, as `generate(do_sample=False)`), with a KV cache; stops
    /// early after the end-of-sequence token (`eos_token_id`) or when `on_token` returns
    /// `false`. `on_token` sees each new token as it comes (streaming). Returns the new
    /// tokens. Errors before any work when the prompt is empty, holds an id outside the
    /// vocabulary, or `prompt + max_new_tokens` exceeds `n_positions`.
    #[track_caller]
    pub fn generate(
        &self,
        prompt: &[i64],
        max_new_tokens: usize,
        cfg: &SampleConfig,
        gen: &mut Generator,
        mut on_token: impl FnMut(i64) -> Result<bool>,
    ) -> Result<Vec<i64>> {
        cfg.validate()?;
        let v = self.config.vocab_size;
        if prompt.is_empty() || prompt.iter().any(|&t| t < 0 || t as usize >= v) {
            return Err(Error::invalid(
                "Gpt2::generate",
                format!("the prompt must be non-empty token ids in 0..{v}"),
            ));
        }
        let limit = self.config.n_positions;
        if prompt.len().saturating_add(max_new_tokens) > limit {
            return Err(Error::invalid(
                "Gpt2::generate",
                format!(
                    "{} prompt tokens + {max_new_tokens} new ones exceed the model's context of \
                     {limit} positions",
                    prompt.len()
                ),
            ));
        }
        let _g = no_grad();
        let mut cache = self.new_cache(1)?;
        let mut out = Vec::with_capacity(max_new_tokens.min(1 << 16));
        let mut pending = prompt.to_vec();
        for _ in 0..max_new_tokens {
            let n = pending.len();
            let ids = Tensor::from_vec(std::mem::take(&mut pending), [1, n])?;
            let logits = self.forward_cached(&ids, None, None, &mut cache)?;
            let last = logits.select(1, (n - 1) as isize)?.reshape([v])?;
            let row = last.to_dtype(DType::F32)?.to_vec::<f32>()?;
            let tok = sample_logits(&row, cfg, gen)? as i64;
            out.push(tok);
            pending.push(tok);
            let eos = self.config.eos_token_id.is_some_and(|e| e as i64 == tok);
            if !on_token(tok)? || eos {
                break;
            }
        }
        Ok(out)
    }
}

impl Module for Gpt2 {
    /// Logits `[B, T, vocab]` for int64 `[B, T]` ids (no mask, positions `0..T`).
    fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        self.run(ids, None, None, None)
    }

    /// Hugging Face names (`transformer.h.0.attn.c_attn.weight`, stored `[in, out]`).
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        let mut v = vec![
            ("transformer.wte.weight".to_string(), self.wte.clone()),
            ("transformer.wpe.weight".to_string(), self.wpe.clone()),
        ];
        let ln = |v: &mut Vec<(String, Tensor)>, p: String, l: &LayerNorm| {
            v.extend(crate::nn::prefixed(&p, l.named_parameters()));
        };
        // the stored [in, out] layout back from the transposed view
        let proj = |v: &mut Vec<(String, Tensor)>, p: String, pr: &Proj| {
            if let Ok(w) = pr.weight.t() {
                v.push((format!("{p}.weight"), w));
            }
            v.push((format!("{p}.bias"), pr.bias.clone()));
        };
        for (i, b) in self.h.iter().enumerate() {
            let p = format!("transformer.h.{i}");
            ln(&mut v, format!("{p}.ln_1"), &b.ln_1);
            proj(&mut v, format!("{p}.attn.c_attn"), &b.c_attn);
            proj(&mut v, format!("{p}.attn.c_proj"), &b.c_proj);
            ln(&mut v, format!("{p}.ln_2"), &b.ln_2);
            proj(&mut v, format!("{p}.mlp.c_fc"), &b.c_fc);
            proj(&mut v, format!("{p}.mlp.c_proj"), &b.mlp_proj);
        }
        ln(&mut v, "transformer.ln_f".to_string(), &self.ln_f);
        if !self.config.tie_word_embeddings {
            v.push(("lm_head.weight".to_string(), self.lm_head.clone()));
        }
        v
    }

    fn train(&mut self, _mode: bool) {}

    fn is_training(&self) -> bool {
        false
    }
}
