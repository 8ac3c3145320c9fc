//! `might bench kernels`: throughput of the kernels `bench/compare.sh` measures against
//! PyTorch (sgemm in GFLOP/s; elementwise, reductions and softmax in GB/s), with the same
//! shapes, sizes and byte-counting convention as `bench/torch/kernels.py`.

use std::time::Instant;

use might::{DType, Result, Tensor};

/// `(m, k, n)` of `C[m, n] = A[m, k] · B[k, n]`.
pub const SGEMM_SHAPES: [(usize, usize, usize); 6] = [
    (256, 256, 256),
    (512, 512, 512),
    (1024, 1024, 1024),
    (2048, 2048, 2048),
    (64, 784, 128),
    (4096, 768, 3072),
];
pub const SIZES: [usize; 2] = [1 << 20, 1 << 24];

/// Bytes moved per element (read + written once each, STREAM convention).
fn bytes_per_elem(op: &str) -> usize {
    match op {
        "add" => 12,
        "sum" => 4,
        _ => 8,
    }
}

/// Median seconds per call: `reps` samples, each averaging enough back-to-back calls to last
/// at least `min_time` seconds (so fast kernels are not timer-bound).
fn time_it(mut f: impl FnMut() -> Result<()>, reps: usize, min_time: f64) -> Result<f64> {
    f()?;
    f()?;
    let t0 = Instant::now();
    f()?;
    let one = t0.elapsed().as_secs_f64().max(1e-9);
    let inner = ((min_time / one).ceil() as usize).clamp(1, 100_000);
    let mut samples = Vec::with_capacity(reps);
    for _ in 0..reps.max(1) {
        let t0 = Instant::now();
        for _ in 0..inner {
            f()?;
        }
        samples.push(t0.elapsed().as_secs_f64() / inner as f64);
    }
    samples.sort_by(f64::total_cmp);
    Ok(samples[samples.len() / 2])
}

/// One measured case, printed as a JSON object.
struct Case {
    kind: &'static str,
    name: String,
    seconds: f64,
    /// GFLOP/s for sgemm, GB/s otherwise.
    rate: f64,
}

pub fn kernels(threads: Option<usize>, reps: usize, min_time: f64, json: bool) -> Result<()> {
    if let Some(t) = threads {
        might::set_num_threads(t);
    }
    might::manual_seed(0);
    let mut cases = Vec::new();
    for (m, k, n) in SGEMM_SHAPES {
        let a = Tensor::randn([m, k], DType::F32)?;
        let b = Tensor::randn([k, n], DType::F32)?;
        let s = time_it(|| a.matmul(&b).map(drop), reps, min_time)?;
        cases.push(Case {
            kind: "sgemm",
            name: format!("{m}x{k}x{n}"),
            seconds: s,
            rate: 2.0 * (m * k * n) as f64 / s / 1e9,
        });
    }
    for n in SIZES {
        let a = Tensor::randn([n], DType::F32)?;
        let b = Tensor::randn([n], DType::F32)?;
        // Softmax over rows of 1024, the shape of attention and classifier logits.
        let rows = a.reshape([n / 1024, 1024])?;
        type Op<'a> = (&'static str, Box<dyn Fn() -> Result<Tensor> + 'a>);
        let ops: Vec<Op> = vec![
            ("add", Box::new(|| a.add(&b))),
            ("relu", Box::new(|| a.relu())),
            ("exp", Box::new(|| a.exp())),
            ("gelu", Box::new(|| a.gelu())),
            ("sum", Box::new(|| a.sum_all())),
            ("softmax", Box::new(|| rows.softmax(-1))),
        ];
        for (op, f) in &ops {
            let s = time_it(|| f().map(drop), reps, min_time)?;
            cases.push(Case {
                kind: "elementwise",
                name: format!("{op}@{}M", n >> 20),
                seconds: s,
                rate: (bytes_per_elem(op) * n) as f64 / s / 1e9,
            });
        }
    }
    let threads = might::get_num_threads();
    if json {
        let items: Vec<String> = cases
            .iter()
            .map(|c| {
                format!(
                    "{{\"kind\":\"{}\",\"name\":\"{}\",\"seconds\":{:e},\"rate\":{:.4}}}",
                    c.kind, c.name, c.seconds, c.rate
                )
            })
            .collect();
        println!(
            "{{\"bench\":\"kernels\",\"lib\":\"might\",\"threads\":{threads},\"results\":[{}]}}",
            items.join(",")
        );
    } else {
        println!("might kernels, {threads} thread(s)");
        for c in &cases {
            let unit = if c.kind == "sgemm" { "GFLOP/s" } else { "GB/s" };
            println!(
                "  {:<18} {:>10.3} ms  {:>8.2} {unit}",
                c.name,
                c.seconds * 1e3,
                c.rate
            );
        }
    }
    Ok(())
}

/// `might bench matmul`: f32 `n×n` products on one device, GFLOP/s per size as JSON lines.
/// On a GPU each sample queues `inner` products and waits for them (`Device::synchronize`),
/// so the figure is the device's throughput, not the launch latency of one call.
pub fn matmul(
    device: &str,
    sizes: &[usize],
    reps: usize,
) -> std::result::Result<(), crate::train::CliError> {
    let dev = crate::meter::parse_device(device)?;
    might::manual_seed(0);
    for &n in sizes {
        let a = Tensor::randn([n, n], DType::F32)?.to_device(dev)?;
        let b = Tensor::randn([n, n], DType::F32)?.to_device(dev)?;
        // warm-up: compiles the kernel and fills the buffer cache
        a.matmul(&b)?;
        dev.synchronize()?;
        let t0 = Instant::now();
        a.matmul(&b)?;
        dev.synchronize()?;
        let one = t0.elapsed().as_secs_f64().max(1e-9);
        let inner = ((0.2 / one).ceil() as usize).clamp(1, 1000);
        let mut samples = Vec::new();
        for _ in 0..reps.max(1) {
            let t0 = Instant::now();
            for _ in 0..inner {
                a.matmul(&b)?;
            }
            dev.synchronize()?;
            samples.push(t0.elapsed().as_secs_f64() / inner as f64);
        }
        samples.sort_by(f64::total_cmp);
        let s = samples[samples.len() / 2];
        println!(
            "{{\"bench\":\"matmul\",\"n\":{n},\"seconds\":{s:.6e},\"gflops\":{:.1},{}}}",
            2.0 * (n as f64).powi(3) / s / 1e9,
            crate::meter::json_fields(dev)
        );
    }
    Ok(())
}
