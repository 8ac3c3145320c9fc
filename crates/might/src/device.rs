//! Where a tensor's data lives. Only the CPU exists today; the enum is the seam where a GPU
//! backend (wgpu) will plug in: each variant owns its own buffers in `Storage`.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Device {
    #[default]
    Cpu,
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
        }
    }
}
