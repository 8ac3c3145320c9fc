//! The GPU backend against the CPU: every op's values and input gradients computed on the GPU
//! in f32 against the CPU in f64 (whose gradients `gradcheck` verifies by finite
//! differences), the GPU's own rules (f64 refused, adapters named, RNG draws as on the CPU),
//! (training on the GPU: `tests/gpu_training.rs`). Runs where wgpu finds an adapter (lavapipe in
//! CI); elsewhere each test prints that it skipped. Sizes stay small: lavapipe emulates a GPU
//! on the CPU.
//!
//! Tolerances: f32 kernels against f64 references, `|gpu - cpu| <= tol · (1 + |cpu|)` with
//! `tol = 1e-4` for elementwise ops and 2e-4 for long sums and products (f32 rounding grows
//! with the reduction length).
#![cfg(feature = "gpu")]

mod common;

use might::nn::functional::{
    cross_entropy, layer_norm, linear, mse_loss, CrossEntropyOptions, Reduction,
};
use might::{manual_seed, DType, Device, ErrorKind, Result, Tensor};

const TOL: f64 = 1e-4;

/// The weights that reduce an output to a scalar for the backward (fixed, asymmetric).
fn weights(n: usize) -> Vec<f64> {
    (0..n).map(|i| 0.5 + ((i * 7) % 11) as f64 * 0.3).collect()
}

fn close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g - w).abs() <= tol * (1.0 + w.abs()) || (g.is_nan() && w.is_nan());
        assert!(ok, "{what}[{i}]: gpu {g} vs cpu {w}");
    }
}

/// Run `f` on the CPU in f64 and on `gpu` in f32 (integer inputs as they are), compare the
/// outputs and, for float outputs, the gradients of every float input.
fn parity(
    gpu: Device,
    what: &str,
    f: impl Fn(&[Tensor]) -> Result<Tensor>,
    inputs: &[Tensor],
    tol: f64,
) -> Result<()> {
    let prep = |dev: Device, dt: DType| -> Result<Vec<Tensor>> {
        inputs
            .iter()
            .map(|x| {
                if x.dtype().is_float() {
                    Ok(x.to_dtype(dt)?
                        .to_device(dev)?
                        .detach()
                        .with_requires_grad())
                } else {
                    x.to_device(dev)
                }
            })
            .collect()
    };
    let (xc, xg) = (prep(Device::Cpu, DType::F64)?, prep(gpu, DType::F32)?);
    let (yc, yg) = (f(&xc)?, f(&xg)?);
    assert_eq!(yg.device(), gpu, "{what}: output device");
    assert_eq!(yc.dims(), yg.dims(), "{what}: shape");
    close(what, &yg.to_f64_vec(), &yc.to_f64_vec(), tol);
    if !yc.dtype().is_float() || !yc.requires_grad() {
        return Ok(());
    }
    for (y, dev) in [(&yc, Device::Cpu), (&yg, gpu)] {
        let w = Tensor::from_vec(weights(y.numel()), y.shape())?
            .to_dtype(y.dtype())?
            .to_device(dev)?;
        y.mul(&w)?.sum_all()?.backward()?;
    }
    for (k, (c, g)) in xc.iter().zip(&xg).enumerate() {
        if let (Some(gc), Some(gg)) = (c.grad(), g.grad()) {
            assert_eq!(gg.device(), gpu);
            close(
                &format!("{what}: grad {k}"),
                &gg.to_f64_vec(),
                &gc.to_f64_vec(),
                tol,
            );
        }
    }
    Ok(())
}

fn randn(dims: &[usize]) -> Tensor {
    Tensor::randn(dims.to_vec(), DType::F64).unwrap()
}

