//! Training checkpoints: model tensors, optimizer state, step/epoch, RNG state and free-form
//! strings in one safetensors file. Model tensors are stored as `model.<name>`, optimizer
//! tensors as `optim.<name>`; everything else lives in the metadata. Writes are atomic: a
//! crash leaves either the old checkpoint or the new one, never a torn file.

use crate::io::safetensors;
use crate::{Error, Result, Tensor};
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

const FMT: &str = "checkpoint";
const FORMAT_KEY: &str = "might.format";
const FORMAT_VALUE: &str = "checkpoint-v1";

pub use super::OptimizerState;

/// Everything needed to resume training.
#[derive(Clone, Debug, Default)]
pub struct Checkpoint {
    pub model: Vec<(String, Tensor)>,
    pub optimizer: OptimizerState,
    pub step: u64,
    pub epoch: u64,
    /// Generator state (`tensor::random::global_state()`).
    pub rng: [u64; 4],
    /// Free-form strings (config, git hash...).
    pub extra: HashMap<String, String>,
}

/// Write `ckpt` to `path` atomically: a temporary file in the same directory is written,
/// fsynced, renamed over `path`, and the directory is fsynced.
#[track_caller]
pub fn save_checkpoint(path: impl AsRef<Path>, ckpt: &Checkpoint) -> Result<()> {
    let path = path.as_ref();
    let mut tensors = Vec::with_capacity(ckpt.model.len() + ckpt.optimizer.tensors.len());
    for (k, t) in &ckpt.model {
        tensors.push((format!("model.{k}"), t.clone()));
    }
    for (k, t) in &ckpt.optimizer.tensors {
        tensors.push((format!("optim.{k}"), t.clone()));
    }
    let mut meta = HashMap::new();
    meta.insert(FORMAT_KEY.to_string(), FORMAT_VALUE.to_string());
    meta.insert("might.step".into(), ckpt.step.to_string());
    meta.insert("might.epoch".into(), ckpt.epoch.to_string());
    meta.insert(
        "might.rng".into(),
        ckpt.rng
            .iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join(","),
    );
    for (k, v) in &ckpt.optimizer.scalars {
        // `{:?}` prints the shortest string that parses back to the same f64.
        meta.insert(format!("optim.{k}"), format!("{v:?}"));
    }
    for (k, v) in &ckpt.extra {
        meta.insert(format!("extra.{k}"), v.clone());
    }
    let bytes = safetensors::save_to_bytes(&tensors, Some(&meta))?;
    write_atomic(path, &bytes)
}

/// Read a checkpoint written by `save_checkpoint`.
#[track_caller]
pub fn load_checkpoint(path: impl AsRef<Path>) -> Result<Checkpoint> {
    let path = path.as_ref();
    let (tensors, meta) = safetensors::load_with_metadata(path)?;
    from_parts(tensors, meta)
        .map_err(|e| Error::new(e.kind, e.op, format!("{}: {}", path.display(), e.msg)))
}

/// Read a checkpoint from bytes in memory (one fetched by a web page, or embedded).
#[track_caller]
pub fn load_checkpoint_from_bytes(bytes: &[u8]) -> Result<Checkpoint> {
    let (tensors, meta) = safetensors::load_bytes_with_metadata(bytes)?;
    from_parts(tensors, meta)
}

#[track_caller]
fn from_parts(tensors: Vec<(String, Tensor)>, meta: HashMap<String, String>) -> Result<Checkpoint> {
    let bad = |m: String| Error::format(FMT, m);
    if meta.get(FORMAT_KEY).map(String::as_str) != Some(FORMAT_VALUE) {
        return Err(bad(format!(
            "not a might checkpoint (metadata '{FORMAT_KEY}' missing)"
        )));
    }
    let num = |k: &str| -> Result<u64> {
        meta.get(k)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| bad(format!("metadata '{k}' missing or not an integer")))
    };
    let mut ck = Checkpoint {
        step: num("might.step")?,
        epoch: num("might.epoch")?,
        ..Default::default()
    };
    let rng: Vec<u64> = meta
        .get("might.rng")
        .map(|s| s.split(',').filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_default();
    ck.rng = rng
        .try_into()
        .map_err(|_| bad("metadata 'might.rng' is not four integers".into()))?;
    for (k, t) in tensors {
        if let Some(n) = k.strip_prefix("model.") {
            ck.model.push((n.to_string(), t));
        } else if let Some(n) = k.strip_prefix("optim.") {
            ck.optimizer.tensors.push((n.to_string(), t));
        } else {
            return Err(bad(format!("tensor '{k}' is neither model.* nor optim.*")));
        }
    }
    let mut scalars = Vec::new();
    for (k, v) in &meta {
        if let Some(n) = k.strip_prefix("optim.") {
            let x = v
                .parse::<f64>()
                .map_err(|_| bad(format!("optimizer scalar '{n}' = {v:?} is not a number")))?;
            scalars.push((n.to_string(), x));
        } else if let Some(n) = k.strip_prefix("extra.") {
            ck.extra.insert(n.to_string(), v.clone());
        }
    }
    scalars.sort_by(|a, b| a.0.cmp(&b.0));
    ck.optimizer.scalars = scalars;
    Ok(ck)
}

/// tmp file in the same directory → write → fsync → rename → fsync directory.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let io =
        |what: &str, e: std::io::Error| Error::io(FMT, format!("{what} {}: {e}", path.display()));
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let file_name = path
        .file_name()
        .ok_or_else(|| Error::invalid(FMT, format!("{} is not a file path", path.display())))?;
    let tmp = dir.join(format!(
        ".{}.tmp.{}",
        file_name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| -> Result<()> {
        let mut f =
            std::fs::File::create(&tmp).map_err(|e| io("cannot create temp file for", e))?;
        f.write_all(bytes).map_err(|e| io("cannot write", e))?;
        f.sync_all().map_err(|e| io("cannot fsync", e))?;
        drop(f);
        std::fs::rename(&tmp, path).map_err(|e| io("cannot rename temp file onto", e))?;
        // Persist the rename itself (the directory entry). Not all platforms can open a
        // directory for syncing; the data is already durable, so that is not an error.
        if let Ok(d) = std::fs::File::open(&dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
