//! Typed layers over `might::nn`: `Linear<IN, OUT>`, `LayerNorm<D>`, `Embedding<V, D>`.
//!
//! Each holds the dynamic layer and forwards to it, so values, gradients, initialisation
//! (the same draws from the global generator) and parameter names are exactly those of
//! `might::nn`; the type adds the sizes. They implement [`Module`] too (delegating to the
//! dynamic layer), so optimizers, `state_dict` and checkpoints work unchanged. The typed
//! `forward` is an inherent method and wins over `Module::forward` in `layer.forward(&x)`.

use std::marker::PhantomData;

use super::dim::fmt_dims;
use super::tensor::{wrap, wrap_res, LastDim, Tensor1, Tensor2, Tensor3, Tensor4};
use crate::nn::{self, Module};
use crate::{Error, Result, Tensor, WithDType};

/// Cast a freshly built f32 parameter to `E` (a new leaf that records gradients).
pub(crate) fn cast_param<E: WithDType>(t: Tensor) -> Result<Tensor> {
    if t.dtype() == E::DTYPE {
        return Ok(t);
    }
    Ok(t.detach().to_dtype(E::DTYPE)?.with_requires_grad())
}

/// Check a dynamic parameter against the typed shape it must have.
#[track_caller]
pub(crate) fn check_param<E: WithDType>(
    layer: &str,
    what: &str,
    t: &Tensor,
    dims: &[usize],
) -> Result<()> {
    if t.dims() != dims || t.dtype() != E::DTYPE {
        return Err(Error::shape(
            layer,
            format!(
                "{what} is {} {}, the typed layer needs {} {}",
                t.dtype(),
                t.shape(),
                E::DTYPE,
                fmt_dims(dims)
            ),
        ));
    }
    Ok(())
}

/// `y = x Wᵀ + b` for inputs whose last dim is `IN`: `Tensor2<B, IN> -> Tensor2<B, OUT>`,
/// `Tensor3<B, T, IN> -> Tensor3<B, T, OUT>`, ... A wrong input size is the compile error
/// "the last dim of `Tensor2<..>` is not IN".
pub struct Linear<const IN: usize, const OUT: usize, E = f32> {
    inner: nn::Linear,
    _e: PhantomData<fn() -> E>,
}

impl<const IN: usize, const OUT: usize, E: WithDType> Linear<IN, OUT, E> {
    /// With bias, PyTorch's init (the draws of `nn::Linear::new(IN, OUT, true)`).
    pub fn new() -> Result<Self> {
        Self::build(true)
    }

    /// Without bias.
    pub fn without_bias() -> Result<Self> {
        Self::build(false)
    }

    fn build(bias: bool) -> Result<Self> {
        let l = nn::Linear::new(IN, OUT, bias)?;
        let weight = cast_param::<E>(l.weight)?;
        let bias = l.bias.map(cast_param::<E>).transpose()?;
        Ok(Linear {
            inner: nn::Linear { weight, bias },
            _e: PhantomData,
        })
    }

    /// From typed parameters (used as they are: leaves become trainable).
    #[track_caller]
    pub fn from_weights(
        weight: Tensor2<OUT, IN, E>,
        bias: Option<Tensor1<OUT, E>>,
    ) -> Result<Self> {
        Ok(Linear {
            inner: nn::Linear::from_weights(weight.into_dyn(), bias.map(Tensor1::into_dyn))?,
            _e: PhantomData,
        })
    }

    /// Wrap a dynamic layer, checking its sizes and dtype once.
    #[track_caller]
    pub fn from_dyn(l: nn::Linear) -> Result<Self> {
        check_param::<E>("typed::Linear", "weight", &l.weight, &[OUT, IN])?;
        if let Some(b) = &l.bias {
            check_param::<E>("typed::Linear", "bias", b, &[OUT])?;
        }
        Ok(Linear {
            inner: l,
            _e: PhantomData,
        })
    }

    /// The dynamic layer inside.
    pub fn as_dyn(&self) -> &nn::Linear {
        &self.inner
    }

    /// `weight: [OUT, IN]` (shares storage with the layer).
    pub fn weight(&self) -> Tensor2<OUT, IN, E> {
        wrap(self.inner.weight.clone())
    }

    /// `bias: [OUT]` when the layer has one.
    pub fn bias(&self) -> Option<Tensor1<OUT, E>> {
        self.inner.bias.clone().map(wrap)
    }

    /// `x Wᵀ + b` over the last dim (the dynamic layer's fused kernel, same values).
    #[track_caller]
    pub fn forward<X: LastDim<IN, Elem = E>>(&self, x: &X) -> Result<X::Map<OUT>> {
        wrap_res(self.inner.forward(x.as_dyn()))
    }
}

impl<const IN: usize, const OUT: usize, E: WithDType> Module for Linear<IN, OUT, E> {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.inner.forward(x)
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        self.inner.named_parameters()
    }
}

/// Layer normalisation over a last dim of size `D` (eps 1e-5, affine weight and bias).
pub struct LayerNorm<const D: usize, E = f32> {
    inner: nn::LayerNorm,
    _e: PhantomData<fn() -> E>,
}

impl<const D: usize, E: WithDType> LayerNorm<D, E> {
    /// Weight 1, bias 0, eps 1e-5 (`nn::LayerNorm::new(D)`).
    pub fn new() -> Result<Self> {
        Self::with_config(1e-5, true)
    }

