//! Layers of `might::nn`: hand-computed values, gradient checks (inputs and parameters, in
//! f64), naming, training-mode behaviour, and an end-to-end XOR fit.

use might::autograd::{gradcheck, GradCheck};
use might::nn::functional::{layer_norm, scaled_dot_product_attention};
use might::nn::init::{self, FanMode, Nonlinearity};
use might::nn::{
    prefixed, BatchNorm1d, BatchNorm2d, Embedding, Flatten, LayerNorm, Linear, MhaConfig, Module,
    MultiheadAttention, RMSNorm, ReLU, Sequential, SiLU, Sigmoid, Softmax, Tanh, GELU,
};
use might::{manual_seed, no_grad, DType, ErrorKind, Result, Tensor};
use std::sync::{Mutex, MutexGuard};

/// Seed the global generator and hold it for the rest of the test: tests run in parallel and
/// share the generator, so another test's draws would otherwise change this one's weights.
fn seeded(seed: u64) -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    let guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    manual_seed(seed);
    guard
}

fn t64(v: &[f64], s: &[usize]) -> Tensor {
    Tensor::from_slice(v, s).unwrap()
}

fn close(a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= tol * (1.0 + y.abs()),
            "elem {i}: {x} vs {y}"
        );
    }
}

fn gc() -> GradCheck {
    GradCheck::default()
}

#[test]
fn linear_hand_computed_and_shape_error() -> Result<()> {
    let _seed = seeded(0); // draws from the shared generator
    let l = Linear::from_weights(
        t64(&[1., 2., 3., 4., 5., 6.], &[3, 2]),
        Some(t64(&[1., 0., -1.], &[3])),
    )?;
    let y = l.forward(&t64(&[1., 1., 2., -1.], &[2, 2]))?;
    assert_eq!(y.dims(), &[2, 3]);
    assert_eq!(y.to_vec::<f64>()?, vec![4., 7., 10., 1., 2., 3.]);
    let e = l.forward(&t64(&[1., 2., 3.], &[1, 3])).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Shape);
    assert!(e.to_string().contains("[1, 3]"), "{e}");
    Ok(())
}

#[test]
fn linear_default_init_is_uniform_within_one_over_sqrt_fan_in() -> Result<()> {
    let _seed = seeded(3);
    let l = Linear::new(16, 32, true).unwrap();
    assert_eq!(l.weight.dims(), &[32, 16]);
    assert_eq!(l.weight.dtype(), DType::F32);
    assert!(l.weight.requires_grad() && l.weight.is_leaf());
    let w = l.weight.to_f64_vec();
    assert!(w.iter().all(|v| v.abs() <= 0.25));
    // a U(-0.25, 0.25) sample of 512 has max |w| close to 0.25 and mean near 0
    assert!(w.iter().fold(0f64, |a, b| a.max(b.abs())) > 0.24);
    assert!((w.iter().sum::<f64>() / 512.0).abs() < 0.03);
    let b = l.bias.as_ref().unwrap().to_f64_vec();
    assert!(b.iter().all(|v| v.abs() <= 0.25) && b.iter().any(|&v| v != b[0]));
    Ok(())
}

#[test]
fn linear_gradcheck_input_weight_bias() -> Result<()> {
    let _seed = seeded(1);
    let x = Tensor::randn([3, 4], DType::F64)?;
    let w = Tensor::randn([2, 4], DType::F64)?;
    let b = Tensor::randn([2], DType::F64)?;
    gradcheck(
        |i| Linear::from_weights(i[1].clone(), Some(i[2].clone()))?.forward(&i[0]),
        &[x, w, b],
        gc(),
    )
}

