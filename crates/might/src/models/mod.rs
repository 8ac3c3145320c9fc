//! Whole models, apart from the `nn` layers they are built of: the character GPT that
//! `might train gpt` trains, and pretrained Hugging Face families loaded from a Hub folder
//! (`config.json` + `model.safetensors` or `pytorch_model.bin`, `tokenizer.json`).
//!
//! - [`Gpt`]: the nanoGPT-style character model (`might train gpt`), with [`generate`] and its
//!   [`CharVocab`]; [`vision`]: the image classifiers `might train mnist/cifar10` builds.
//! - [`Gpt2`]: `GPT2LMHeadModel` (GPT-2 and its relatives: distilgpt2, tiny random ones).
//! - [`BertModel`]: BERT encoders, and [`SentenceTransformer`] pipelines on top of them
//!   (mean/CLS/max pooling and normalisation read from `modules.json`).
//! - [`Weights`]: a named-tensor view (prefix, dtype cast, device placement, shape checks),
//!   so a new architecture is a short file of lookups.
//! - [`Tokenizer`] (feature `tokenizers`): Hugging Face tokenizers, with exactly the ids of
//!   the Python ones.

mod bert;
mod char_gpt;
mod char_vocab;
mod config;
pub mod generate;
mod gpt2;
mod hub;
mod kv_cache;
mod sentence;
#[cfg(feature = "tokenizers")]
mod tokenizer;
pub mod vision;
mod weights;

pub use bert::{BertConfig, BertModel, BertOutput};
pub use char_gpt::{Gpt, GptConfig};
pub use char_vocab::{gpt_from_metadata, gpt_metadata, CharVocab};
pub use config::{Activation, HfConfig};
pub use gpt2::{Gpt2, Gpt2Config};
pub use hub::{Architecture, ModelDir};
pub use kv_cache::KvCache;
pub use sentence::{Pooling, SentenceTransformer};
#[cfg(feature = "tokenizers")]
pub use tokenizer::Tokenizer;
pub use weights::Weights;
