//! Autoregressive sampling from a [`Gpt`]: temperature, top-k and top-p (nucleus) filtering,
//! a seeded [`Generator`] and a KV cache, so that producing `n` tokens costs `n` one-position
//! forwards instead of `n` full-context ones.

use super::Gpt;
use crate::{Error, Generator, Result, Tensor};
use std::borrow::Borrow;

/// How the next token is drawn from the logits.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SampleConfig {
    /// Logits are divided by this; 0 means greedy (always the most likely token).
    pub temperature: f64,
    /// Keep only the `k` most likely tokens.
    pub top_k: Option<usize>,
    /// Keep the smallest set of most likely tokens whose probability reaches `p`.
    pub top_p: Option<f64>,
}

impl Default for SampleConfig {
    fn default() -> Self {
        SampleConfig {
            temperature: 1.0,
            top_k: None,
            top_p: None,
        }
    }
}

impl SampleConfig {
    #[track_caller]
    pub fn validate(&self) -> Result<()> {
        if !(self.temperature >= 0.0 && self.temperature.is_finite()) {
            return Err(Error::invalid(
                "sample",
                format!(
                    "temperature must be finite and >= 0, got {}",
                    self.temperature
                ),
            ));
        }
        if self.top_k == Some(0) {
            return Err(Error::invalid("sample", "top_k must be at least 1"));
        }
        if let Some(p) = self.top_p {
            if !(p > 0.0 && p <= 1.0) {
                return Err(Error::invalid(
                    "sample",
                    format!("top_p must be in (0, 1], got {p}"),
                ));
            }
        }
        Ok(())
    }
}

/// Draw one token index from a row of logits.
///
/// Order as in the usual recipe: temperature scaling, then top-k, then top-p over the
/// renormalised survivors, then one draw from `gen`. NaN logits count as impossible.
#[track_caller]
pub fn sample_logits(logits: &[f32], cfg: &SampleConfig, gen: &mut Generator) -> Result<usize> {
    cfg.validate()?;
    if logits.is_empty() {
        return Err(Error::invalid("sample", "empty logits"));
    }
    let score = |i: usize| {
        let v = logits[i] as f64;
        if v.is_nan() {
            f64::NEG_INFINITY
        } else {
            v
        }
    };
    if cfg.temperature == 0.0 {
        // greedy: the first most likely token, without sorting the vocabulary
        let mut best = 0;
        for i in 1..logits.len() {
            if score(i) > score(best) {
                best = i;
            }
        }
        return Ok(best);
    }
    // candidates sorted by logit, most likely first (stable, so ties keep index order)
    let mut order: Vec<usize> = (0..logits.len()).collect();
    order.sort_by(|&a, &b| score(b).total_cmp(&score(a)));
    if let Some(k) = cfg.top_k {
        order.truncate(k.min(order.len()));
    }
    let m = score(order[0]);
    if m == f64::NEG_INFINITY {
        return Err(Error::invalid("sample", "every logit is -inf or NaN"));
    }
    let mut probs: Vec<f64> = order
        .iter()
        .map(|&i| ((score(i) - m) / cfg.temperature).exp())
        .collect();
    let total: f64 = probs.iter().sum();
    probs.iter_mut().for_each(|p| *p /= total);
    if let Some(p) = cfg.top_p {
        let mut acc = 0.0;
        let mut keep = probs.len();
        for (j, &q) in probs.iter().enumerate() {
            acc += q;
            if acc >= p {
                keep = j + 1;
                break;
            }
        }
        probs.truncate(keep);
        order.truncate(keep);
    }
    let total: f64 = probs.iter().sum();
    let mut u = gen.next_f64() * total;
    for (j, &q) in probs.iter().enumerate() {
        if u < q {
            return Ok(order[j]);
        }
        u -= q;
    }
    Ok(order[probs.len() - 1])
}