/// The bias goes into the product (`AddmmBackward`): same output and gradients as
/// `matmul` + `add` on every product path: the AVX-512 dot kernel (MNIST layer, 1 and 2
/// threads), the transposed small-batch product, the inner-dim split at 2 threads, batched
/// rows, f64, and a bias that is a strided view (a slice of a longer vector).
#[test]
fn linear_adds_the_bias_inside_the_product() -> Result<()> {
    let _seed = seeded(2);
    let cases: &[(&[usize], usize, DType, usize)] = &[
        (&[64, 784], 128, DType::F32, 1),
        (&[64, 784], 128, DType::F32, 2),
        (&[5, 7], 300, DType::F32, 1),
        (&[200, 600], 90, DType::F32, 2),
        (&[2, 33, 40], 24, DType::F32, 2),
        (&[3, 5], 4, DType::F64, 1),
    ];
    let before = might::get_num_threads();
    for &(xs, n, dt, threads) in cases {
        might::set_num_threads(threads);
        let k = xs[xs.len() - 1];
        let x = Tensor::randn(xs.to_vec(), dt)?.with_requires_grad();
        let w = Tensor::randn([n, k], dt)?.with_requires_grad();
        let long = Tensor::randn([n + 3], dt)?.with_requires_grad();
        // (each graph narrows the bias itself: a backward frees the nodes it ran)
        let b = long.narrow(0, 2, n)?;
        let y = Linear::from_weights(w.clone(), Some(b))?.forward(&x)?;
        assert_eq!(y.grad_fn(), Some("AddmmBackward"), "{xs:?} x {n}");
        let want = x.matmul(&w.t()?)?.add(&long.narrow(0, 2, n)?)?;
        let tol = if dt == DType::F32 { 1e-4 } else { 1e-12 };
        let scale = want.to_f64_vec().iter().fold(1.0f64, |m, v| m.max(v.abs()));
        close(&y.to_f64_vec(), &want.to_f64_vec(), tol * scale);
        let g = Tensor::randn(y.shape().clone(), dt)?;
        let mut grads = Vec::new();
        for out in [&y, &want] {
            for t in [&x, &w, &long] {
                t.zero_grad();
            }
            out.mul(&g)?.sum_all()?.backward()?;
            grads.push([&x, &w, &long].map(|t| t.grad().expect("grad").to_f64_vec()));
        }
        for (got, want) in grads[0].iter().zip(&grads[1]) {
            let s = want.iter().fold(1.0f64, |m, v| m.max(v.abs()));
            close(got, want, tol * s);
        }
    }
    might::set_num_threads(before);
    Ok(())
}

struct Mlp {
    fc1: Linear,
    fc2: Linear,
}

impl Module for Mlp {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.fc2.forward(&self.fc1.forward(x)?.tanh()?)
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        let mut v = prefixed("fc1", self.fc1.named_parameters());
        v.extend(prefixed("fc2", self.fc2.named_parameters()));
        v
    }
}

#[test]
fn parameter_names_follow_pytorch() -> Result<()> {
    let _seed = seeded(0); // draws from the shared generator
    let seq = Sequential::new()
        .add(Linear::new(4, 8, true).unwrap())
        .add(ReLU)
        .add(BatchNorm1d::new(8).unwrap())
        .add(Linear::new(8, 2, false).unwrap());
    let names: Vec<String> = seq.named_parameters().into_iter().map(|p| p.0).collect();
    assert_eq!(
        names,
        ["0.weight", "0.bias", "2.weight", "2.bias", "3.weight"]
    );
    assert_eq!(seq.num_parameters(), 4 * 8 + 8 + 8 + 8 + 16);
    let sd: Vec<String> = seq.state_dict().into_iter().map(|p| p.0).collect();
    assert_eq!(
        sd,
        [
            "0.weight",
            "0.bias",
            "2.weight",
            "2.bias",
            "2.running_mean",
            "2.running_var",
            "2.num_batches_tracked",
            "3.weight"
        ]
    );
    let nested = prefixed("layers", seq.named_parameters());
    assert_eq!(nested[0].0, "layers.0.weight");
    let mlp = Mlp {
        fc1: Linear::new(2, 3, true).unwrap(),
        fc2: Linear::new(3, 1, true).unwrap(),
    };
    let names: Vec<String> = mlp.named_parameters().into_iter().map(|p| p.0).collect();
    assert_eq!(names, ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]);
    // parameters share storage with the module: writing through them changes the module
    {
        let _g = no_grad();
        mlp.parameters()[1].fill_(0.5)?;
    }
    assert_eq!(
        mlp.fc1.bias.as_ref().unwrap().to_vec::<f32>()?,
        vec![0.5; 3]
    );
    let mha = MultiheadAttention::new(8, 2, MhaConfig::default())?;
    let names: Vec<String> = mha.named_parameters().into_iter().map(|p| p.0).collect();
    assert_eq!(
        names,
        [
            "in_proj_weight",
            "in_proj_bias",
            "out_proj.weight",
            "out_proj.bias"
        ]
    );
    Ok(())
}

