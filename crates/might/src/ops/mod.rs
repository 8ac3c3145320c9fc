//! Tensor operations: shape and dtype checking, autograd recording, and one call per op into
//! the backend interface ([`crate::backend`]) through [`crate::Storage`]. Each op's forward and
//! backward (the closure passed to `record`) sit together; the loops live in the backends.

pub mod attention;
pub mod binary;
pub mod conv;
pub mod convert;
pub mod fused;
pub mod fused_optim;
pub mod index;
pub mod matmul;
pub mod reduce;
pub mod softmax;
pub mod unary;
