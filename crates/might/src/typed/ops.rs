//! Typed ops: elementwise math, bias broadcasting, reductions, softmax, matmul, transpose /
//! permute, reshape / flatten. Each is the dynamic op; the signature carries the shape rule.
//!
//! How a mismatch becomes a compile error:
//! - when the output shape is a function rustc can express (equal dims), the same const
//!   parameter appears in both places: `Tensor2<M, K>::matmul(&Tensor2<K, N>)`, `add(&Self)`,
//!   `add_bias(&Tensor1<D>)` with `Self: LastDim<D>`. A wrong size is a type error, reported
//!   by `cargo check` already;
//! - when it is arithmetic (`C·H·W`, a permuted dim), the caller writes the output type and an
//!   inline `const { .. }` block checks it. That check runs when the function is
//!   instantiated, i.e. during `cargo build` (and `cargo test`, `cargo run`), not during
//!   `cargo check` (see the module docs of [`crate::typed`]).

use super::dim::{check_flatten, check_permute, check_reshape};
use super::tensor::{wrap, wrap_res, LastDim, Tensor0, Tensor1, Tensor2, Tensor3, Tensor4};
use super::Typed;
use crate::{Result, Tensor, WithDType};

macro_rules! elementwise {
    ($name:ident, [$($d:ident),*]) => {
        impl<$(const $d: usize,)* E: WithDType> $name<$($d,)* E> {
            /// `self + rhs`, same shape.
            #[track_caller]
            pub fn add(&self, rhs: &Self) -> Result<Self> {
                wrap_res(self.as_dyn().add(rhs.as_dyn()))
            }
            /// `self - rhs`, same shape.
            #[track_caller]
            pub fn sub(&self, rhs: &Self) -> Result<Self> {
                wrap_res(self.as_dyn().sub(rhs.as_dyn()))
            }
            /// `self * rhs` elementwise, same shape.
            #[track_caller]
            pub fn mul(&self, rhs: &Self) -> Result<Self> {
                wrap_res(self.as_dyn().mul(rhs.as_dyn()))
            }
            /// `self / rhs` elementwise, same shape.
            #[track_caller]
            pub fn div(&self, rhs: &Self) -> Result<Self> {
                wrap_res(self.as_dyn().div(rhs.as_dyn()))
            }
            /// `self + v`.
            #[track_caller]
            pub fn add_scalar(&self, v: f64) -> Result<Self> {
                wrap_res(self.as_dyn().add_scalar(v))
            }
            /// `self * v`.
            #[track_caller]
            pub fn mul_scalar(&self, v: f64) -> Result<Self> {
                wrap_res(self.as_dyn().mul_scalar(v))
            }
            /// `mul * self + add` in one pass.
            #[track_caller]
            pub fn affine(&self, mul: f64, add: f64) -> Result<Self> {
                wrap_res(self.as_dyn().affine(mul, add))
            }
            unary!(neg, exp, log, sqrt, tanh, sigmoid, relu, gelu, silu, abs, square);

            /// Sum of every element.
            #[track_caller]
            pub fn sum_all(&self) -> Result<Tensor0<E>> {
                wrap_res(self.as_dyn().sum_all())
            }
            /// Mean of every element.
            #[track_caller]
            pub fn mean_all(&self) -> Result<Tensor0<E>> {
                wrap_res(self.as_dyn().mean_all())
            }
            /// Inverted dropout with probability `p` while `training` (global generator).
            #[track_caller]
            pub fn dropout(&self, p: f64, training: bool) -> Result<Self> {
                wrap_res(crate::nn::functional::dropout(self.as_dyn(), p, training))
            }
        }
    };
}

macro_rules! unary {
    ($($op:ident),*) => {$(
        #[doc = concat!("Elementwise `", stringify!($op), "` (shape unchanged).")]
        #[track_caller]
        pub fn $op(&self) -> Result<Self> {
            wrap_res(self.as_dyn().$op())
        }
    )*};
}

elementwise!(Tensor0, []);
elementwise!(Tensor1, [N]);
elementwise!(Tensor2, [M, N]);
elementwise!(Tensor3, [A, B, C]);
elementwise!(Tensor4, [N, C, H, W]);

