//! Training checkpoints, stored with `might::io::checkpoint` (one safetensors file written
//! atomically): model state, optimizer state, epoch, RNG state and text fields (dataset,
//! model kind, input shape, class names, normalisation).

use std::collections::BTreeMap;
use std::path::Path;

use might::io::checkpoint as io;
use might::{Error, Result, Tensor};

#[derive(Default)]
pub struct Checkpoint {
    pub model: Vec<(String, Tensor)>,
    pub optim_tensors: Vec<(String, Tensor)>,
    pub optim_scalars: Vec<(String, f64)>,
    pub epoch: u64,
    pub step: u64,
    pub rng: [u64; 4],
    pub meta: BTreeMap<String, String>,
}

pub fn save(path: &Path, ck: &Checkpoint) -> Result<()> {
    let c = io::Checkpoint {
        model: ck.model.clone(),
        optimizer: io::OptimizerState {
            tensors: ck.optim_tensors.clone(),
            scalars: ck.optim_scalars.clone(),
        },
        step: ck.step,
        epoch: ck.epoch,
        rng: ck.rng,
        extra: ck.meta.clone().into_iter().collect(),
    };
    io::save_checkpoint(path, &c)
}

pub fn load(path: &Path) -> Result<Checkpoint> {
    let shown = path.display().to_string();
    let c = io::load_checkpoint(path).map_err(|mut e| {
        if !e.msg.contains(&shown) {
            e.msg = format!("{shown}: {}", e.msg);
        }
        e
    })?;
    Ok(Checkpoint {
        model: c.model,
        optim_tensors: c.optimizer.tensors,
        optim_scalars: c.optimizer.scalars,
        epoch: c.epoch,
        step: c.step,
        rng: c.rng,
        meta: c.extra.into_iter().collect(),
    })
}

/// Copy checkpoint tensors into the model's tensors (names and shapes must match exactly).
pub fn load_into(state: &[(String, Tensor)], saved: &[(String, Tensor)]) -> Result<()> {
    let _g = might::no_grad();
    for (name, t) in state {
        let s = saved
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
            .ok_or_else(|| Error::format("load_checkpoint", format!("checkpoint has no {name}")))?;
        if s.dims() != t.dims() {
            return Err(Error::shape(
                "load_checkpoint",
                format!(
                    "{name}: checkpoint has {} but the model has {}",
                    s.shape(),
                    t.shape()
                ),
            ));
        }
        t.copy_(s)?;
    }
    if saved.len() != state.len() {
        return Err(Error::format(
            "load_checkpoint",
            format!(
                "checkpoint has {} tensors but the model has {} (different model?)",
                saved.len(),
                state.len()
            ),
        ));
    }
    Ok(())
}
