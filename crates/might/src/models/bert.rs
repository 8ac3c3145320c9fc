//! BERT encoders (`BertModel`) as the Hugging Face Hub stores them: word + position +
//! token-type embeddings and a LayerNorm, post-LayerNorm encoder layers (self-attention with a
//! padding mask, then an MLP, each followed by residual + LayerNorm), and the optional pooler
//! (`tanh(dense(h[CLS]))`). Checkpoints with a `bert.` prefix (`BertForMaskedLM`, ...) and old
//! ones with LayerNorm `gamma`/`beta` load too.
//!
//! The query, key and value projections are concatenated once at load time into one `[3H, H]`
//! weight: one product per layer, and the fused attention reads q, k and v inside its output.

use super::config::{Activation, HfConfig};
use super::weights::Weights;
use crate::nn::{functional, key_keep_from_mask, masked_attention, LayerNorm, Module};
use crate::ops::attention::fused_attention_packed;
use crate::{DType, Device, Error, Result, Tensor};

/// BERT's `config.json` fields (transformers' defaults where absent).
#[derive(Clone, Debug, PartialEq)]
pub struct BertConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub hidden_act: Activation,
    pub max_position_embeddings: usize,
    pub type_vocab_size: usize,
    pub layer_norm_eps: f64,
    pub pad_token_id: usize,
}