/// Ops over the last dim, for every rank from 1: bias broadcasting, softmax, argmax.
macro_rules! last_dim_ops {
    ($name:ident, [$($d:ident),*], $reduced:ty) => {
        impl<$(const $d: usize,)* E: WithDType> $name<$($d,)* E> {
            /// `self * scale` with `scale` broadcast over the leading dims (like `add_bias`).
            #[track_caller]
            pub fn mul_bias<const D: usize>(&self, scale: &Tensor1<D, E>) -> Result<Self>
            where
                Self: LastDim<D>,
            {
                wrap_res(self.as_dyn().mul(scale.as_dyn()))
            }
            /// Softmax over the last dim.
            #[track_caller]
            pub fn softmax(&self) -> Result<Self> {
                wrap_res(self.as_dyn().softmax(-1))
            }
            /// Log-softmax over the last dim.
            #[track_caller]
            pub fn log_softmax(&self) -> Result<Self> {
                wrap_res(self.as_dyn().log_softmax(-1))
            }
            /// Index of the largest element along the last dim (int64).
            #[track_caller]
            pub fn argmax(&self) -> Result<$reduced> {
                wrap_res(self.as_dyn().argmax(-1, false))
            }
            /// Sum over the last dim.
            #[track_caller]
            pub fn sum_last(&self) -> Result<<$name<$($d,)* E> as Reduce>::Out> {
                wrap_res(self.as_dyn().sum(-1, false))
            }
            /// Mean over the last dim.
            #[track_caller]
            pub fn mean_last(&self) -> Result<<$name<$($d,)* E> as Reduce>::Out> {
                wrap_res(self.as_dyn().mean(-1, false))
            }
        }
    };
}

/// The tensor with its last dim reduced away (what `sum_last` / `mean_last` return).
pub trait Reduce: Typed {
    type Out: Typed<Elem = Self::Elem>;
}
impl<const N: usize, E: WithDType> Reduce for Tensor1<N, E> {
    type Out = Tensor0<E>;
}
impl<const M: usize, const N: usize, E: WithDType> Reduce for Tensor2<M, N, E> {
    type Out = Tensor1<M, E>;
}
impl<const A: usize, const B: usize, const C: usize, E: WithDType> Reduce for Tensor3<A, B, C, E> {
    type Out = Tensor2<A, B, E>;
}
impl<const N: usize, const C: usize, const H: usize, const W: usize, E: WithDType> Reduce
    for Tensor4<N, C, H, W, E>
{
    type Out = Tensor3<N, C, H, E>;
}

last_dim_ops!(Tensor1, [N], Tensor0<i64>);
last_dim_ops!(Tensor2, [M, N], Tensor1<M, i64>);
last_dim_ops!(Tensor3, [A, B, C], Tensor2<A, B, i64>);
last_dim_ops!(Tensor4, [N, C, H, W], Tensor3<N, C, H, i64>);

impl<const M: usize, const K: usize, E: WithDType> Tensor2<M, K, E> {
    /// `[M, K] @ [K, N] -> [M, N]`. The inner dims are one parameter `K`, so a mismatch is
    /// rustc's "expected `&Tensor2<K, _>`, found `&Tensor2<K', N>`".
    #[track_caller]
    pub fn matmul<const N: usize>(&self, rhs: &Tensor2<K, N, E>) -> Result<Tensor2<M, N, E>> {
        wrap_res(self.as_dyn().matmul(rhs.as_dyn()))
    }

    /// The transpose `[K, M]` (a view, no copy).
    #[track_caller]
    pub fn t(&self) -> Result<Tensor2<K, M, E>> {
        wrap_res(self.as_dyn().t())
    }

    /// Add a row to every row (`[M, K] + [1, K]`), the column-vector form of a bias.
    #[track_caller]
    pub fn add_row(&self, row: &Tensor2<1, K, E>) -> Result<Self> {
        wrap_res(self.as_dyn().add(row.as_dyn()))
    }

    /// Add a column to every column (`[M, K] + [M, 1]`).
    #[track_caller]
    pub fn add_col(&self, col: &Tensor2<M, 1, E>) -> Result<Self> {
        wrap_res(self.as_dyn().add(col.as_dyn()))
    }

    /// Pick one entry per row: `out[i] = self[i, index[i]]` (e.g. the target class's
    /// log-probability).
    #[track_caller]
    pub fn gather_rows(&self, index: &Tensor1<M, i64>) -> Result<Tensor1<M, E>> {
        let picked = self.as_dyn().gather(1, &index.as_dyn().unsqueeze(1)?)?;
        wrap_res(picked.squeeze(1))
    }
}

impl<const A: usize, const M: usize, const K: usize, E: WithDType> Tensor3<A, M, K, E> {
    /// Batched `[A, M, K] @ [A, K, N] -> [A, M, N]`.
    #[track_caller]
    pub fn matmul<const N: usize>(&self, rhs: &Tensor3<A, K, N, E>) -> Result<Tensor3<A, M, N, E>> {
        wrap_res(self.as_dyn().matmul(rhs.as_dyn()))
    }

