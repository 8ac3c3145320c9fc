//! Where a tensor's data lives. Each variant owns its own buffers in `Storage`; the CPU is
//! the default. `Reference` (feature `reference-backend`) is a deliberately simple scalar
//! backend that runs the conformance suite and proves the seam a GPU backend plugs into.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Device {
    #[default]
    Cpu,
    /// The reference backend: plain scalar loops, for testing (feature `reference-backend`).
    #[cfg(feature = "reference-backend")]
    Reference,
}

impl Device {
    /// Every device this build has (the conformance tests run on each).
    pub const ALL: &'static [Device] = &[
        Device::Cpu,
        #[cfg(feature = "reference-backend")]
        Device::Reference,
    ];

    /// Whether buffers of this device are host memory the CPU kernels read directly (the
    /// fused kernels not yet behind the backend interface run only there).
    pub fn is_cpu(self) -> bool {
        self == Device::Cpu
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            #[cfg(feature = "reference-backend")]
            Device::Reference => f.write_str("reference"),
        }
    }
}
