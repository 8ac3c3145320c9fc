//! Reading a tensor back as nested `Vec`s, built on [`Tensor::to_vec`].

use crate::{Error, Result, Tensor, WithDType};

impl Tensor {
    /// Nested `Vec`s for a 2-D tensor.
    #[track_caller]
    pub fn to_vec2<T: WithDType>(&self) -> Result<Vec<Vec<T>>> {
        if self.rank() != 2 {
            return Err(Error::shape(
                "to_vec2",
                format!("expected a 2-d tensor, got shape {}", self.shape()),
            ));
        }
        let v = self.to_vec::<T>()?;
        let n = self.dims()[1];
        Ok(if n == 0 {
            vec![vec![]; self.dims()[0]]
        } else {
            v.chunks(n).map(|c| c.to_vec()).collect()
        })
    }
}
