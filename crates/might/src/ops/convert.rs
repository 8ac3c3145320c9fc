//! dtype conversion.

use crate::backend::cpu::elementwise::unary_map;
use crate::backend::cpu::CpuStorage as S;
use crate::{DType, Result, Tensor, WithDType};
use half::{bf16, f16};

fn convert<T: WithDType + Sync>(v: &[T], l: &crate::Layout, to: DType) -> S {
    match to {
        DType::F32 => S::F32(unary_map(v, l, |x| x.to_f64() as f32)),
        DType::F64 => S::F64(unary_map(v, l, |x| x.to_f64())),
        DType::F16 => S::F16(unary_map(v, l, |x| f16::from_f64(x.to_f64()))),
        DType::BF16 => S::BF16(unary_map(v, l, |x| bf16::from_f64(x.to_f64()))),
        DType::I64 => S::I64(unary_map(v, l, |x| x.to_f64() as i64)),
        DType::U8 => S::U8(unary_map(v, l, |x| x.to_f64() as i64 as u8)),
        DType::Bool => S::Bool(unary_map(v, l, |x| x.to_f64() != 0.0)),
    }
}

impl Tensor {
    /// Convert to another dtype (floats to ints truncate toward zero, like PyTorch).
    /// Differentiable between float dtypes.
    pub fn to_dtype(&self, dtype: DType) -> Result<Tensor> {
        if dtype == self.dtype() {
            return Ok(self.clone());
        }
        let s = self.storage();
        let l = self.layout();
        let out = match (s.cpu(), dtype) {
            // direct paths that avoid f64 round trips on hot conversions
            (S::F16(v), DType::F32) => S::F32(unary_map(v, l, |x| x.to_f32())),
            (S::BF16(v), DType::F32) => S::F32(unary_map(v, l, |x| x.to_f32())),
            (S::F32(v), DType::F16) => S::F16(unary_map(v, l, f16::from_f32)),
            (S::F32(v), DType::BF16) => S::BF16(unary_map(v, l, bf16::from_f32)),
            (S::U8(v), DType::F32) => S::F32(unary_map(v, l, |x| x as f32)),
            (s, _) => crate::with_cpu!(s, v => convert(v, l, dtype)),
        };
        drop(s);
        let out = Tensor::from_cpu(out, self.shape());
        let from = self.dtype();
        if !(from.is_float() && dtype.is_float()) {
            return Ok(out);
        }
        Ok(out.record("ToCopyBackward", &[self], move || {
            Box::new(move |g| Ok(vec![Some(g.to_dtype(from)?)]))
        }))
    }
}
