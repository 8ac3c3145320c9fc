//! A convolutional network on MNIST, written with might's layers (`might::nn`), optimizer
//! (`might::optim::Adam`) and learning-rate schedule (`OneCycleLR`): the classic CNN training
//! loop, reaching about 99 % test accuracy after one epoch.
//!
//! Run with `cargo run --release -p might --example 04_mnist_cnn [DATA_DIR] [EPOCHS] [--quick]`
//! (default `data/mnist`, 1 epoch). `--quick` trains on 200 batches only (a few seconds).

use std::sync::Arc;

use might::data::{DataLoader, Dataset, Mnist, Transform};
use might::nn::functional::{cross_entropy, CrossEntropyOptions};
use might::nn::{
    BatchNorm2d, Conv2d, Conv2dConfig, Dropout, Flatten, Linear, MaxPool2d, Module, ReLU,
    Sequential,
};
use might::optim::{Adam, AdamConfig, OneCycleLR, Optimizer, Scheduler};
use might::DType;

/// conv 3x3 (padding 1, no bias: BatchNorm removes per-channel offsets) → BatchNorm → ReLU →
/// 2x2 max pool: halves the image and widens the channels.
fn block(net: Sequential, cin: usize, cout: usize) -> might::Result<Sequential> {
    let cfg = Conv2dConfig {
        padding: 1,
        bias: false,
        ..Default::default()
    };
    Ok(net
        .add(Conv2d::new(cin, cout, 3, cfg)?)
        .add(BatchNorm2d::new(cout)?)
        .add(ReLU)
        .add(MaxPool2d::new(2)))
}

fn main() -> might::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let mut pos = args.iter().filter(|a| !a.starts_with("--"));
    let dir = pos.next().cloned().unwrap_or_else(|| "data/mnist".into());
    let epochs: usize = pos.next().and_then(|e| e.parse().ok()).unwrap_or(1);
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
    let steps_per_epoch = if quick { 200 } else { loader.len() };

    // [1, 28, 28] → [32, 14, 14] → [64, 7, 7] → 128 → 10 class scores.
    let net = block(Sequential::new(), 1, 32)?;
    let net = block(net, 32, 64)?;
    let mut model = net
        .add(Flatten::new())
        .add(Dropout::new(0.25))
        .add(Linear::new(64 * 7 * 7, 128, true)?)
        .add(ReLU)
        .add(Dropout::new(0.25))
        .add(Linear::new(128, 10, true)?);
    println!("{} parameters", model.num_parameters());

    // Adam; the one-cycle schedule warms the lr up to 3e-3 and anneals it to ~0 by the end.
    let mut opt = Adam::new(
        model.parameters(),
        AdamConfig {
            lr: 3e-3,
            ..Default::default()
        },
    )?;
    let total = (epochs * steps_per_epoch).max(2);
    let mut sched = Scheduler::for_optimizer(&mut opt, OneCycleLR::new(total)?);
    let ce = CrossEntropyOptions::default();

    for epoch in 1..=epochs {
        model.train(true); // BatchNorm uses batch statistics, Dropout drops
        let (mut total_loss, mut steps) = (0.0, 0);
        for batch in loader.iter().take(steps_per_epoch) {
            let (x, y) = batch?;
            let loss = cross_entropy(&model.forward(&x)?, &y, &ce)?;
            opt.zero_grad();
            loss.backward()?;
            opt.step()?;
            sched.step(&mut opt);
            total_loss += loss.item()?;
            steps += 1;
        }

        // Test accuracy: eval mode (running BatchNorm statistics, no dropout), no graph.
        model.eval();
        let _g = might::no_grad();
        let mut right = 0;
        for batch in &DataLoader::new(test.clone(), 1000, false, false, 0) {
            let (x, y) = batch?;
            let pred = model.forward(&x)?.argmax(-1, false)?;
            right += pred.eq(&y)?.to_dtype(DType::I64)?.sum_all()?.item()? as usize;
        }
        println!(
            "epoch {epoch}: train loss {:.4}, test accuracy {:.2}%",
            total_loss / steps.max(1) as f64,
            100.0 * right as f64 / test.len() as f64
        );
    }
    Ok(())
}
