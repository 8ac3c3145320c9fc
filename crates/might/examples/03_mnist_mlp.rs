//! The classic training loop: an MLP (784-128-10) on MNIST with SGD + momentum, written
//! directly with might's tensors, autograd and data loader.
//!
//! Run with `cargo run --release -p might --example 03_mnist_mlp [DATA_DIR] [EPOCHS]`
//! (default `data/mnist`, 1 epoch).

use std::sync::Arc;

use might::data::{DataLoader, Dataset, Mnist, Transform};
use might::{DType, Tensor};

/// A linear layer's parameters, initialised like PyTorch (uniform ±1/sqrt(fan_in)).
fn linear(fan_in: usize, fan_out: usize) -> might::Result<(Tensor, Tensor)> {
    let b = 1.0 / (fan_in as f64).sqrt();
    Ok((
        Tensor::uniform([fan_out, fan_in], -b, b, DType::F32)?.with_requires_grad(),
        Tensor::uniform([fan_out], -b, b, DType::F32)?.with_requires_grad(),
    ))
}

fn main() -> might::Result<()> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().unwrap_or_else(|| "data/mnist".into());
    let epochs: usize = args.next().and_then(|e| e.parse().ok()).unwrap_or(1);
    might::manual_seed(0);

    // Pixels scaled to [0, 1] then standardised with the training set's mean and std.
    let norm = || {
        vec![Transform::Normalize {
            mean: vec![0.1307],
            std: vec![0.3081],
        }]
    };
    let train: Arc<dyn Dataset> = Arc::new(Mnist::load(&dir, true)?.with_transforms(norm(), 0));
    let test: Arc<dyn Dataset> = Arc::new(Mnist::load(&dir, false)?.with_transforms(norm(), 0));
    let loader = DataLoader::new(train, 64, true, false, 0);

    let (w1, b1) = linear(784, 128)?;
    let (w2, b2) = linear(128, 10)?;
    let params = [w1.clone(), b1.clone(), w2.clone(), b2.clone()];
    let forward = |x: &Tensor| -> might::Result<Tensor> {
        let x = x.reshape([x.dims()[0], 784])?;
        x.matmul(&w1.t()?)?
            .add(&b1)?
            .relu()?
            .matmul(&w2.t()?)?
            .add(&b2)
    };
    // Cross-entropy = mean of -log_softmax at the target class.
    let loss_fn = |logits: &Tensor, y: &Tensor| -> might::Result<Tensor> {
        logits
            .log_softmax(-1)?
            .gather(1, &y.unsqueeze(1)?)?
            .mean_all()?
            .neg()
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
            let loss = loss_fn(&forward(&x)?, &y)?;
            for p in &params {
                p.zero_grad();
            }
            loss.backward()?;
            // SGD with momentum: v = m v + g; p -= lr v.
            let _g = might::no_grad();
            for (p, v) in params.iter().zip(&mut velocity) {
                v.affine_(momentum, 0.0)?.add_(&p.grad().unwrap())?;
                p.add_scaled_(v, -lr)?;
            }
            total += loss.item()?;
            steps += 1;
        }
        // Test accuracy.
        let _g = might::no_grad();
        let mut right = 0;
        for batch in &DataLoader::new(test.clone(), 1000, false, false, 0) {
            let (x, y) = batch?;
            let pred = forward(&x)?.argmax(-1, false)?;
            right += pred.eq(&y)?.to_dtype(DType::I64)?.sum_all()?.item()? as usize;
        }
        println!(
            "epoch {epoch}: train loss {:.4}, test accuracy {:.2}%",
            total / steps as f64,
            100.0 * right as f64 / test.len() as f64
        );
    }
    Ok(())
}
