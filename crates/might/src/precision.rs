//! How precisely f32 matrix products are computed: PyTorch's
//! `torch.set_float32_matmul_precision`.
//!
//! A process-wide setting, like the thread count: a training script picks it once. The default,
//! [`MatmulPrecision::Highest`], multiplies in f32. [`MatmulPrecision::Medium`] lets the CPU
//! backend round both operands of an f32 product to bfloat16 and accumulate the products in
//! f32, on CPUs with AVX512-BF16 (where that runs twice as many multiply-adds per instruction);
//! inputs, outputs and everything else stay f32, so only the products' rounding changes (each
//! operand keeps 8 significant bits instead of 24). Where the CPU lacks the instructions, or a
//! product is too small to gain, the f32 path runs whatever the setting.
//!
//! As in PyTorch, the setting covers matrix products (`matmul`, linear layers, their
//! gradients), not convolutions; attention's fused kernels also keep their small products
//! in f32.

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU8, Ordering};

/// The internal precision of f32 matrix products (PyTorch's names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MatmulPrecision {
    /// f32 products and sums (the default).
    #[default]
    Highest,
    /// PyTorch's TF32 / bf16x3 level. No CPU here has TF32, so this multiplies in f32, as
    /// PyTorch does on such machines.
    High,
    /// Operands rounded to bfloat16, products summed in f32, where the CPU has AVX512-BF16.
    Medium,
}

static PRECISION: AtomicU8 = AtomicU8::new(0);

/// Set the internal precision of f32 matrix products for the whole process.
pub fn set_float32_matmul_precision(p: MatmulPrecision) {
    PRECISION.store(p as u8, Ordering::Relaxed);
}

/// The internal precision of f32 matrix products.
pub fn get_float32_matmul_precision() -> MatmulPrecision {
    match PRECISION.load(Ordering::Relaxed) {
        0 => MatmulPrecision::Highest,
        1 => MatmulPrecision::High,
        _ => MatmulPrecision::Medium,
    }
}

impl fmt::Display for MatmulPrecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MatmulPrecision::Highest => "highest",
            MatmulPrecision::High => "high",
            MatmulPrecision::Medium => "medium",
        })
    }
}

impl FromStr for MatmulPrecision {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<Self> {
        match s {
            "highest" => Ok(MatmulPrecision::Highest),
            "high" => Ok(MatmulPrecision::High),
            "medium" => Ok(MatmulPrecision::Medium),
            _ => Err(crate::Error::invalid(
                "set_float32_matmul_precision",
                format!("unknown precision {s:?} (highest, high or medium)"),
            )),
        }
    }
}