/// Positive values in `[0.5, 2.5)` (for log, sqrt, pow).
fn pos(dims: &[usize]) -> Tensor {
    Tensor::rand(dims.to_vec(), DType::F64)
        .unwrap()
        .mul_scalar(2.0)
        .unwrap()
        .add_scalar(0.5)
        .unwrap()
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

#[test]
fn elementwise_ops_match_the_cpu() -> Result<()> {
    let g = gpu_or_skip!();
    manual_seed(1);
    let (a, p) = (randn(&[3, 5]), pos(&[3, 5]));
    type F = fn(&Tensor) -> Result<Tensor>;
    let unary: [(&str, F, &Tensor); 26] = [
        ("neg", |x| x.neg(), &a),
        ("abs", |x| x.abs(), &a),
        ("exp", |x| x.exp(), &a),
        ("log", |x| x.log(), &p),
        ("log1p", |x| x.log1p(), &p),
        ("sqrt", |x| x.sqrt(), &p),
        ("rsqrt", |x| x.rsqrt(), &p),
        ("sin", |x| x.sin(), &a),
        ("cos", |x| x.cos(), &a),
        ("tanh", |x| x.tanh(), &a),
        ("sigmoid", |x| x.sigmoid(), &a),
        ("relu", |x| x.relu(), &a),
        ("gelu", |x| x.gelu(), &a),
        ("gelu_tanh", |x| x.gelu_tanh(), &a),
        ("silu", |x| x.silu(), &a),
        ("softplus", |x| x.softplus(), &a),
        ("erf", |x| x.erf(), &a),
        ("tan", |x| x.mul_scalar(0.4)?.tan(), &a),
        ("square", |x| x.square(), &a),
        ("sign", |x| x.sign(), &a),
        ("floor", |x| x.mul_scalar(3.0)?.floor(), &a),
        ("ceil", |x| x.mul_scalar(3.0)?.ceil(), &a),
        ("powf", |x| x.powf(2.5), &p),
        ("powf odd", |x| x.powf(3.0), &a),
        ("clamp", |x| x.clamp(Some(-0.5), Some(0.7)), &a),
        ("affine", |x| x.mul_scalar(-1.5)?.add_scalar(0.25), &a),
    ];
    for (name, f, x) in unary {
        parity(g, name, |t| f(&t[0]), std::slice::from_ref(x), TOL)?;
        // and through a transposed view
        parity(g, name, |t| f(&t[0].t()?), std::slice::from_ref(x), TOL)?;
    }
    // binary ops with broadcasting on both sides
    let (b, c, q) = (randn(&[3, 1, 4]), randn(&[5, 1]), pos(&[5, 1]));
    type B = fn(&Tensor, &Tensor) -> Result<Tensor>;
    let binary: [(&str, B); 6] = [
        ("add", |x, y| x.add(y)),
        ("sub", |x, y| x.sub(y)),
        ("mul", |x, y| x.mul(y)),
        ("div", |x, y| x.div(&y.exp()?)),
        ("maximum", |x, y| x.maximum(y)),
        ("minimum", |x, y| x.minimum(y)),
    ];
    for (name, f) in binary {
        parity(g, name, |t| f(&t[0], &t[1]), &[b.clone(), c.clone()], TOL)?;
    }
    parity(g, "pow", |t| t[1].pow(&t[0]), &[b.clone(), q.clone()], TOL)?;
    parity(
        g,
        "where",
        |t| Tensor::where_(&t[0].gt(&t[1])?, &t[0], &t[1].mul_scalar(2.0)?),
        &[b.clone(), c.clone()],
        TOL,
    )?;
    parity(
        g,
        "masked_fill",
        |t| t[0].masked_fill(&t[0].lt_scalar(0.0)?, -3.0),
        std::slice::from_ref(&a),
        TOL,
    )?;
    // in place, through a strided view of the destination
    parity(
        g,
        "add_ in place",
        |t| {
            let _g = might::no_grad();
            let d = t[0].mul_scalar(1.0)?;
            d.slice(1, 0, 5, 2)?.add_(&t[1].slice(1, 1, 4, 1)?)?;
            d.t()?.mul_(&t[1].t()?)?;
            Ok(d)
        },
        &[a.clone(), randn(&[3, 5])],
        TOL,
    )?;
    Ok(())
}

#[test]
fn comparisons_casts_and_integers_match_the_cpu() -> Result<()> {
    let g = gpu_or_skip!();
    let x = Tensor::from_slice(&[1.0f32, f32::NAN, -2.0, 3.5, 0.0, -0.0], [6])?;
    let y = Tensor::from_slice(&[1.0f32, 1.0, -1.0, f32::NAN, -0.0, 2.0], [6])?;
    let (xg, yg) = (x.to_device(g)?, y.to_device(g)?);
    for (name, a, b) in [
        ("eq", x.eq(&y)?, xg.eq(&yg)?),
        ("ne", x.ne(&y)?, xg.ne(&yg)?),
        ("lt", x.lt(&y)?, xg.lt(&yg)?),
        ("le", x.le(&y)?, xg.le(&yg)?),
        ("gt", x.gt(&y)?, xg.gt(&yg)?),
        ("ge", x.ge(&y)?, xg.ge(&yg)?),
    ] {
        assert_eq!(b.to_vec::<bool>()?, a.to_vec::<bool>()?, "{name}");
    }
    // casts round trip like the CPU's (NaN to int is 0 on both)
    let f = Tensor::from_slice(&[2.7f32, -1.5, 300.0, 0.0], [4])?;
    for dt in [DType::I64, DType::U8, DType::Bool] {
        let (c, d) = (f.to_dtype(dt)?, f.to_device(g)?.to_dtype(dt)?);
        assert_eq!(d.to_f64_vec(), c.to_f64_vec(), "to {dt}");
        assert_eq!(
            d.to_dtype(DType::F32)?.to_vec::<f32>()?,
            c.to_dtype(DType::F32)?.to_vec::<f32>()?
        );
    }
    // int64 arithmetic (wrapping in 32 bits on the GPU; these fit), division by zero gives 0
    let i = ids(&[7, -3, 12, 5], &[4]);
    let j = ids(&[2, 4, -5, 0], &[4]);
    let (ig, jg) = (i.to_device(g)?, j.to_device(g)?);
    for (name, a, b) in [
        ("add", i.add(&j)?, ig.add(&jg)?),
        ("mul", i.mul(&j)?, ig.mul(&jg)?),
        ("div", i.div(&j)?, ig.div(&jg)?),
        ("sum", i.sum_all()?, ig.sum_all()?),
        ("max", i.maximum(&j)?, ig.maximum(&jg)?),
    ] {
        assert_eq!(b.to_vec::<i64>()?, a.to_vec::<i64>()?, "int {name}");
    }
    // u8 wraps like the CPU, bool reductions
    let u = Tensor::from_slice(&[250u8, 3, 128], [3])?;
    let ug = u.to_device(g)?;
    assert_eq!(ug.add(&ug)?.to_vec::<u8>()?, u.add(&u)?.to_vec::<u8>()?);
    assert_eq!(ug.sum_all()?.to_vec::<i64>()?, vec![381]);
    let m = xg.gt_scalar(0.5)?;
    assert_eq!(m.any_dims(&[0], false)?.to_vec::<bool>()?, vec![true]);
    assert_eq!(m.all_dims(&[0], false)?.to_vec::<bool>()?, vec![false]);
    // int64 values past i32 are refused on upload, naming the value
    let e = ids(&[1 << 40], &[1]).to_device(g).unwrap_err();
    assert!(e.to_string().contains("does not fit"), "{e}");
    Ok(())
}

#[test]
fn reductions_and_softmax_match_the_cpu() -> Result<()> {
    let g = gpu_or_skip!();
    manual_seed(2);
    let a = randn(&[4, 6, 5]);
    type F = fn(&Tensor) -> Result<Tensor>;
    let cases: [(&str, F); 14] = [
        ("sum 1", |x| x.sum(1, false)),
        ("sum 0 keep", |x| x.sum(0, true)),
        ("sum all", |x| x.sum_all()),
        ("sum dims", |x| x.sum_dims(&[0, 2], false)),
        ("mean", |x| x.mean(2, false)),
        ("var", |x| x.var(1, 1, false)),
        ("max", |x| Ok(x.max(1, false)?.0)),
        ("min", |x| Ok(x.min(2, true)?.0)),
        ("prod", |x| x.prod(2, false)),
        ("logsumexp", |x| x.logsumexp(1, false)),
        ("softmax", |x| x.softmax(2)),
        ("softmax dim 1", |x| x.softmax(1)),
        ("log_softmax", |x| x.log_softmax(2)),
        ("sum of a transpose", |x| x.transpose(0, 2)?.sum(2, false)),
    ];
    for (name, f) in cases {
        parity(g, name, |t| f(&t[0]), std::slice::from_ref(&a), 2e-4)?;
    }
    // long rows take the workgroup path
    let long = randn(&[3, 1000]);
    parity(
        g,
        "long sum",
        |t| t[0].sum(1, false),
        std::slice::from_ref(&long),
        2e-4,
    )?;
    parity(
        g,
        "long softmax",
        |t| t[0].log_softmax(1),
        std::slice::from_ref(&long),
        2e-4,
    )?;
    parity(
        g,
        "long max",
        |t| t[0].max_all(),
        std::slice::from_ref(&long),
        2e-4,
    )?;
    // arg reductions: the same indices
    let (c, d) = (
        a.argmax(1, false)?,
        a.to_dtype(DType::F32)?.to_device(g)?.argmax(1, false)?,
    );
    assert_eq!(d.to_vec::<i64>()?, c.to_vec::<i64>()?);
    let (c, d) = (
        a.argmin(2, false)?,
        a.to_dtype(DType::F32)?.to_device(g)?.argmin(2, false)?,
    );
    assert_eq!(d.to_vec::<i64>()?, c.to_vec::<i64>()?);
    Ok(())
}

#[test]
fn matmul_matches_the_cpu() -> Result<()> {
    let g = gpu_or_skip!();
    manual_seed(3);
    let m = |t: &[Tensor]| t[0].matmul(&t[1]);
    parity(g, "2d", m, &[randn(&[4, 5]), randn(&[5, 3])], TOL)?;
    // sizes that are not multiples of the 64×64 tile, a long inner dim
    parity(
        g,
        "ragged",
        m,
        &[randn(&[70, 130]), randn(&[130, 67])],
        2e-4,
    )?;
    // batched with a broadcast right operand, and transposed operands read in place
    parity(
        g,
        "batched",
        m,
        &[randn(&[2, 3, 4, 5]), randn(&[5, 6])],
        TOL,
    )?;
    parity(
        g,
        "transposed",
        |t| t[0].t()?.matmul(&t[1].t()?),
        &[randn(&[9, 4]), randn(&[7, 9])],
        TOL,
    )?;
    parity(g, "vector", m, &[randn(&[3, 8]), randn(&[8])], TOL)?;
    parity(
        g,
        "linear",
        |t| linear(&t[0], &t[1], Some(&t[2])),
        &[randn(&[6, 5]), randn(&[4, 5]), randn(&[4])],
        TOL,
    )?;
    Ok(())
}

#[test]
fn convolutions_and_pools_match_the_cpu() -> Result<()> {
    let g = gpu_or_skip!();
    manual_seed(4);
    let x = randn(&[2, 4, 7, 6]);
    // (stride, padding, dilation, groups)
    for (s, p, d, gr) in [
        (1, 0, 1, 1),
        (2, 1, 1, 1),
        (1, 2, 2, 1),
        (2, 1, 1, 2),
        (1, 1, 1, 4),
    ] {
        let w = randn(&[8, 4 / gr, 3, 3]);
        let b = randn(&[8]);
        parity(
            g,
            &format!("conv2d s{s} p{p} d{d} g{gr}"),
            |t| t[0].conv2d(&t[1], Some(&t[2]), [s, s], [p, p], [d, d], gr),
            &[x.clone(), w.clone(), b],
            2e-4,
        )?;
        parity(
            g,
            "conv2d without bias",
            |t| t[0].conv2d(&t[1], None, [s, s], [p, p], [d, d], gr),
            &[x.clone(), w],
            2e-4,
        )?;
    }
    let w = randn(&[3, 4, 2, 3]);
    parity(
        g,
        "conv2d_relu",
        |t| t[0].conv2d_relu(&t[1], Some(&t[2]), [1, 2], [1, 0], [1, 1], 1),
        &[x.clone(), w, randn(&[3])],
        2e-4,
    )?;
    parity(
        g,
        "max_pool2d",
        |t| t[0].max_pool2d([2, 2], [2, 2], [0, 0]),
        std::slice::from_ref(&x),
        TOL,
    )?;
    parity(
        g,
        "max_pool2d overlapping, padded",
        |t| t[0].max_pool2d([3, 3], [2, 1], [1, 1]),
        std::slice::from_ref(&x),
        TOL,
    )?;
    parity(
        g,
        "avg_pool2d",
        |t| t[0].avg_pool2d([3, 2], [2, 2], [1, 1]),
        std::slice::from_ref(&x),
        TOL,
    )?;
    parity(
        g,
        "adaptive",
        |t| t[0].adaptive_avg_pool2d([3, 4]),
        std::slice::from_ref(&x),
        TOL,
    )?;
    parity(
        g,
        "global avg",
        |t| t[0].adaptive_avg_pool2d([1, 1]),
        std::slice::from_ref(&x),
        TOL,
    )?;
    Ok(())
}

#[test]
fn indexing_and_layers_match_the_cpu() -> Result<()> {
    let g = gpu_or_skip!();
    manual_seed(5);
    let a = randn(&[5, 4]);
    let i = ids(&[3, 0, 3, 1], &[4]);
    parity(
        g,
        "index_select 0",
        |t| t[0].index_select(0, &t[1]),
        &[a.clone(), i.clone()],
        TOL,
    )?;
    parity(
        g,
        "index_select 1",
        |t| t[0].index_select(1, &t[1]),
        &[a.clone(), ids(&[2, 2, 0], &[3])],
        TOL,
    )?;
    parity(
        g,
        "embedding",
        |t| Tensor::embedding(&t[1], &t[0]),
        &[a.clone(), ids(&[4, 1, 1, 0, 4, 4], &[2, 3])],
        TOL,
    )?;
    let gi = ids(&[0, 3, 3, 1, 2, 2, 0, 0], &[2, 4]);
    parity(
        g,
        "gather",
        |t| t[0].gather(1, &t[1]),
        &[randn(&[2, 5]), gi.clone()],
        TOL,
    )?;
    parity(
        g,
        "scatter_add",
        |t| t[0].scatter_add(1, &t[1], &t[2]),
        &[randn(&[2, 5]), gi, randn(&[2, 4])],
        TOL,
    )?;
    parity(
        g,
        "index_add",
        |t| t[0].index_add(0, &t[1], &t[2]),
        &[a.clone(), i, randn(&[4, 4])],
        TOL,
    )?;
    parity(
        g,
        "cat, narrow, stack",
        |t| {
            let c = Tensor::cat(&[t[0].clone(), t[1].narrow(0, 1, 2)?], 0)?;
            Tensor::stack(&[c.clone(), c.mul_scalar(2.0)?], 1)
        },
        &[a.clone(), randn(&[3, 4])],
        TOL,
    )?;
    parity(
        g,
        "layer_norm",
        |t| layer_norm(&t[0], &[4], Some(&t[1]), Some(&t[2]), 1e-5),
        &[a.clone(), randn(&[4]), randn(&[4])],
        2e-4,
    )?;
    let target = ids(&[1, 0, 3, 3, 2], &[5]);
    parity(
        g,
        "cross_entropy",
        |t| cross_entropy(&t[0], &t[1], &CrossEntropyOptions::default()),
        &[a.clone(), target],
        TOL,
    )?;
    let sc = randn(&[2, 3, 4, 6]);
    for off in [0, 2] {
        parity(
            g,
            &format!("causal_softmax offset {off}"),
            |t| might::nn::causal_softmax(&t[0], 0.7, off),
            std::slice::from_ref(&sc),
            TOL,
        )?;
    }
    parity(
        g,
        "layer_norm without affine",
        |t| layer_norm(&t[0], &[4], None, None, 1e-5),
        std::slice::from_ref(&a),
        2e-4,
    )?;
    parity(
        g,
        "mse_loss",
        |t| mse_loss(&t[0], &t[1], Reduction::Mean),
        &[a.clone(), randn(&[5, 4])],
        TOL,
    )?;
    Ok(())
}

#[test]
fn the_gpu_refuses_f64_and_names_the_adapters() -> Result<()> {
    let g = gpu_or_skip!();
    let e = Tensor::zeros([2], DType::F64)?.to_device(g).unwrap_err();
    assert_eq!(e.kind, ErrorKind::DType, "{e}");
    assert!(
        e.to_string().contains("float64") && e.to_string().contains("to_dtype"),
        "{e}"
    );
    let e = Tensor::zeros([2], DType::F32)?
        .to_device(g)?
        .to_dtype(DType::F64)
        .unwrap_err();
    assert!(e.to_string().contains("float64"), "{e}");
    let e = Device::gpu(1000).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Device);
    assert!(e.to_string().contains("gpu:0 = "), "{e}");
    assert_eq!(g.to_string(), "gpu:0");
    assert!(!g.name().is_empty());
    // tensors on different devices: a clear error, not a silent copy
    let (c, d) = (
        Tensor::ones([2], DType::F32)?,
        Tensor::ones([2], DType::F32)?.to_device(g)?,
    );
    assert_eq!(c.add(&d).unwrap_err().kind, ErrorKind::Device);
    Ok(())
}