/// Continue `prompt` (token ids, at least one) by `max_new_tokens` sampled tokens; returns
/// only the new ones. Runs in evaluation mode without gradients, with a [`super::KvCache`].
/// When the context reaches `block_size`, the cache is rebuilt from the last
/// `block_size / 2` tokens (positions restart at 0), which keeps generation amortised linear
/// at the cost of a shorter context right after each rebuild.
#[track_caller]
pub fn generate(
    model: &Gpt,
    prompt: &[i64],
    max_new_tokens: usize,
    cfg: &SampleConfig,
    gen: &mut Generator,
) -> Result<Vec<i64>> {
    let mut stream = TokenStream::new(model, prompt, cfg)?;
    // the tokens are kept twice (context and output): refuse counts no memory could hold
    let what = format_args!("{max_new_tokens} new tokens");
    crate::limits::check_bytes("generate", &what, max_new_tokens as u128, 16)?;
    let mut out = Vec::with_capacity(max_new_tokens.min(1 << 16));
    for _ in 0..max_new_tokens {
        out.push(stream.next_token(gen)?);
    }
    Ok(out)
}

/// Generation one token at a time, for callers that show text as it comes (a web page, a
/// terminal): [`generate`] is `n` calls of [`TokenStream::next_token`]. Holds the KV cache
/// and the context; runs without gradients. `M` is `&Gpt` or a shared owner (`Rc<Gpt>`,
/// `Arc<Gpt>`) for a stream that outlives the caller's borrow.
pub struct TokenStream<M: Borrow<Gpt>> {
    model: M,
    cfg: SampleConfig,
    cache: super::KvCache,
    /// Every token so far (prompt included): the context a cache rebuild starts from.
    all: Vec<i64>,
    /// Tokens not yet in the cache.
    pending: Vec<i64>,
}

impl<M: Borrow<Gpt>> TokenStream<M> {
    /// Start after `prompt` (non-empty token ids of the model's vocabulary).
    #[track_caller]
    pub fn new(model: M, prompt: &[i64], cfg: &SampleConfig) -> Result<TokenStream<M>> {
        cfg.validate()?;
        let gpt = model.borrow();
        let v = gpt.config.vocab_size as i64;
        if prompt.is_empty() || prompt.iter().any(|&t| t < 0 || t >= v) {
            return Err(Error::invalid(
                "generate",
                format!("prompt must be non-empty token ids in 0..{v}"),
            ));
        }
        let start = prompt.len().saturating_sub(gpt.config.block_size);
        let cache = gpt.new_cache(1)?;
        Ok(TokenStream {
            model,
            cfg: *cfg,
            cache,
            all: prompt.to_vec(),
            pending: prompt[start..].to_vec(),
        })
    }

    /// Draw the next token with `gen`.
    #[track_caller]
    pub fn next_token(&mut self, gen: &mut Generator) -> Result<i64> {
        let row = self.last_logits()?.to_vec::<f32>()?;
        self.take(&row, gen)
    }

    /// [`TokenStream::next_token`] for code that must not block on the device (a browser's
    /// WebGPU, where values come back only through the page's event loop).
    pub async fn next_token_async(&mut self, gen: &mut Generator) -> Result<i64> {
        let row = self.last_logits()?.to_vec_async::<f32>().await?;
        self.take(&row, gen)
    }

    /// Run the pending tokens through the model; the logits of the last one, `[vocab]` f32,
    /// on the model's device.
    fn last_logits(&mut self) -> Result<Tensor> {
        let _g = crate::no_grad();
        let model = self.model.borrow();
        let block = model.config.block_size;
        let v = model.config.vocab_size;
        if self.cache.len() + self.pending.len() > block {
            self.cache.clear();
            let keep = (block / 2).max(1);
            self.pending = self.all[self.all.len() - keep..].to_vec();
        }
        let n = self.pending.len();
        let idx = Tensor::from_vec(std::mem::take(&mut self.pending), [1, n])?
            .to_device(model.wte().device())?;
        let logits = model.forward_cached(&idx, &mut self.cache)?;
        logits
            .select(1, (n - 1) as isize)?
            .reshape([v])?
            .to_dtype(crate::DType::F32)
    }

    /// Sample from `row` and append the token to the context.
    fn take(&mut self, row: &[f32], gen: &mut Generator) -> Result<i64> {
        let tok = sample_logits(row, &self.cfg, gen)? as i64;
        self.all.push(tok);
        self.pending.push(tok);
        Ok(tok)
    }
}
