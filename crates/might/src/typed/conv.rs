//! Typed image layers: `Conv2d<CIN, COUT, K, S, P>`, `MaxPool2d<K, S, P>`,
//! `AvgPool2d<K, S, P>`, `BatchNorm2d<C>`, over `Tensor4<N, C, H, W>`.
//!
//! The channel count is a shared const parameter (wrong channels: a type error at
//! `cargo check`). The output height and width are `(H + 2·P - K) / S + 1`, which stable
//! Rust cannot compute in a type (`generic_const_exprs` is nightly-only), so the caller
//! writes them — usually as the annotated type of the result — and an inline
//! `const { .. }` block compares them with the formula. That block is evaluated when the
//! function is instantiated for those sizes: `cargo build` / `cargo test` report a wrong
//! size, `cargo check` does not.

use std::marker::PhantomData;

use super::dim::{check_positive, check_window, either};
use super::layers::{cast_param, check_param};
use super::tensor::{wrap, wrap_res, Tensor1, Tensor4};
use crate::nn::{self, Conv2dConfig, Module};
use crate::{Result, Tensor, WithDType};

/// A `K × K` convolution from `CIN` to `COUT` channels, stride `S` (default 1), zero
/// padding `P` (default 0).
pub struct Conv2d<
    const CIN: usize,
    const COUT: usize,
    const K: usize,
    const S: usize = 1,
    const P: usize = 0,
    E = f32,
> {
    inner: nn::Conv2d,
    _e: PhantomData<fn() -> E>,
}

impl<const CIN: usize, const COUT: usize, const K: usize, const S: usize, const P: usize, E>
    Conv2d<CIN, COUT, K, S, P, E>
where
    E: WithDType,
{
    /// With bias, PyTorch's init (the draws of `nn::Conv2d::new`).
    pub fn new() -> Result<Self> {
        Self::build(true)
    }

    /// Without bias (e.g. before a BatchNorm).
    pub fn without_bias() -> Result<Self> {
        Self::build(false)
    }

    fn build(bias: bool) -> Result<Self> {
        const {
            if let Some(m) = check_positive("Conv2d", K, S) {
                panic!("{}", m.as_str())
            }
        };
        let cfg = Conv2dConfig {
            stride: S,
            padding: P,
            bias,
            ..Default::default()
        };
        let mut c = nn::Conv2d::new(CIN, COUT, K, cfg)?;
        c.weight = cast_param::<E>(c.weight)?;
        c.bias = c.bias.map(cast_param::<E>).transpose()?;
        Ok(Conv2d {
            inner: c,
            _e: PhantomData,
        })
    }

    /// From typed parameters.
    #[track_caller]
    pub fn from_weights(
        weight: Tensor4<COUT, CIN, K, K, E>,
        bias: Option<Tensor1<COUT, E>>,
    ) -> Result<Self> {
        const {
            if let Some(m) = check_positive("Conv2d", K, S) {
                panic!("{}", m.as_str())
            }
        };
        Ok(Conv2d {
            inner: nn::Conv2d::from_weights(
                weight.into_dyn(),
                bias.map(Tensor1::into_dyn),
                [S; 2],
                [P; 2],
                [1; 2],
                1,
            )?,
            _e: PhantomData,
        })
    }

    /// Wrap a dynamic layer, checking its sizes, stride, padding, dilation 1 and groups 1.
    #[track_caller]
    pub fn from_dyn(c: nn::Conv2d) -> Result<Self> {
        check_param::<E>("typed::Conv2d", "weight", &c.weight, &[COUT, CIN, K, K])?;
        if let Some(b) = &c.bias {
            check_param::<E>("typed::Conv2d", "bias", b, &[COUT])?;
        }
        if c.stride != [S; 2] || c.padding != [P; 2] || c.dilation != [1; 2] || c.groups != 1 {
            return Err(crate::Error::invalid(
                "typed::Conv2d",
                format!(
                    "stride {:?}, padding {:?}, dilation {:?}, groups {} differ from the typed \
                     layer's stride {S}, padding {P}, dilation 1, groups 1",
                    c.stride, c.padding, c.dilation, c.groups
                ),
            ));
        }
        Ok(Conv2d {
            inner: c,
            _e: PhantomData,
        })
    }

    pub fn as_dyn(&self) -> &nn::Conv2d {
        &self.inner
    }

    /// `weight: [COUT, CIN, K, K]`.
    pub fn weight(&self) -> Tensor4<COUT, CIN, K, K, E> {
        wrap(self.inner.weight.clone())
    }

    /// `bias: [COUT]` when present.
    pub fn bias(&self) -> Option<Tensor1<COUT, E>> {
        self.inner.bias.clone().map(wrap)
    }

    /// Convolve `[N, CIN, H, W]` into `[N, COUT, OH, OW]`. `OH` and `OW` are usually inferred
    /// from the annotated result type; the build checks them against
    /// `(H + 2·P - K) / S + 1` ("Conv2d: output height OH is 27 but should be ... = 28").
    #[track_caller]
    pub fn forward<
        const N: usize,
        const H: usize,
        const W: usize,
        const OH: usize,
        const OW: usize,
    >(
        &self,
        x: &Tensor4<N, CIN, H, W, E>,
    ) -> Result<Tensor4<N, COUT, OH, OW, E>> {
        const {
            let h = check_window("Conv2d", "height", "H", "OH", H, K, S, P, OH);
            if let Some(m) = either(
                h,
                check_window("Conv2d", "width", "W", "OW", W, K, S, P, OW),
            ) {
                panic!("{}", m.as_str())
            }
        };
        wrap_res(self.inner.forward(x.as_dyn()))
    }

    /// `relu(forward(x))` as one fused op (same values and gradients).
    #[track_caller]
    pub fn forward_relu<
        const N: usize,
        const H: usize,
        const W: usize,
        const OH: usize,
        const OW: usize,
    >(
        &self,
        x: &Tensor4<N, CIN, H, W, E>,
    ) -> Result<Tensor4<N, COUT, OH, OW, E>> {
        const {
            let h = check_window("Conv2d", "height", "H", "OH", H, K, S, P, OH);
            if let Some(m) = either(
                h,
                check_window("Conv2d", "width", "W", "OW", W, K, S, P, OW),
            ) {
                panic!("{}", m.as_str())
            }
        };
        let y = match self.inner.forward_relu(x.as_dyn()) {
            Some(y) => y,
            None => self.inner.forward(x.as_dyn())?.relu(),
        };
        wrap_res(y)
    }
}

