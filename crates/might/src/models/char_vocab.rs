//! The character vocabulary of a [`super::Gpt`] trained by `might train gpt`, and the
//! checkpoint fields that describe the model (`model = gpt`, `vocab`, `n_layer`, ...), so every
//! program that loads such a checkpoint (the CLI's `sample`, the browser demo) reads it alike.

use super::GptConfig;
use crate::{Error, Result};
use std::collections::HashMap;

/// Characters and their token ids (the id of a character is its position in `chars`).
#[derive(Clone, Debug, PartialEq)]
pub struct CharVocab {
    chars: Vec<char>,
    ids: HashMap<char, i64>,
}

impl CharVocab {
    /// A vocabulary of `chars`, in id order.
    pub fn new(chars: Vec<char>) -> CharVocab {
        let ids = chars
            .iter()
            .enumerate()
            .map(|(i, &c)| (c, i as i64))
            .collect();
        CharVocab { chars, ids }
    }

    /// The characters, in id order.
    pub fn chars(&self) -> &[char] {
        &self.chars
    }

    pub fn len(&self) -> usize {
        self.chars.len()
    }

    pub fn is_empty(&self) -> bool {
        self.chars.is_empty()
    }

    /// Token ids of `s`; an error names the first character the vocabulary lacks.
    #[track_caller]
    pub fn encode(&self, s: &str) -> Result<Vec<i64>> {
        s.chars()
            .map(|c| {
                self.ids.get(&c).copied().ok_or_else(|| {
                    Error::invalid(
                        "CharVocab::encode",
                        format!("character {c:?} is not in the model's vocabulary"),
                    )
                })
            })
            .collect()
    }

    /// The text of `ids`; ids outside the vocabulary (never produced by a model of this
    /// size) become U+FFFD.
    pub fn decode(&self, ids: &[i64]) -> String {
        ids.iter()
            .map(|&i| {
                usize::try_from(i)
                    .ok()
                    .and_then(|i| self.chars.get(i))
                    .copied()
                    .unwrap_or('\u{FFFD}')
            })
            .collect()
    }
}

/// The checkpoint fields that describe a character GPT.
pub fn gpt_metadata(cfg: &GptConfig, vocab: &CharVocab) -> Vec<(String, String)> {
    vec![
        ("model".into(), "gpt".into()),
        ("vocab".into(), vocab.chars.iter().collect()),
        ("n_layer".into(), cfg.n_layer.to_string()),
        ("n_head".into(), cfg.n_head.to_string()),
        ("n_embd".into(), cfg.n_embd.to_string()),
        ("block_size".into(), cfg.block_size.to_string()),
        ("bias".into(), cfg.bias.to_string()),
        ("dropout".into(), cfg.dropout.to_string()),
    ]
}

/// Config and vocabulary from a checkpoint's fields (see [`gpt_metadata`]). Only parsed here:
/// [`super::Gpt::from_tensors`] checks them against the tensors before anything is sized
/// from them.
#[track_caller]
pub fn gpt_from_metadata(meta: &HashMap<String, String>) -> Result<(GptConfig, CharVocab)> {
    let bad = |k: &str| Error::format("checkpoint", format!("checkpoint has no valid {k}"));
    if meta.get("model").map(String::as_str) != Some("gpt") {
        return Err(Error::format(
            "checkpoint",
            "not a GPT checkpoint (its field model is not \"gpt\")",
        ));
    }
    let n = |k: &str| -> Result<usize> { meta.get(k).and_then(|v| v.parse().ok()).ok_or(bad(k)) };
    let vocab = CharVocab::new(meta.get("vocab").ok_or(bad("vocab"))?.chars().collect());
    let cfg = GptConfig {
        vocab_size: vocab.len(),
        block_size: n("block_size")?,
        n_layer: n("n_layer")?,
        n_head: n("n_head")?,
        n_embd: n("n_embd")?,
        dropout: meta
            .get("dropout")
            .and_then(|v| v.parse().ok())
            .ok_or(bad("dropout"))?,
        bias: meta.get("bias").map(String::as_str) == Some("true"),
    };
    Ok((cfg, vocab))
}
