//! Element types. Floats (f32, f64) support every op; f16/bf16 are storage types that compute
//! through f32; i64/u8 hold indices, labels and images; bool holds masks.

use half::{bf16, f16};
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    F64,
    F16,
    BF16,
    I64,
    U8,
    Bool,
}

impl DType {
    pub const ALL: [DType; 7] = [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::BF16,
        DType::I64,
        DType::U8,
        DType::Bool,
    ];

    /// Bytes per element.
    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F64 | DType::I64 => 8,
            DType::F16 | DType::BF16 => 2,
            DType::U8 | DType::Bool => 1,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
    }

    pub fn is_int(self) -> bool {
        matches!(self, DType::I64 | DType::U8)
    }

    /// PyTorch's name (`torch.float32` -> `"float32"`).
    pub fn as_str(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::I64 => "int64",
            DType::U8 => "uint8",
            DType::Bool => "bool",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

mod sealed {
    /// Only might's seven element types are tensor elements: every backend stores exactly
    /// these, and generic code relies on `DTYPE` naming the Rust type.
    pub trait Sealed {}
}

/// A Rust type that can be a tensor element (sealed: f32, f64, f16, bf16, i64, u8, bool).
pub trait WithDType:
    sealed::Sealed + Copy + Send + Sync + 'static + fmt::Debug + PartialOrd + PartialEq + Default
{
    const DTYPE: DType;
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
    fn zero() -> Self {
        Self::from_f64(0.0)
    }
    fn one() -> Self {
        Self::from_f64(1.0)
    }
}

macro_rules! with_dtype {
    ($t:ty, $dt:ident, $to:expr, $from:expr) => {
        impl sealed::Sealed for $t {}
        impl WithDType for $t {
            const DTYPE: DType = DType::$dt;
            #[inline(always)]
            fn to_f64(self) -> f64 {
                $to(self)
            }
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                $from(v)
            }
        }
    };
}

with_dtype!(f32, F32, |v: f32| v as f64, |v: f64| v as f32);
with_dtype!(f64, F64, |v: f64| v, |v: f64| v);
with_dtype!(f16, F16, |v: f16| v.to_f64(), f16::from_f64);
with_dtype!(bf16, BF16, |v: bf16| v.to_f64(), bf16::from_f64);
with_dtype!(i64, I64, |v: i64| v as f64, |v: f64| v as i64);
with_dtype!(u8, U8, |v: u8| v as f64, |v: f64| v as u8);
with_dtype!(bool, Bool, |v: bool| if v { 1.0 } else { 0.0 }, |v: f64| v
    != 0.0);
