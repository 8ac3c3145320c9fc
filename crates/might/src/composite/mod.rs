//! Composite tensor ops: `Tensor` methods built only from the core's primitives (views,
//! `index_select`, `gather`, `scatter_add`, elementwise ops, reductions, `matmul`), so every
//! backend runs them from the day it runs the primitives, as burn's default bodies do. A backend
//! may later give one of them a kernel behind the backend interface; the composition stays as
//! the reference. Their backward passes are either the chain of the primitives' own or, where
//! that would be wasteful, one closure recorded here (`Tensor::record`).
//!
//! This layer sits above `ops` and below `nn`: it imports nothing from nn, optim, io, data,
//! models or onnx. Its lines are counted apart from the core's budget (`.ci/layering.sh`).
//! Printing (`display.rs`) lives here too: it reads values through the public API only.

mod activations;
mod conv_transpose;
mod cumulative;
mod display;
mod divergence;
mod einsum;
mod flip_roll;
mod group_norm;
mod interpolate;
mod multidim_reduce;
mod pad;
mod pool_extra;
mod readback;
mod repeat;
mod sampling;
mod scatter;
mod similarity;
mod sort;

use crate::{Result, Tensor};
pub use divergence::KlDivReduction;

/// An int64 index vector (computed on the host) as a 1-D tensor on `like`'s device.
#[track_caller]
fn index_on(like: &Tensor, ids: Vec<i64>) -> Result<Tensor> {
    let n = ids.len();
    Tensor::from_vec(ids, [n])?.to_device(like.device())
}
