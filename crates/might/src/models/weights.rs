//! A named-tensor view of a checkpoint, in the spirit of candle's `VarBuilder`: look tensors up
//! by dotted name under a prefix, check their shape, cast them to the model's dtype and place
//! them on its device. A model file is then a list of lookups, and every missing or mis-shaped
//! tensor is an error that names it.

use crate::{DType, Device, Error, Result, Tensor};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// Tensors by name, a prefix, and the dtype and device models built from them use.
#[derive(Clone)]
pub struct Weights {
    tensors: Arc<HashMap<String, Tensor>>,
    prefix: String,
    dtype: DType,
    device: Device,
}

impl Weights {
    /// Wrap named tensors (as loaded from a file); tensors are cast to `dtype` and moved to
    /// `device` when looked up.
    pub fn new(tensors: Vec<(String, Tensor)>, dtype: DType, device: Device) -> Weights {
        Weights {
            tensors: Arc::new(tensors.into_iter().collect()),
            prefix: String::new(),
            dtype,
            device,
        }
    }

    /// Load checkpoint files (`.safetensors`, or PyTorch `.bin`/`.pt`/`.pth`); the names of
    /// all of them together.
    #[track_caller]
    pub fn from_files(paths: &[impl AsRef<Path>], dtype: DType, device: Device) -> Result<Weights> {
        let mut all = Vec::new();
        for p in paths {
            let p = p.as_ref();
            let is_st = p.extension().is_some_and(|e| e == "safetensors");
            all.extend(if is_st {
                crate::io::safetensors::load(p)?
            } else {
                crate::io::pt::load(p)?
            });
        }
        Ok(Weights::new(all, dtype, device))
    }

    /// The same tensors under `prefix.name` (candle's `pp`, "push prefix").
    pub fn pp(&self, name: impl AsRef<str>) -> Weights {
        Weights {
            prefix: self.path(name.as_ref()),
            ..self.clone()
        }
    }

    /// The full name of `name` under this view's prefix.
    pub fn path(&self, name: &str) -> String {
        if self.prefix.is_empty() {
            name.to_string()
        } else {
            format!("{}.{name}", self.prefix)
        }
    }

    /// Is there a tensor called `name` under the prefix?
    pub fn contains(&self, name: &str) -> bool {
        self.tensors.contains_key(&self.path(name))
    }

    /// The dtype tensors are cast to.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The device tensors are placed on.
    pub fn device(&self) -> Device {
        self.device
    }

    /// Every name in the checkpoint (all prefixes), sorted.
    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.tensors.keys().cloned().collect();
        v.sort();
        v
    }

    /// Every tensor of the checkpoint with its full name, unconverted, sorted by name.
    pub fn raw_tensors(&self) -> Vec<(String, Tensor)> {
        let mut v: Vec<(String, Tensor)> = self
            .tensors
            .iter()
            .map(|(k, t)| (k.clone(), t.clone()))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// Tensor `name` with exactly `shape`, in the view's dtype on its device.
    #[track_caller]
    pub fn get(&self, name: &str, shape: &[usize]) -> Result<Tensor> {
        let t = self.get_any(name)?;
        if t.dims() != shape {
            return Err(Error::shape(
                "Weights",
                format!(
                    "tensor {} has shape {}, the model expects {shape:?}",
                    self.path(name),
                    t.shape()
                ),
            ));
        }
        Ok(t)
    }

    /// Tensor `name` of whatever shape, in the view's dtype on its device.
    #[track_caller]
    pub fn get_any(&self, name: &str) -> Result<Tensor> {
        let full = self.path(name);
        let Some(t) = self.tensors.get(&full) else {
            return Err(self.missing(&full));
        };
        let t = if t.dtype() == self.dtype {
            t.clone()
        } else {
            t.to_dtype(self.dtype)?
        };
        if t.device() == self.device {
            Ok(t)
        } else {
            t.to_device(self.device)
        }
    }

    /// The first of `names` present (checkpoints of different ages name some tensors
    /// differently: LayerNorm `weight`/`gamma`), with exactly `shape`.
    #[track_caller]
    pub fn get_first(&self, names: &[&str], shape: &[usize]) -> Result<Tensor> {
        let name = names.iter().find(|n| self.contains(n)).unwrap_or(&names[0]);
        self.get(name, shape)
    }

    fn missing(&self, full: &str) -> Error {
        // a few names under the same parent help spot a renamed or prefixed checkpoint
        let parent = full.rsplit_once('.').map_or("", |(p, _)| p);
        let mut near: Vec<&String> = self
            .tensors
            .keys()
            .filter(|k| !parent.is_empty() && k.starts_with(parent))
            .collect();
        near.sort();
        near.truncate(5);
        let hint = if near.is_empty() {
            let mut any: Vec<&String> = self.tensors.keys().collect();
            any.sort();
            any.truncate(3);
            format!(
                "; the checkpoint has {} tensors, e.g. {any:?}",
                self.tensors.len()
            )
        } else {
            format!("; near it: {near:?}")
        };
        Error::invalid("Weights", format!("missing tensor {full}{hint}"))
    }
}
