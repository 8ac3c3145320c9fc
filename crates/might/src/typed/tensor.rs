//! The typed tensors `Tensor0<E>` … `Tensor4<N, C, H, W, E>`: a dynamic [`Tensor`] handle
//! plus dims and element type in the type.
//!
//! Why one struct per rank (not one `Tensor<Shape, E>`): rustc then prints a mismatch as
//! `Tensor2<3, 4>`, the way the user wrote it, instead of an expanded shape type.
//! Each is `#[repr(transparent)]` over [`Tensor`] (one pointer): conversion either way is
//! free, autograd and devices are the dynamic tensor's, and every op below is the dynamic
//! op plus nothing but the types.

use std::fmt;
use std::marker::PhantomData;

use super::dim::{check_boundary, check_static, fmt_dims};
use crate::{DType, Device, Error, Result, Tensor, WithDType};

/// What every typed tensor is: its dims and element type as constants, and the dynamic
/// tensor inside. Generic code (losses, `reshape`) is written against this trait.
pub trait Typed: Sized + Clone {
    /// Element type (`f32`, `f64`, `i64`, ...).
    type Elem: WithDType;
    /// The dims as written in the type ([`Dyn`](super::Dyn) for run-time ones).
    const DIMS: &'static [usize];

    /// The dynamic tensor inside (a borrow: no copy, no refcount change).
    fn as_dyn(&self) -> &Tensor;

    /// Give the dynamic tensor back (free).
    fn into_dyn(self) -> Tensor;

    /// Wrap a dynamic tensor after checking its rank, every static dim and its dtype: the
    /// one run-time check at the boundary. Fails with a `Shape` (or `DType`) error naming
    /// both shapes.
    #[track_caller]
    fn from_dyn(t: Tensor) -> Result<Self> {
        check_boundary("typed::from_dyn", &t, Self::DIMS, Self::Elem::DTYPE)?;
        Ok(Self::wrap_unchecked(t))
    }

    /// Wrap without the check; the typed ops use it on results whose shape the types already
    /// guarantee (debug builds still assert it).
    #[doc(hidden)]
    fn wrap_unchecked(t: Tensor) -> Self;

    /// Run-time sizes (a [`Dyn`](super::Dyn) dim reads its actual size).
    fn shape_vec(&self) -> Vec<usize> {
        self.as_dyn().dims().to_vec()
    }
}

/// Wrap an op's result as `T`; debug builds verify that the dynamic op agrees with the types.
#[inline]
pub(crate) fn wrap<T: Typed>(t: Tensor) -> T {
    debug_assert!(
        check_boundary("typed", &t, T::DIMS, T::Elem::DTYPE).is_ok(),
        "typed op produced {} {}, its type says {} {}",
        t.shape(),
        t.dtype(),
        fmt_dims(T::DIMS),
        T::Elem::DTYPE
    );
    T::wrap_unchecked(t)
}

/// `Ok(wrap(t?))`.
#[inline]
pub(crate) fn wrap_res<T: Typed>(t: Result<Tensor>) -> Result<T> {
    t.map(wrap)
}

/// A typed tensor whose last dim is `D`: what a layer for inputs of size `D` (Linear,
/// LayerNorm) and a bias of size `D` accept, whatever the leading dims. `Map<O>` is the same
/// tensor with last dim `O`.
#[diagnostic::on_unimplemented(
    message = "the last dim of `{Self}` is not {D}",
    label = "the last dim of this tensor must be {D}",
    note = "a Linear<{D}, _> or LayerNorm<{D}> takes rows of {D}, not `{Self}`"
)]
pub trait LastDim<const D: usize>: Typed {
    /// The same dims with the last one replaced by `O`.
    type Map<const O: usize>: Typed<Elem = Self::Elem>;
    /// The same dims and element type `E2`.
    type Cast<E2: WithDType>: Typed<Elem = E2>;
}