impl BertConfig {
    /// Read the fields of a `config.json`.
    #[track_caller]
    pub fn from_config(c: &HfConfig) -> Result<BertConfig> {
        let pet = c.str("position_embedding_type", "absolute")?;
        if pet != "absolute" {
            return Err(Error::invalid(
                "BertConfig",
                format!("position_embedding_type `{pet}` is not supported (absolute)"),
            ));
        }
        let cfg = BertConfig {
            vocab_size: c.usize("vocab_size", Some(30522))?,
            hidden_size: c.usize("hidden_size", Some(768))?,
            num_hidden_layers: c.usize("num_hidden_layers", Some(12))?,
            num_attention_heads: c.usize("num_attention_heads", Some(12))?,
            intermediate_size: c.usize("intermediate_size", Some(3072))?,
            hidden_act: Activation::from_name(&c.str("hidden_act", "gelu")?)?,
            max_position_embeddings: c.usize("max_position_embeddings", Some(512))?,
            type_vocab_size: c.usize("type_vocab_size", Some(2))?,
            layer_norm_eps: c.f64("layer_norm_eps", 1e-12)?,
            pad_token_id: c.usize("pad_token_id", Some(0))?,
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// Reject sizes the model cannot be built with.
    #[track_caller]
    pub fn validate(&self) -> Result<()> {
        let c = self;
        let sizes = [
            c.vocab_size,
            c.hidden_size,
            c.num_attention_heads,
            c.intermediate_size,
            c.max_position_embeddings,
            c.type_vocab_size,
        ];
        if sizes.contains(&0)
            || !c.hidden_size.is_multiple_of(c.num_attention_heads)
            || c.layer_norm_eps.is_nan()
            || c.layer_norm_eps <= 0.0
        {
            return Err(Error::invalid(
                "BertConfig",
                format!(
                    "sizes must be positive, hidden_size divisible by num_attention_heads and \
                     layer_norm_eps positive: {c:?}"
                ),
            ));
        }
        Ok(())
    }
}

struct Layer {
    /// `[3H, H]`: query, key and value weights stacked.
    qkv_w: Tensor,
    qkv_b: Tensor,
    attn_out_w: Tensor,
    attn_out_b: Tensor,
    attn_ln: LayerNorm,
    inter_w: Tensor,
    inter_b: Tensor,
    out_w: Tensor,
    out_b: Tensor,
    out_ln: LayerNorm,
}

/// What [`BertModel::forward`] returns (transformers' `BaseModelOutputWithPooling`).
pub struct BertOutput {
    /// `[B, T, H]`.
    pub last_hidden_state: Tensor,
    /// `[B, H]`, when the checkpoint has a pooler.
    pub pooler_output: Option<Tensor>,
}

/// `BertModel`; see the module docs.
pub struct BertModel {
    pub config: BertConfig,
    word: Tensor,
    position: Tensor,
    token_type: Tensor,
    emb_ln: LayerNorm,
    layers: Vec<Layer>,
    pooler: Option<(Tensor, Tensor)>,
}

fn layer_norm(w: &Weights, n: usize, eps: f64) -> Result<LayerNorm> {
    let weight = w.get_first(&["weight", "gamma"], &[n])?;
    let bias = w.get_first(&["bias", "beta"], &[n])?;
    LayerNorm::from_weights(weight, Some(bias), eps)
}

impl BertModel {
    /// Build from a checkpoint's tensors (with or without the `bert.` prefix; a missing
    /// pooler leaves `pooler_output` empty).
    #[track_caller]
    pub fn load(config: BertConfig, weights: &Weights) -> Result<BertModel> {
        config.validate()?;
        let w = if weights.contains("bert.embeddings.word_embeddings.weight") {
            weights.pp("bert")
        } else {
            weights.clone()
        };
        let (h, eps) = (config.hidden_size, config.layer_norm_eps);
        let inter = config.intermediate_size;
        let e = w.pp("embeddings");
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for i in 0..config.num_hidden_layers {
            let l = w.pp(format!("encoder.layer.{i}"));
            let a = l.pp("attention.self");
            let ws: Vec<Tensor> = ["query", "key", "value"]
                .iter()
                .map(|n| a.get(&format!("{n}.weight"), &[h, h]))
                .collect::<Result<_>>()?;
            let bs: Vec<Tensor> = ["query", "key", "value"]
                .iter()
                .map(|n| a.get(&format!("{n}.bias"), &[h]))
                .collect::<Result<_>>()?;
            layers.push(Layer {
                qkv_w: Tensor::cat(&ws, 0)?,
                qkv_b: Tensor::cat(&bs, 0)?,
                attn_out_w: l.get("attention.output.dense.weight", &[h, h])?,
                attn_out_b: l.get("attention.output.dense.bias", &[h])?,
                attn_ln: layer_norm(&l.pp("attention.output.LayerNorm"), h, eps)?,
                inter_w: l.get("intermediate.dense.weight", &[inter, h])?,
                inter_b: l.get("intermediate.dense.bias", &[inter])?,
                out_w: l.get("output.dense.weight", &[h, inter])?,
                out_b: l.get("output.dense.bias", &[h])?,
                out_ln: layer_norm(&l.pp("output.LayerNorm"), h, eps)?,
            });
        }
        let pooler = if w.contains("pooler.dense.weight") {
            Some((
                w.get("pooler.dense.weight", &[h, h])?,
                w.get("pooler.dense.bias", &[h])?,
            ))
        } else {
            None
        };
        Ok(BertModel {
            word: e.get("word_embeddings.weight", &[config.vocab_size, h])?,
            position: e.get(
                "position_embeddings.weight",
                &[config.max_position_embeddings, h],
            )?,
            token_type: e.get("token_type_embeddings.weight", &[config.type_vocab_size, h])?,
            emb_ln: layer_norm(&e.pp("LayerNorm"), h, eps)?,
            layers,
            pooler,
            config,
        })
    }

    /// The model's device.
    pub fn device(&self) -> Device {
        self.word.device()
    }

    /// Hidden states of int64 `input_ids: [B, T]` (`T ≤ max_position_embeddings`).
    /// `token_type_ids` default to 0, `attention_mask` (`[B, T]`, nonzero = real token) to all
    /// ones; padded positions are computed but attend only to real tokens, as in
    /// transformers.
    #[track_caller]
    pub fn forward(
        &self,
        input_ids: &Tensor,
        token_type_ids: Option<&Tensor>,
        attention_mask: Option<&Tensor>,
    ) -> Result<BertOutput> {
        const OP: &str = "BertModel";
        let dims = input_ids.dims();
        if input_ids.dtype() != DType::I64 || dims.len() != 2 || dims[1] == 0 {
            return Err(Error::shape(
                OP,
                format!(
                    "input_ids must be non-empty int64 [B, T], got {} {}",
                    input_ids.dtype(),
                    input_ids.shape()
                ),
            ));
        }
        let (b, t) = (dims[0], dims[1]);
        if t > self.config.max_position_embeddings {
            return Err(Error::shape(
                OP,
                format!(
                    "{t} tokens exceed max_position_embeddings {}",
                    self.config.max_position_embeddings
                ),
            ));
        }
        for (name, m) in [
            ("token_type_ids", token_type_ids),
            ("attention_mask", attention_mask),
        ] {
            if let Some(m) = m {
                if m.dims() != [b, t] {
                    return Err(Error::shape(
                        OP,
                        format!("{name} {} must be [{b}, {t}]", m.shape()),
                    ));
                }
            }
        }
        let keep = attention_mask.map(key_keep_from_mask).transpose()?;
        // all ones: no mask at all (the fast path)
        let keep = keep.filter(|k| k.iter().any(|&x| !x));
        let dev = self.device();
        let ids = input_ids.to_device(dev)?;
        let pos = Tensor::arange(0.0, t as f64, 1.0, DType::I64)?
            .reshape([1, t])?
            .to_device(dev)?;
        let mut x =
            Tensor::embedding(&ids, &self.word)?.add(&Tensor::embedding(&pos, &self.position)?)?;
        x = match token_type_ids {
            Some(tt) => x.add(&Tensor::embedding(
                &tt.to_dtype(DType::I64)?.to_device(dev)?,
                &self.token_type,
            )?)?,
            // type 0 for every token: its row, broadcast
            None => x.add(&self.token_type.narrow(0, 0, 1)?)?,
        };
        x = self.emb_ln.forward(&x)?;
        for l in &self.layers {
            let a = self.attention(l, &x, keep.as_deref())?;
            x = l.attn_ln.forward(&a.add(&x)?)?;
            let m = functional::linear(&x, &l.inter_w, Some(&l.inter_b))?;
            let m = self.config.hidden_act.forward(&m)?;
            let o = functional::linear(&m, &l.out_w, Some(&l.out_b))?;
            x = l.out_ln.forward(&o.add(&x)?)?;
        }
        let pooler_output = match &self.pooler {
            Some((w, bias)) => {
                let cls = x.select(1, 0)?;
                Some(functional::linear(&cls, w, Some(bias))?.tanh()?)
            }
            None => None,
        };
        Ok(BertOutput {
            last_hidden_state: x,
            pooler_output,
        })
    }

    /// Bidirectional self-attention of `x: [B, T, H]` (keys hidden by the padding mask).
    fn attention(&self, l: &Layer, x: &Tensor, keep: Option<&[bool]>) -> Result<Tensor> {
        let (b, t, c) = (x.dims()[0], x.dims()[1], x.dims()[2]);
        let h = self.config.num_attention_heads;
        let d = c / h;
        let scale = 1.0 / (d as f64).sqrt();
        let qkv = functional::linear(x, &l.qkv_w, Some(&l.qkv_b))?;
        let y = match fused_attention_packed(&qkv, h, scale, None, keep)? {
            Some(y) => y,
            None => {
                let part = |i: usize| -> Result<Tensor> {
                    qkv.narrow(2, i * c, c)?
                        .reshape([b, t, h, d])?
                        .transpose(1, 2)
                };
                masked_attention(&part(0)?, &part(1)?, &part(2)?, scale, None, keep)?
            }
        };
        let y = y.transpose(1, 2)?.reshape([b, t, c])?;
        functional::linear(&y, &l.attn_out_w, Some(&l.attn_out_b))
    }
}

impl Module for BertModel {
    /// `last_hidden_state` for int64 ids `[B, T]` (no padding).
    fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        Ok(BertModel::forward(self, ids, None, None)?.last_hidden_state)
    }

    /// The tensors (query/key/value as their stacked `[3H, H]` weight per layer).
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        let mut v = vec![
            (
                "embeddings.word_embeddings.weight".into(),
                self.word.clone(),
            ),
            (
                "embeddings.position_embeddings.weight".into(),
                self.position.clone(),
            ),
            (
                "embeddings.token_type_embeddings.weight".into(),
                self.token_type.clone(),
            ),
        ];
        v.extend(crate::nn::prefixed(
            "embeddings.LayerNorm",
            self.emb_ln.named_parameters(),
        ));
        for (i, l) in self.layers.iter().enumerate() {
            let p = format!("encoder.layer.{i}");
            for (n, t) in [
                ("attention.self.qkv.weight", &l.qkv_w),
                ("attention.self.qkv.bias", &l.qkv_b),
                ("attention.output.dense.weight", &l.attn_out_w),
                ("attention.output.dense.bias", &l.attn_out_b),
                ("intermediate.dense.weight", &l.inter_w),
                ("intermediate.dense.bias", &l.inter_b),
                ("output.dense.weight", &l.out_w),
                ("output.dense.bias", &l.out_b),
            ] {
                v.push((format!("{p}.{n}"), t.clone()));
            }
            v.extend(crate::nn::prefixed(
                &format!("{p}.attention.output.LayerNorm"),
                l.attn_ln.named_parameters(),
            ));
            v.extend(crate::nn::prefixed(
                &format!("{p}.output.LayerNorm"),
                l.out_ln.named_parameters(),
            ));
        }
        if let Some((w, b)) = &self.pooler {
            v.push(("pooler.dense.weight".into(), w.clone()));
            v.push(("pooler.dense.bias".into(), b.clone()));
        }
        v
    }

    fn train(&mut self, _mode: bool) {}

    fn is_training(&self) -> bool {
        false
    }
}
