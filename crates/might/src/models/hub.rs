//! A Hugging Face Hub model folder: `config.json`, the weights (`model.safetensors`, sharded
//! `model.safetensors.index.json`, or `pytorch_model.bin` and its index) and the tokenizer.

use super::config::HfConfig;
use super::weights::Weights;
use crate::{DType, Device, Error, Result};
use std::path::{Path, PathBuf};

/// The model families might can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Architecture {
    /// `GPT2LMHeadModel` / `GPT2Model` (`model_type: gpt2`).
    Gpt2,
    /// `BertModel` and `Bert*` heads (`model_type: bert`).
    Bert,
    /// A BERT with a sentence-transformers pipeline (`modules.json`).
    SentenceTransformer,
}

/// An opened model folder.
#[derive(Clone, Debug)]
pub struct ModelDir {
    pub path: PathBuf,
    pub config: HfConfig,
    pub architecture: Architecture,
}

impl ModelDir {
    /// Open `path`: read `config.json` and tell the architecture from `model_type` (or
    /// `architectures`).
    #[track_caller]
    pub fn open(path: impl AsRef<Path>) -> Result<ModelDir> {
        let path = path.as_ref().to_path_buf();
        let cfg_path = path.join("config.json");
        if !cfg_path.is_file() {
            return Err(Error::io(
                "ModelDir",
                format!(
                    "{} is not a Hugging Face model folder (no config.json)",
                    path.display()
                ),
            ));
        }
        let config = HfConfig::load(&cfg_path)?;
        let model_type = config.str("model_type", "")?;
        let arch = config.first_str("architectures").unwrap_or_default();
        let architecture = match (model_type.as_str(), arch.as_str()) {
            ("gpt2", _) | (_, "GPT2LMHeadModel" | "GPT2Model") => Architecture::Gpt2,
            ("bert", _) | (_, "BertModel") if path.join("modules.json").is_file() => {
                Architecture::SentenceTransformer
            }
            ("bert", _) | (_, "BertModel") => Architecture::Bert,
            _ => {
                return Err(Error::invalid(
                    "ModelDir",
                    format!(
                        "{}: model_type `{model_type}` (architectures: `{arch}`) is not supported \
                         (gpt2, bert)",
                        cfg_path.display()
                    ),
                ))
            }
        };
        Ok(ModelDir {
            path,
            config,
            architecture,
        })
    }

    /// The checkpoint files, preferring safetensors: one file, or the shards an index lists.
    #[track_caller]
    pub fn weight_files(&self) -> Result<Vec<PathBuf>> {
        for (single, index) in [
            ("model.safetensors", "model.safetensors.index.json"),
            ("pytorch_model.bin", "pytorch_model.bin.index.json"),
        ] {
            if self.path.join(single).is_file() {
                return Ok(vec![self.path.join(single)]);
            }
            let index = self.path.join(index);
            if index.is_file() {
                let map = HfConfig::load(&index)?.string_map("weight_map")?;
                let mut files: Vec<String> = map.into_iter().map(|(_, f)| f).collect();
                files.sort();
                files.dedup();
                let mut out = Vec::new();
                for f in files {
                    // shard names come from the file: keep them inside the folder
                    if f.contains('/') || f.contains('\\') || f.starts_with('.') {
                        return Err(Error::format(
                            "ModelDir",
                            format!("{}: shard name {f:?} leaves the folder", index.display()),
                        ));
                    }
                    out.push(self.path.join(f));
                }
                return Ok(out);
            }
        }
        Err(Error::io(
            "ModelDir",
            format!(
                "{} has no model.safetensors or pytorch_model.bin (nor a sharded index)",
                self.path.display()
            ),
        ))
    }

    /// The checkpoint as a [`Weights`] view (cast to `dtype`, placed on `device`).
    #[track_caller]
    pub fn weights(&self, dtype: DType, device: Device) -> Result<Weights> {
        Weights::from_files(&self.weight_files()?, dtype, device)
    }

    /// The folder's tokenizer.
    #[cfg(feature = "tokenizers")]
    #[track_caller]
    pub fn tokenizer(&self) -> Result<super::Tokenizer> {
        super::Tokenizer::from_dir(&self.path)
    }
}
