//! The conformance test matrix: a test body written once as `fn name(dev: Device) ->
//! Result<()>` runs on every backend this build has. `device_tests!(a, b, ..)` instantiates
//! each listed body as `a_cpu` and, with the `reference-backend` feature, `a_reference`; the
//! next backend adds one line here and runs the whole suite unchanged.

#![allow(dead_code)]

use might::{Device, Result, Tensor};

/// `#[test] fn <name>_<device>()` for every listed `fn name(dev: Device) -> Result<()>`.
#[macro_export]
macro_rules! device_tests {
    ($($f:ident),* $(,)?) => {
        $(paste::paste! {
            #[test]
            fn [<$f _cpu>]() -> might::Result<()> {
                $f(might::Device::Cpu)
            }
            #[cfg(feature = "reference-backend")]
            #[test]
            fn [<$f _reference>]() -> might::Result<()> {
                $f(might::Device::Reference)
            }
        })*
    };
}

/// Host data as a tensor on `dev`.
pub fn on<T: might::WithDType>(
    dev: Device,
    data: Vec<T>,
    shape: impl Into<might::Shape>,
) -> Result<Tensor> {
    Tensor::from_vec(data, shape)?.to_device(dev)
}
