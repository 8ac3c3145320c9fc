//! Shapes checked by the compiler: tensors whose dims are const generics, on stable Rust.
//!
//! `Tensor1<N>`, `Tensor2<M, N>`, `Tensor3<A, B, C>`, `Tensor4<N, C, H, W>` (and the scalar
//! `Tensor0`) carry their dims and element type (`E`, default `f32`) in the type. Each is a
//! `#[repr(transparent)]` wrapper over the dynamic [`Tensor`](crate::Tensor): converting
//! either way is free ([`Typed::from_dyn`] checks once, `into_dyn` / `as_dyn` / `Tensor::from`
//! give it back), autograd records through the wrapped ops as usual, and the device is the
//! dynamic tensor's. A dim known only at run time — the batch — is [`Dyn`]; it is checked
//! when a dynamic tensor enters (`from_dyn`) and read back with `dims()`.
//!
//! ```
//! use might::typed::{cross_entropy, Dyn, Linear, Tensor1, Tensor2};
//! use might::Tensor;
//! # fn main() -> might::Result<()> {
//! let fc1 = Linear::<784, 128>::new()?;
//! let fc2 = Linear::<128, 10>::new()?;
//! // the batch size comes from the data: Dyn, checked here once
//! let x: Tensor2<Dyn, 784> = Tensor2::from_dyn(Tensor::randn([32, 784], might::DType::F32)?)?;
//! let y: Tensor1<Dyn, i64> = Tensor1::from_dyn(Tensor::rand_int(0, 10, [32])?)?;
//! let logits = fc2.forward(&fc1.forward(&x)?.relu()?)?; // Tensor2<Dyn, 10>
//! let loss = cross_entropy(&logits, &y)?;
//! loss.backward()?;
//! assert_eq!(fc1.weight().grad().unwrap().dims(), [128, 784]);
//! # Ok(()) }
//! ```
//!
//! # How each mismatch is caught
//!
//! *Type errors* (reported by `cargo check`, the editor, `cargo build`): every rule that is an
//! equality of dims puts one const parameter in both places.
//! - `matmul`: `Tensor2<M, K>::matmul(&Tensor2<K, N>) -> Tensor2<M, N>` — inner dims differ:
//!   ``expected `&Tensor2<4, _>`, found `&Tensor2<5, 3>` ``.
//! - elementwise ops take `&Self`; `add_bias(&Tensor1<D>)` needs `Self: LastDim<D>`:
//!   ``the last dim of `Tensor2<8, 4>` is not 5``; the same bound guards `Linear<IN, OUT>`
//!   and `LayerNorm<D>`.
//! - `Conv2d<CIN, COUT, K, S, P>::forward(&Tensor4<N, CIN, H, W>)`: wrong channel count:
//!   ``expected `&Tensor4<_, 3, _, _>`, found `&Tensor4<2, 1, 28, 28>` ``.
//! - losses: logits `[B, C]` and targets `[B]` share `B`.
//!
//! *Build-time asserts* (reported by `cargo build`, `cargo test`, `cargo run` — **not by
//! `cargo check`**): sizes that are arithmetic of other sizes cannot be computed in a type on
//! stable Rust (dfdx needed nightly `generic_const_exprs` for them). The caller writes them as
//! type parameters, usually by annotating the result, and an inline `const { .. }` block in
//! the op compares them with the formula:
//! - conv / pool output: `let y: Tensor4<Dyn, 32, 28, 28> = conv.forward(&x)?;` —
//!   "Conv2d: output height OH = 27, but (in + 2*P - K) / S + 1 = (28 + 2*1 - 3) / 1 + 1 = 28";
//! - `flatten::<F>()`: "flatten: F = 3000, but C*H*W = 64*7*7 = 3136";
//! - `reshape::<T>()`: "reshape: [4, 6] has 24 elements, but [5, 5] has 25";
//! - `permute`, `narrow_last`, and the constructors that need static dims (`zeros`, ...).
//!
//! Such a block is evaluated when rustc instantiates the generic function for concrete sizes,
//! which happens during code generation. `cargo check` stops before that, so a wrong conv
//! output size passes `cargo check` and fails `cargo build` (verified with rustc 1.95; the
//! compile-fail tests in `tests/typed_ui` run under `cargo build` for that reason). The
//! message then reads `error[E0080]: evaluation panicked: <the message>`, with a note
//! pointing at the call.
//!
//! In rustc's messages [`Dyn`] shows as `usize::MAX` (it is that value).
//!
//! # What stays dynamic
//!
//! The values of ids (an embedding index out of range), the run-time size of a `Dyn` dim
//! (two `Tensor2<Dyn, 4>` with different batch sizes), allocation and dtype support remain
//! run-time errors, returned as [`crate::Error`] like every might op.

mod conv;
mod dim;
mod layers;
mod loss;
mod ops;
mod tensor;

pub use conv::{AvgPool2d, BatchNorm2d, Conv2d, MaxPool2d};
#[doc(hidden)]
pub use dim::{
    check_flatten, check_narrow, check_permute, check_positive, check_reshape, check_static,
    check_window, either, Msg,
};
pub use dim::{window_out, Dyn};
pub use layers::{attention, Embedding, LayerNorm, Linear};
pub use loss::{cross_entropy, cross_entropy_seq, cross_entropy_with, l1_loss, mse_loss, nll_loss};
pub use ops::Reduce;
pub use tensor::{LastDim, Tensor0, Tensor1, Tensor2, Tensor3, Tensor4, Typed};
