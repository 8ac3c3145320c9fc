//! Trains the MLP that `05_embedded_mnist` ships inside its executable and writes its weights
//! to `crates/might/examples/mnist_mlp.safetensors` (f16: half the bytes, same accuracy).
//!
//! `cargo run --release -p might --example train_embedded_mnist [DATA_DIR] [EPOCHS] [OUT]`
//! (defaults: `data/mnist`, 5 epochs). The input normalisation travels in the file's metadata,
//! so a reader needs nothing else to use the model.

use std::collections::HashMap;
use std::sync::Arc;

use might::data::{DataLoader, Dataset, Mnist, Transform};
use might::nn::functional::{cross_entropy, CrossEntropyOptions};
use might::nn::{Flatten, Linear, Module, ReLU, Sequential};
use might::optim::{Optimizer, Sgd, SgdConfig};
use might::{DType, Tensor};

const MEAN: f32 = 0.1307;
const STD: f32 = 0.3081;

fn main() -> might::Result<()> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().unwrap_or_else(|| "data/mnist".into());
    let epochs: usize = args.next().and_then(|e| e.parse().ok()).unwrap_or(5);
    let out = args
        .next()
        .unwrap_or_else(|| "crates/might/examples/mnist_mlp.safetensors".into());
    might::manual_seed(0);

    let norm = || {
        vec![Transform::Normalize {
            mean: vec![MEAN],
            std: vec![STD],
        }]
    };
    let train: Arc<dyn Dataset> = Arc::new(Mnist::load(&dir, true)?.with_transforms(norm(), 0));
    let test = Mnist::load(&dir, false)?.with_transforms(norm(), 0);
    let loader = DataLoader::new(train, 64, true, false, 0);

    // Same layout as PyTorch's nn.Sequential(Flatten, Linear, ReLU, Linear): names 1.*, 3.*.
    let model = Sequential::new()
        .add(Flatten::new())
        .add(Linear::new(784, 128, true)?)
        .add(ReLU)
        .add(Linear::new(128, 10, true)?);
    let mut opt = Sgd::new(
        model.parameters(),
        SgdConfig {
            lr: 0.05,
            momentum: 0.9,
            ..Default::default()
        },
    )?;
    let ce = CrossEntropyOptions::default();
    for epoch in 1..=epochs {
        // Halve the step size each epoch after the second: a cheap schedule that settles well.
        if epoch > 2 {
            let lr = opt.lr() * 0.5;
            opt.set_lr(lr);
        }
        for batch in &loader {
            let (x, y) = batch?;
            let loss = cross_entropy(&model.forward(&x)?, &y, &ce)?;
            opt.zero_grad();
            loss.backward()?;
            opt.step()?;
        }
        let idx: Vec<usize> = (0..test.len()).collect();
        let (x, y) = test.get_batch(&idx)?;
        let pred = {
            let _g = might::no_grad();
            model.forward(&x)?.argmax(1, false)?
        };
        let correct = pred.eq(&y)?.to_dtype(DType::F64)?.sum_all()?.item()?;
        println!(
            "epoch {epoch}: test accuracy {:.2}%",
            100.0 * correct / test.len() as f64
        );
    }

    let weights: Vec<(String, Tensor)> = model
        .state_dict()
        .into_iter()
        .map(|(k, t)| Ok((k, t.detach().to_dtype(DType::F16)?)))
        .collect::<might::Result<_>>()?;
    let meta = HashMap::from([
        ("mean".to_string(), MEAN.to_string()),
        ("std".to_string(), STD.to_string()),
        (
            "architecture".to_string(),
            "784-128-10 MLP, ReLU".to_string(),
        ),
    ]);
    might::io::safetensors::save(&out, &weights, Some(meta))?;
    println!("wrote {out}");
    Ok(())
}