#[test]
fn random_draws_match_the_cpu() -> Result<()> {
    let g = gpu_or_skip!();
    manual_seed(11);
    let c = Tensor::randn([3, 4], DType::F32)?;
    manual_seed(11);
    let d = Tensor::normal_on([3, 4], 0.0, 1.0, DType::F32, g)?;
    assert_eq!(d.device(), g);
    assert_eq!(d.to_vec::<f32>()?, c.to_vec::<f32>()?);
    // printing reads the values back
    assert_eq!(format!("{d}"), format!("{c}"));
    assert!((d.sum_all()?.item()? - c.sum_all()?.item()?).abs() < 1e-5);
    Ok(())
}

/// The fused SGD and Adam(W) steps (and RMSprop, composed) take the CPU's steps in f32.
#[test]
fn optimizer_steps_match_the_cpu() -> Result<()> {
    use might::optim::{
        Adam, AdamConfig, AdamW, Optimizer, RmsProp, RmsPropConfig, Sgd, SgdConfig,
    };
    let g = gpu_or_skip!();
    manual_seed(8);
    let p0 = Tensor::randn([3, 5], DType::F32)?;
    let grads: Vec<Tensor> = (0..3)
        .map(|_| Tensor::randn([3, 5], DType::F32))
        .collect::<Result<_>>()?;
    type Make = fn(Vec<Tensor>) -> Result<Box<dyn Optimizer>>;
    let adam = |wd: f64, amsgrad: bool| AdamConfig {
        lr: 0.01,
        betas: (0.9, 0.99),
        eps: 1e-8,
        weight_decay: wd,
        amsgrad,
    };
    let makers: [(&str, Make); 6] = [
        ("sgd", |p| {
            Ok(Box::new(Sgd::new(
                p,
                SgdConfig {
                    lr: 0.1,
                    ..Default::default()
                },
            )?))
        }),
        ("sgd momentum wd nesterov", |p| {
            Ok(Box::new(Sgd::new(
                p,
                SgdConfig {
                    lr: 0.1,
                    momentum: 0.9,
                    nesterov: true,
                    weight_decay: 0.01,
                    ..Default::default()
                },
            )?))
        }),
        ("sgd dampening", |p| {
            Ok(Box::new(Sgd::new(
                p,
                SgdConfig {
                    lr: 0.1,
                    momentum: 0.8,
                    dampening: 0.3,
                    ..Default::default()
                },
            )?))
        }),
        ("adam l2", |p| {
            Ok(Box::new(Adam::new(
                p,
                AdamConfig {
                    lr: 0.01,
                    betas: (0.9, 0.99),
                    eps: 1e-8,
                    weight_decay: 0.1,
                    amsgrad: false,
                },
            )?))
        }),
        ("adamw amsgrad", |p| {
            Ok(Box::new(AdamW::new(
                p,
                AdamConfig {
                    lr: 0.01,
                    betas: (0.9, 0.99),
                    eps: 1e-8,
                    weight_decay: 0.1,
                    amsgrad: true,
                },
            )?))
        }),
        ("rmsprop", |p| {
            Ok(Box::new(RmsProp::new(
                p,
                RmsPropConfig {
                    lr: 0.01,
                    ..Default::default()
                },
            )?))
        }),
    ];
    let _ = adam;
    for (name, make) in makers {
        let (pc, pg) = (
            p0.deep_clone()?.with_requires_grad(),
            p0.to_device(g)?.with_requires_grad(),
        );
        let (mut oc, mut og) = (make(vec![pc.clone()])?, make(vec![pg.clone()])?);
        for gr in &grads {
            pc.set_grad(Some(gr.clone()));
            pg.set_grad(Some(gr.to_device(g)?));
            oc.step()?;
            og.step()?;
        }
        assert_eq!(pg.device(), g);
        close(name, &pg.to_f64_vec(), &pc.to_f64_vec(), 1e-5);
    }
    Ok(())
}
