//! A self-contained MNIST classifier: the trained weights (a 784-128-10 MLP, f16, ~200 KB) are
//! compiled into the executable with `include_bytes!` and read with
//! `might::io::safetensors` from memory, so the binary needs no model file at run time.
//!
//! `cargo run --release -p might --example 05_embedded_mnist [DATA_DIR] [N]` classifies the
//! first N (default all 10 000) test images of DATA_DIR (default `data/mnist`) and prints the
//! accuracy. The weights come from `train_embedded_mnist.rs`.

use might::data::{Dataset, Mnist};
use might::io::safetensors::load_bytes_with_metadata;
use might::nn::load_state_dict;
use might::nn::{Flatten, Linear, Module, ReLU, Sequential};
use might::{DType, Error, Result, Tensor};

/// The model file, inside the executable.
pub static WEIGHTS: &[u8] = include_bytes!("mnist_mlp.safetensors");

/// The classifier: the network plus the input normalisation it was trained with.
pub struct Classifier {
    pub model: Sequential,
    pub mean: f32,
    pub std: f32,
}

impl Classifier {
    /// Build the network and copy the embedded f16 weights into its f32 parameters (strict:
    /// a missing, extra or misshapen tensor is an error).
    pub fn from_bytes(bytes: &[u8]) -> Result<Classifier> {
        let (tensors, meta) = load_bytes_with_metadata(bytes)?;
        let mut model = Sequential::new()
            .add(Flatten::new())
            .add(Linear::new(784, 128, true)?)
            .add(ReLU)
            .add(Linear::new(128, 10, true)?);
        model.eval();
        load_state_dict(&model, &tensors, true)?;
        let field = |k: &str| -> Result<f32> {
            meta.get(k)
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| Error::format("embedded_mnist", format!("metadata has no '{k}'")))
        };
        Ok(Classifier {
            model,
            mean: field("mean")?,
            std: field("std")?,
        })
    }

    /// Class index of each image (`x`: `[n, 1, 28, 28]` pixels in [0, 1]).
    pub fn predict(&self, x: &Tensor) -> Result<Vec<i64>> {
        let _g = might::no_grad();
        let x = x.affine(1.0 / self.std as f64, -(self.mean / self.std) as f64)?;
        self.model.forward(&x)?.argmax(1, false)?.to_vec::<i64>()
    }

    /// Fraction of the first `n` samples of `data` classified correctly.
    pub fn accuracy(&self, data: &Mnist, n: usize) -> Result<f64> {
        let n = n.min(data.len());
        let mut correct = 0usize;
        for start in (0..n).step_by(1000) {
            let idx: Vec<usize> = (start..(start + 1000).min(n)).collect();
            let (x, y) = data.get_batch(&idx)?;
            let y = y.to_dtype(DType::I64)?.to_vec::<i64>()?;
            let pred = self.predict(&x)?;
            correct += pred.iter().zip(&y).filter(|(p, t)| p == t).count();
        }
        Ok(correct as f64 / n.max(1) as f64)
    }
}

#[allow(dead_code)] // the test suite includes this file as a module and calls only the above
fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().unwrap_or_else(|| "data/mnist".into());
    let n: usize = args
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(usize::MAX);
    let clf = Classifier::from_bytes(WEIGHTS)?;
    let test = Mnist::load(&dir, false)?;
    let n = n.min(test.len());
    let acc = clf.accuracy(&test, n)?;
    println!(
        "embedded model ({} bytes, {} parameters): {:.2}% on {n} MNIST test images",
        WEIGHTS.len(),
        clf.model.num_parameters(),
        100.0 * acc
    );
    Ok(())
}