    /// Choose eps and whether there is a bias.
    pub fn with_config(eps: f64, bias: bool) -> Result<Self> {
        let mut l = nn::LayerNorm::with_config(&[D], eps, true, bias)?;
        l.weight = l.weight.map(cast_param::<E>).transpose()?;
        l.bias = l.bias.map(cast_param::<E>).transpose()?;
        Ok(LayerNorm {
            inner: l,
            _e: PhantomData,
        })
    }

    /// From typed parameters.
    #[track_caller]
    pub fn from_weights(
        weight: Tensor1<D, E>,
        bias: Option<Tensor1<D, E>>,
        eps: f64,
    ) -> Result<Self> {
        Ok(LayerNorm {
            inner: nn::LayerNorm::from_weights(
                weight.into_dyn(),
                bias.map(Tensor1::into_dyn),
                eps,
            )?,
            _e: PhantomData,
        })
    }

    pub fn as_dyn(&self) -> &nn::LayerNorm {
        &self.inner
    }

    /// Normalise the last dim; any leading dims.
    #[track_caller]
    pub fn forward<X: LastDim<D, Elem = E>>(&self, x: &X) -> Result<X> {
        wrap_res(self.inner.forward(x.as_dyn()))
    }
}

impl<const D: usize, E: WithDType> Module for LayerNorm<D, E> {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.inner.forward(x)
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        self.inner.named_parameters()
    }
}

/// A table of `V` embeddings of size `D`. Ids are values, not types: one out of range is
/// the dynamic op's run-time error.
pub struct Embedding<const V: usize, const D: usize, E = f32> {
    inner: nn::Embedding,
    _e: PhantomData<fn() -> E>,
}

impl<const V: usize, const D: usize, E: WithDType> Embedding<V, D, E> {
    /// N(0, 1) init (`nn::Embedding::new(V, D)`).
    pub fn new() -> Result<Self> {
        let e = nn::Embedding::new(V, D)?;
        Self::from_weight(wrap(cast_param::<E>(e.weight)?))
    }

    /// From a typed table (a leaf becomes trainable).
    #[track_caller]
    pub fn from_weight(weight: Tensor2<V, D, E>) -> Result<Self> {
        Ok(Embedding {
            inner: nn::Embedding::from_weight(weight.into_dyn())?,
            _e: PhantomData,
        })
    }

    pub fn as_dyn(&self) -> &nn::Embedding {
        &self.inner
    }

    /// The table `[V, D]` (shares storage).
    pub fn weight(&self) -> Tensor2<V, D, E> {
        wrap(self.inner.weight.clone())
    }

    /// Look up a batch of sequences: `[B, T]` ids -> `[B, T, D]`.
    #[track_caller]
    pub fn forward<const B: usize, const T: usize>(
        &self,
        ids: &Tensor2<B, T, i64>,
    ) -> Result<Tensor3<B, T, D, E>> {
        wrap_res(self.inner.forward(ids.as_dyn()))
    }

    /// Look up one sequence: `[T]` ids -> `[T, D]`.
    #[track_caller]
    pub fn lookup<const T: usize>(&self, ids: &Tensor1<T, i64>) -> Result<Tensor2<T, D, E>> {
        wrap_res(self.inner.forward(ids.as_dyn()))
    }
}

impl<const V: usize, const D: usize, E: WithDType> Module for Embedding<V, D, E> {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.inner.forward(x)
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        self.inner.named_parameters()
    }
}

impl<const A: usize, const B: usize, const C: usize, E: WithDType> Tensor3<A, B, C, E> {
    /// `self + rhs` with `rhs: [B, C]` broadcast over the first dim (position embeddings
    /// added to a batch of token embeddings).
    #[track_caller]
    pub fn add_broadcast(&self, rhs: &Tensor2<B, C, E>) -> Result<Self> {
        wrap_res(self.as_dyn().add(rhs.as_dyn()))
    }

    /// Columns `OFF..OFF + LEN` of the last dim (a view), e.g. the query third of a packed
    /// `[B, T, 3C]` projection: `qkv.narrow_last::<0, C>()`. Out of range fails the build.
    #[track_caller]
    pub fn narrow_last<const OFF: usize, const LEN: usize>(&self) -> Result<Tensor3<A, B, LEN, E>> {
        const {
            if let Some(m) = super::dim::check_narrow(OFF, LEN, C) {
                panic!("{}", m.as_str())
            }
        };
        wrap_res(self.as_dyn().narrow(2, OFF, LEN))
    }
}

/// `softmax(q kᵀ / sqrt(D)) v` per batch entry and head, optionally causal (query `i` sees
/// keys `0..=i`): `q: [B, H, L, D]`, `k: [B, H, S, D]`, `v: [B, H, S, DV]` -> `[B, H, L, DV]`.
/// The dynamic `scaled_dot_product_attention` (its fused kernel), without mask or dropout.
#[track_caller]
pub fn attention<
    const B: usize,
    const H: usize,
    const L: usize,
    const S: usize,
    const D: usize,
    const DV: usize,
    E: WithDType,
>(
    q: &Tensor4<B, H, L, D, E>,
    k: &Tensor4<B, H, S, D, E>,
    v: &Tensor4<B, H, S, DV, E>,
    causal: bool,
) -> Result<Tensor4<B, H, L, DV, E>> {
    wrap_res(nn::scaled_dot_product_attention(
        q.as_dyn(),
        k.as_dyn(),
        v.as_dyn(),
        None,
        0.0,
        causal,
    ))
}
