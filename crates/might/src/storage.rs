//! Storage: the typed buffer behind one or more tensors. Tensors share it through
//! `Arc<RwLock<Storage>>`; it is freed when the last view goes away.

use crate::backend::cpu::CpuStorage;
use crate::{DType, Device};

/// A device buffer. Kernels dispatch on the variant; a GPU variant will hold its own buffer
/// (and sync lazily with a CPU copy) without any change to `Tensor`.
#[derive(Clone, Debug)]
pub enum Storage {
    Cpu(CpuStorage),
}

impl Storage {
    pub fn device(&self) -> Device {
        match self {
            Storage::Cpu(_) => Device::Cpu,
        }
    }
    pub fn dtype(&self) -> DType {
        match self {
            Storage::Cpu(s) => s.dtype(),
        }
    }
    pub fn len(&self) -> usize {
        match self {
            Storage::Cpu(s) => s.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn cpu(&self) -> &CpuStorage {
        match self {
            Storage::Cpu(s) => s,
        }
    }
    pub fn cpu_mut(&mut self) -> &mut CpuStorage {
        match self {
            Storage::Cpu(s) => s,
        }
    }
}