#[test]
fn activation_modules_match_ops_and_gradcheck() -> Result<()> {
    let _seed = seeded(2);
    let x = Tensor::randn([2, 5], DType::F64)?;
    let mods: Vec<Box<dyn Module>> = vec![
        Box::new(GELU::new()),
        Box::new(GELU::tanh()),
        Box::new(SiLU),
        Box::new(Tanh),
        Box::new(Sigmoid),
        Box::new(Softmax::new(-1)),
        Box::new(Softmax::new(0)),
    ];
    for m in &mods {
        gradcheck(|i| m.forward(&i[0]), std::slice::from_ref(&x), gc())?;
    }
    let y = ReLU.forward(&t64(&[-1., 0.5, 2.], &[3]))?;
    assert_eq!(y.to_vec::<f64>()?, vec![0., 0.5, 2.]);
    let s = Softmax::new(-1).forward(&t64(&[0., 0.], &[1, 2]))?;
    assert_eq!(s.to_vec::<f64>()?, vec![0.5, 0.5]);
    Ok(())
}

#[test]
fn flatten_keeps_batch_dim() -> Result<()> {
    let _seed = seeded(0); // draws from the shared generator
    let x = Tensor::zeros([2, 3, 4, 5], DType::F32)?;
    assert_eq!(Flatten::new().forward(&x)?.dims(), &[2, 60]);
    assert_eq!(Flatten::with_dims(1, 2).forward(&x)?.dims(), &[2, 12, 5]);
    Ok(())
}

#[test]
fn embedding_lookup_and_grad() -> Result<()> {
    let _seed = seeded(0); // draws from the shared generator
    let w = t64(&[0., 1., 10., 11., 20., 21.], &[3, 2]);
    let e = Embedding::from_weight(w.clone())?;
    let ids = Tensor::from_vec(vec![2i64, 0, 2], [3])?;
    let y = e.forward(&ids.reshape([1, 3])?)?;
    assert_eq!(y.dims(), &[1, 3, 2]);
    assert_eq!(y.to_vec::<f64>()?, vec![20., 21., 0., 1., 20., 21.]);
    assert_eq!(
        e.forward(&w).unwrap_err().kind,
        ErrorKind::DType,
        "float ids are rejected"
    );
    assert!(e.forward(&Tensor::from_vec(vec![3i64], [1])?).is_err());
    gradcheck(
        |i| Embedding::from_weight(i[0].clone())?.forward(&ids),
        &[w],
        gc(),
    )?;
    let e = Embedding::new(5, 3).unwrap();
    assert_eq!(e.weight.dims(), &[5, 3]);
    // padding_idx: zero row, looked up as is, never gets a gradient
    let e = Embedding::with_padding_idx(4, 2, 1)?;
    assert_eq!(e.weight.to_vec::<f32>()?[2..4], [0.0, 0.0]);
    {
        let _g = no_grad();
        e.weight.select(0, 1)?.fill_(3.0)?;
    }
    let ids = Tensor::from_vec(vec![1i64, 2, 1], [3])?;
    let y = e.forward(&ids)?;
    assert_eq!(y.to_vec::<f32>()?[..2], [3.0, 3.0]);
    y.sum_all()?.backward()?;
    assert_eq!(
        e.weight.grad().unwrap().to_vec::<f32>()?,
        vec![0., 0., 0., 0., 1., 1., 0., 0.]
    );
    assert!(Embedding::with_padding_idx(4, 2, 4).is_err());
    Ok(())
}

