//! Times each distinct convolution of ResNet-18 at batch 1 (inference, fused bias + ReLU), one
//! thread: GFLOP/s per layer and the whole network's conv time (each layer weighted by how
//! often ResNet-18 runs it). Each figure is the fastest of `reps` single runs, which a busy
//! machine disturbs less than a mean.
//!
//! `cargo run --release -p might --example resnet_convs -- [reps]`

use might::{DType, Result, Tensor};

fn main() -> Result<()> {
    let reps: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    might::set_num_threads(1);
    // (name, count in the network, C, O, H=W in, kernel, stride, padding)
    let layers = [
        ("conv1 7x7/2", 1, 3, 64, 224, 7, 2, 3),
        ("l1 3x3 64", 4, 64, 64, 56, 3, 1, 1),
        ("l2 3x3/2 64-128", 1, 64, 128, 56, 3, 2, 1),
        ("l2 3x3 128", 3, 128, 128, 28, 3, 1, 1),
        ("l2 ds 1x1/2", 1, 64, 128, 56, 1, 2, 0),
        ("l3 3x3/2 128-256", 1, 128, 256, 28, 3, 2, 1),
        ("l3 3x3 256", 3, 256, 256, 14, 3, 1, 1),
        ("l3 ds 1x1/2", 1, 128, 256, 28, 1, 2, 0),
        ("l4 3x3/2 256-512", 1, 256, 512, 14, 3, 2, 1),
        ("l4 3x3 512", 3, 512, 512, 7, 3, 1, 1),
        ("l4 ds 1x1/2", 1, 256, 512, 14, 1, 2, 0),
    ];
    let mut total = 0.0;
    for (name, count, c, o, h, k, s, p) in layers {
        let x = Tensor::randn([1, c, h, h], DType::F32)?;
        let w = Tensor::randn([o, c, k, k], DType::F32)?;
        let b = Tensor::randn([o], DType::F32)?;
        let oh = (h + 2 * p - k) / s + 1;
        let flops = 2.0 * (o * oh * oh * c * k * k) as f64;
        let f = || x.conv2d_relu(&w, Some(&b), [s, s], [p, p], [1, 1], 1);
        f()?;
        let mut best = f64::MAX;
        for _ in 0..reps {
            let t = std::time::Instant::now();
            f()?;
            best = best.min(t.elapsed().as_secs_f64() * 1e3);
        }
        total += best * count as f64;
        println!(
            "{name:<18} x{count}  {best:7.3} ms  {:6.1} GFLOP/s",
            flops / best / 1e6
        );
    }
    println!("all convs of ResNet-18: {total:.2} ms");
    // the stem's max pool, 3x3 stride 2 padding 1 on the 112x112 maps
    let x = Tensor::randn([1, 64, 112, 112], DType::F32)?;
    let mut best = f64::MAX;
    for _ in 0..reps {
        let t = std::time::Instant::now();
        x.max_pool2d([3, 3], [2, 2], [1, 1])?;
        best = best.min(t.elapsed().as_secs_f64() * 1e3);
    }
    println!("stem max pool 3x3/2: {best:.3} ms");
    let mut best = f64::MAX;
    for _ in 0..reps {
        let t = std::time::Instant::now();
        x.max_pool2d_with_indices([3, 3], [2, 2], [1, 1])?;
        best = best.min(t.elapsed().as_secs_f64() * 1e3);
    }
    println!("stem max pool 3x3/2 with indices (training): {best:.3} ms");
    Ok(())
}
