//! `set_float32_matmul_precision`: the default multiplies in f32; `medium` rounds the operands
//! of f32 products to bfloat16 and sums in f32 where the CPU has AVX512-BF16 (and is exactly
//! the default elsewhere). A process-wide setting, so each test takes the lock and restores it.

use might::internals::bgemm::{available, round_bf16};
use might::nn::{Linear, Module};
use might::{DType, MatmulPrecision, Result, Tensor};
use std::sync::{Mutex, MutexGuard};

static LOCK: Mutex<()> = Mutex::new(());

/// Holds the lock; puts back the default precision and thread count when dropped.
struct Setting(#[allow(dead_code)] MutexGuard<'static, ()>, usize);

fn setting() -> Setting {
    Setting(
        LOCK.lock().unwrap_or_else(|e| e.into_inner()),
        might::get_num_threads(),
    )
}

impl Drop for Setting {
    fn drop(&mut self) {
        might::set_float32_matmul_precision(MatmulPrecision::Highest);
        might::set_num_threads(self.1);
    }
}

fn bf16(x: f32) -> f64 {
    f32::from_bits((round_bf16(x) as u32) << 16) as f64
}

/// Values with all 24 mantissa bits in use, in [-1, 1).
fn values(len: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2_654_435_761) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

/// Largest `|got - want| / (sum of |terms| + 1)` over `[m, n]`, where `want` sums `a[i, p] *
/// b[p, j]` in f64 after `round` of each operand.
fn worst(
    got: &[f32],
    a: &[f32],
    b: &[f32],
    (m, n, k): (usize, usize, usize),
    round: fn(f32) -> f64,
) -> f64 {
    let mut w = 0.0f64;
    for i in 0..m {
        for j in 0..n {
            let (mut s, mut mag) = (0.0, 0.0);
            for p in 0..k {
                let t = round(a[i * k + p]) * round(b[p * n + j]);
                (s, mag) = (s + t, mag + t.abs());
            }
            w = w.max((got[i * n + j] as f64 - s).abs() / (mag + 1.0));
        }
    }
    w
}

#[test]
fn names_follow_pytorch_and_the_default_is_highest() {
    let _s = setting();
    assert_eq!(
        might::get_float32_matmul_precision(),
        MatmulPrecision::Highest
    );
    for (name, p) in [
        ("highest", MatmulPrecision::Highest),
        ("high", MatmulPrecision::High),
        ("medium", MatmulPrecision::Medium),
    ] {
        assert_eq!(name.parse::<MatmulPrecision>().unwrap(), p);
        assert_eq!(p.to_string(), name);
        might::set_float32_matmul_precision(p);
        assert_eq!(might::get_float32_matmul_precision(), p);
    }
    let e = "low".parse::<MatmulPrecision>().unwrap_err().to_string();
    assert!(
        e.contains("set_float32_matmul_precision") && e.contains("low"),
        "{e}"
    );
}

/// A plain product and the linear-layer layout `x @ Wᵀ`, on one thread and two: `medium`
/// gives the f32 sum of the bf16-rounded operands, `highest` (and `high`) that of the f32
/// ones, and the two differ by bf16's rounding.
#[test]
fn medium_rounds_the_operands_of_f32_products() -> Result<()> {
    let _s = setting();
    // (100, 48, 64) on two threads: one block of rows is 36 x 48 x 64, too small to round
    // on its own, but the product is rounded as a whole
    for (m, n, k) in [(70, 130, 300), (100, 48, 64)] {
        let (av, bv) = (values(m * k, 1), values(k * n, 2));
        let a = Tensor::from_vec(av.clone(), [m, k])?;
        let b = Tensor::from_vec(bv.clone(), [k, n])?;
        // the same `b` as the transpose of a row-major [n, k] weight
        let bt = b.t()?.contiguous()?.t()?;
        let exact = |x: f32| x as f64;
        for threads in [1, 2] {
            might::set_num_threads(threads);
            for rhs in [&b, &bt] {
                let mut got = Vec::new();
                for p in [
                    MatmulPrecision::Highest,
                    MatmulPrecision::High,
                    MatmulPrecision::Medium,
                ] {
                    might::set_float32_matmul_precision(p);
                    got.push(a.matmul(rhs)?.to_vec::<f32>()?);
                }
                let size = (m, n, k);
                assert!(worst(&got[0], &av, &bv, size, exact) < 1e-6);
                assert_eq!(got[0], got[1], "high multiplies in f32 on CPUs");
                if available() {
                    assert!(
                        worst(&got[2], &av, &bv, size, bf16) < 1e-6,
                        "{size:?} {threads}T"
                    );
                    assert!(worst(&got[2], &av, &bv, size, exact) > 1e-4, "not rounded");
                } else {
                    assert_eq!(got[0], got[2], "no AVX512-BF16: medium multiplies in f32");
                }
            }
        }
    }
    Ok(())
}

/// Products too small to gain from rounding (a short inner dimension, a few output columns,
/// little work) stay in f32 even at `medium`.
#[test]
fn small_products_stay_f32_at_medium() -> Result<()> {
    let _s = setting();
    for (m, k, n) in [(8, 16, 8), (256, 128, 10), (256, 16, 256), (32, 32, 32)] {
        let a = Tensor::from_vec(values(m * k, 3), [m, k])?;
        let b = Tensor::from_vec(values(k * n, 4), [k, n])?;
        might::set_float32_matmul_precision(MatmulPrecision::Highest);
        let want = a.matmul(&b)?.to_vec::<f32>()?;
        might::set_float32_matmul_precision(MatmulPrecision::Medium);
        assert_eq!(a.matmul(&b)?.to_vec::<f32>()?, want, "{m}x{k}x{n}");
    }
    Ok(())
}

/// A linear layer's forward and all three gradients at `medium` stay within bf16's rounding
/// of the f32 ones (and, on CPUs with the instructions, are not the f32 ones).
#[test]
fn linear_layer_trains_at_medium() -> Result<()> {
    let _s = setting();
    might::manual_seed(7);
    let layer = Linear::new(96, 80, true).unwrap();
    let x = Tensor::randn([64, 96], DType::F32)?;
    let run = |p: MatmulPrecision| -> Result<Vec<Vec<f32>>> {
        might::set_float32_matmul_precision(p);
        let x = x.detach().requires_grad_(true).clone();
        for t in [&layer.weight, layer.bias.as_ref().unwrap()] {
            t.zero_grad();
        }
        let y = layer.forward(&x)?;
        // a loss whose gradient differs per output: sum(y * y) / 2
        y.mul(&y)?.sum_all()?.mul_scalar(0.5)?.backward()?;
        Ok(vec![
            y.to_vec()?,
            x.grad().unwrap().to_vec()?,
            layer.weight.grad().unwrap().to_vec()?,
            layer.bias.as_ref().unwrap().grad().unwrap().to_vec()?,
        ])
    };
    let f32s = run(MatmulPrecision::Highest)?;
    let bf16s = run(MatmulPrecision::Medium)?;
    if available() {
        // the forward exactly: bf16-rounded x @ Wᵀ, plus the bias once
        let (xv, wv) = (x.to_vec::<f32>()?, layer.weight.to_vec::<f32>()?);
        let wt: Vec<f32> = (0..96 * 80).map(|i| wv[(i % 80) * 96 + i / 80]).collect();
        let bias = layer.bias.as_ref().unwrap().to_vec::<f32>()?;
        let y: Vec<f32> = bf16s[0]
            .iter()
            .enumerate()
            .map(|(i, v)| v - bias[i % 80])
            .collect();
        assert!(worst(&y, &xv, &wt, (64, 80, 96), bf16) < 1e-6);
    }
    let mut differs = false;
    for (name, (a, b)) in ["output", "input grad", "weight grad", "bias grad"]
        .iter()
        .zip(f32s.iter().zip(&bf16s))
    {
        let scale = a.iter().fold(0f32, |s, v| s.max(v.abs()));
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() <= 2e-2 * scale, "{name}: {x} vs {y}");
            differs |= x != y;
        }
    }
    assert_eq!(differs, available());
    Ok(())
}