    /// `[A, M, K] @ [K, N] -> [A, M, N]`: one matrix applied to every batch entry.
    #[track_caller]
    pub fn matmul_shared<const N: usize>(
        &self,
        rhs: &Tensor2<K, N, E>,
    ) -> Result<Tensor3<A, M, N, E>> {
        wrap_res(self.as_dyn().matmul(rhs.as_dyn()))
    }

    /// Swap the last two dims: `[A, K, M]` (a view).
    #[track_caller]
    pub fn transpose_12(&self) -> Result<Tensor3<A, K, M, E>> {
        wrap_res(self.as_dyn().transpose(1, 2))
    }

    /// Swap the first two dims: `[M, A, K]` (a view).
    #[track_caller]
    pub fn transpose_01(&self) -> Result<Tensor3<M, A, K, E>> {
        wrap_res(self.as_dyn().transpose(0, 1))
    }

    /// Any permutation: `x.permute::<2, 0, 1, _, _, _>()` with the output type written by the
    /// caller (stable Rust cannot compute it); a wrong output dim fails the build.
    #[track_caller]
    pub fn permute<
        const I: usize,
        const J: usize,
        const L: usize,
        const X: usize,
        const Y: usize,
        const Z: usize,
    >(
        &self,
    ) -> Result<Tensor3<X, Y, Z, E>> {
        const {
            if let Some(m) = check_permute(&[A, M, K], &[I, J, L], &[X, Y, Z]) {
                panic!("{}", m.as_str())
            }
        };
        wrap_res(self.as_dyn().permute(&[I as isize, J as isize, L as isize]))
    }

    /// Merge the first two dims: `[A·M, K]` (needs static `A` and `M`; checked at build).
    #[track_caller]
    pub fn merge_01<const AM: usize>(&self) -> Result<Tensor2<AM, K, E>> {
        self.reshape()
    }
}

impl<const N: usize, const C: usize, const H: usize, const W: usize, E: WithDType>
    Tensor4<N, C, H, W, E>
{
    /// Batched `[N, C, H, W] @ [N, C, W, P] -> [N, C, H, P]` (e.g. attention per head).
    #[track_caller]
    pub fn matmul<const P: usize>(
        &self,
        rhs: &Tensor4<N, C, W, P, E>,
    ) -> Result<Tensor4<N, C, H, P, E>> {
        wrap_res(self.as_dyn().matmul(rhs.as_dyn()))
    }

    /// Swap dims 1 and 2: `[N, H, C, W]` (a view), e.g. `[B, T, heads, D] -> [B, heads, T, D]`.
    #[track_caller]
    pub fn transpose_12(&self) -> Result<Tensor4<N, H, C, W, E>> {
        wrap_res(self.as_dyn().transpose(1, 2))
    }

    /// Swap the last two dims: `[N, C, W, H]` (a view).
    #[track_caller]
    pub fn transpose_23(&self) -> Result<Tensor4<N, C, W, H, E>> {
        wrap_res(self.as_dyn().transpose(2, 3))
    }

    /// Any permutation, the output type written by the caller and checked at build:
    /// `let y: Tensor4<B, H, W, C> = x.permute::<0, 2, 3, 1, _, _, _, _>()?`.
    #[track_caller]
    #[allow(clippy::type_complexity)]
    pub fn permute<
        const I: usize,
        const J: usize,
        const K: usize,
        const L: usize,
        const X0: usize,
        const X1: usize,
        const X2: usize,
        const X3: usize,
    >(
        &self,
    ) -> Result<Tensor4<X0, X1, X2, X3, E>> {
        const {
            if let Some(m) = check_permute(&[N, C, H, W], &[I, J, K, L], &[X0, X1, X2, X3]) {
                panic!("{}", m.as_str())
            }
        };
        wrap_res(
            self.as_dyn()
                .permute(&[I as isize, J as isize, K as isize, L as isize]),
        )
    }

    /// `[N, C, H, W] -> [N, F]` keeping the batch dim, with `F` written by the caller and
    /// checked at build: `F == C·H·W`, else "flatten: F is .. but should be C*H*W = ..".
    #[track_caller]
    pub fn flatten<const F: usize>(&self) -> Result<Tensor2<N, F, E>> {
        const {
            if let Some(m) = check_flatten(C, H, W, F) {
                panic!("{}", m.as_str())
            }
        };
        wrap_res(self.as_dyn().flatten(1, -1))
    }
}