impl<const CIN: usize, const COUT: usize, const K: usize, const S: usize, const P: usize, E> Module
    for Conv2d<CIN, COUT, K, S, P, E>
where
    E: WithDType,
{
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.inner.forward(x)
    }
    fn forward_relu(&self, x: &Tensor) -> Option<Result<Tensor>> {
        self.inner.forward_relu(x)
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        self.inner.named_parameters()
    }
}

macro_rules! typed_pool {
    ($(#[$doc:meta])* $name:ident, $label:literal, $method:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default)]
        pub struct $name<const K: usize, const S: usize = K, const P: usize = 0>;

        impl<const K: usize, const S: usize, const P: usize> $name<K, S, P> {
            pub fn new() -> Self {
                $name
            }

            /// Pool `[N, C, H, W]` into `[N, C, OH, OW]`; the build checks `OH` and `OW`
            /// against `(H + 2·P - K) / S + 1`.
            #[track_caller]
            pub fn forward<
                const N: usize,
                const C: usize,
                const H: usize,
                const W: usize,
                const OH: usize,
                const OW: usize,
                E: WithDType,
            >(
                &self,
                x: &Tensor4<N, C, H, W, E>,
            ) -> Result<Tensor4<N, C, OH, OW, E>> {
                const {
                    let h = check_window($label, "height", "H", "OH", H, K, S, P, OH);
                    let w = check_window($label, "width", "W", "OW", W, K, S, P, OW);
                    if let Some(m) = either(check_positive($label, K, S), either(h, w)) {
                        panic!("{}", m.as_str())
                    }
                };
                wrap_res(x.as_dyn().$method([K; 2], [S; 2], [P; 2]))
            }
        }
    };
}

typed_pool!(
    /// Max pooling with a `K × K` window, stride `S` (default `K`), padding `P` (default 0).
    MaxPool2d,
    "MaxPool2d",
    max_pool2d
);
typed_pool!(
    /// Average pooling (padding counted in the average, like PyTorch's default).
    AvgPool2d,
    "AvgPool2d",
    avg_pool2d
);

/// Batch normalisation of `[N, C, H, W]` over `C` channels (eps 1e-5, momentum 0.1).
pub struct BatchNorm2d<const C: usize> {
    inner: nn::BatchNorm2d,
}

impl<const C: usize> BatchNorm2d<C> {
    #[track_caller]
    pub fn new() -> Result<Self> {
        Ok(BatchNorm2d {
            inner: nn::BatchNorm2d::new(C)?,
        })
    }

    pub fn as_dyn(&self) -> &nn::BatchNorm2d {
        &self.inner
    }

    /// Normalise per channel (batch statistics while training, running ones in eval mode).
    #[track_caller]
    pub fn forward<const N: usize, const H: usize, const W: usize, E: WithDType>(
        &self,
        x: &Tensor4<N, C, H, W, E>,
    ) -> Result<Tensor4<N, C, H, W, E>> {
        wrap_res(self.inner.forward(x.as_dyn()))
    }

    /// `relu(forward(x))` as one fused op.
    #[track_caller]
    pub fn forward_relu<const N: usize, const H: usize, const W: usize, E: WithDType>(
        &self,
        x: &Tensor4<N, C, H, W, E>,
    ) -> Result<Tensor4<N, C, H, W, E>> {
        let y = match self.inner.forward_relu(x.as_dyn()) {
            Some(y) => y,
            None => self.inner.forward(x.as_dyn())?.relu(),
        };
        wrap_res(y)
    }
}

impl<const C: usize> Module for BatchNorm2d<C> {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.inner.forward(x)
    }
    fn forward_relu(&self, x: &Tensor) -> Option<Result<Tensor>> {
        self.inner.forward_relu(x)
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        self.inner.named_parameters()
    }
    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        self.inner.named_buffers()
    }
    fn train(&mut self, mode: bool) {
        self.inner.train(mode)
    }
    fn is_training(&self) -> bool {
        self.inner.is_training()
    }
}