#[test]
fn layer_norm_hand_values_and_gradcheck() -> Result<()> {
    let x = t64(&[1., 2., 3., -1., 0., 4.], &[2, 3]);
    let y = layer_norm(&x, &[3], None, None, 0.0)?.to_vec::<f64>()?;
    let k = (1.5f64).sqrt();
    close(&y[..3], &[-k, 0., k], 1e-12);
    // row 2: mean 1, var (4 + 1 + 9) / 3
    let s = (14.0f64 / 3.0).sqrt();
    close(&y[3..], &[-2. / s, -1. / s, 3. / s], 1e-12);
    let _seed = seeded(4);
    let x = Tensor::randn([3, 2, 4], DType::F64)?;
    let w = Tensor::randn([4], DType::F64)?;
    let b = Tensor::randn([4], DType::F64)?;
    gradcheck(
        |i| LayerNorm::from_weights(i[1].clone(), Some(i[2].clone()), 1e-5)?.forward(&i[0]),
        &[x.clone(), w, b],
        gc(),
    )?;
    let w2 = Tensor::randn([2, 4], DType::F64)?;
    gradcheck(
        |i| layer_norm(&i[0], &[2, 4], Some(&i[1]), None, 1e-5),
        &[x.clone(), w2],
        gc(),
    )?;
    // rows of 19: a full 16-lane chunk and a tail, without an affine weight (the kernel
    // multiplies by ones then), and with a bias only
    let x19 = Tensor::randn([2, 19], DType::F64)?;
    gradcheck(
        |i| layer_norm(&i[0], &[19], None, None, 1e-5),
        std::slice::from_ref(&x19),
        gc(),
    )?;
    let b19 = Tensor::randn([19], DType::F64)?;
    gradcheck(
        |i| layer_norm(&i[0], &[19], None, Some(&i[1]), 1e-5),
        &[x19, b19],
        gc(),
    )?;
    // rows of 40 (two 16-lane chunks and a tail of 8), f32 against the f64 kernel
    let x40 = Tensor::randn([5, 40], DType::F64)?;
    let (w40, b40) = (
        Tensor::randn([40], DType::F64)?,
        Tensor::randn([40], DType::F64)?,
    );
    let y64 = layer_norm(&x40, &[40], Some(&w40), Some(&b40), 1e-5)?;
    let f = |t: &Tensor| t.to_dtype(DType::F32);
    let y32 = layer_norm(&f(&x40)?, &[40], Some(&f(&w40)?), Some(&f(&b40)?), 1e-5)?;
    close(&y32.to_f64_vec(), &y64.to_vec::<f64>()?, 1e-5);
    // f32 kernel agrees with the f64 one; a non-contiguous input is fine
    let xt = x.transpose(0, 2)?;
    let ln = LayerNorm::new(3).unwrap();
    let a = ln.forward(&xt.to_dtype(DType::F32)?)?.to_f64_vec();
    let ln64 = LayerNorm::from_weights(Tensor::ones([3], DType::F64)?, None, 1e-5)?;
    close(&a, &ln64.forward(&xt)?.to_f64_vec(), 1e-5);
    assert_eq!(ln.named_parameters().len(), 2);
    assert_eq!(
        ln.forward(&Tensor::zeros([2, 4], DType::F32)?)
            .unwrap_err()
            .kind,
        ErrorKind::Shape
    );
    Ok(())
}

#[test]
fn rms_norm_hand_values_and_gradcheck() -> Result<()> {
    let x = t64(&[3., 4.], &[1, 2]);
    let r = RMSNorm::with_config(&[2], Some(0.0), false).unwrap();
    // rms = sqrt((9 + 16) / 2)
    let k = (12.5f64).sqrt();
    close(&r.forward(&x)?.to_vec::<f64>()?, &[3. / k, 4. / k], 1e-12);
    let _seed = seeded(6);
    let x = Tensor::randn([3, 5], DType::F64)?;
    let w = Tensor::randn([5], DType::F64)?;
    gradcheck(
        |i| RMSNorm::from_weight(i[1].clone(), Some(1e-6)).forward(&i[0]),
        &[x, w],
        gc(),
    )
}

#[test]
fn batchnorm1d_running_stats_after_two_steps_and_eval() -> Result<()> {
    let _seed = seeded(0); // draws from the shared generator
    let mut bn = BatchNorm1d::new(2).unwrap();
    // channel 0: [1, 3] -> mean 2, biased var 1, unbiased 2; channel 1: [0, 0] -> 0, 0
    let x1 = Tensor::from_vec(vec![1f32, 0., 3., 0.], [2, 2])?;
    let y = bn.forward(&x1)?.to_f64_vec();
    let s = 1.0 / (1.0f64 + 1e-5).sqrt();
    close(&y, &[-s, 0., s, 0.], 1e-6);
    // channel 0: [5, 7, 9] -> mean 7, unbiased var 4; channel 1: [1, 2, 3] -> 2, 1
    let x2 = Tensor::from_vec(vec![5f32, 1., 7., 2., 9., 3.], [3, 2])?;
    bn.forward(&x2)?;
    let rm0 = 0.9 * (0.9 * 0.0 + 0.1 * 2.0) + 0.1 * 7.0;
    let rm1 = 0.9 * 0.0 + 0.1 * 2.0;
    let rv0 = 0.9 * (0.9 * 1.0 + 0.1 * 2.0) + 0.1 * 4.0;
    let rv1 = 0.9 * (0.9 * 1.0 + 0.1 * 0.0) + 0.1 * 1.0;
    close(&bn.running_mean.to_f64_vec(), &[rm0, rm1], 1e-6);
    close(&bn.running_var.to_f64_vec(), &[rv0, rv1], 1e-6);
    assert_eq!(bn.num_batches_tracked.to_vec::<i64>()?, vec![2]);
    bn.eval();
    let y = bn.forward(&Tensor::from_vec(vec![1f32, 1.], [1, 2])?)?;
    close(
        &y.to_f64_vec(),
        &[
            (1.0 - rm0) / (rv0 + 1e-5).sqrt(),
            (1.0 - rm1) / (rv1 + 1e-5).sqrt(),
        ],
        1e-6,
    );
    assert_eq!(
        bn.num_batches_tracked.to_vec::<i64>()?,
        vec![2],
        "eval does not count"
    );
    bn.train(true);
    assert!(
        bn.forward(&Tensor::ones([1, 2], DType::F32)?).is_err(),
        "one value per channel"
    );
    assert_eq!(
        bn.forward(&Tensor::ones([2, 3], DType::F32)?)
            .unwrap_err()
            .kind,
        ErrorKind::Shape
    );
    Ok(())
}

