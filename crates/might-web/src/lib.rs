//! might in the browser. The two demo models of `might train`, loaded from their checkpoints'
//! bytes (a page fetches them from its own origin), with what a page needs around them:
//!
//! - [`DigitClassifier`]: the MNIST CNN (or MLP); [`mnist_input`] turns a drawing into the
//!   28x28 input MNIST's digits were made as (bounding box scaled to 20x20, centred by mass).
//! - [`TextGenerator`]: the character GPT, streaming one character at a time.
//!
//! Everything here is plain Rust, tested natively; `bindings` (wasm32 only) exports it to
//! JavaScript with wasm-bindgen. `web/` holds the page and `web/build.sh`.

mod canvas;
mod digits;
mod text;

#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
mod bindings;

pub use canvas::{mnist_input, SIDE};
pub use digits::DigitClassifier;
pub use text::TextGenerator;

/// A `might train` checkpoint from bytes, its float16 weights (the page's files hold them:
/// half the download) widened to float32, which the models compute in.
fn load_checkpoint(bytes: &[u8]) -> might::Result<might::optim::Checkpoint> {
    let mut ck = might::optim::load_checkpoint_from_bytes(bytes)?;
    for (_, t) in ck.model.iter_mut() {
        if t.dtype() == might::DType::F16 {
            *t = t.to_dtype(might::DType::F32)?;
        }
    }
    Ok(ck)
}
