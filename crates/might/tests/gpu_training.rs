//! Training on the GPU: an MLP-free CNN takes the same SGD steps as on the CPU and reaches the
//! same parameters, with its work queued (no host wait per step) and its buffers reused. In
//! its own test binary: the GPU's counters of host reads and created buffers are per process.
#![cfg(feature = "gpu")]

mod common;

use might::nn::functional::{cross_entropy, CrossEntropyOptions};
use might::nn::{Conv2d, Conv2dConfig, Flatten, Linear, MaxPool2d, Module, ReLU, Sequential};
use might::optim::{Optimizer, Sgd, SgdConfig};
use might::{manual_seed, DType, Device, Result, Tensor};

fn close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "{what}[{i}]: gpu {g} vs cpu {w}"
        );
    }
}

fn ids(v: &[i64], dims: &[usize]) -> Tensor {
    Tensor::from_slice(v, dims.to_vec()).unwrap()
}

macro_rules! gpu_or_skip {
    () => {
        match common::gpu() {
            Some(d) => d,
            None => return Ok(()),
        }
    };
}

fn cnn() -> Result<Sequential> {
    Ok(Sequential::new()
        .add(Conv2d::new(1, 4, 3, Conv2dConfig::default())?)
        .add(ReLU)
        .add(MaxPool2d::new(2))
        .add(Flatten::new())
        .add(Linear::new(4 * 3 * 3, 5, true).unwrap()))
}

/// A CNN takes the same SGD steps on both devices; after the first step the GPU
/// creates no new buffers and the host reads nothing until it asks for the loss.
#[test]
fn training_matches_the_cpu_queued_and_without_new_buffers() -> Result<()> {
    let g = gpu_or_skip!();
    let Device::Gpu(n) = g else { unreachable!() };
    manual_seed(6);
    let x = Tensor::randn([8, 1, 8, 8], DType::F32)?;
    let y = ids(&[0, 1, 2, 3, 4, 0, 1, 2], &[8]);
    let (cpu, moved) = (cnn()?, cnn()?);
    moved.load_state_dict(&cpu.state_dict(), true)?;
    moved.to_device(g)?;
    let cfg = SgdConfig {
        lr: 0.1,
        momentum: 0.9,
        ..Default::default()
    };
    let mut opts = [
        Sgd::new(cpu.parameters(), cfg)?,
        Sgd::new(moved.parameters(), cfg)?,
    ];
    let (xg, yg) = (x.to_device(g)?, y.to_device(g)?);
    let mut counts = vec![];
    for step in 0..4 {
        let mut losses = vec![];
        for (k, (m, (xs, ys))) in [(&cpu, (&x, &y)), (&moved, (&xg, &yg))]
            .into_iter()
            .enumerate()
        {
            let loss = cross_entropy(&m.forward(xs)?, ys, &CrossEntropyOptions::default())?;
            loss.backward()?;
            opts[k].step()?;
            opts[k].zero_grad();
            losses.push(loss);
        }
        counts.push(might::internals::gpu_counters(n));
        if step == 3 {
            close(
                "loss",
                &losses[1].to_f64_vec(),
                &losses[0].to_f64_vec(),
                1e-4,
            );
        }
    }
    // steps 2..4 read nothing back and created no buffers
    assert_eq!(
        counts[3].0, counts[1].0,
        "host reads during steps: {counts:?}"
    );
    assert_eq!(
        counts[3].1, counts[1].1,
        "buffers created during steps: {counts:?}"
    );
    for ((name, p), (_, q)) in moved.state_dict().iter().zip(cpu.state_dict()) {
        assert_eq!(p.device(), g);
        close(name, &p.to_f64_vec(), &q.to_f64_vec(), 1e-4);
    }
    // a state read on the host loads into the model on the GPU (what --resume does)
    let fresh = cnn()?;
    fresh.to_device(g)?;
    fresh.load_state_dict(&cpu.state_dict(), true)?;
    for ((name, p), (_, q)) in fresh.state_dict().iter().zip(cpu.state_dict()) {
        assert_eq!(p.device(), g);
        assert_eq!(p.to_f64_vec(), q.to_f64_vec(), "{name}");
    }
    g.synchronize()?;
    Ok(())
}
