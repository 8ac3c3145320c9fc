//! Creation ops: constants, ranges, identity and random tensors.

use super::random::with_global;
use crate::{DType, Device, Error, Result, Shape, Storage, Tensor};

#[track_caller]
fn checked(op: &str, shape: impl Into<Shape>, dtype: DType) -> Result<Shape> {
    let shape = shape.into();
    match shape.checked_numel() {
        Some(n) if n <= isize::MAX as usize / 8 => {
            crate::limits::check_alloc(op, &shape, dtype).map(|_| shape)
        }
        _ => Err(Error::shape(
            op,
            format!("shape {shape} has too many elements"),
        )),
    }
}

impl Tensor {
    /// A tensor filled with zeros (on the CPU; [`zeros_on`](Tensor::zeros_on) picks the device).
    #[track_caller]
    pub fn zeros(shape: impl Into<Shape>, dtype: DType) -> Result<Tensor> {
        Tensor::zeros_on(shape, dtype, Device::Cpu)
    }

    /// A tensor filled with zeros on `device` (PyTorch's `torch.zeros(.., device=)`).
    #[track_caller]
    pub fn zeros_on(shape: impl Into<Shape>, dtype: DType, device: Device) -> Result<Tensor> {
        let shape = checked("zeros", shape, dtype)?;
        let n = shape.numel();
        Tensor::from_result(Storage::zeros(device, dtype, n), shape)
    }

    /// A tensor filled with ones.
    #[track_caller]
    pub fn ones(shape: impl Into<Shape>, dtype: DType) -> Result<Tensor> {
        Tensor::full(shape, 1.0, dtype)
    }

    /// A tensor filled with ones on `device`.
    #[track_caller]
    pub fn ones_on(shape: impl Into<Shape>, dtype: DType, device: Device) -> Result<Tensor> {
        Tensor::full_on(shape, 1.0, dtype, device)
    }

    /// A tensor filled with `value` (converted to `dtype`).
    #[track_caller]
    pub fn full(shape: impl Into<Shape>, value: f64, dtype: DType) -> Result<Tensor> {
        Tensor::full_on(shape, value, dtype, Device::Cpu)
    }

    /// A tensor filled with `value` on `device`.
    #[track_caller]
    pub fn full_on(
        shape: impl Into<Shape>,
        value: f64,
        dtype: DType,
        device: Device,
    ) -> Result<Tensor> {
        let shape = checked("full", shape, dtype)?;
        let n = shape.numel();
        let mut it = std::iter::repeat_n(value, n);
        Tensor::from_result(Storage::from_f64(device, dtype, &mut it), shape)
    }

    /// Zeros of `t`'s shape, dtype and device.
    pub fn zeros_like(t: &Tensor) -> Result<Tensor> {
        Tensor::zeros_on(t.shape(), t.dtype(), t.device())
    }
    /// Ones of `t`'s shape, dtype and device.
    pub fn ones_like(t: &Tensor) -> Result<Tensor> {
        Tensor::ones_on(t.shape(), t.dtype(), t.device())
    }
    /// `value` in `t`'s shape, dtype and device.
    pub fn full_like(t: &Tensor, value: f64) -> Result<Tensor> {
        Tensor::full_on(t.shape(), value, t.dtype(), t.device())
    }
    /// U[0, 1) samples in `t`'s shape, dtype and device.
    pub fn rand_like(t: &Tensor) -> Result<Tensor> {
        Tensor::uniform_on(t.shape(), 0.0, 1.0, t.dtype(), t.device())
    }
    /// N(0, 1) samples in `t`'s shape, dtype and device.
    pub fn randn_like(t: &Tensor) -> Result<Tensor> {
        Tensor::normal_on(t.shape(), 0.0, 1.0, t.dtype(), t.device())
    }

    /// `start, start+step, ...` below `end` (like `torch.arange`).
    #[track_caller]
    pub fn arange(start: f64, end: f64, step: f64, dtype: DType) -> Result<Tensor> {
        if step == 0.0 || !step.is_finite() || !start.is_finite() || !end.is_finite() {
            return Err(Error::invalid(
                "arange",
                format!("invalid range start={start} end={end} step={step}"),
            ));
        }
        let n = ((end - start) / step).ceil().max(0.0) as usize;
        let shape = checked("arange", [n], dtype)?;
        let mut it = (0..n).map(|i| start + i as f64 * step);
        Tensor::from_result(Storage::from_f64(Device::Cpu, dtype, &mut it), shape)
    }