/// BatchNorm2d training forward and backward in f32 on planes long enough for the lane
/// reductions (63 = 32 + 8·3 + 7 elements: every chunk width and a scalar tail; 784 = an
/// MNIST plane), with a channel mean far from zero (the variance must not cancel), against
/// the formulas evaluated in f64.
#[test]
fn batchnorm2d_f32_long_planes_match_f64_formulas() -> Result<()> {
    let _seed = seeded(11);
    for &(n, c, h, w) in &[(3usize, 4usize, 7usize, 9usize), (2, 3, 28, 28)] {
        let s = h * w;
        let x = Tensor::randn([n, c, h, w], DType::F32)?.affine(3.0, 100.0)?;
        let r = Tensor::randn([n, c, h, w], DType::F32)?;
        let wt = Tensor::randn([c], DType::F32)?;
        let bt = Tensor::randn([c], DType::F32)?;
        let xg = x.detach();
        xg.requires_grad_(true);
        wt.requires_grad_(true);
        bt.requires_grad_(true);
        let mut bn = BatchNorm2d::new(c).unwrap();
        bn.set_affine(Some(wt.clone()), Some(bt.clone()))?;
        let y = bn.forward(&xg)?;
        y.mul(&r)?.sum_all()?.backward()?;
        let (xv, rv) = (x.to_f64_vec(), r.to_f64_vec());
        let (wv, bv) = (wt.to_f64_vec(), bt.to_f64_vec());
        let m = (n * s) as f64;
        let (mut want_y, mut want_dx) = (vec![0.0; n * c * s], vec![0.0; n * c * s]);
        let (mut want_dw, mut want_db) = (vec![0.0; c], vec![0.0; c]);
        for ch in 0..c {
            let idx: Vec<usize> = (0..n)
                .flat_map(|i| (0..s).map(move |j| (i * c + ch) * s + j))
                .collect();
            let mean = idx.iter().map(|&k| xv[k]).sum::<f64>() / m;
            let var = idx.iter().map(|&k| (xv[k] - mean).powi(2)).sum::<f64>() / m;
            let rstd = 1.0 / (var + 1e-5).sqrt();
            let xh = |k: usize| (xv[k] - mean) * rstd;
            let db: f64 = idx.iter().map(|&k| rv[k]).sum();
            let dw: f64 = idx.iter().map(|&k| rv[k] * xh(k)).sum();
            for &k in &idx {
                want_y[k] = xh(k) * wv[ch] + bv[ch];
                want_dx[k] = wv[ch] * rstd * (rv[k] - db / m - xh(k) * dw / m);
            }
            want_dw[ch] = dw;
            want_db[ch] = db;
        }
        close(&y.to_f64_vec(), &want_y, 1e-4);
        close(&xg.grad().unwrap().to_f64_vec(), &want_dx, 1e-3);
        close(&wt.grad().unwrap().to_f64_vec(), &want_dw, 1e-4);
        close(&bt.grad().unwrap().to_f64_vec(), &want_db, 1e-4);
    }
    Ok(())
}

