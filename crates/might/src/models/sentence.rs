//! sentence-transformers pipelines: a BERT encoder, a pooling of its token states into one
//! vector per sentence, and an optional L2 normalisation, as the folder's `modules.json`,
//! `1_Pooling/config.json` and `sentence_bert_config.json` describe them
//! (all-MiniLM-L6-v2 and its relatives).

use super::bert::{BertConfig, BertModel};
use super::config::HfConfig;
use super::hub::ModelDir;
use crate::{DType, Device, Error, Result, Tensor};

/// How token states become one sentence vector (sentence-transformers' `Pooling`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pooling {
    /// Mean of the real (unmasked) tokens' states.
    Mean,
    /// The first (`[CLS]`) token's state.
    Cls,
    /// Elementwise maximum over the real tokens.
    Max,
    /// Sum of the real tokens' states divided by `sqrt(count)`.
    MeanSqrtLen,
}

impl Pooling {
    /// Read `1_Pooling/config.json`-style flags (the first mode set wins).
    pub fn from_config(c: &HfConfig) -> Result<Pooling> {
        for (key, p) in [
            ("pooling_mode_cls_token", Pooling::Cls),
            ("pooling_mode_mean_tokens", Pooling::Mean),
            ("pooling_mode_max_tokens", Pooling::Max),
            ("pooling_mode_mean_sqrt_len_tokens", Pooling::MeanSqrtLen),
        ] {
            if c.bool(key, false)? {
                return Ok(p);
            }
        }
        if let Ok(mode) = c.str("pooling_mode", "") {
            match mode.as_str() {
                "cls" => return Ok(Pooling::Cls),
                "mean" => return Ok(Pooling::Mean),
                "max" => return Ok(Pooling::Max),
                "mean_sqrt_len_tokens" => return Ok(Pooling::MeanSqrtLen),
                _ => {}
            }
        }
        Err(Error::invalid(
            "Pooling",
            "no supported pooling mode is set (cls, mean, max, mean_sqrt_len_tokens)",
        ))
    }

    /// Pool `states: [B, T, H]` with `mask: [B, T]` (1 = real token) into `[B, H]`.
    #[track_caller]
    pub fn forward(self, states: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let (b, t) = (states.dims()[0], states.dims()[1]);
        if mask.dims() != [b, t] {
            return Err(Error::shape(
                "Pooling",
                format!("mask {} must be [{b}, {t}]", mask.shape()),
            ));
        }
        let m = mask
            .to_dtype(states.dtype())?
            .to_device(states.device())?
            .unsqueeze(-1)?;
        match self {
            Pooling::Cls => states.select(1, 0),
            Pooling::Max => {
                // masked tokens may not win: -1e9 where masked, as sentence-transformers does
                let blocked = m.eq_scalar(0.0)?;
                let filled =
                    states.masked_fill(&blocked.broadcast_to(states.shape().clone())?, -1e9)?;
                Ok(filled.max(1, false)?.0)
            }
            Pooling::Mean | Pooling::MeanSqrtLen => {
                let sum = states.mul(&m)?.sum(1, false)?;
                let count = m.sum(1, false)?.clamp(Some(1e-9), None)?;
                let count = if self == Pooling::Mean {
                    count
                } else {
                    count.sqrt()?
                };
                sum.div(&count)
            }
        }
    }
}

/// A sentence embedding model: BERT → pooling → (normalisation).
pub struct SentenceTransformer {
    pub bert: BertModel,
    pub pooling: Pooling,
    /// L2-normalise the vectors (a `Normalize` module in `modules.json`).
    pub normalize: bool,
    /// Longer inputs are truncated to this many tokens (`max_seq_length`).
    pub max_seq_length: usize,
    #[cfg(feature = "tokenizers")]
    pub tokenizer: super::Tokenizer,
}