/// The run-time half of `reshape`: the target dims with a [`Dyn`](super::Dyn) entry resolved
/// from the element count.
#[track_caller]
fn reshape_to<T: Typed>(t: &Tensor) -> Result<T> {
    let mut target = T::DIMS.to_vec();
    if let Some(i) = target.iter().position(|&d| d == super::Dyn) {
        let known: usize = target.iter().filter(|&&d| d != super::Dyn).product();
        target[i] = t.numel().checked_div(known).unwrap_or(0);
    }
    Ok(wrap(t.reshape(target)?))
}

// `reshape` and `add_bias` are written out per rank (not by macro) so that a compile error
// in them names the user's line without a macro backtrace.

impl<const N: usize, E: WithDType> Tensor1<N, E> {
    /// Reshape to any typed shape `T` with the same element count (a view when the layout
    /// allows): `let y: Tensor4<Dyn, 1, 28, 28> = x.reshape()?`. One `Dyn` dim on each side
    /// carries the run-time size. A count mismatch fails the build.
    #[track_caller]
    pub fn reshape<T: Typed<Elem = E>>(&self) -> Result<T> {
        const {
            if let Some(m) = check_reshape(Self::DIMS, T::DIMS) {
                panic!("{}", m.as_str())
            }
        };
        reshape_to(self.as_dyn())
    }

    /// `self + bias` with `bias` broadcast over every leading dim; its size must be the last
    /// dim, else a compile error.
    #[track_caller]
    pub fn add_bias<const D: usize>(&self, bias: &Tensor1<D, E>) -> Result<Self>
    where
        Self: LastDim<D>,
    {
        wrap_res(self.as_dyn().add(bias.as_dyn()))
    }
}

impl<const M: usize, const N: usize, E: WithDType> Tensor2<M, N, E> {
    /// Reshape to any typed shape `T` with the same element count (a view when the layout
    /// allows): `let y: Tensor4<Dyn, 1, 28, 28> = x.reshape()?`. One `Dyn` dim on each side
    /// carries the run-time size. A count mismatch fails the build.
    #[track_caller]
    pub fn reshape<T: Typed<Elem = E>>(&self) -> Result<T> {
        const {
            if let Some(m) = check_reshape(Self::DIMS, T::DIMS) {
                panic!("{}", m.as_str())
            }
        };
        reshape_to(self.as_dyn())
    }

    /// `self + bias` with `bias` broadcast over every leading dim; its size must be the last
    /// dim, else a compile error.
    #[track_caller]
    pub fn add_bias<const D: usize>(&self, bias: &Tensor1<D, E>) -> Result<Self>
    where
        Self: LastDim<D>,
    {
        wrap_res(self.as_dyn().add(bias.as_dyn()))
    }
}

impl<const A: usize, const B: usize, const C: usize, E: WithDType> Tensor3<A, B, C, E> {
    /// Reshape to any typed shape `T` with the same element count (a view when the layout
    /// allows): `let y: Tensor4<Dyn, 1, 28, 28> = x.reshape()?`. One `Dyn` dim on each side
    /// carries the run-time size. A count mismatch fails the build.
    #[track_caller]
    pub fn reshape<T: Typed<Elem = E>>(&self) -> Result<T> {
        const {
            if let Some(m) = check_reshape(Self::DIMS, T::DIMS) {
                panic!("{}", m.as_str())
            }
        };
        reshape_to(self.as_dyn())
    }

    /// `self + bias` with `bias` broadcast over every leading dim; its size must be the last
    /// dim, else a compile error.
    #[track_caller]
    pub fn add_bias<const D: usize>(&self, bias: &Tensor1<D, E>) -> Result<Self>
    where
        Self: LastDim<D>,
    {
        wrap_res(self.as_dyn().add(bias.as_dyn()))
    }
}

impl<const N: usize, const C: usize, const H: usize, const W: usize, E: WithDType>
    Tensor4<N, C, H, W, E>
{
    /// Reshape to any typed shape `T` with the same element count (a view when the layout
    /// allows): `let y: Tensor4<Dyn, 1, 28, 28> = x.reshape()?`. One `Dyn` dim on each side
    /// carries the run-time size. A count mismatch fails the build.
    #[track_caller]
    pub fn reshape<T: Typed<Elem = E>>(&self) -> Result<T> {
        const {
            if let Some(m) = check_reshape(Self::DIMS, T::DIMS) {
                panic!("{}", m.as_str())
            }
        };
        reshape_to(self.as_dyn())
    }

    /// `self + bias` with `bias` broadcast over every leading dim; its size must be the last
    /// dim, else a compile error.
    #[track_caller]
    pub fn add_bias<const D: usize>(&self, bias: &Tensor1<D, E>) -> Result<Self>
    where
        Self: LastDim<D>,
    {
        wrap_res(self.as_dyn().add(bias.as_dyn()))
    }
}
