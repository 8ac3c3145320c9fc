//! A GPT language model in the style of nanoGPT / GPT-2: token and position embeddings,
//! `n_layer` pre-LayerNorm blocks of causal multi-head self-attention and a GELU MLP, a final
//! LayerNorm and an LM head whose weight is the token embedding (weight tying).
//!
//! Parameter names are nanoGPT's (`transformer.wte.weight`, `transformer.h.0.attn.c_attn.weight`,
//! ..., `lm_head.weight`), so a nanoGPT `state_dict` loads as is. Like PyTorch,
//! [`Module::named_parameters`] reports the tied tensor once (as `transformer.wte.weight`, so an
//! optimizer updates it once) while [`Module::state_dict`] lists it under both keys.

use super::kv_cache::{self, KvCache};
use crate::nn::layers::as_param;
use crate::nn::{functional, init, prefixed, Embedding, LayerNorm, Linear, Module};
use crate::ops::attention::{causal_softmax, fused_attention, fused_attention_packed};
use crate::{no_grad, DType, Error, Result, Tensor};

/// Size of a [`Gpt`] (nanoGPT's `GPTConfig`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GptConfig {
    /// Number of tokens (the LM head's output size).
    pub vocab_size: usize,
    /// Longest context (rows of the position embedding).
    pub block_size: usize,
    pub n_layer: usize,
    pub n_head: usize,
    /// Model width; must be divisible by `n_head`.
    pub n_embd: usize,
    /// Dropout on embeddings, attention probabilities and residual branches while training.
    pub dropout: f64,
    /// Biases in the Linear layers and LayerNorms.
    pub bias: bool,
}

impl GptConfig {
    /// Reject sizes the model cannot be built with.
    #[track_caller]
    pub fn validate(&self) -> Result<()> {
        let c = self;
        if c.vocab_size == 0 || c.block_size == 0 || c.n_head == 0 || c.n_embd == 0 {
            return Err(Error::invalid(
                "GptConfig",
                format!("vocab_size, block_size, n_head and n_embd must be positive: {c:?}"),
            ));
        }
        if !c.n_embd.is_multiple_of(c.n_head) {
            return Err(Error::invalid(
                "GptConfig",
                format!(
                    "n_embd {} must be divisible by n_head {}",
                    c.n_embd, c.n_head
                ),
            ));
        }
        if !(0.0..1.0).contains(&c.dropout) {
            return Err(Error::invalid(
                "GptConfig",
                format!("dropout must be in [0, 1), got {}", c.dropout),
            ));
        }
        // before anything is built: the parameters must fit the memory budget
        let n = c.parameter_count();
        let what = format_args!("a model of {n} parameters ({c:?})");
        crate::limits::check_bytes("GptConfig", &what, n, 4)
    }

    /// Number of parameter values (without the tied head), computed without overflow for
    /// any sizes (so absurd configurations are refused before anything is allocated).
    pub fn parameter_count(&self) -> u128 {
        let (v, t, l) = (
            self.vocab_size as u128,
            self.block_size as u128,
            self.n_layer as u128,
        );
        let c = self.n_embd as u128;
        let b = u128::from(self.bias);
        // per layer: two LayerNorms, qkv [3c, c], proj [c, c], fc [4c, c], proj [c, 4c]
        let layer = c
            .saturating_mul(c)
            .saturating_mul(12)
            .saturating_add(c.saturating_mul(2 + 11 * b));
        (v.saturating_add(t).saturating_mul(c))
            .saturating_add(l.saturating_mul(layer))
            .saturating_add(c + b * c)
    }

    /// Names and shapes of every tensor of the model, in `named_parameters` order (without the
    /// tied `lm_head.weight`).
    pub fn parameter_shapes(&self) -> Vec<(String, Vec<usize>)> {
        let (c, b) = (self.n_embd, self.bias);
        let mut v = vec![
            (
                "transformer.wte.weight".to_string(),
                vec![self.vocab_size, c],
            ),
            (
                "transformer.wpe.weight".to_string(),
                vec![self.block_size, c],
            ),
        ];
        // (name, shape of the weight); the bias, when present, is [shape[0]]
        let push = |v: &mut Vec<(String, Vec<usize>)>, name: String, shape: Vec<usize>| {
            let o = shape[0];
            v.push((format!("{name}.weight"), shape));
            if b {
                v.push((format!("{name}.bias"), vec![o]));
            }
        };
        for i in 0..self.n_layer {
            let p = format!("transformer.h.{i}");
            push(&mut v, format!("{p}.ln_1"), vec![c]);
            push(&mut v, format!("{p}.attn.c_attn"), vec![3 * c, c]);
            push(&mut v, format!("{p}.attn.c_proj"), vec![c, c]);
            push(&mut v, format!("{p}.ln_2"), vec![c]);
            push(&mut v, format!("{p}.mlp.c_fc"), vec![4 * c, c]);
            push(&mut v, format!("{p}.mlp.c_proj"), vec![c, 4 * c]);
        }
        push(&mut v, "transformer.ln_f".to_string(), vec![c]);
        v
    }
}

