//! Training checkpoints, stored with `might::optim::checkpoint` (one safetensors file written
//! atomically): model state, optimizer state, epoch, RNG state and text fields (dataset,
//! model kind, input shape, class names, normalisation).

use std::collections::BTreeMap;
use std::path::Path;

use might::optim::checkpoint as io;
use might::optim::OptimizerState;
use might::{Result, Tensor};

#[derive(Default)]
pub struct Checkpoint {
    pub model: Vec<(String, Tensor)>,
    pub optimizer: OptimizerState,
    pub epoch: u64,
    pub step: u64,
    pub rng: [u64; 4],
    pub meta: BTreeMap<String, String>,
}

pub fn save(path: &Path, ck: &Checkpoint) -> Result<()> {
    let c = io::Checkpoint {
        model: ck.model.clone(),
        optimizer: ck.optimizer.clone(),
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
        optimizer: c.optimizer,
        epoch: c.epoch,
        step: c.step,
        rng: c.rng,
        meta: c.extra.into_iter().collect(),
    })
}
