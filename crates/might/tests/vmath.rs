//! The vectorised f32 activations and softmax kernels, through the public API: the contiguous
//! fast path (AVX2-dispatched where the CPU has it) must agree bit for bit with the strided
//! path (a plain loop), and the f32 results must match an f64 computation closely.

use might::{DType, Result, Tensor};

/// `[rows, cols]` of normal samples spread over several scales, plus special values.
fn data(rows: usize, cols: usize) -> Result<Tensor> {
    might::manual_seed(11);
    let mut v = Tensor::randn([rows * cols], DType::F32)?.to_vec::<f32>()?;
    for (i, x) in v.iter_mut().enumerate() {
        *x *= [0.3, 2.0, 9.0, 40.0][i % 4];
    }
    let special = [
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        1e-30,
        -1e-30,
        88.8,
        -104.0,
    ];
    v[..special.len()].copy_from_slice(&special);
    Tensor::from_vec(v, [rows, cols])
}

fn same_bits(a: &Tensor, b: &Tensor, what: &str) -> Result<()> {
    let (a, b) = (
        a.contiguous()?.to_vec::<f32>()?,
        b.contiguous()?.to_vec::<f32>()?,
    );
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!(
            x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
            "{what}[{i}]: {x:e} vs {y:e}"
        );
    }
    Ok(())
}

type Op = fn(&Tensor) -> Result<Tensor>;

const OPS: [(&str, Op); 8] = [
    ("exp", |t| t.exp()),
    ("sigmoid", |t| t.sigmoid()),
    ("tanh", |t| t.tanh()),
    ("gelu", |t| t.gelu()),
    ("gelu_tanh", |t| t.gelu_tanh()),
    ("silu", |t| t.silu()),
    ("softplus", |t| t.softplus()),
    ("erf", |t| t.erf()),
];

#[test]
fn contiguous_and_strided_paths_agree_bitwise() -> Result<()> {
    // x.t() is not contiguous: it runs the strided row loop, never the dispatched one
    let x = data(300, 257)?;
    let xt = x.t()?;
    let xtc = xt.contiguous()?;
    for (name, f) in OPS {
        same_bits(&f(&xt)?, &f(&xtc)?, name)?;
    }
    // binary kernels (the backward passes) the same way
    let g = data(257, 300)?.mul_scalar(0.5)?;
    for (name, f) in OPS {
        let a = xt.detach().with_requires_grad();
        f(&a)?.backward_with_grad(&g)?;
        let b = xtc.detach().with_requires_grad();
        f(&b)?.backward_with_grad(&g)?;
        same_bits(&a.grad().unwrap(), &b.grad().unwrap(), name)?;
    }
    Ok(())
}

#[test]
fn f32_activations_match_f64() -> Result<()> {
    might::manual_seed(3);
    let x = Tensor::randn([20_000], DType::F32)?.mul_scalar(4.0)?;
    let x64 = x.to_dtype(DType::F64)?;
    for (name, f) in OPS {
        let (y, r) = (f(&x)?.to_vec::<f32>()?, f(&x64)?.to_vec::<f64>()?);
        let xs = x.to_vec::<f32>()?;
        for (i, (&a, &b)) in y.iter().zip(&r).enumerate() {
            // gelu_tanh's `1 + tanh(..)` cancels for x < 0 (in PyTorch too): absolute there
            let abs = if name == "gelu_tanh" {
                1e-6 * xs[i].abs() as f64
            } else {
                1e-37
            };
            let tol = 1e-6 * b.abs() + abs;
            assert!((a as f64 - b).abs() <= tol, "{name}[{i}]: {a:e} vs {b:e}");
        }
    }
    Ok(())
}

#[test]
fn half_types_compute_through_f32() -> Result<()> {
    let x = Tensor::linspace(-6.0, 6.0, 1001, DType::F32)?;
    for dt in [DType::F16, DType::BF16] {
        let xh = x.to_dtype(dt)?;
        for (name, f) in OPS {
            let want = f(&xh.to_dtype(DType::F32)?)?.to_dtype(dt)?;
            same_bits(
                &f(&xh)?.to_dtype(DType::F32)?,
                &want.to_dtype(DType::F32)?,
                name,
            )?;
        }
    }
    Ok(())
}