struct Attention {
    c_attn: Linear,
    c_proj: Linear,
    n_head: usize,
}

struct Mlp {
    c_fc: Linear,
    c_proj: Linear,
}

struct Block {
    ln_1: LayerNorm,
    attn: Attention,
    ln_2: LayerNorm,
    mlp: Mlp,
}

/// The GPT model; see the module docs.
pub struct Gpt {
    pub config: GptConfig,
    wte: Embedding,
    wpe: Embedding,
    h: Vec<Block>,
    ln_f: LayerNorm,
    training: bool,
}

fn get(map: &[(String, Tensor)], name: &str) -> Result<Tensor> {
    map.iter()
        .find(|(n, _)| n == name)
        .map(|(_, t)| t.clone())
        .ok_or_else(|| Error::invalid("Gpt", format!("missing tensor {name}")))
}

impl Gpt {
    /// A freshly initialised f32 model with nanoGPT's init: every Linear and Embedding weight
    /// from N(0, 0.02), biases 0, LayerNorms 1/0, and the residual projections (`c_proj`)
    /// from N(0, 0.02/sqrt(2·n_layer)) so the residual stream's variance does not grow with
    /// depth. Uses the global generator (`manual_seed` makes it reproducible).
    #[track_caller]
    pub fn new(config: GptConfig) -> Result<Gpt> {
        config.validate()?;
        let proj_std = 0.02 / ((2 * config.n_layer.max(1)) as f64).sqrt();
        let mut tensors = Vec::new();
        for (name, shape) in config.parameter_shapes() {
            let t = Tensor::zeros(shape.clone(), DType::F32)?;
            if name.contains(".ln_") {
                if name.ends_with("weight") {
                    init::ones(&t)?;
                }
            } else if shape.len() == 2 {
                let std = if name.ends_with("c_proj.weight") {
                    proj_std
                } else {
                    0.02
                };
                init::normal(&t, 0.0, std)?;
            }
            tensors.push((name, t));
        }
        Gpt::from_tensors(config, &tensors)
    }

    /// Build around given tensors (named as in [`GptConfig::parameter_shapes`]; an extra
    /// `lm_head.weight` is ignored, the head always shares `transformer.wte.weight`). The
    /// tensors are used as they are, not copied: f64 tensors give an f64 model (gradient
    /// checks), loaded weights a pretrained one.
    #[track_caller]
    pub fn from_tensors(config: GptConfig, tensors: &[(String, Tensor)]) -> Result<Gpt> {
        config.validate()?;
        // the last layer must be there before the list of every tensor is made (a config
        // from a file's metadata may claim any number of layers)
        if config.n_layer > 0 {
            get(
                tensors,
                &format!("transformer.h.{}.ln_1.weight", config.n_layer - 1),
            )?;
        }
        for (name, shape) in config.parameter_shapes() {
            let t = get(tensors, &name)?;
            if t.dims() != shape.as_slice() {
                return Err(Error::shape(
                    "Gpt",
                    format!("{name} has shape {}, expected {shape:?}", t.shape()),
                ));
            }
        }
        let b = config.bias;
        let lin = |p: &str| -> Result<Linear> {
            let bias = if b {
                Some(get(tensors, &format!("{p}.bias"))?)
            } else {
                None
            };
            Linear::from_weights(get(tensors, &format!("{p}.weight"))?, bias)
        };
        let ln = |p: &str| -> Result<LayerNorm> {
            let bias = if b {
                Some(get(tensors, &format!("{p}.bias"))?)
            } else {
                None
            };
            LayerNorm::from_weights(get(tensors, &format!("{p}.weight"))?, bias, 1e-5)
        };
        let mut h = Vec::with_capacity(config.n_layer);
        for i in 0..config.n_layer {
            let p = format!("transformer.h.{i}");
            h.push(Block {
                ln_1: ln(&format!("{p}.ln_1"))?,
                attn: Attention {
                    c_attn: lin(&format!("{p}.attn.c_attn"))?,
                    c_proj: lin(&format!("{p}.attn.c_proj"))?,
                    n_head: config.n_head,
                },
                ln_2: ln(&format!("{p}.ln_2"))?,
                mlp: Mlp {
                    c_fc: lin(&format!("{p}.mlp.c_fc"))?,
                    c_proj: lin(&format!("{p}.mlp.c_proj"))?,
                },
            });
        }
        Ok(Gpt {
            config,
            wte: Embedding::from_weight(as_param(get(tensors, "transformer.wte.weight")?))?,
            wpe: Embedding::from_weight(get(tensors, "transformer.wpe.weight")?)?,
            h,
            ln_f: ln("transformer.ln_f")?,
            training: true,
        })
    }