/// `BatchNorm → ReLU` in a `Sequential` runs as one fused op when training: its output and
/// the gradients of the input, weight and bias are bit for bit those of the two ops run one
/// after the other (the fused backward recomputes the ReLU's gate from the input), on f32
/// planes of every lane-chunk width; and its f64 gradients pass a finite-difference check.
#[test]
fn batchnorm_relu_fused_matches_separate_ops() -> Result<()> {
    let _seed = seeded(12);
    for dims in [vec![4usize, 5, 9, 13], vec![6, 3, 40]] {
        let c = dims[1];
        let x = Tensor::randn(dims.clone(), DType::F32)?;
        let r = Tensor::randn(dims.clone(), DType::F32)?;
        let (w, b) = (
            Tensor::randn([c], DType::F32)?,
            Tensor::randn([c], DType::F32)?,
        );
        let mut out = vec![];
        for fused in [true, false] {
            let (xg, wg, bg) = (x.detach(), w.detach(), b.detach());
            for t in [&xg, &wg, &bg] {
                t.requires_grad_(true);
            }
            // in a `Sequential` (fused when training) or one op after the other
            let run = |bn: Box<dyn Module>| -> Result<Tensor> {
                if fused {
                    let mut seq = Sequential::new();
                    seq.push(bn);
                    seq.add(ReLU).forward(&xg)
                } else {
                    bn.forward(&xg)?.relu()
                }
            };
            let (wa, ba) = (Some(wg.clone()), Some(bg.clone()));
            let y = if dims.len() == 4 {
                let mut bn = BatchNorm2d::new(c).unwrap();
                bn.set_affine(wa, ba)?;
                run(Box::new(bn))?
            } else {
                let mut bn = BatchNorm1d::new(c).unwrap();
                bn.set_affine(wa, ba)?;
                run(Box::new(bn))?
            };
            y.mul(&r)?.sum_all()?.backward()?;
            let grads: Vec<Vec<f32>> = [&xg, &wg, &bg]
                .iter()
                .map(|t| t.grad().unwrap().to_vec::<f32>().unwrap())
                .collect();
            out.push((y.to_vec::<f32>()?, grads));
        }
        assert!(out[0].0.contains(&0.0) && out[0].0.iter().any(|&v| v > 0.0));
        let same = |a: &[f32], b: &[f32], what: &str| {
            assert_eq!(a.len(), b.len());
            let bad = a
                .iter()
                .zip(b)
                .position(|(x, y)| x.to_bits() != y.to_bits());
            assert!(bad.is_none(), "{dims:?} {what}: differs at {bad:?}");
        };
        same(&out[0].0, &out[1].0, "output");
        for (i, what) in ["x grad", "weight grad", "bias grad"].iter().enumerate() {
            same(&out[0].1[i], &out[1].1[i], what);
        }
    }
    let x = Tensor::randn([3, 2, 3, 3], DType::F64)?;
    let w = Tensor::randn([2], DType::F64)?;
    let b = Tensor::randn([2], DType::F64)?;
    gradcheck(
        |i| {
            let mut bn = BatchNorm2d::new(2).unwrap();
            bn.set_affine(Some(i[1].clone()), Some(i[2].clone()))?;
            Sequential::new().add(bn).add(ReLU).forward(&i[0])
        },
        &[x, w, b],
        gc(),
    )
}

#[test]
fn batchnorm_gradcheck_train_and_eval() -> Result<()> {
    let _seed = seeded(7);
    let x = Tensor::randn([4, 3], DType::F64)?;
    let w = Tensor::randn([3], DType::F64)?;
    let b = Tensor::randn([3], DType::F64)?;
    let run = |i: &[Tensor], train: bool| -> Result<Tensor> {
        let mut bn = BatchNorm1d::new(3).unwrap();
        bn.set_affine(Some(i[1].clone()), Some(i[2].clone()))?;
        bn.train(train);
        bn.forward(&i[0])
    };
    gradcheck(|i| run(i, true), &[x.clone(), w.clone(), b.clone()], gc())?;
    gradcheck(|i| run(i, false), &[x, w.clone(), b.clone()], gc())?;
    let x4 = Tensor::randn([2, 3, 2, 2], DType::F64)?;
    gradcheck(
        |i| {
            let mut bn = BatchNorm2d::new(3).unwrap();
            bn.set_affine(Some(i[1].clone()), Some(i[2].clone()))?;
            bn.forward(&i[0])
        },
        &[x4, w, b],
        gc(),
    )?;
    let x3 = Tensor::randn([2, 3, 4], DType::F64)?;
    gradcheck(|i| BatchNorm1d::new(3).unwrap().forward(&i[0]), &[x3], gc())
}