#[test]
fn softmax_kernels_match_f64() -> Result<()> {
    // rows of 1 (tail only), 7 (< one lane block), 1000 (blocks + tail), 4096
    for n in [1usize, 7, 1000, 4096] {
        might::manual_seed(n as u64);
        let x = Tensor::randn([8, n], DType::F32)?.mul_scalar(5.0)?;
        let x64 = x.to_dtype(DType::F64)?;
        for log in [false, true] {
            let sm = |t: &Tensor| {
                if log {
                    t.log_softmax(-1)
                } else {
                    t.softmax(-1)
                }
            };
            let a = x.detach().with_requires_grad();
            let b = x64.detach().with_requires_grad();
            let (ya, yb) = (sm(&a)?, sm(&b)?);
            let g = Tensor::randn([8, n], DType::F32)?;
            ya.backward_with_grad(&g)?;
            yb.backward_with_grad(&g.to_dtype(DType::F64)?)?;
            let close = |p: Vec<f32>, q: Vec<f64>, what: &str| {
                let scale = q.iter().fold(0f64, |m, v| m.max(v.abs()));
                for (i, (&u, &v)) in p.iter().zip(&q).enumerate() {
                    let tol = 2e-6 * v.abs() + 1e-6 * scale;
                    assert!(
                        (u as f64 - v).abs() <= tol,
                        "{what} n={n} [{i}]: {u:e} vs {v:e}"
                    );
                }
            };
            close(ya.to_vec()?, yb.to_vec()?, "forward");
            close(
                a.grad().unwrap().to_vec()?,
                b.grad().unwrap().to_vec()?,
                "backward",
            );
        }
        // causal_softmax has the same structure: compare it too
        let t = x.reshape([2, 4, n])?;
        let (c32, c64) = (
            might::nn::causal_softmax(&t, 0.5, n.saturating_sub(4))?,
            might::nn::causal_softmax(&t.to_dtype(DType::F64)?, 0.5, n.saturating_sub(4))?,
        );
        for (&u, &v) in c32.to_vec::<f32>()?.iter().zip(&c64.to_vec::<f64>()?) {
            assert!(
                (u as f64 - v).abs() <= 2e-6 * v.abs() + 1e-9,
                "causal n={n}: {u:e} vs {v:e}"
            );
        }
    }
    Ok(())
}

/// While training, GELU keeps the derivative computed in its forward pass (no `x`): the
/// output must be bit for bit the inference one, and the gradient that of the f64 GELU.
#[test]
fn gelu_training_path_matches_inference_and_f64_gradient() -> Result<()> {
    might::manual_seed(5);
    for threads in [1, 2] {
        might::set_num_threads(threads);
        // above the threading threshold, with values out into both tails
        let x = Tensor::randn([70_001], DType::F32)?.mul_scalar(5.0)?;
        let g = Tensor::randn([70_001], DType::F32)?;
        let inference = {
            let _ng = might::no_grad();
            x.gelu()?
        };
        let xr = x.detach().with_requires_grad();
        let y = xr.gelu()?;
        same_bits(&y, &inference, "gelu (training)")?;
        y.backward_with_grad(&g)?;
        let got = xr.grad().unwrap().to_vec::<f32>()?;
        // reference: g · a central difference of the f64 inference GELU (error ~1e-10)
        let want = {
            let _ng = might::no_grad();
            let (x64, h) = (x.to_dtype(DType::F64)?, 1e-5);
            let slope = x64
                .add_scalar(h)?
                .gelu()?
                .sub(&x64.sub_scalar(h)?.gelu()?)?
                .div_scalar(2.0 * h)?;
            slope.mul(&g.to_dtype(DType::F64)?)?.to_vec::<f64>()?
        };
        let (xs, gs) = (x.to_vec::<f32>()?, g.to_vec::<f32>()?);
        for i in 0..got.len() {
            // ≤ 5 ulp of the derivative's larger term (≤ 1.1 here) times |g|, plus the product
            let tol = 2e-6 * gs[i].abs() as f64 + 1e-6 * want[i].abs();
            assert!(
                (got[i] as f64 - want[i]).abs() <= tol,
                "gelu grad at x = {:e}: {:e} vs {:e}",
                xs[i],
                got[i],
                want[i]
            );
        }
    }
    might::set_num_threads(1);
    Ok(())
}
