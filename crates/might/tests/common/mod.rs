//! The conformance test matrix: a test body written once as `fn name(dev: Device) ->
//! Result<()>` runs on every backend this build has. `device_tests!(a, b, ..)` instantiates
//! each listed body as `a_cpu`, with the `reference-backend` feature `a_reference`, and with
//! the `gpu` feature `a_gpu`. Bodies listed after `; f64:` compute in f64 (gradchecks against
//! finite differences), which WGSL lacks: they run on the host backends only, and
//! `tests/gpu.rs` checks the same ops on the GPU in f32 against the CPU in f64.

#![allow(dead_code)]

use might::{Device, Result, Tensor};

/// `#[test] fn <name>_<device>()` for every listed `fn name(dev: Device) -> Result<()>`.
#[macro_export]
macro_rules! device_tests {
    ($($f:ident),* $(,)? $(; f64: $($h:ident),* $(,)?)?) => {
        $($crate::device_tests!(@all $f);)*
        $($($crate::device_tests!(@host $h);)*)?
    };
    (@host $f:ident) => {
        paste::paste! {
            #[test]
            fn [<$f _cpu>]() -> might::Result<()> {
                $f(might::Device::Cpu)
            }
            #[cfg(feature = "reference-backend")]
            #[test]
            fn [<$f _reference>]() -> might::Result<()> {
                $f(might::Device::Reference)
            }
        }
    };
    (@all $f:ident) => {
        $crate::device_tests!(@host $f);
        paste::paste! {
            #[cfg(feature = "gpu")]
            #[test]
            fn [<$f _gpu>]() -> might::Result<()> {
                match $crate::common::gpu() {
                    Some(d) => $f(d),
                    None => Ok(()),
                }
            }
        }
    };
}

/// The GPU the `_gpu` tests run on; `None` (with a printed notice) where wgpu finds no adapter,
/// unless `MIGHT_REQUIRE_GPU=1` (set in CI), which makes a missing GPU a failure.
#[cfg(feature = "gpu")]
pub fn gpu() -> Option<Device> {
    match Device::gpu(0) {
        Ok(d) => Some(d),
        Err(e) if std::env::var("MIGHT_REQUIRE_GPU").is_ok_and(|v| v == "1") => {
            panic!("MIGHT_REQUIRE_GPU=1 but no GPU: {e}")
        }
        Err(e) => {
            eprintln!("SKIPPED (no GPU adapter): {e}");
            None
        }
    }
}

/// Host data as a tensor on `dev`.
pub fn on<T: might::WithDType>(
    dev: Device,
    data: Vec<T>,
    shape: impl Into<might::Shape>,
) -> Result<Tensor> {
    Tensor::from_vec(data, shape)?.to_device(dev)
}
