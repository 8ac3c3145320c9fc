//! The GPU: tensors and modules moved to `Device::gpu(0)`, a few training steps there, and
//! the values read back only when the host asks.
//!
//! Run with `cargo run -p might --features gpu --example 09_gpu` (without a GPU, Mesa's
//! software Vulkan driver provides one: `apt-get install mesa-vulkan-drivers`).

use might::nn::functional::{cross_entropy, CrossEntropyOptions};
use might::nn::{Linear, Module, ReLU, Sequential};
use might::optim::{AdamConfig, AdamW, Optimizer};
use might::{DType, Device, Tensor};

fn main() -> might::Result<()> {
    // The GPU, or a clear error naming the adapters wgpu found.
    let gpu = Device::gpu(0)?;
    println!("running on {gpu}: {}", gpu.name());

    // Tensors move with `to_device`; ops run where their operands live.
    let a = Tensor::randn([4, 3], DType::F32)?.to_device(gpu)?;
    let b = Tensor::randn([3, 2], DType::F32)?.to_device(gpu)?;
    println!("a @ b =\n{}", a.matmul(&b)?); // printing reads the values back

    // WGSL has no f64: convert first.
    let e = Tensor::zeros([2], DType::F64)?.to_device(gpu).unwrap_err();
    println!("f64 on the GPU: {e}");

    // A model moves its parameters in place; an optimizer made after steps them there.
    let model = Sequential::new()
        .add(Linear::new(3, 16, true)?)
        .add(ReLU)
        .add(Linear::new(16, 2, true)?);
    model.to_device(gpu)?;
    let mut opt = AdamW::new(
        model.parameters(),
        AdamConfig {
            lr: 1e-2,
            ..AdamConfig::adamw()
        },
    )?;
    let x = Tensor::randn([32, 3], DType::F32)?.to_device(gpu)?;
    // the label: whether the first feature is positive
    let y = x
        .narrow(1, 0, 1)?
        .squeeze(1)?
        .gt_scalar(0.0)?
        .to_dtype(DType::I64)?;
    let mut losses = Vec::new();
    for _ in 0..50 {
        let loss = cross_entropy(&model.forward(&x)?, &y, &CrossEntropyOptions::default())?;
        opt.zero_grad();
        loss.backward()?;
        opt.step()?;
        losses.push(loss); // queued: nothing waits for the GPU inside the loop
    }
    let first = losses[0].item()?;
    let last = losses[49].item()?; // the host waits here
    println!("loss {first:.4} -> {last:.4}");
    Ok(())
}
