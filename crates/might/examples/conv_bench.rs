//! Times forward + backward of two small CNNs on random MNIST-shaped batches (batch 64):
//! `small` is the issue-7 model (conv 1→8, pool, conv 8→16, pool, linear 400→10) and `cli` the
//! CLI's MNIST CNN (conv 1→32, pool, conv 32→64, pool, linear 3136→128→10).
//!
//! `cargo run --release -p might --example conv_bench -- [threads] [steps]`

use might::{DType, Result, Tensor};
use std::time::Instant;

fn param(shape: &[usize], fan_in: usize) -> Result<Tensor> {
    let b = 1.0 / (fan_in as f64).sqrt();
    Ok(Tensor::uniform(shape, -b, b, DType::F32)?.with_requires_grad())
}

/// `relu(conv2d(..))`, fused (what `nn::Sequential` runs for a `Conv2d` then a `ReLU`).
fn conv_relu(x: &Tensor, w: &Tensor, b: &Tensor, pad: usize) -> Result<Tensor> {
    x.conv2d_relu(w, Some(b), [1, 1], [pad, pad], [1, 1], 1)
}

fn pool(x: &Tensor) -> Result<Tensor> {
    x.max_pool2d([2, 2], [2, 2], [0, 0])
}

fn lin(x: &Tensor, w: &Tensor, b: &Tensor) -> Result<Tensor> {
    x.matmul(&w.t()?)?.add(b)
}

fn run(
    name: &str,
    params: &[Tensor],
    f: &dyn Fn(&Tensor) -> Result<Tensor>,
    steps: usize,
) -> Result<()> {
    let x = Tensor::rand([64, 1, 28, 28], DType::F32)?;
    let y = Tensor::rand_int(0, 10, [64])?;
    let step = || -> Result<()> {
        for p in params {
            p.zero_grad();
        }
        let logits = f(&x)?;
        let loss = logits
            .log_softmax(-1)?
            .gather(1, &y.unsqueeze(1)?)?
            .mean_all()?
            .neg()?;
        loss.backward()?;
        Ok(())
    };
    for _ in 0..5 {
        step()?;
    }
    let t0 = Instant::now();
    for _ in 0..steps {
        step()?;
    }
    let s = t0.elapsed().as_secs_f64();
    println!(
        "{name}: {:.2} ms/step, {:.0} samples/s, epoch (937 steps) {:.2} s",
        s / steps as f64 * 1e3,
        (steps * 64) as f64 / s,
        s / steps as f64 * 937.0
    );
    Ok(())
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let threads: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1);
    let steps: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(100);
    let which = args.get(3).cloned().unwrap_or_else(|| "both".into());
    might::set_num_threads(threads);
    might::manual_seed(0);
    println!("threads {threads}");
    if which != "cli" {
        let (w1, b1) = (param(&[8, 1, 3, 3], 9)?, param(&[8], 9)?);
        let (w2, b2) = (param(&[16, 8, 3, 3], 72)?, param(&[16], 72)?);
        let (w3, b3) = (param(&[10, 400], 400)?, param(&[10], 400)?);
        let ps = [
            w1.clone(),
            b1.clone(),
            w2.clone(),
            b2.clone(),
            w3.clone(),
            b3.clone(),
        ];
        run(
            "small",
            &ps,
            &|x| {
                let x = pool(&conv_relu(x, &w1, &b1, 0)?)?;
                let x = pool(&conv_relu(&x, &w2, &b2, 0)?)?;
                lin(&x.flatten(1, -1)?, &w3, &b3)
            },
            steps,
        )?;
    }
    if which != "small" {
        let (w1, b1) = (param(&[32, 1, 3, 3], 9)?, param(&[32], 9)?);
        let (w2, b2) = (param(&[64, 32, 3, 3], 288)?, param(&[64], 288)?);
        let (w3, b3) = (param(&[128, 3136], 3136)?, param(&[128], 3136)?);
        let (w4, b4) = (param(&[10, 128], 128)?, param(&[10], 128)?);
        let ps = [
            w1.clone(),
            b1.clone(),
            w2.clone(),
            b2.clone(),
            w3.clone(),
            b3.clone(),
            w4.clone(),
            b4.clone(),
        ];
        run(
            "cli",
            &ps,
            &|x| {
                let x = pool(&conv_relu(x, &w1, &b1, 1)?)?;
                let x = pool(&conv_relu(&x, &w2, &b2, 1)?)?;
                let x = lin(&x.flatten(1, -1)?, &w3, &b3)?.relu()?;
                lin(&x, &w4, &b4)
            },
            steps / 4,
        )?;
    }
    Ok(())
}
