//! Basic layers: Linear, Identity, Flatten, Dropout, Embedding.

use super::{functional, init, Module};
use crate::{DType, Error, Result, Tensor};

/// Make a fresh parameter (leaf with `requires_grad`) for layer `op`: an error naming the
/// layer where its sizes overflow or do not fit the memory budget.
#[track_caller]
pub(crate) fn param(op: &str, shape: &[usize], dtype: DType) -> Result<Tensor> {
    match Tensor::zeros(shape.to_vec(), dtype) {
        Ok(t) => Ok(t.with_requires_grad()),
        Err(e) => Err(Error {
            op: op.to_string(),
            ..e
        }),
    }
}

/// Make `t` a trainable leaf (used by the `from_*` constructors that take user tensors).
pub(crate) fn as_param(t: Tensor) -> Tensor {
    if t.is_leaf() {
        t.requires_grad_(true);
    }
    t
}

/// `y = x Wᵀ + b` with `W: [out, in]`, `b: [out]` (PyTorch layout, so weights load as is).
pub struct Linear {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
}

impl Linear {
    /// PyTorch's default init: weight and bias from U(-1/sqrt(in), 1/sqrt(in))
    /// (`kaiming_uniform(a = sqrt(5))`), f32.
    #[track_caller]
    pub fn new(in_features: usize, out_features: usize, bias: bool) -> Result<Linear> {
        let weight = param("Linear", &[out_features, in_features], DType::F32)?;
        let bound = if in_features > 0 {
            1.0 / (in_features as f64).sqrt()
        } else {
            0.0
        };
        init::uniform(&weight, -bound, bound)?;
        let bias = match bias {
            true => {
                let b = param("Linear", &[out_features], DType::F32)?;
                init::uniform(&b, -bound, bound)?;
                Some(b)
            }
            false => None,
        };
        Ok(Linear { weight, bias })
    }

    /// Build from given tensors (`weight: [out, in]`, `bias: [out]`); leaves become trainable.
    #[track_caller]
    pub fn from_weights(weight: Tensor, bias: Option<Tensor>) -> Result<Linear> {
        if weight.rank() != 2 {
            return Err(Error::shape(
                "Linear",
                format!("weight must be [out, in], got {}", weight.shape()),
            ));
        }
        if let Some(b) = &bias {
            if b.dims() != [weight.dims()[0]] {
                return Err(Error::shape(
                    "Linear",
                    format!("bias must be [{}], got {}", weight.dims()[0], b.shape()),
                ));
            }
        }
        Ok(Linear {
            weight: as_param(weight),
            bias: bias.map(as_param),
        })
    }

    pub fn in_features(&self) -> usize {
        self.weight.dims()[1]
    }
    pub fn out_features(&self) -> usize {
        self.weight.dims()[0]
    }
}

impl Module for Linear {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        functional::linear(x, &self.weight, self.bias.as_ref())
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        let mut v = vec![("weight".to_string(), self.weight.clone())];
        if let Some(b) = &self.bias {
            v.push(("bias".to_string(), b.clone()));
        }
        v
    }
}

/// Passes its input through (placeholder in architectures).
#[derive(Clone, Copy, Debug, Default)]
pub struct Identity;

impl Module for Identity {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(x.clone())
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        vec![]
    }
}

/// Flatten dims `start..=end` into one (default 1..=-1: keep the batch dim).
#[derive(Clone, Copy, Debug)]
pub struct Flatten {
    pub start_dim: isize,
    pub end_dim: isize,
}

impl Default for Flatten {
    fn default() -> Self {
        Flatten::new()
    }
}

impl Flatten {
    pub fn new() -> Self {
        Flatten {
            start_dim: 1,
            end_dim: -1,
        }
    }
    pub fn with_dims(start_dim: isize, end_dim: isize) -> Self {
        Flatten { start_dim, end_dim }
    }
}

impl Module for Flatten {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.flatten(self.start_dim, self.end_dim)
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        vec![]
    }
}

/// Zero each element with probability `p` while training and scale the rest by `1/(1-p)`
/// (inverted dropout, so evaluation is the identity). Masks come from the global generator,
/// so `manual_seed` makes them reproducible.
#[derive(Clone, Copy, Debug)]
pub struct Dropout {
    pub p: f64,
    training: bool,
}

impl Dropout {
    pub fn new(p: f64) -> Dropout {
        Dropout { p, training: true }
    }
}

impl Module for Dropout {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        functional::dropout(x, self.p, self.training)
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        vec![]
    }
    fn train(&mut self, mode: bool) {
        self.training = mode;
    }
    fn is_training(&self) -> bool {
        self.training
    }
}

/// A lookup table `weight: [num_embeddings, dim]`; `forward(ids)` takes int64 ids of any shape
/// and returns `[..ids.shape, dim]`.
pub struct Embedding {
    pub weight: Tensor,
    /// Row that stays fixed: looked up as is but never receives a gradient (PyTorch's
    /// `padding_idx`; initialised to zeros by [`Embedding::with_padding_idx`]).
    pub padding_idx: Option<usize>,
}

impl Embedding {
    /// PyTorch's default init: N(0, 1), f32.
    #[track_caller]
    pub fn new(num_embeddings: usize, dim: usize) -> Result<Embedding> {
        let weight = param("Embedding", &[num_embeddings, dim], DType::F32)?;
        init::normal(&weight, 0.0, 1.0)?;
        Ok(Embedding {
            weight,
            padding_idx: None,
        })
    }

    /// Like `new`, with row `padding_idx` zeroed and excluded from gradients.
    #[track_caller]
    pub fn with_padding_idx(
        num_embeddings: usize,
        dim: usize,
        padding_idx: usize,
    ) -> Result<Embedding> {
        if padding_idx >= num_embeddings {
            return Err(Error::index(
                "Embedding",
                format!("padding_idx {padding_idx} out of range for {num_embeddings} embeddings"),
            ));
        }
        let mut e = Embedding::new(num_embeddings, dim)?;
        {
            let _g = crate::no_grad();
            e.weight.select(0, padding_idx as isize)?.zero_()?;
        }
        e.padding_idx = Some(padding_idx);
        Ok(e)
    }

    /// Build from a given table (trainable if it is a leaf).
    #[track_caller]
    pub fn from_weight(weight: Tensor) -> Result<Embedding> {
        if weight.rank() != 2 {
            return Err(Error::shape(
                "Embedding",
                format!("weight must be [num, dim], got {}", weight.shape()),
            ));
        }
        Ok(Embedding {
            weight: as_param(weight),
            padding_idx: None,
        })
    }
}

impl Module for Embedding {
    fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        if ids.dtype() != DType::I64 {
            return Err(Error::dtype(
                "Embedding",
                format!("ids must be int64, got {} {}", ids.dtype(), ids.shape()),
            ));
        }
        let out = Tensor::embedding(ids, &self.weight)?;
        match self.padding_idx {
            None => Ok(out),
            Some(p) => {
                // padding positions read the row detached, so no gradient reaches it
                let pad = ids.eq_scalar(p as f64)?.unsqueeze(-1)?;
                let row = self.weight.detach().select(0, p as isize)?;
                Tensor::where_(&pad, &row, &out)
            }
        }
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        vec![("weight".to_string(), self.weight.clone())]
    }
}
