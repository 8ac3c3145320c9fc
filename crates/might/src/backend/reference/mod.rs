//! The reference backend: a deliberately simple second implementation of the backend
//! interface, there to prove the seam (`device.rs`, `storage.rs` and this folder are all it
//! takes to add a backend) and to run the conformance suite against something other than the
//! CPU kernels. Plain scalar loops over `Layout`s: no SIMD, no threads, no `unsafe`, no
//! GEMM crate, and none of the optional fused fast paths (the ops compose them).
//!
//! Storage is one `Vec<f64>` for every dtype but int64 (each value exactly representable in
//! its dtype: rounded on every store), and a `Vec<i64>` for int64, which f64 cannot hold
//! exactly past 2^53. Arithmetic runs in f64 and rounds once to the dtype, so results agree
//! with the CPU backend to the last bit for `+ - * /` and within a few ulps for the f32
//! transcendental functions, where the CPU uses vectorised approximations.

mod dispatch;
mod elementwise;
mod index;
mod linalg;
mod pool;
mod reduce;

use crate::backend::BackendDevice;
use crate::tensor::random::Generator;
use crate::{DType, Layout, Result, WithDType};
use half::{bf16, f16};
use std::any::Any;

/// The element values of a buffer.
#[derive(Clone, Debug)]
pub(crate) enum Buf {
    /// f32, f64, f16, bf16, u8 and bool (0/1), each value exact in its dtype.
    F(Vec<f64>),
    /// int64.
    I(Vec<i64>),
}

/// A reference-backend buffer: a dtype tag and its values.
#[derive(Clone, Debug)]
pub struct RefStorage {
    dtype: DType,
    buf: Buf,
}

/// The reference backend as a device (there is one).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RefDevice;

/// `v` rounded to `dtype` as a conversion from f64 does (`WithDType::from_f64`: f16/bf16
/// round directly from f64, u8 saturates, bool is `v != 0`).
pub(crate) fn from_f64(dtype: DType, v: f64) -> f64 {
    match dtype {
        DType::F64 => v,
        DType::F32 => v as f32 as f64,
        DType::F16 => f16::from_f64(v).to_f64(),
        DType::BF16 => bf16::from_f64(v).to_f64(),
        DType::U8 => v as u8 as f64,
        DType::Bool => (v != 0.0) as u8 as f64,
        DType::I64 => v as i64 as f64,
    }
}

/// `v`, the exact result of an arithmetic step, rounded to the float `dtype` the way the CPU
/// backend computes it: f16/bf16 compute in f32, so they round through f32.
pub(crate) fn round(dtype: DType, v: f64) -> f64 {
    match dtype {
        DType::F16 => f16::from_f32(v as f32).to_f64(),
        DType::BF16 => bf16::from_f32(v as f32).to_f64(),
        d => from_f64(d, v),
    }
}

/// Storage offsets of the elements `l` selects, in logical (row-major) order.
pub(crate) fn offsets(l: &Layout) -> Vec<usize> {
    crate::backend::walk::offsets(l)
}

/// Move `v` into the `Vec<U>` it is (one type, checked through `Any`).
fn cast_vec<T: 'static, U: 'static>(v: Vec<T>) -> Option<Vec<U>> {
    let b: Box<dyn Any> = Box::new(v);
    b.downcast::<Vec<U>>().ok().map(|b| *b)
}

