//! Element arithmetic of the CPU kernels ([`BinaryOp`](crate::backend::BinaryOp)), one
//! definition per element type.

use half::{bf16, f16};

/// Element arithmetic, one definition per type: floats IEEE, integers wrapping (like PyTorch),
/// integer division by zero gives 0 instead of trapping.
pub trait Arith: Copy {
    fn add(a: Self, b: Self) -> Self;
    fn sub(a: Self, b: Self) -> Self;
    fn mul(a: Self, b: Self) -> Self;
    fn div(a: Self, b: Self) -> Self;
    fn pow(a: Self, b: Self) -> Self;
    fn max(a: Self, b: Self) -> Self;
    fn min(a: Self, b: Self) -> Self;
}

macro_rules! arith_float {
    ($t:ty) => {
        impl Arith for $t {
            #[inline(always)]
            fn add(a: $t, b: $t) -> $t {
                a + b
            }
            #[inline(always)]
            fn sub(a: $t, b: $t) -> $t {
                a - b
            }
            #[inline(always)]
            fn mul(a: $t, b: $t) -> $t {
                a * b
            }
            #[inline(always)]
            fn div(a: $t, b: $t) -> $t {
                a / b
            }
            #[inline(always)]
            fn pow(a: $t, b: $t) -> $t {
                a.powf(b)
            }
            #[inline(always)]
            fn max(a: $t, b: $t) -> $t {
                if a.is_nan() || a > b {
                    a
                } else {
                    b
                }
            }
            #[inline(always)]
            fn min(a: $t, b: $t) -> $t {
                if a.is_nan() || a < b {
                    a
                } else {
                    b
                }
            }
        }
    };
}
arith_float!(f32);
arith_float!(f64);

macro_rules! arith_int {
    ($t:ty) => {
        impl Arith for $t {
            #[inline(always)]
            fn add(a: $t, b: $t) -> $t {
                a.wrapping_add(b)
            }
            #[inline(always)]
            fn sub(a: $t, b: $t) -> $t {
                a.wrapping_sub(b)
            }
            #[inline(always)]
            fn mul(a: $t, b: $t) -> $t {
                a.wrapping_mul(b)
            }
            #[inline(always)]
            fn div(a: $t, b: $t) -> $t {
                if b == 0 {
                    0
                } else {
                    a.wrapping_div(b)
                }
            }
            #[inline(always)]
            fn pow(a: $t, b: $t) -> $t {
                a.wrapping_pow(b.clamp(0 as $t, 64 as $t) as u32)
            }
            #[inline(always)]
            fn max(a: $t, b: $t) -> $t {
                a.max(b)
            }
            #[inline(always)]
            fn min(a: $t, b: $t) -> $t {
                a.min(b)
            }
        }
    };
}
arith_int!(i64);
arith_int!(u8);

macro_rules! arith_half {
    ($t:ty) => {
        impl Arith for $t {
            #[inline(always)]
            fn add(a: $t, b: $t) -> $t {
                <$t>::from_f32(a.to_f32() + b.to_f32())
            }
            #[inline(always)]
            fn sub(a: $t, b: $t) -> $t {
                <$t>::from_f32(a.to_f32() - b.to_f32())
            }
            #[inline(always)]
            fn mul(a: $t, b: $t) -> $t {
                <$t>::from_f32(a.to_f32() * b.to_f32())
            }
            #[inline(always)]
            fn div(a: $t, b: $t) -> $t {
                <$t>::from_f32(a.to_f32() / b.to_f32())
            }
            #[inline(always)]
            fn pow(a: $t, b: $t) -> $t {
                <$t>::from_f32(a.to_f32().powf(b.to_f32()))
            }
            #[inline(always)]
            fn max(a: $t, b: $t) -> $t {
                if a.is_nan() || a > b {
                    a
                } else {
                    b
                }
            }
            #[inline(always)]
            fn min(a: $t, b: $t) -> $t {
                if a.is_nan() || a < b {
                    a
                } else {
                    b
                }
            }
        }
    };
}
arith_half!(f16);
arith_half!(bf16);
