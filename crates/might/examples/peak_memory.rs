//! Peak heap memory of one training step (forward + backward) of the MNIST MLP and the small
//! MNIST CNN, measured with a counting allocator. Run:
//! `cargo run --release -p might --example peak_memory`
//!
//! Shows that backward frees each node's saved activations as soon as it has run: the live
//! bytes after backward drop back to parameters + gradients.

use might::nn::{
    cross_entropy, Conv2d, Conv2dConfig, CrossEntropyOptions, Flatten, Linear, MaxPool2d, Module,
    ReLU, Sequential,
};
use might::{DType, Result, Tensor};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only counts bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let now = LIVE.fetch_add(l.size(), Relaxed) + l.size();
        PEAK.fetch_max(now, Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn mb(b: usize) -> f64 {
    b as f64 / 1e6
}

fn step(name: &str, model: &dyn Module, x: &Tensor, y: &Tensor) -> Result<()> {
    // one warm-up step so lazily created pools are not counted
    cross_entropy(&model.forward(x)?, y, &CrossEntropyOptions::default())?.backward()?;
    for p in model.parameters() {
        p.zero_grad();
    }
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    let loss = cross_entropy(&model.forward(x)?, y, &CrossEntropyOptions::default())?;
    let after_fwd = LIVE.load(Relaxed);
    let peak_fwd = PEAK.load(Relaxed);
    loss.backward()?;
    let peak = PEAK.load(Relaxed);
    drop(loss);
    let after = LIVE.load(Relaxed);
    println!(
        "{name}: graph after forward {:.2} MB (peak {:.2}), peak during step {:.2} MB, \
         live after backward {:.2} MB (the gradients), params {:.2} MB",
        mb(after_fwd - base),
        mb(peak_fwd - base),
        mb(peak - base),
        mb(after - base),
        mb(model.num_parameters() * 4)
    );
    Ok(())
}

fn main() -> Result<()> {
    might::manual_seed(0);
    let y = Tensor::rand_int(0, 10, [64])?;
    let mlp = Sequential::new()
        .add(Linear::new(784, 128, true)?)
        .add(ReLU)
        .add(Linear::new(128, 10, true)?);
    step(
        "MLP 784-128-10, B=64",
        &mlp,
        &Tensor::rand([64, 784], DType::F32)?,
        &y,
    )?;
    let c = Conv2dConfig::default();
    let cnn = Sequential::new()
        .add(Conv2d::new(1, 8, 3, c)?)
        .add(ReLU)
        .add(MaxPool2d::new(2))
        .add(Conv2d::new(8, 16, 3, c)?)
        .add(ReLU)
        .add(MaxPool2d::new(2))
        .add(Flatten::default())
        .add(Linear::new(400, 10, true)?);
    step(
        "CNN conv8-pool-conv16-pool-fc, B=64",
        &cnn,
        &Tensor::rand([64, 1, 28, 28], DType::F32)?,
        &y,
    )?;
    Ok(())
}
