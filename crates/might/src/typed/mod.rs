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
//! *Type errors*, reported by `cargo check` (and so by the editor) as well as `cargo build`:
//! every rule that is an equality of dims puts one const parameter in both places.
//! - `matmul`: `Tensor2<M, K>::matmul(&Tensor2<K, N>) -> Tensor2<M, N>`; `[8, 4] @ [5, 3]` is
//!   ``error[E0308]: mismatched types … expected `4`, found `5` … expected reference
//!   `&Tensor2<4, _>` found reference `&Tensor2<5, 3>` ``.
//! - elementwise ops take `&Self`; `add_bias(&Tensor1<D>)` needs `Self: LastDim<D>`: a bias of
//!   5 on rows of 4 is ``expected reference `&Tensor1<4>` found reference `&Tensor1<5>` ``.
//! - `Linear<IN, OUT>` and `LayerNorm<D>` accept any tensor whose last dim is `IN` / `D`
//!   ([`LastDim`]): ``error[E0277]: the last dim of `Tensor2<8, 100>` is not 784``.
//! - `Conv2d<CIN, COUT, K, S, P>::forward(&Tensor4<N, CIN, H, W>)`: a 1-channel image into a
//!   3-channel conv is ``expected reference `&Tensor4<_, 3, _, _>` found reference
//!   `&Tensor4<2, 1, 28, 28>` ``.
//! - losses: logits `[B, C]` and targets `[B]` share `B`.
//!
//! *Build-time asserts*, reported by `cargo build`, `cargo test` and `cargo run` but **not by
//! `cargo check`**: sizes that are arithmetic of other sizes cannot be computed in a type on
//! stable Rust (dfdx needed nightly `generic_const_exprs` for them). The caller writes them as
//! type parameters, usually by annotating the result, and an inline `const { .. }` block in
//! the op compares them with the formula and stops compilation with a message that names the
//! dim and the size it should have:
//! - conv / pool output, `let y: Tensor4<Dyn, 8, 27, 27> = conv.forward(&x)?` for a 3×3,
//!   padding-1 conv of 28×28: `error[E0080]: evaluation panicked: Conv2d: output height OH is
//!   27 but should be (H + 2*P - K) / S + 1 = (28 + 2*1 - 3) / 1 + 1 = 28`;
//! - `flatten::<3000>()` of `[Dyn, 64, 7, 7]`: `flatten: F is 3000 but should be C*H*W =
//!   64*7*7 = 3136`;
//! - `reshape` of `Tensor2<4, 6>` into `Tensor2<5, 5>`: `reshape: [4, 6] has 24 elements, but
//!   [5, 5] has 25`;
//! - `permute` (output dims), `narrow_last` (range), and the constructors that need static
//!   dims (`zeros`, `randn`, ... on a type with a `Dyn` dim).
//!
//! Why not `cargo check`: such a block is evaluated when rustc instantiates the generic
//! function for concrete sizes (monomorphization), which belongs to code generation;
//! `cargo check` stops before it. So a wrong conv output size passes `cargo check` (and
//! rust-analyzer) and fails `cargo build` — verified with rustc 1.95. rustc prints the message
//! above, a note showing the `const` block in might, and a note "the above error was
//! encountered while instantiating `fn …forward::<…>`" pointing at the user's call. The
//! compile-fail tests (`tests/typed_ui`) run under `cargo build` for this reason.
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
pub use dim::{window_out, Dyn};
pub use layers::{attention, Embedding, LayerNorm, Linear};
pub use loss::{cross_entropy, cross_entropy_seq, cross_entropy_with, l1_loss, mse_loss, nll_loss};
pub use ops::Reduce;
pub use tensor::{LastDim, Tensor0, Tensor1, Tensor2, Tensor3, Tensor4, Typed};
