//! `03_mnist_mlp` with shapes checked by the compiler (`might::typed`): the same MLP
//! (784-128-10, SGD + momentum), the same seed, the same operations in the same order — so it
//! prints the same losses and accuracies as `03_mnist_mlp`, bit for bit (measured, one epoch:
//! train loss 0.2792, test accuracy 95.83 % for both).
//!
//! The batch dim is `Dyn` (the last batch is smaller); every other size is in the types, so
//! `x.matmul(&w2.t()?)` with the layers swapped, or a bias of the wrong size, is a compile
//! error instead of a run-time one.
//!
//! Run with `cargo run --release -p might --example 06_typed_mnist_mlp [DATA_DIR] [EPOCHS]`
//! (default `data/mnist`, 1 epoch).

use std::sync::Arc;

use might::data::{DataLoader, Dataset, Mnist, Transform};
use might::typed::{Dyn, Tensor1, Tensor2, Tensor4};
use might::Tensor;

/// Input pixels, hidden units, classes.
const IN: usize = 784;
const HIDDEN: usize = 128;
const CLASSES: usize = 10;

/// The model's parameters, initialised like PyTorch (uniform ±1/sqrt(fan_in)) in the order of
/// `03_mnist_mlp` (w1, b1, w2, b2) so that the same seed gives the same values.
struct Mlp {
    w1: Tensor2<HIDDEN, IN>,
    b1: Tensor1<HIDDEN>,
    w2: Tensor2<CLASSES, HIDDEN>,
    b2: Tensor1<CLASSES>,
}

impl Mlp {
    fn new() -> might::Result<Mlp> {
        let b = 1.0 / (IN as f64).sqrt();
        let w1 = Tensor2::uniform(-b, b)?.with_requires_grad();
        let b1 = Tensor1::uniform(-b, b)?.with_requires_grad();
        let b = 1.0 / (HIDDEN as f64).sqrt();
        let w2 = Tensor2::uniform(-b, b)?.with_requires_grad();
        let b2 = Tensor1::uniform(-b, b)?.with_requires_grad();
        Ok(Mlp { w1, b1, w2, b2 })
    }

    /// `relu(x W1ᵀ + b1) W2ᵀ + b2`: `[B, 1, 28, 28] -> [B, 784] -> [B, 128] -> [B, 10]`.
    fn forward(&self, x: &Tensor4<Dyn, 1, 28, 28>) -> might::Result<Tensor2<Dyn, CLASSES>> {
        let x: Tensor2<Dyn, IN> = x.reshape()?;
        x.matmul(&self.w1.t()?)?
            .add_bias(&self.b1)?
            .relu()?
            .matmul(&self.w2.t()?)?
            .add_bias(&self.b2)
    }

    fn parameters(&self) -> Vec<Tensor> {
        vec![
            self.w1.as_dyn().clone(),
            self.b1.as_dyn().clone(),
            self.w2.as_dyn().clone(),
            self.b2.as_dyn().clone(),
        ]
    }
}

fn main() -> might::Result<()> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().unwrap_or_else(|| "data/mnist".into());
    let epochs: usize = args.next().and_then(|e| e.parse().ok()).unwrap_or(1);
    might::manual_seed(0);

    let norm = || {
        vec![Transform::Normalize {
            mean: vec![0.1307],
            std: vec![0.3081],
        }]
    };
    let train: Arc<dyn Dataset> = Arc::new(Mnist::load(&dir, true)?.with_transforms(norm(), 0));
    let test: Arc<dyn Dataset> = Arc::new(Mnist::load(&dir, false)?.with_transforms(norm(), 0));
    let loader = DataLoader::new(train, 64, true, false, 0);

    let model = Mlp::new()?;
    let params = model.parameters();
    // Cross-entropy = mean of -log_softmax at the target class.
    let loss_fn = |logits: &Tensor2<Dyn, CLASSES>, y: &Tensor1<Dyn, i64>| {
        logits.log_softmax()?.gather_rows(y)?.mean_all()?.neg()
    };

    let (lr, momentum) = (0.01, 0.9);
    let mut velocity: Vec<Tensor> = params
        .iter()
        .map(Tensor::zeros_like)
        .collect::<might::Result<_>>()?;
    for epoch in 1..=epochs {
        let mut total = 0.0;
        let mut steps = 0;
        for batch in &loader {
            let (x, y) = batch?;
            // the boundary: the loader's dynamic tensors are checked once here
            let (x, y) = (Tensor4::from_dyn(x)?, Tensor1::from_dyn(y)?);
            let loss = loss_fn(&model.forward(&x)?, &y)?;
            for p in &params {
                p.zero_grad();
            }
            loss.backward()?;
            let _g = might::no_grad();
            for (p, v) in params.iter().zip(&mut velocity) {
                v.affine_(momentum, 0.0)?.add_(&p.grad().unwrap())?;
                p.add_scaled_(v, -lr)?;
            }
            total += loss.item()?;
            steps += 1;
        }
        let _g = might::no_grad();
        let mut right = 0;
        for batch in &DataLoader::new(test.clone(), 1000, false, false, 0) {
            let (x, y) = batch?;
            let pred: Tensor1<Dyn, i64> = model.forward(&Tensor4::from_dyn(x)?)?.argmax()?;
            right += pred
                .as_dyn()
                .eq(&y)?
                .to_dtype(might::DType::I64)?
                .sum_all()?
                .item()? as usize;
        }
        println!(
            "epoch {epoch}: train loss {:.4}, test accuracy {:.2}%",
            total / steps as f64,
            100.0 * right as f64 / test.len() as f64
        );
    }
    Ok(())
}