macro_rules! typed_tensor {
    ($(#[$doc:meta])* $name:ident, $rank:literal, [$($d:ident),*]) => {
        $(#[$doc])*
        #[repr(transparent)]
        pub struct $name<$(const $d: usize,)* E = f32> {
            t: Tensor,
            _e: PhantomData<fn() -> E>,
        }

        impl<$(const $d: usize,)* E: WithDType> Typed for $name<$($d,)* E> {
            type Elem = E;
            const DIMS: &'static [usize] = &[$($d),*];
            #[inline]
            fn as_dyn(&self) -> &Tensor {
                &self.t
            }
            #[inline]
            fn into_dyn(self) -> Tensor {
                self.t
            }
            #[inline]
            fn wrap_unchecked(t: Tensor) -> Self {
                $name { t, _e: PhantomData }
            }
        }

        impl<$(const $d: usize,)* E> Clone for $name<$($d,)* E> {
            fn clone(&self) -> Self {
                $name { t: self.t.clone(), _e: PhantomData }
            }
        }

        impl<$(const $d: usize,)* E: WithDType> fmt::Debug for $name<$($d,)* E> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}{} {} ", stringify!($name), fmt_dims(Self::DIMS), E::DTYPE)?;
                fmt::Debug::fmt(&self.t, f)
            }
        }

        impl<$(const $d: usize,)* E> fmt::Display for $name<$($d,)* E> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.t, f)
            }
        }

        impl<$(const $d: usize,)* E> From<$name<$($d,)* E>> for Tensor {
            fn from(t: $name<$($d,)* E>) -> Tensor {
                t.t
            }
        }

        impl<$(const $d: usize,)* E: WithDType> TryFrom<Tensor> for $name<$($d,)* E> {
            type Error = Error;
            #[track_caller]
            fn try_from(t: Tensor) -> Result<Self> {
                <Self as Typed>::from_dyn(t)
            }
        }

        impl<$(const $d: usize,)* E: WithDType> $name<$($d,)* E> {
            /// Wrap a dynamic tensor after checking rank, static dims and dtype
            /// (see [`Typed::from_dyn`]).
            #[track_caller]
            pub fn from_dyn(t: Tensor) -> Result<Self> {
                <Self as Typed>::from_dyn(t)
            }

            /// The dynamic tensor inside (free).
            pub fn into_dyn(self) -> Tensor {
                self.t
            }

            /// Borrow the dynamic tensor inside.
            pub fn as_dyn(&self) -> &Tensor {
                &self.t
            }

            /// Run-time sizes: the static dims, and the actual size of each [`Dyn`](super::Dyn) one.
            pub fn dims(&self) -> [usize; $rank] {
                let mut out = [0; $rank];
                out.copy_from_slice(self.t.dims());
                out
            }

            pub fn dtype(&self) -> DType {
                E::DTYPE
            }

            pub fn device(&self) -> Device {
                self.t.device()
            }

            /// Move to `device` (the typed shape goes along).
            pub fn to_device(&self, device: Device) -> Result<Self> {
                wrap_res(self.t.to_device(device))
            }

            /// Convert the elements to `E2`.
            #[track_caller]
            pub fn to_dtype<E2: WithDType>(&self) -> Result<$name<$($d,)* E2>> {
                wrap_res(self.t.to_dtype(E2::DTYPE))
            }

            /// Elements in logical (row-major) order.
            #[track_caller]
            pub fn to_vec(&self) -> Result<Vec<E>>
            where
                E: crate::WithDType,
            {
                self.t.to_vec::<E>()
            }

            /// Elements as f64, whatever `E`.
            pub fn to_f64_vec(&self) -> Vec<f64> {
                self.t.to_f64_vec()
            }

            /// Zeros. Every dim must be static (a [`Dyn`](super::Dyn) dim fails the build).
            #[track_caller]
            pub fn zeros() -> Result<Self> {
                const {
            if let Some(m) = check_static(concat!(stringify!($name), "::zeros"), Self::DIMS) { panic!("{}", m.as_str()) }
        };
                wrap_res(Tensor::zeros(Self::DIMS.to_vec(), E::DTYPE))
            }

            /// Ones (static dims only).
            #[track_caller]
            pub fn ones() -> Result<Self> {
                const {
            if let Some(m) = check_static(concat!(stringify!($name), "::ones"), Self::DIMS) { panic!("{}", m.as_str()) }
        };
                wrap_res(Tensor::ones(Self::DIMS.to_vec(), E::DTYPE))
            }

            /// Every element `v` (static dims only).
            #[track_caller]
            pub fn full(v: f64) -> Result<Self> {
                const {
            if let Some(m) = check_static(concat!(stringify!($name), "::full"), Self::DIMS) { panic!("{}", m.as_str()) }
        };
                wrap_res(Tensor::full(Self::DIMS.to_vec(), v, E::DTYPE))
            }

            /// Standard normal samples from the global generator (static dims only).
            #[track_caller]
            pub fn randn() -> Result<Self> {
                const {
            if let Some(m) = check_static(concat!(stringify!($name), "::randn"), Self::DIMS) { panic!("{}", m.as_str()) }
        };
                wrap_res(Tensor::randn(Self::DIMS.to_vec(), E::DTYPE))
            }

            /// Uniform samples in `[low, high)` (static dims only).
            #[track_caller]
            pub fn uniform(low: f64, high: f64) -> Result<Self> {
                const {
            if let Some(m) = check_static(concat!(stringify!($name), "::uniform"), Self::DIMS) { panic!("{}", m.as_str()) }
        };
                wrap_res(Tensor::uniform(Self::DIMS.to_vec(), low, high, E::DTYPE))
            }

            /// From row-major data (static dims only; the length is checked at run time).
            #[track_caller]
            pub fn from_vec(data: Vec<E>) -> Result<Self>
            where
                E: crate::WithDType,
            {
                const {
            if let Some(m) = check_static(concat!(stringify!($name), "::from_vec"), Self::DIMS) { panic!("{}", m.as_str()) }
        };
                wrap_res(Tensor::from_vec(data, Self::DIMS.to_vec()))
            }

            /// Zeros of this tensor's run-time shape.
            pub fn zeros_like(&self) -> Result<Self> {
                wrap_res(Tensor::zeros_like(&self.t))
            }

            /// Make this a leaf that records gradients.
            pub fn with_requires_grad(self) -> Self {
                $name { t: self.t.with_requires_grad(), _e: PhantomData }
            }

            pub fn requires_grad(&self) -> bool {
                self.t.requires_grad()
            }

            /// The accumulated gradient, typed like the tensor.
            pub fn grad(&self) -> Option<Self> {
                self.t.grad().map(wrap)
            }

            pub fn zero_grad(&self) {
                self.t.zero_grad()
            }

            /// The same values outside the autograd graph.
            pub fn detach(&self) -> Self {
                wrap(self.t.detach())
            }

            /// A contiguous copy (or this tensor when it already is).
            pub fn contiguous(&self) -> Result<Self> {
                wrap_res(self.t.contiguous())
            }
        }
    };
}

