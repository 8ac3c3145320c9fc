//! Micro-benchmarks of the core kernels (run: `cargo bench -p might --bench core`).
//! Prints GFLOP/s for matmul and GB/s for elementwise ops and reductions; the
//! side-by-side comparison with PyTorch lives in `bench/`.
//!
//! A plain harness (no framework) keeps the dev build lean: each case runs a warm-up and then
//! enough repetitions for ~0.3 s, and reports the median.

use might::{DType, Tensor};
use std::time::{Duration, Instant};

fn median_secs(mut f: impl FnMut()) -> f64 {
    f();
    let start = Instant::now();
    let mut times = vec![];
    while start.elapsed() < Duration::from_millis(300) || times.len() < 5 {
        let t = Instant::now();
        f();
        times.push(t.elapsed().as_secs_f64());
        if times.len() >= 200 {
            break;
        }
    }
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    times[times.len() / 2]
}

fn main() {
    let filter = std::env::args().nth(1).filter(|a| !a.starts_with('-'));
    let want = |name: &str| filter.as_deref().is_none_or(|f| name.contains(f));
    println!("threads: {}", might::get_num_threads());
    for (m, k, n) in [
        (256, 256, 256),
        (512, 512, 512),
        (1024, 1024, 1024),
        (2048, 2048, 2048),
        (64, 784, 128),
        (4096, 768, 3072),
    ] {
        let name = format!("matmul {m}x{k}x{n}");
        if !want(&name) {
            continue;
        }
        let a = Tensor::randn([m, k], DType::F32).unwrap();
        let b = Tensor::randn([k, n], DType::F32).unwrap();
        let s = median_secs(|| {
            a.matmul(&b).unwrap();
        });
        println!(
            "{name:<28} {:8.1} GFLOP/s",
            2.0 * (m * k * n) as f64 / s / 1e9
        );
    }
    for n in [1usize << 20, 1 << 24] {
        let a = Tensor::randn([n], DType::F32).unwrap();
        let b = Tensor::randn([n], DType::F32).unwrap();
        let tag = if n == 1 << 20 { "1M" } else { "16M" };
        let gbs = |bytes: usize, s: f64| bytes as f64 / s / 1e9;
        type Case<'a> = (&'static str, usize, Box<dyn Fn() + 'a>);
        let cases: Vec<Case> = vec![
            (
                "add",
                3,
                Box::new(|| {
                    a.add(&b).unwrap();
                }),
            ),
            (
                "relu",
                2,
                Box::new(|| {
                    a.relu().unwrap();
                }),
            ),
            (
                "exp",
                2,
                Box::new(|| {
                    a.exp().unwrap();
                }),
            ),
            (
                "gelu",
                2,
                Box::new(|| {
                    a.gelu().unwrap();
                }),
            ),
            (
                "sum",
                1,
                Box::new(|| {
                    a.sum_all().unwrap();
                }),
            ),
            (
                "softmax(rows of 1024)",
                2,
                Box::new(|| {
                    a.reshape([n / 1024, 1024]).unwrap().softmax(-1).unwrap();
                }),
            ),
        ];
        for (name, passes, f) in cases {
            let full = format!("{name} {tag}");
            if !want(&full) {
                continue;
            }
            let s = median_secs(f);
            println!("{full:<28} {:8.1} GB/s", gbs(passes * n * 4, s));
        }
    }
}
