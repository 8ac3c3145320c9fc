//! # might — tensor is the might
//!
//! A small, fast tensor library for training and running neural networks, in Rust.
//!
//! Layers, one direction only: `nn` / `optim` / `io` / `data` → `autograd` (the backward
//! engine) → `ops` (checks, graph recording, one backend call per op) → tensor core (`shape`,
//! `layout`, `dtype`, `storage`, `device`, `error`) → the backend interface
//! ([`backend`]: traits and named ops) → the backends (`backend/<name>/`). `Storage` and `Device`
//! are the only core types that name a concrete backend: adding one touches them and its own
//! folder under `backend/`.
//!
//! ```
//! use might::{Tensor, DType};
//! let a = Tensor::from_vec(vec![1f32, 2., 3., 4., 5., 6.], [2, 3])?;
//! let b = a.t()?;                       // a view: no copy
//! let c = a.matmul(&b)?;                // [2, 2]
//! assert_eq!(c.to_vec::<f32>()?, vec![14., 32., 32., 77.]);
//! # Ok::<(), might::Error>(())
//! ```

pub mod autograd;
pub(crate) mod backend;
pub(crate) mod composite;
pub mod data;
pub mod device;
#[cfg(feature = "mpi")]
pub mod distributed;
pub mod dtype;
pub mod error;
pub mod gradcheck;
pub mod io;
pub mod layout;
pub mod limits;
pub mod models;
pub mod nn;
#[cfg(feature = "onnx")]
pub mod onnx;
pub mod ops;
pub mod optim;
pub mod precision;
pub mod shape;
pub(crate) mod storage;
pub mod tensor;
pub mod typed;

pub use autograd::{no_grad, set_grad_enabled};
#[cfg(feature = "gpu")]
pub use device::init_gpu;
#[cfg(target_arch = "wasm32")]
pub use device::set_wasm_simd128;
pub use device::{
    buffer_cache_bytes, empty_cache, get_num_threads, set_buffer_cache_limit, set_num_threads,
    Device,
};
pub use dtype::{DType, WithDType};
pub use error::{Error, ErrorKind, Result};
pub use layout::Layout;
pub use limits::{memory_limit, set_memory_limit};
pub use precision::{get_float32_matmul_precision, set_float32_matmul_precision, MatmulPrecision};
pub use shape::{broadcast_shapes, strict_broadcast, Shape};
pub(crate) use storage::Storage;
pub use tensor::random::{manual_seed, Generator};
pub use tensor::{Tensor, TensorId};

/// Internals for might's own tests and benches (not part of the API; may change any time).
#[doc(hidden)]
pub mod internals {
    pub use crate::device::cpu_internals::bgemm;
    #[cfg(feature = "gpu")]
    pub use crate::device::cpu_internals::gpu_counters;
}