impl SentenceTransformer {
    /// Load a sentence-transformers folder (`modules.json` with a Transformer module at the
    /// root, a Pooling module and optionally Normalize).
    #[track_caller]
    pub fn load(dir: &ModelDir, dtype: DType, device: Device) -> Result<SentenceTransformer> {
        let modules_path = dir.path.join("modules.json");
        let text = std::fs::read(&modules_path).map_err(|e| {
            Error::io(
                "SentenceTransformer",
                format!("cannot read {}: {e}", modules_path.display()),
            )
        })?;
        let modules = HfConfig::items(&text, &modules_path.display().to_string())?;
        let mut pooling = None;
        let mut normalize = false;
        for m in &modules {
            let kind = m.str("type", "")?;
            let path = m.str("path", "")?;
            match kind.rsplit('.').next().unwrap_or("") {
                "Transformer" => {
                    if !path.is_empty() {
                        return Err(Error::invalid(
                            "SentenceTransformer",
                            format!("the Transformer module must be at the folder root, is in {path:?}"),
                        ));
                    }
                }
                "Pooling" => {
                    let cfg = HfConfig::load(dir.path.join(&path).join("config.json"))?;
                    pooling = Some(Pooling::from_config(&cfg)?);
                }
                "Normalize" => normalize = true,
                other => {
                    return Err(Error::invalid(
                        "SentenceTransformer",
                        format!("module type `{other}` ({kind}) is not supported (Transformer, Pooling, Normalize)"),
                    ))
                }
            }
        }
        let bert_cfg = BertConfig::from_config(&dir.config)?;
        let st_cfg = dir.path.join("sentence_bert_config.json");
        let max_seq_length = if st_cfg.exists() {
            HfConfig::load(&st_cfg)?
                .usize("max_seq_length", Some(bert_cfg.max_position_embeddings))?
        } else {
            bert_cfg.max_position_embeddings
        }
        .min(bert_cfg.max_position_embeddings);
        let bert = BertModel::load(bert_cfg, &dir.weights(dtype, device)?)?;
        Ok(SentenceTransformer {
            bert,
            pooling: pooling.unwrap_or(Pooling::Mean),
            normalize,
            max_seq_length,
            #[cfg(feature = "tokenizers")]
            tokenizer: dir.tokenizer()?.with_truncation(max_seq_length)?,
        })
    }

    /// Sentence vectors `[B, H]` of tokenised input (`input_ids`, `attention_mask`: `[B, T]`).
    #[track_caller]
    pub fn embed_ids(&self, input_ids: &Tensor, attention_mask: &Tensor) -> Result<Tensor> {
        let _g = crate::no_grad();
        let out = self.bert.forward(input_ids, None, Some(attention_mask))?;
        let v = self
            .pooling
            .forward(&out.last_hidden_state, attention_mask)?;
        if !self.normalize {
            return Ok(v);
        }
        // x / max(||x||, 1e-12), as torch.nn.functional.normalize
        let norm = v.square()?.sum(1, true)?.sqrt()?.clamp(Some(1e-12), None)?;
        v.div(&norm)
    }

    /// Sentence vectors `[N, H]` of `sentences`, `batch_size` at a time (each batch padded to
    /// its longest sentence).
    #[cfg(feature = "tokenizers")]
    #[track_caller]
    pub fn encode(&self, sentences: &[&str], batch_size: usize) -> Result<Tensor> {
        if batch_size == 0 {
            return Err(Error::invalid(
                "SentenceTransformer::encode",
                "batch_size must be at least 1",
            ));
        }
        let h = self.bert.config.hidden_size;
        if sentences.is_empty() {
            return Tensor::zeros_on([0, h], DType::F32, self.bert.device());
        }
        // longest first (as sentence-transformers, which sorts by characters; sorting by
        // tokens pads less): each batch is padded to its longest sentence
        let seqs = self.tokenizer.encode_batch(sentences, true)?;
        let mut order: Vec<usize> = (0..sentences.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(seqs[i].len()));
        let mut parts = Vec::new();
        for chunk in order.chunks(batch_size) {
            let batch: Vec<&[u32]> = chunk.iter().map(|&i| seqs[i].as_slice()).collect();
            let (ids, mask) = self.tokenizer.pad(&batch)?;
            parts.push(self.embed_ids(&ids, &mask)?);
        }
        // back to the callers' order
        let mut inverse = vec![0i64; order.len()];
        for (pos, &i) in order.iter().enumerate() {
            inverse[i] = pos as i64;
        }
        let inverse = Tensor::from_vec(inverse, [order.len()])?.to_device(self.bert.device())?;
        Tensor::cat(&parts, 0)?.index_select(0, &inverse)
    }
}
