//! Hugging Face tokenizers (the `tokenizers` crate, feature `tokenizers`): a Hub folder's
//! `tokenizer.json`, or GPT-2's `vocab.json` + `merges.txt` where there is none. Ids are
//! exactly those of the Python tokenizers (the same Rust code runs behind them).

use crate::{Error, Result, Tensor};
use std::path::Path;
use tokenizers::models::bpe::BPE;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{AddedToken, TruncationParams};

/// A text ↔ token-ids converter.
#[derive(Clone)]
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
}

fn err(op: &str, e: impl std::fmt::Display) -> Error {
    Error::invalid(op, e.to_string())
}

impl Tokenizer {
    /// Read a `tokenizer.json`. Its own padding and truncation settings are dropped (callers
    /// choose them, as sentence-transformers and `generate` do).
    #[track_caller]
    pub fn from_file(path: impl AsRef<Path>) -> Result<Tokenizer> {
        let path = path.as_ref();
        let mut inner = tokenizers::Tokenizer::from_file(path)
            .map_err(|e| err("Tokenizer", format!("{}: {e}", path.display())))?;
        inner.with_padding(None);
        inner
            .with_truncation(None)
            .map_err(|e| err("Tokenizer", e))?;
        Ok(Tokenizer { inner })
    }

    /// GPT-2's byte-level BPE from `vocab.json` + `merges.txt` (`<|endoftext|>` a special
    /// token), as `GPT2TokenizerFast` builds it.
    #[track_caller]
    pub fn from_gpt2_files(vocab: impl AsRef<Path>, merges: impl AsRef<Path>) -> Result<Tokenizer> {
        let (vocab, merges) = (vocab.as_ref(), merges.as_ref());
        let bpe = BPE::from_file(&vocab.display().to_string(), &merges.display().to_string())
            .build()
            .map_err(|e| {
                err(
                    "Tokenizer",
                    format!("{} / {}: {e}", vocab.display(), merges.display()),
                )
            })?;
        let mut inner = tokenizers::Tokenizer::new(bpe);
        inner.with_pre_tokenizer(Some(ByteLevel::new(false, true, true)));
        inner.with_decoder(Some(ByteLevel::default()));
        inner.add_special_tokens(&[AddedToken::from("<|endoftext|>", true)]);
        Ok(Tokenizer { inner })
    }

    /// The tokenizer of a Hub folder: `tokenizer.json`, else `vocab.json` + `merges.txt`.
    #[track_caller]
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<Tokenizer> {
        let dir = dir.as_ref();
        let json = dir.join("tokenizer.json");
        if json.exists() {
            return Tokenizer::from_file(json);
        }
        let (vocab, merges) = (dir.join("vocab.json"), dir.join("merges.txt"));
        if vocab.exists() && merges.exists() {
            return Tokenizer::from_gpt2_files(vocab, merges);
        }
        Err(Error::io(
            "Tokenizer",
            format!(
                "{} has no tokenizer.json (nor vocab.json + merges.txt)",
                dir.display()
            ),
        ))
    }

    /// Truncate encodings to `max_length` tokens (special tokens included).
    #[track_caller]
    pub fn with_truncation(mut self, max_length: usize) -> Result<Tokenizer> {
        self.inner
            .with_truncation(Some(TruncationParams {
                max_length,
                ..Default::default()
            }))
            .map_err(|e| err("Tokenizer", e))?;
        Ok(self)
    }

    /// Token ids of `text` (with the model's special tokens, e.g. `[CLS]` … `[SEP]`, when
    /// `add_special_tokens`).
    #[track_caller]
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>> {
        let enc = self
            .inner
            .encode(text, add_special_tokens)
            .map_err(|e| err("Tokenizer::encode", e))?;
        Ok(enc.get_ids().to_vec())
    }

    /// Token ids of several texts (encoded in parallel), unpadded.
    #[track_caller]
    pub fn encode_batch(&self, texts: &[&str], add_special_tokens: bool) -> Result<Vec<Vec<u32>>> {
        let encs = self
            .inner
            .encode_batch(texts.to_vec(), add_special_tokens)
            .map_err(|e| err("Tokenizer::encode", e))?;
        Ok(encs.into_iter().map(|e| e.get_ids().to_vec()).collect())
    }

    /// The padding id: `[PAD]`'s, else 0.
    pub fn pad_id(&self) -> u32 {
        self.inner.token_to_id("[PAD]").unwrap_or(0)
    }

    /// `seqs` padded on the right to the longest with [`Tokenizer::pad_id`]:
    /// `(input_ids, attention_mask)`, both int64 `[N, T]`.
    #[track_caller]
    pub fn pad(&self, seqs: &[&[u32]]) -> Result<(Tensor, Tensor)> {
        let t = seqs.iter().map(|s| s.len()).max().unwrap_or(0);
        let pad = self.pad_id() as i64;
        let mut ids = Vec::with_capacity(seqs.len() * t);
        let mut mask = Vec::with_capacity(seqs.len() * t);
        for s in seqs {
            ids.extend(s.iter().map(|&i| i as i64));
            ids.extend(std::iter::repeat_n(pad, t - s.len()));
            mask.extend(std::iter::repeat_n(1i64, s.len()));
            mask.extend(std::iter::repeat_n(0i64, t - s.len()));
        }
        Ok((
            Tensor::from_vec(ids, [seqs.len(), t])?,
            Tensor::from_vec(mask, [seqs.len(), t])?,
        ))
    }

    /// Token ids of several texts, padded on the right to the longest with the pad token
    /// (`[PAD]`, else id 0): `(input_ids, attention_mask)`, both int64 `[N, T]`.
    #[track_caller]
    pub fn encode_batch_padded(
        &self,
        texts: &[&str],
        add_special_tokens: bool,
    ) -> Result<(Tensor, Tensor)> {
        let seqs = self.encode_batch(texts, add_special_tokens)?;
        let refs: Vec<&[u32]> = seqs.iter().map(Vec::as_slice).collect();
        self.pad(&refs)
    }

    /// The text of `ids` (`skip_special_tokens` drops `[CLS]`, `<|endoftext|>`, ...).
    #[track_caller]
    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String> {
        self.inner
            .decode(ids, skip_special_tokens)
            .map_err(|e| err("Tokenizer::decode", e))
    }

    /// The id of a token string, if it is in the vocabulary.
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// Vocabulary size, added tokens included.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }
}
