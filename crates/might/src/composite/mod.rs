//! Composite tensor ops: `Tensor` methods built only from the core's primitives (views,
//! `index_select`, `gather`, `scatter_add`, elementwise ops, reductions, `matmul`), so every
//! backend runs them from the day it runs the primitives, as burn's default bodies do. A backend
//! may later give one of them a kernel behind the backend interface; the composition stays as
//! the reference. Their backward passes are either the chain of the primitives' own or, where
//! that would be wasteful, one closure recorded here (`Tensor::record`).
//!
//! This layer sits above `ops` and below `nn`: it imports nothing from nn, optim, io, data,
//! models or onnx. Its lines are counted apart from the core's budget (`.ci/layering.sh`).

mod activations;
mod divergence;
mod einsum;
mod group_norm;
mod similarity;

pub use divergence::KlDivReduction;
