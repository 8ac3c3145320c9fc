//! Where a tensor's data lives, and the settings of each device.
//!
//! `Device` names a backend; each variant owns its buffers in `Storage` and its settings
//! (threads, the precision of f32 matrix products, the buffer cache) in its backend. The
//! process-wide setters (`set_num_threads`, `set_float32_matmul_precision`,
//! `empty_cache`, ...) are the CPU's, as in PyTorch. This file and `storage.rs` are the only
//! places outside `backend/` that name a concrete backend. `Reference` (feature
//! `reference-backend`) is a deliberately simple scalar backend that runs the conformance
//! suite and proves the seam a GPU backend plugs into.

use crate::backend::cpu::CpuDevice;
#[cfg(feature = "reference-backend")]
use crate::backend::reference::RefDevice;
#[cfg(feature = "gpu")]
use crate::backend::wgpu::WgpuDevice;
use crate::backend::BackendDevice;
use crate::MatmulPrecision;
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Device {
    #[default]
    Cpu,
    /// The reference backend: plain scalar loops, for testing (feature `reference-backend`).
    #[cfg(feature = "reference-backend")]
    Reference,
    /// GPU number `n` through wgpu (feature `gpu`): real GPUs first, software ones last.
    #[cfg(feature = "gpu")]
    Gpu(usize),
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            #[cfg(feature = "reference-backend")]
            Device::Reference => f.write_str("reference"),
            #[cfg(feature = "gpu")]
            Device::Gpu(n) => write!(f, "gpu:{n}"),
        }
    }
}

/// The CPU backend's kernels that might's own tests and benches reach (through the doc-hidden
/// `might::internals`), named here so that only this file and `storage.rs` name a backend.
pub(crate) mod cpu_internals {
    pub use crate::backend::cpu::bgemm;
    /// `(host reads, buffers created)` on GPU `n`: how tests see that work is queued and
    /// buffers are reused.
    #[cfg(feature = "gpu")]
    pub use crate::backend::wgpu::counters as gpu_counters;
}

/// Run `$e` with `$d` bound to the device's backend.
macro_rules! backend {
    ($dev:expr, $d:ident => $e:expr) => {
        match $dev {
            Device::Cpu => {
                let $d = CpuDevice;
                $e
            }
            #[cfg(feature = "reference-backend")]
            Device::Reference => {
                let $d = RefDevice;
                $e
            }
            #[cfg(feature = "gpu")]
            Device::Gpu(n) => {
                let $d = WgpuDevice(n);
                $e
            }
        }
    };
}

impl Device {
    /// Every device this build has (the conformance tests run on each).
    pub const ALL: &'static [Device] = &[
        Device::Cpu,
        #[cfg(feature = "reference-backend")]
        Device::Reference,
    ];

    /// GPU number `n` (0 is the best one), checked: the error names the adapters found.
    #[cfg(feature = "gpu")]
    #[track_caller]
    pub fn gpu(n: usize) -> crate::Result<Device> {
        crate::backend::wgpu::open(n)?;
        Ok(Device::Gpu(n))
    }

    /// The fastest device this build can use: the first GPU when there is a hardware one,
    /// else the CPU (a software GPU emulation is slower than the CPU backend).
    pub fn best() -> Device {
        #[cfg(feature = "gpu")]
        if crate::backend::wgpu::is_hardware(0) && Device::gpu(0).is_ok() {
            return Device::Gpu(0);
        }
        Device::Cpu
    }

    /// What runs this device's kernels, e.g. `cpu` or `NVIDIA H200 (Vulkan, ...)`.
    pub fn name(self) -> String {
        match self {
            #[cfg(feature = "gpu")]
            Device::Gpu(n) => crate::backend::wgpu::adapter_name(n),
            d => d.to_string(),
        }
    }

    /// Wait until every kernel queued on this device has run (a no-op on the CPU, whose
    /// kernels run when called); `torch.cuda.synchronize`.
    pub fn synchronize(self) -> crate::Result<()> {
        match self {
            #[cfg(feature = "gpu")]
            Device::Gpu(n) => crate::backend::wgpu::synchronize(n),
            _ => Ok(()),
        }
    }

    /// Threads this device's kernels run on (CPU: `MIGHT_NUM_THREADS`, else every core).
    pub fn num_threads(self) -> usize {
        backend!(self, d => d.num_threads())
    }
    /// Set how many threads this device's kernels run on (at least 1).
    pub fn set_num_threads(self, n: usize) {
        backend!(self, d => d.set_num_threads(n))
    }
    /// The internal precision of this device's f32 matrix products.
    pub fn matmul_precision(self) -> MatmulPrecision {
        backend!(self, d => d.matmul_precision())
    }
    /// Set the internal precision of this device's f32 matrix products.
    pub fn set_matmul_precision(self, p: MatmulPrecision) {
        backend!(self, d => d.set_matmul_precision(p))
    }
    /// Bytes held by this device's cache of freed buffers (kept for reuse by later ops).
    pub fn cached_bytes(self) -> usize {
        backend!(self, d => d.cached_bytes())
    }
    /// Cap this device's buffer cache at `bytes` (0 disables it); frees what no longer fits.
    pub fn set_cache_limit(self, bytes: usize) {
        backend!(self, d => d.set_cache_limit(bytes))
    }
    /// Free every buffer this device caches (like `torch.cuda.empty_cache`).
    pub fn empty_cache(self) {
        backend!(self, d => d.empty_cache())
    }
}

/// Open GPU `n` without blocking and return its adapter's name. In a browser (WebGPU) this is
/// the only way to open it, awaited before the first `Device::Gpu(n)` tensor: WebGPU hands out
/// adapters and devices only asynchronously. Natively it does what [`Device::gpu`] does.
#[cfg(feature = "gpu")]
pub async fn init_gpu(n: usize) -> crate::Result<String> {
    crate::backend::wgpu::init_async(n).await
}

/// Threads the CPU kernels use (`torch.get_num_threads`): [`Device::num_threads`] of the CPU.
pub fn get_num_threads() -> usize {
    Device::Cpu.num_threads()
}

/// Set the threads the CPU kernels use (`torch.set_num_threads`).
pub fn set_num_threads(n: usize) {
    Device::Cpu.set_num_threads(n)
}

/// WebAssembly only: run the CPU kernels' simd128 build (`true`, the default) or their scalar
/// build (to compare the two, or to reproduce scalar results). Every kernel and matrix
/// product switches at the same dispatch point that picks AVX-512 / AVX2 on x86-64.
#[cfg(target_arch = "wasm32")]
pub fn set_wasm_simd128(on: bool) {
    crate::backend::cpu::simd::set_simd128(on)
}

/// Bytes held by the CPU's buffer cache.
pub fn buffer_cache_bytes() -> usize {
    Device::Cpu.cached_bytes()
}

/// Cap the CPU's buffer cache (bytes; 0 disables it).
pub fn set_buffer_cache_limit(bytes: usize) {
    Device::Cpu.set_cache_limit(bytes)
}

/// Free every buffer the CPU caches.
pub fn empty_cache() {
    Device::Cpu.empty_cache()
}