typed_tensor!(
    /// A scalar (0-d) tensor: what losses and reductions return; `backward()` starts here.
    Tensor0, 0, []
);
typed_tensor!(
    /// A vector of `N` elements (a bias, a row of class ids).
    Tensor1, 1, [N]
);
typed_tensor!(
    /// A `M × N` matrix, e.g. `Tensor2<Dyn, 784>` for a batch of flattened images.
    Tensor2, 2, [M, N]
);
typed_tensor!(
    /// A rank-3 tensor `[A, B, C]`, e.g. `[batch, time, channels]` in a sequence model.
    Tensor3, 3, [A, B, C]
);
typed_tensor!(
    /// A rank-4 tensor `[N, C, H, W]`: a batch of images with channels first.
    Tensor4, 4, [N, C, H, W]
);

impl<const N: usize, E: WithDType> LastDim<N> for Tensor1<N, E> {
    type Map<const O: usize> = Tensor1<O, E>;
    type Cast<E2: WithDType> = Tensor1<N, E2>;
}
impl<const M: usize, const N: usize, E: WithDType> LastDim<N> for Tensor2<M, N, E> {
    type Map<const O: usize> = Tensor2<M, O, E>;
    type Cast<E2: WithDType> = Tensor2<M, N, E2>;
}
impl<const A: usize, const B: usize, const C: usize, E: WithDType> LastDim<C>
    for Tensor3<A, B, C, E>
{
    type Map<const O: usize> = Tensor3<A, B, O, E>;
    type Cast<E2: WithDType> = Tensor3<A, B, C, E2>;
}
impl<const N: usize, const C: usize, const H: usize, const W: usize, E: WithDType> LastDim<W>
    for Tensor4<N, C, H, W, E>
{
    type Map<const O: usize> = Tensor4<N, C, H, O, E>;
    type Cast<E2: WithDType> = Tensor4<N, C, H, W, E2>;
}

impl<E: WithDType> Tensor0<E> {
    /// Back-propagate from this scalar into every leaf that requires a gradient.
    #[track_caller]
    pub fn backward(&self) -> Result<()> {
        self.t.backward()
    }

    /// The value as f64.
    #[track_caller]
    pub fn item(&self) -> Result<f64> {
        self.t.item()
    }

    /// A 0-d tensor holding `v`.
    pub fn scalar(v: E) -> Self
    where
        E: crate::WithDType,
    {
        wrap(Tensor::scalar(v))
    }
}
