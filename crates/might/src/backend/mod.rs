//! Backends: the code that actually touches memory. Only `cpu` exists; a `gpu` module (wgpu)
//! will sit beside it behind the same `Storage` enum.

pub mod cpu;
