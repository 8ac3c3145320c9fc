//! dtype conversion.

use crate::{DType, Result, Tensor};

impl Tensor {
    /// Convert to another dtype (floats to ints truncate toward zero, like PyTorch).
    /// Differentiable between float dtypes.
    pub fn to_dtype(&self, dtype: DType) -> Result<Tensor> {
        if dtype == self.dtype() {
            return Ok(self.clone());
        }
        let out = self.storage().to_dtype(self.layout(), dtype);
        let out = Tensor::from_result(out, self.shape())?;
        let from = self.dtype();
        if !(from.is_float() && dtype.is_float()) {
            return Ok(out);
        }
        Ok(out.record("ToCopyBackward", &[self], move || {
            Box::new(move |g| Ok(vec![Some(g.to_dtype(from)?)]))
        }))
    }
}
