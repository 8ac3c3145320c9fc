//! The character GPT of a `might train gpt` checkpoint, sampled one character at a time.

use std::rc::Rc;

use might::models::generate::{SampleConfig, TokenStream};
use might::models::{gpt_from_metadata, CharVocab, Gpt};
use might::nn::Module;
use might::{Device, Generator, Result};

/// A loaded character GPT and, once [`TextGenerator::start`] is called, a running sample.
pub struct TextGenerator {
    model: Rc<Gpt>,
    vocab: CharVocab,
    stream: Option<(TokenStream<Rc<Gpt>>, Generator)>,
}

impl TextGenerator {
    /// From the bytes of a checkpoint written by `might train gpt`.
    pub fn from_checkpoint(bytes: &[u8]) -> Result<TextGenerator> {
        let ck = crate::load_checkpoint(bytes)?;
        let (cfg, vocab) = gpt_from_metadata(&ck.extra)?;
        let mut model = Gpt::from_tensors(cfg, &ck.model)?;
        model.eval();
        Ok(TextGenerator {
            model: Rc::new(model),
            vocab,
            stream: None,
        })
    }

    /// The characters the model knows (a prompt may use only these).
    pub fn vocabulary(&self) -> String {
        self.vocab.chars().iter().collect()
    }

    /// Move the weights to `device` (ends a running sample).
    pub fn to_device(&mut self, device: Device) -> Result<()> {
        self.stream = None;
        self.model.to_device(device)
    }

    /// Start sampling after `prompt`; `temperature` 0 is greedy, `top_k` 0 keeps every
    /// character. The same prompt, settings and seed give the same text as `might sample`.
    pub fn start(&mut self, prompt: &str, temperature: f64, top_k: usize, seed: u64) -> Result<()> {
        self.stream = None;
        let ids = self.vocab.encode(prompt)?;
        let cfg = SampleConfig {
            temperature,
            top_k: (top_k > 0).then_some(top_k),
            top_p: None,
        };
        let stream = TokenStream::new(self.model.clone(), &ids, &cfg)?;
        self.stream = Some((stream, Generator::new(seed)));
        Ok(())
    }

    fn running(&mut self) -> Result<&mut (TokenStream<Rc<Gpt>>, Generator)> {
        self.stream.as_mut().ok_or_else(|| {
            might::Error::invalid("TextGenerator::next", "call start(prompt, ...) first")
        })
    }

    /// The next `n` characters of the running sample.
    pub fn next(&mut self, n: usize) -> Result<String> {
        let (stream, gen) = self.running()?;
        let mut ids = Vec::with_capacity(n.min(4096));
        for _ in 0..n {
            ids.push(stream.next_token(gen)?);
        }
        Ok(self.vocab.decode(&ids))
    }

    /// [`TextGenerator::next`] without blocking on the device (the browser's WebGPU).
    pub async fn next_async(&mut self, n: usize) -> Result<String> {
        let (stream, gen) = self.running()?;
        let mut ids = Vec::with_capacity(n.min(4096));
        for _ in 0..n {
            ids.push(stream.next_token_async(gen).await?);
        }
        Ok(self.vocab.decode(&ids))
    }
}
