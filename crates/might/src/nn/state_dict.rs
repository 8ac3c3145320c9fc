//! Copying loaded tensors into a model's parameters and buffers by name
//! (`model.load_state_dict(sd, strict)` in PyTorch).

use crate::{Error, Result, Tensor};
use std::collections::HashMap;

/// What `load_into` did not match.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// Target names with no tensor in the input.
    pub missing: Vec<String>,
    /// Input names with no target.
    pub unexpected: Vec<String>,
    /// `(name, target shape, input shape)` for names present in both with different shapes.
    pub mismatched: Vec<(String, Vec<usize>, Vec<usize>)>,
}

impl LoadReport {
    pub fn is_clean(&self) -> bool {
        self.missing.is_empty() && self.unexpected.is_empty() && self.mismatched.is_empty()
    }
}

/// Copy `tensors` into the `targets` with the same names (in place, under `no_grad`, converting
/// the dtype to the target's). Shape mismatches are never copied.
///
/// `strict = true`: any missing key, unexpected key or shape mismatch is an error that lists
/// all of them at once, and nothing is copied. `strict = false`: matching tensors are copied
/// and the report says what was skipped.
///
/// A module loads as `load_into(&module.state_dict(), &tensors, strict)` ([`load_state_dict`]).
#[track_caller]
pub fn load_into(
    targets: &[(String, Tensor)],
    tensors: &[(String, Tensor)],
    strict: bool,
) -> Result<LoadReport> {
    let input: HashMap<&str, &Tensor> = tensors.iter().map(|(k, t)| (k.as_str(), t)).collect();
    let target_names: HashMap<&str, &Tensor> =
        targets.iter().map(|(k, t)| (k.as_str(), t)).collect();
    let mut report = LoadReport::default();
    let mut copies = Vec::new();
    for (name, dst) in targets {
        match input.get(name.as_str()) {
            None => report.missing.push(name.clone()),
            Some(src) if src.dims() != dst.dims() => {
                report
                    .mismatched
                    .push((name.clone(), dst.dims().to_vec(), src.dims().to_vec()))
            }
            Some(src) => copies.push((dst, *src)),
        }
    }
    for (name, _) in tensors {
        if !target_names.contains_key(name.as_str()) {
            report.unexpected.push(name.clone());
        }
    }
    if strict && !report.is_clean() {
        let mut parts = Vec::new();
        if !report.missing.is_empty() {
            parts.push(format!("missing keys: {}", report.missing.join(", ")));
        }
        if !report.unexpected.is_empty() {
            parts.push(format!("unexpected keys: {}", report.unexpected.join(", ")));
        }
        for (n, want, got) in &report.mismatched {
            parts.push(format!(
                "size mismatch for {n}: model has {want:?}, checkpoint has {got:?}"
            ));
        }
        return Err(Error::shape("load_state_dict", parts.join("; ")));
    }
    let _guard = crate::no_grad();
    for (dst, src) in copies {
        // a checkpoint read on the host loads into a model on any device
        dst.copy_(&src.to_device(dst.device())?)?;
    }
    Ok(report)
}

/// Load `tensors` into a module's parameters and buffers, in place (PyTorch's
/// `module.load_state_dict(sd, strict)`). Names must match `module.state_dict()`.
#[track_caller]
pub fn load_state_dict(
    module: &dyn super::Module,
    tensors: &[(String, Tensor)],
    strict: bool,
) -> Result<LoadReport> {
    load_into(&module.state_dict(), tensors, strict)
}