    /// `steps` evenly spaced values from `start` to `end` inclusive.
    #[track_caller]
    pub fn linspace(start: f64, end: f64, steps: usize, dtype: DType) -> Result<Tensor> {
        let shape = checked("linspace", [steps], dtype)?;
        let step = if steps > 1 {
            (end - start) / (steps - 1) as f64
        } else {
            0.0
        };
        let mut it = (0..steps).map(|i| {
            if steps > 1 && i == steps - 1 {
                end
            } else {
                start + i as f64 * step
            }
        });
        Tensor::from_result(Storage::from_f64(Device::Cpu, dtype, &mut it), shape)
    }

    /// The n×n identity matrix.
    #[track_caller]
    pub fn eye(n: usize, dtype: DType) -> Result<Tensor> {
        let shape = checked("eye", [n, n], dtype)?;
        let mut it = (0..n * n).map(|i| if i / n == i % n { 1.0 } else { 0.0 });
        Tensor::from_result(Storage::from_f64(Device::Cpu, dtype, &mut it), shape)
    }

    /// Uniform samples in [0, 1) from the global generator (`manual_seed`).
    #[track_caller]
    pub fn rand(shape: impl Into<Shape>, dtype: DType) -> Result<Tensor> {
        Tensor::uniform(shape, 0.0, 1.0, dtype)
    }

    /// Uniform samples in [low, high).
    #[track_caller]
    pub fn uniform(shape: impl Into<Shape>, low: f64, high: f64, dtype: DType) -> Result<Tensor> {
        Tensor::uniform_on(shape, low, high, dtype, Device::Cpu)
    }

    /// Uniform samples in [low, high) on `device`, drawn from the global generator (the same
    /// values on every device for one seed).
    #[track_caller]
    pub fn uniform_on(
        shape: impl Into<Shape>,
        low: f64,
        high: f64,
        dtype: DType,
        device: Device,
    ) -> Result<Tensor> {
        let shape = checked("rand", shape, dtype)?;
        let n = shape.numel();
        let data = with_global(|g| Storage::rand_uniform(device, dtype, n, low, high, g));
        Tensor::from_result(data, shape)
    }

    /// Standard normal samples from the global generator.
    #[track_caller]
    pub fn randn(shape: impl Into<Shape>, dtype: DType) -> Result<Tensor> {
        Tensor::normal(shape, 0.0, 1.0, dtype)
    }

    /// Normal samples with the given mean and standard deviation.
    #[track_caller]
    pub fn normal(shape: impl Into<Shape>, mean: f64, std: f64, dtype: DType) -> Result<Tensor> {
        Tensor::normal_on(shape, mean, std, dtype, Device::Cpu)
    }

    /// Normal samples on `device`, drawn from the global generator.
    #[track_caller]
    pub fn normal_on(
        shape: impl Into<Shape>,
        mean: f64,
        std: f64,
        dtype: DType,
        device: Device,
    ) -> Result<Tensor> {
        let shape = checked("randn", shape, dtype)?;
        let n = shape.numel();
        let data = with_global(|g| Storage::rand_normal(device, dtype, n, mean, std, g));
        Tensor::from_result(data, shape)
    }

    /// Uniform integers in [low, high) as int64 (`torch.randint`).
    #[track_caller]
    pub fn rand_int(low: i64, high: i64, shape: impl Into<Shape>) -> Result<Tensor> {
        if high <= low {
            return Err(Error::invalid(
                "rand_int",
                format!("empty range [{low}, {high})"),
            ));
        }
        let shape = checked("rand_int", shape, DType::I64)?;
        let n = shape.numel();
        let span = (high as i128 - low as i128) as u64;
        let data = with_global(|g| {
            (0..n)
                .map(|_| (low as i128 + g.below(span) as i128) as i64)
                .collect::<Vec<_>>()
        });
        Tensor::from_vec(data, shape)
    }

    /// A random permutation of `0..n` as int64 (`torch.randperm`).
    pub fn randperm(n: usize) -> Tensor {
        let p = with_global(|g| g.permutation(n));
        Tensor::new(&p.into_iter().map(|v| v as i64).collect::<Vec<_>>())
    }
}