impl RefStorage {
    /// A float-held buffer (every dtype but int64) of values already exact in `dtype`.
    pub(crate) fn f(dtype: DType, v: Vec<f64>) -> RefStorage {
        debug_assert!(dtype != DType::I64);
        RefStorage {
            dtype,
            buf: Buf::F(v),
        }
    }
    pub(crate) fn i64(v: Vec<i64>) -> RefStorage {
        RefStorage {
            dtype: DType::I64,
            buf: Buf::I(v),
        }
    }
    /// A buffer of `dtype` from exact f64 results, rounded with `rnd` (ints: truncated).
    pub(crate) fn from_vals(dtype: DType, v: Vec<f64>, rnd: fn(DType, f64) -> f64) -> RefStorage {
        if dtype == DType::I64 {
            return RefStorage::i64(v.into_iter().map(|x| x as i64).collect());
        }
        RefStorage::f(dtype, v.into_iter().map(|x| rnd(dtype, x)).collect())
    }
    pub(crate) fn dtype(&self) -> DType {
        self.dtype
    }
    /// Element `i` as f64 (int64 rounds, like `WithDType::to_f64`).
    pub(crate) fn get(&self, i: usize) -> f64 {
        match &self.buf {
            Buf::F(v) => v[i],
            Buf::I(v) => v[i] as f64,
        }
    }
    /// Element `i` as i64 (exact for int64, u8 and bool).
    pub(crate) fn get_i(&self, i: usize) -> i64 {
        match &self.buf {
            Buf::F(v) => v[i] as i64,
            Buf::I(v) => v[i],
        }
    }
    /// The elements `l` selects as f64.
    pub(crate) fn gather_f(&self, l: &Layout) -> Vec<f64> {
        offsets(l).into_iter().map(|o| self.get(o)).collect()
    }
    /// The elements `l` selects, copied into a new buffer of the same dtype.
    pub(crate) fn select(&self, offs: &[usize]) -> RefStorage {
        let buf = match &self.buf {
            Buf::F(v) => Buf::F(offs.iter().map(|&o| v[o]).collect()),
            Buf::I(v) => Buf::I(offs.iter().map(|&o| v[o]).collect()),
        };
        RefStorage {
            dtype: self.dtype,
            buf,
        }
    }
    /// Set element `i` to element `j` of `src` (same dtype).
    pub(crate) fn set_from(&mut self, i: usize, src: &RefStorage, j: usize) {
        match (&mut self.buf, &src.buf) {
            (Buf::F(a), Buf::F(b)) => a[i] = b[j],
            (Buf::I(a), Buf::I(b)) => a[i] = b[j],
            _ => unreachable!("dtypes checked by the caller"),
        }
    }
    /// Set element `i` to `v` (f64 for float-held buffers, i64 for int64: `vi`).
    pub(crate) fn set(&mut self, i: usize, v: f64, vi: i64) {
        match &mut self.buf {
            Buf::F(a) => a[i] = v,
            Buf::I(a) => a[i] = vi,
        }
    }
}

impl RefStorage {
    pub(crate) fn from_host<T: WithDType>(data: Vec<T>) -> RefStorage {
        if T::DTYPE == DType::I64 {
            return RefStorage::i64(cast_vec(data).expect("DTYPE names the type"));
        }
        RefStorage::f(T::DTYPE, data.into_iter().map(T::to_f64).collect())
    }
    pub(crate) fn to_host<T: WithDType>(&self, l: &Layout) -> Vec<T> {
        let offs = offsets(l);
        match &self.buf {
            Buf::I(v) => {
                let out: Vec<i64> = offs.iter().map(|&o| v[o]).collect();
                cast_vec(out).expect("dtype checked by the caller")
            }
            Buf::F(v) => offs.iter().map(|&o| T::from_f64(v[o])).collect(),
        }
    }
}

impl BackendDevice for RefDevice {
    type Storage = RefStorage;
    fn zeros(&self, dtype: DType, n: usize) -> Result<RefStorage> {
        Ok(RefStorage::from_vals(dtype, vec![0.0; n], from_f64))
    }
    fn storage_from_f64(
        &self,
        dtype: DType,
        values: &mut dyn Iterator<Item = f64>,
    ) -> Result<RefStorage> {
        Ok(RefStorage::from_vals(dtype, values.collect(), from_f64))
    }
    fn storage_from_vec<T: WithDType>(&self, data: Vec<T>) -> Result<RefStorage> {
        Ok(RefStorage::from_host(data))
    }
    /// The CPU backend's draws, in its order: f64 takes 53-bit samples, the rest 24-bit.
    fn rand_uniform(
        &self,
        dtype: DType,
        n: usize,
        low: f64,
        high: f64,
        g: &mut Generator,
    ) -> Result<RefStorage> {
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            let u = if dtype == DType::F64 {
                g.next_f64()
            } else {
                g.next_f32() as f64
            };
            v.push(low + (high - low) * u);
        }
        Ok(RefStorage::from_vals(dtype, v, from_f64))
    }
    fn rand_normal(
        &self,
        dtype: DType,
        n: usize,
        mean: f64,
        std: f64,
        g: &mut Generator,
    ) -> Result<RefStorage> {
        let v = (0..n).map(|_| mean + std * g.next_normal()).collect();
        Ok(RefStorage::from_vals(dtype, v, from_f64))
    }
}
