//! The CPU backend: typed buffers and the kernels that read them through layouts.

pub mod arith;
pub(crate) mod attention;
pub mod bgemm;
pub mod conv;
pub(crate) mod conv_blocked;
#[cfg(target_arch = "x86_64")]
mod conv_blocked_avx2;
pub mod conv_direct;
#[cfg(test)]
mod conv_testing;
pub(crate) mod dispatch;
pub mod elementwise;
pub(crate) mod fused;
pub mod im2col;
pub(crate) mod images;
pub mod index;
pub(crate) mod loss;
pub mod matmul;
pub mod max_pool_simd;
pub(crate) mod norm;
pub(crate) mod optim;
pub(crate) mod packed_cache;
pub mod pool;
pub mod pooling;
pub mod prefetch;
pub mod reduce;
pub mod rows;
pub mod sgemm;
pub mod simd;
pub mod softmax;
pub mod strided;
pub mod team;
pub mod threads;
pub mod transpose;
pub(crate) mod unary_ops;
pub mod vmath;
pub(crate) mod winograd;
pub mod wsum;

pub(crate) use dispatch::CpuDevice;

use crate::{DType, WithDType};
use half::{bf16, f16};
use std::any::Any;

/// A typed CPU buffer. Float buffers go back to the [`pool`] when dropped.
#[derive(Clone, Debug)]
pub enum CpuStorage {
    F32(Vec<f32>),
    F64(Vec<f64>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    I64(Vec<i64>),
    U8(Vec<u8>),
    Bool(Vec<bool>),
}

/// Apply an expression to the inner `Vec` of whatever variant a `CpuStorage` is.
#[macro_export]
#[doc(hidden)]
macro_rules! with_cpu {
    ($s:expr, $v:ident => $e:expr) => {
        match $s {
            $crate::backend::cpu::CpuStorage::F32($v) => $e,
            $crate::backend::cpu::CpuStorage::F64($v) => $e,
            $crate::backend::cpu::CpuStorage::F16($v) => $e,
            $crate::backend::cpu::CpuStorage::BF16($v) => $e,
            $crate::backend::cpu::CpuStorage::I64($v) => $e,
            $crate::backend::cpu::CpuStorage::U8($v) => $e,
            $crate::backend::cpu::CpuStorage::Bool($v) => $e,
        }
    };
}

impl Drop for CpuStorage {
    fn drop(&mut self) {
        self.forget_packings();
        match self {
            CpuStorage::F32(v) => pool::recycle(std::mem::take(v)),
            CpuStorage::F64(v) => pool::recycle(std::mem::take(v)),
            CpuStorage::I64(v) => pool::recycle(std::mem::take(v)),
            _ => {}
        }
    }
}

impl CpuStorage {
    pub fn dtype(&self) -> DType {
        match self {
            CpuStorage::F32(_) => DType::F32,
            CpuStorage::F64(_) => DType::F64,
            CpuStorage::F16(_) => DType::F16,
            CpuStorage::BF16(_) => DType::BF16,
            CpuStorage::I64(_) => DType::I64,
            CpuStorage::U8(_) => DType::U8,
            CpuStorage::Bool(_) => DType::Bool,
        }
    }
    pub fn len(&self) -> usize {
        with_cpu!(self, v => v.len())
    }

    /// This buffer is about to be written or freed: packings kept of weights in it
    /// ([`packed_cache`]) are no longer served without a check.
    pub(crate) fn forget_packings(&self) {
        with_cpu!(self, v => packed_cache::forget(v.as_ptr() as usize, std::mem::size_of_val(v.as_slice())))
    }

    /// A zero-filled buffer, or an error where the allocator refuses it (no abort).
    pub fn zeros(dtype: DType, n: usize) -> crate::Result<CpuStorage> {
        use crate::limits::try_filled;
        Ok(match dtype {
            DType::F32 => CpuStorage::F32(pool::try_zeroed(n)?),
            DType::F64 => CpuStorage::F64(pool::try_zeroed(n)?),
            DType::F16 => CpuStorage::F16(try_filled("zeros", f16::ZERO, n)?),
            DType::BF16 => CpuStorage::BF16(try_filled("zeros", bf16::ZERO, n)?),
            DType::I64 => CpuStorage::I64(try_filled("zeros", 0, n)?),
            DType::U8 => CpuStorage::U8(try_filled("zeros", 0, n)?),
            DType::Bool => CpuStorage::Bool(try_filled("zeros", false, n)?),
        })
    }

    /// Build a buffer of `dtype` from f64 values (creation ops, conversions).
    pub fn from_f64_iter(dtype: DType, it: impl Iterator<Item = f64>) -> CpuStorage {
        fn col<T: WithDType>(it: impl Iterator<Item = f64>) -> Vec<T> {
            it.map(T::from_f64).collect()
        }
        match dtype {
            DType::F32 => CpuStorage::F32(col(it)),
            DType::F64 => CpuStorage::F64(col(it)),
            DType::F16 => CpuStorage::F16(col(it)),
            DType::BF16 => CpuStorage::BF16(col(it)),
            DType::I64 => CpuStorage::I64(col(it)),
            DType::U8 => CpuStorage::U8(col(it)),
            DType::Bool => CpuStorage::Bool(col(it)),
        }
    }
}

/// Element types that have a `CpuStorage` variant: lets generic code wrap and unwrap buffers.
/// Every [`WithDType`] is one (the trait is sealed to might's seven element types); the
/// variant is found from `T::DTYPE` and the `Vec` moved, not copied, through `Any`.
pub trait CpuDType: WithDType {
    fn wrap(v: Vec<Self>) -> CpuStorage;
    fn slice(s: &CpuStorage) -> Option<&[Self]>;
    fn slice_mut(s: &mut CpuStorage) -> Option<&mut [Self]>;
}

/// Move `v` into the `Vec<U>` it is (`T` and `U` are one type, checked through `Any`).
fn cast_vec<T: 'static, U: 'static>(v: Vec<T>) -> Vec<U> {
    let b: Box<dyn Any> = Box::new(v);
    *b.downcast::<Vec<U>>()
        .unwrap_or_else(|_| unreachable!("WithDType is sealed: DTYPE names the Rust type"))
}

impl<T: WithDType> CpuDType for T {
    fn wrap(v: Vec<T>) -> CpuStorage {
        match T::DTYPE {
            DType::F32 => CpuStorage::F32(cast_vec(v)),
            DType::F64 => CpuStorage::F64(cast_vec(v)),
            DType::F16 => CpuStorage::F16(cast_vec(v)),
            DType::BF16 => CpuStorage::BF16(cast_vec(v)),
            DType::I64 => CpuStorage::I64(cast_vec(v)),
            DType::U8 => CpuStorage::U8(cast_vec(v)),
            DType::Bool => CpuStorage::Bool(cast_vec(v)),
        }
    }
    fn slice(s: &CpuStorage) -> Option<&[T]> {
        with_cpu!(s, v => (v as &dyn Any).downcast_ref::<Vec<T>>().map(|v| v.as_slice()))
    }
    fn slice_mut(s: &mut CpuStorage) -> Option<&mut [T]> {
        with_cpu!(s, v => (v as &mut dyn Any).downcast_mut::<Vec<T>>().map(|v| v.as_mut_slice()))
    }
}