    fn dropout(&self, x: &Tensor) -> Result<Tensor> {
        functional::dropout(x, self.config.dropout, self.training)
    }

    fn check_idx(&self, idx: &Tensor, past: usize) -> Result<(usize, usize)> {
        if idx.dtype() != DType::I64 || idx.rank() != 2 {
            return Err(Error::shape(
                "Gpt",
                format!(
                    "idx must be int64 [B, T], got {} {}",
                    idx.dtype(),
                    idx.shape()
                ),
            ));
        }
        let (b, t) = (idx.dims()[0], idx.dims()[1]);
        if t == 0 || past + t > self.config.block_size {
            return Err(Error::shape(
                "Gpt",
                format!(
                    "sequence of {t} tokens after {past} cached ones does not fit block_size {}",
                    self.config.block_size
                ),
            ));
        }
        Ok((b, t))
    }

    /// Logits `[B, T, vocab]` for int64 tokens `idx: [B, T]` (`T ≤ block_size`).
    #[track_caller]
    pub fn forward_logits(&self, idx: &Tensor) -> Result<Tensor> {
        self.run(idx, None)
    }

    /// Logits and the mean next-token cross-entropy against `targets: [B, T]` (int64; -100
    /// is ignored, as in PyTorch).
    #[track_caller]
    pub fn forward_with_loss(&self, idx: &Tensor, targets: &Tensor) -> Result<(Tensor, Tensor)> {
        let logits = self.run(idx, None)?;
        if targets.dims() != idx.dims() {
            return Err(Error::shape(
                "Gpt",
                format!(
                    "targets {} must have the shape of idx {}",
                    targets.shape(),
                    idx.shape()
                ),
            ));
        }
        let v = self.config.vocab_size;
        let loss = functional::cross_entropy(
            &logits.reshape([idx.numel(), v])?,
            &targets.reshape([idx.numel()])?,
            &functional::CrossEntropyOptions::default(),
        )?;
        Ok((logits, loss))
    }

    /// An empty cache for batches of `batch` sequences, in the model's dtype, on its device.
    pub fn new_cache(&self, batch: usize) -> Result<KvCache> {
        let c = &self.config;
        let shape = [batch, c.n_head, c.block_size, c.n_embd / c.n_head];
        let (dt, dev) = (self.wte.weight.dtype(), self.wte.weight.device());
        KvCache::zeros(c.n_layer, shape, dt, dev)
    }

    /// Logits `[B, T, vocab]` of `idx` continuing the `cache.len()` positions already in
    /// `cache`, then append their keys and values. No gradients are recorded (inference).
    /// Gives the same logits as recomputing the whole sequence, in time linear in `T` per
    /// cached position.
    #[track_caller]
    pub fn forward_cached(&self, idx: &Tensor, cache: &mut KvCache) -> Result<Tensor> {
        let _g = no_grad();
        if idx.rank() != 2 || !cache.fits(self.h.len(), idx.dims()[0]) {
            return Err(Error::shape(
                "Gpt::forward_cached",
                format!("cache does not fit this model and batch {}", idx.shape()),
            ));
        }
        let out = self.run(idx, Some(cache))?;
        cache.len += idx.dims()[1];
        Ok(out)
    }

    fn run(&self, idx: &Tensor, mut cache: Option<&mut KvCache>) -> Result<Tensor> {
        let past = cache.as_ref().map_or(0, |c| c.len);
        let (_, t) = self.check_idx(idx, past)?;
        let pos = Tensor::arange(past as f64, (past + t) as f64, 1.0, DType::I64)?
            .to_device(idx.device())?;
        let mut x = self.dropout(&self.wte.forward(idx)?.add(&self.wpe.forward(&pos)?)?)?;
        for (i, blk) in self.h.iter().enumerate() {
            let kv = cache.as_deref_mut().map(|c| (&c.layers[i], past));
            let a = self.attention(&blk.attn, &blk.ln_1.forward(&x)?, kv)?;
            x = x.add(&a)?;
            let m = blk.mlp.c_fc.forward(&blk.ln_2.forward(&x)?)?.gelu()?;
            x = x.add(&self.dropout(&blk.mlp.c_proj.forward(&m)?)?)?;
        }
        let x = self.ln_f.forward(&x)?;
        x.matmul(&self.wte.weight.t()?)
    }