#[test]
fn sdpa_hand_values_masks_and_gradcheck() -> Result<()> {
    // one query, two keys: scores [0, 1] / sqrt(1)... with E = 1, q = 1, k = [0, 1]
    let q = t64(&[1.], &[1, 1]);
    let k = t64(&[0., 1.], &[2, 1]);
    let v = t64(&[10., 20.], &[2, 1]);
    let p1 = 1.0f64.exp() / (1.0 + 1.0f64.exp());
    let y = scaled_dot_product_attention(&q, &k, &v, None, 0.0, false)?;
    close(&y.to_vec::<f64>()?, &[10.0 * (1.0 - p1) + 20.0 * p1], 1e-12);
    // causal: the first query sees only the first key
    let q2 = t64(&[1., 1.], &[2, 1]);
    let y = scaled_dot_product_attention(&q2, &k, &v, None, 0.0, true)?;
    close(
        &y.to_vec::<f64>()?,
        &[10.0, 10.0 * (1.0 - p1) + 20.0 * p1],
        1e-12,
    );
    // bool mask: true = attend
    let m = Tensor::from_vec(vec![false, true], [1, 2])?;
    let y = scaled_dot_product_attention(&q, &k, &v, Some(&m), 0.0, false)?;
    close(&y.to_vec::<f64>()?, &[20.0], 1e-12);
    let _seed = seeded(8);
    let q = Tensor::randn([2, 3, 4], DType::F64)?;
    let k = Tensor::randn([2, 5, 4], DType::F64)?;
    let v = Tensor::randn([2, 5, 2], DType::F64)?;
    let fm = Tensor::randn([3, 5], DType::F64)?;
    gradcheck(
        |i| scaled_dot_product_attention(&i[0], &i[1], &i[2], Some(&fm), 0.0, true),
        &[q.clone(), k.clone(), v],
        gc(),
    )?;
    assert_eq!(
        scaled_dot_product_attention(&q, &k, &q, None, 0.0, false)
            .unwrap_err()
            .kind,
        ErrorKind::Shape
    );
    Ok(())
}

#[test]
fn mha_gradcheck_and_weights() -> Result<()> {
    let _seed = seeded(9);
    let cfg = MhaConfig {
        batch_first: true,
        ..Default::default()
    };
    let x = Tensor::randn([2, 3, 4], DType::F64)?;
    let wi = Tensor::randn([12, 4], DType::F64)?.mul_scalar(0.5)?;
    let bi = Tensor::randn([12], DType::F64)?;
    let wo = Tensor::randn([4, 4], DType::F64)?;
    let bo = Tensor::randn([4], DType::F64)?;
    let build = |i: &[Tensor]| -> Result<MultiheadAttention> {
        MultiheadAttention::from_weights(
            2,
            i[1].clone(),
            Some(i[2].clone()),
            Linear::from_weights(i[3].clone(), Some(i[4].clone()))?,
            cfg,
        )
    };
    gradcheck(
        |i| build(i)?.forward(&i[0]),
        &[x.clone(), wi.clone(), bi.clone(), wo.clone(), bo.clone()],
        gc(),
    )?;
    let m = build(&[x.clone(), wi, bi, wo, bo])?;
    let kpm = Tensor::from_vec(vec![false, false, true, false, false, false], [2, 3])?;
    let (o, w) = m.forward_attn(&x, &x, &x, Some(&kpm), true, None)?;
    assert_eq!(o.dims(), &[2, 3, 4]);
    let w = w.unwrap();
    assert_eq!(w.dims(), &[2, 3, 3]);
    let wv = w.to_vec::<f64>()?;
    for r in 0..6 {
        close(&[wv[r * 3..r * 3 + 3].iter().sum::<f64>()], &[1.0], 1e-12);
    }
    // padded key 2 of batch 0 gets no weight
    assert!((0..3).all(|r| wv[r * 3 + 2] == 0.0));
    assert!(MultiheadAttention::new(6, 4, cfg).is_err());
    Ok(())
}

#[test]
fn init_functions_follow_pytorch_fans() -> Result<()> {
    let _seed = seeded(10);
    let w = Tensor::zeros([64, 32, 3, 3], DType::F32)?;
    assert_eq!(init::calculate_fan_in_and_fan_out(&w)?, (288, 576));
    init::xavier_uniform(&w, 1.0)?;
    let a = (6.0f64 / (288.0 + 576.0)).sqrt();
    let v = w.to_f64_vec();
    assert!(v.iter().all(|x| x.abs() <= a) && v.iter().any(|x| x.abs() > 0.95 * a));
    let std = |v: &[f64]| (v.iter().map(|x| x * x).sum::<f64>() / v.len() as f64).sqrt();
    init::kaiming_normal(&w, 0.0, FanMode::FanIn, Nonlinearity::Relu)?;
    let s = std(&w.to_f64_vec());
    assert!((s / (2.0f64 / 288.0).sqrt() - 1.0).abs() < 0.05, "std {s}");
    init::kaiming_uniform(&w, 5f64.sqrt(), FanMode::FanOut, Nonlinearity::LeakyRelu)?;
    assert!(w
        .to_f64_vec()
        .iter()
        .all(|x| x.abs() <= 1.0 / 576f64.sqrt()));
    init::xavier_normal(&w, 2.0)?;
    let s = std(&w.to_f64_vec());
    assert!(
        (s / (2.0 * (2.0f64 / 864.0).sqrt()) - 1.0).abs() < 0.05,
        "std {s}"
    );
    init::normal(&w, 3.0, 0.0)?;
    assert!(w.to_f64_vec().iter().all(|&x| x == 3.0));
    init::uniform(&w, -1.0, -0.5)?;
    assert!(w.to_f64_vec().iter().all(|&x| (-1.0..=-0.5).contains(&x)));
    let p = Tensor::zeros([3], DType::F32)?.with_requires_grad();
    init::ones(&p)?;
    assert_eq!(p.to_vec::<f32>()?, vec![1.0; 3]);
    init::zeros(&p)?;
    assert_eq!(p.to_vec::<f32>()?, vec![0.0; 3]);
    assert_eq!(
        init::xavier_uniform(&p, 1.0).unwrap_err().kind,
        ErrorKind::Shape
    );
    assert!((init::calculate_gain(Nonlinearity::Tanh, 0.0) - 5.0 / 3.0).abs() < 1e-12);
    Ok(())
}