    /// Causal self-attention of `x: [B, T, C]`; with a cache, the new keys/values are written
    /// at positions `past..past+T` and the queries attend to all `past + T` of them.
    fn attention(
        &self,
        a: &Attention,
        x: &Tensor,
        kv: Option<(&(Tensor, Tensor), usize)>,
    ) -> Result<Tensor> {
        let (b, t, c) = (x.dims()[0], x.dims()[1], x.dims()[2]);
        let h = a.n_head;
        let d = c / h;
        let scale = 1.0 / (d as f64).sqrt();
        let dropout = self.training && self.config.dropout > 0.0;
        if kv.is_none() && !dropout {
            // one [.., 3C] projection; the fused kernel reads q, k, v inside it and writes
            // their gradient back as one [B, T, 3C] buffer
            let qkv = a.c_attn.forward(x)?;
            if let Some(y) = fused_attention_packed(&qkv, h, scale, Some(0), None)? {
                let y = y.transpose(1, 2)?.reshape([b, t, c])?;
                return a.c_proj.forward(&y);
            }
        }
        // With a KV cache or dropout: q, k, v as [B, H, T, D] views of three products with
        // thirds of c_attn (views of its weight and bias). One [.., 3C] product then
        // `select`s computes the same, but each select's backward builds a zeroed
        // [3, B, H, T, D] gradient and the engine adds the three: ~4 % of a training step,
        // against a zero-padded [3C, C] weight grad here.
        let third = |i: usize| -> Result<Tensor> {
            let w = a.c_attn.weight.narrow(0, i * c, c)?;
            let bias = match &a.c_attn.bias {
                Some(bias) => Some(bias.narrow(0, i * c, c)?),
                None => None,
            };
            functional::linear(x, &w, bias.as_ref())?
                .reshape([b, t, h, d])?
                .transpose(1, 2)
        };
        let (q, mut k, mut v) = (third(0)?, third(1)?, third(2)?);
        let mut offset = 0;
        if let Some((layer, past)) = kv {
            (k, v) = kv_cache::append(layer, past, &k, &v)?;
            offset = past;
        }
        let fused = if dropout {
            None
        } else {
            fused_attention(&q, &k, &v, scale, Some(offset), None)?
        };
        let y = match fused {
            Some(y) => y,
            None => {
                let scores = q.matmul(&k.transpose(-2, -1)?)?;
                self.dropout(&causal_softmax(&scores, scale, offset)?)?
                    .matmul(&v)?
            }
        };
        let y = y.transpose(1, 2)?.reshape([b, t, c])?;
        self.dropout(&a.c_proj.forward(&y)?)
    }

    /// The token embedding, which is also the LM head's weight.
    pub fn wte(&self) -> &Tensor {
        &self.wte.weight
    }
}

impl Module for Gpt {
    /// Logits `[B, T, vocab]` for int64 tokens `[B, T]`.
    fn forward(&self, idx: &Tensor) -> Result<Tensor> {
        self.run(idx, None)
    }

    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        let mut v = prefixed("transformer.wte", self.wte.named_parameters());
        v.extend(prefixed("transformer.wpe", self.wpe.named_parameters()));
        for (i, blk) in self.h.iter().enumerate() {
            let p = format!("transformer.h.{i}");
            v.extend(prefixed(&format!("{p}.ln_1"), blk.ln_1.named_parameters()));
            v.extend(prefixed(
                &format!("{p}.attn.c_attn"),
                blk.attn.c_attn.named_parameters(),
            ));
            v.extend(prefixed(
                &format!("{p}.attn.c_proj"),
                blk.attn.c_proj.named_parameters(),
            ));
            v.extend(prefixed(&format!("{p}.ln_2"), blk.ln_2.named_parameters()));
            v.extend(prefixed(
                &format!("{p}.mlp.c_fc"),
                blk.mlp.c_fc.named_parameters(),
            ));
            v.extend(prefixed(
                &format!("{p}.mlp.c_proj"),
                blk.mlp.c_proj.named_parameters(),
            ));
        }
        v.extend(prefixed("transformer.ln_f", self.ln_f.named_parameters()));
        v
    }

    /// Every parameter plus the tied `lm_head.weight` (the same tensor as
    /// `transformer.wte.weight`), as PyTorch's `state_dict` lists it.
    fn state_dict(&self) -> Vec<(String, Tensor)> {
        let mut v = self.named_parameters();
        v.push(("lm_head.weight".to_string(), self.wte.weight.clone()));
        v
    }

    fn train(&mut self, mode: bool) {
        self.training = mode;
    }

    fn is_training(&self) -> bool {
        self.training
    }
}