#[test]
fn mlp_learns_xor_with_plain_gradient_descent() -> Result<()> {
    let _seed = seeded(42);
    let model = Sequential::new()
        .add(Linear::new(2, 8, true).unwrap())
        .add(Tanh)
        .add(Linear::new(8, 1, true).unwrap());
    let x = Tensor::from_vec(vec![0f32, 0., 0., 1., 1., 0., 1., 1.], [4, 2])?;
    let y = Tensor::from_vec(vec![0f32, 1., 1., 0.], [4, 1])?;
    let params = model.parameters();
    let lr = 0.5;
    let mut loss_v = f64::INFINITY;
    for _ in 0..500 {
        let loss = might::nn::mse_loss(&model.forward(&x)?, &y, might::nn::Reduction::Mean)?;
        for p in &params {
            p.zero_grad();
        }
        loss.backward()?;
        let _g = no_grad();
        for p in &params {
            p.add_scaled_(&p.grad().unwrap(), -lr)?;
        }
        loss_v = loss.item()?;
    }
    let out = model.forward(&x)?.to_vec::<f32>()?;
    let pred: Vec<f32> = out.iter().map(|&v| if v > 0.5 { 1. } else { 0. }).collect();
    assert_eq!(pred, vec![0., 1., 1., 0.], "outputs {out:?}, loss {loss_v}");
    assert!(loss_v < 0.05, "loss {loss_v}");
    Ok(())
}

/// The weight gradient of a linear layer on a batch of sequences (the batch folds into one
/// product when the rhs is shared, and a column-major rhs gets its gradient as `(g^T x)^T`)
/// matches finite differences for row- and column-major, shared 3-D and batched rhs.
#[test]
fn matmul_weight_grad_folds_batch_and_keeps_layout() -> Result<()> {
    let _seed = seeded(2);
    let x = Tensor::randn([2, 3, 4], DType::F64)?;
    let w = Tensor::randn([5, 4], DType::F64)?;
    // column-major rhs (as in a linear layer) and row-major rhs
    gradcheck(|i| i[0].matmul(&i[1].t()?), &[x.clone(), w.clone()], gc())?;
    let wr = Tensor::randn([4, 5], DType::F64)?;
    gradcheck(|i| i[0].matmul(&i[1]), &[x.clone(), wr.clone()], gc())?;
    // a 3-D rhs with a size-1 batch dim is shared too
    let w3 = Tensor::randn([1, 4, 5], DType::F64)?;
    gradcheck(|i| i[0].matmul(&i[1]), &[x.clone(), w3], gc())?;
    // a batched rhs is not shared: per-batch products
    let wb = Tensor::randn([2, 4, 5], DType::F64)?;
    gradcheck(|i| i[0].matmul(&i[1]), &[x.clone(), wb], gc())?;

    // hand-checkable sum: d/dW sum(x @ W^T) = sum over rows of x, for every output row
    let w = Tensor::randn([5, 4], DType::F32)?.with_requires_grad();
    let xf = x.to_dtype(DType::F32)?;
    xf.matmul(&w.t()?)?.sum_all()?.backward()?;
    let gw = w.grad().expect("weight grad");
    let col: Vec<f32> = xf.reshape([6, 4])?.sum(0, false)?.to_vec()?;
    let got: Vec<f32> = gw.to_vec()?;
    for r in 0..5 {
        for c in 0..4 {
            assert!((got[r * 4 + c] - col[c]).abs() < 1e-5, "{r},{c}");
        }
    }
    Ok(())
}
