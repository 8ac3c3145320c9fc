//! The extra activations, group/instance norm, cosine similarity, KL divergence and einsum:
//! PyTorch fixtures (values and input gradients, `tests/fixtures/gen_extra_ops.py`), values
//! and kink gradients by hand, finite-difference gradchecks, the nn modules, and errors (not
//! panics) naming the op for bad arguments.

use might::autograd::{gradcheck, GradCheck};
use might::nn::{
    functional, GroupNorm, Hardsigmoid, Hardswish, Hardtanh, InstanceNorm1d, InstanceNorm2d,
    KlDivReduction, LeakyReLU, Mish, Module, ReLU6, Sequential, CELU, ELU, SELU,
};
use might::{DType, Device, ErrorKind, Result, Tensor};
use serde_json::Value;

mod common;

device_tests!(
    fixtures_f32,
    kink_gradients_by_hand,
    activation_values_by_hand,
    large_inputs_stay_finite,
    einsum_by_hand,
    modules,
    instance_norm_running_stats,
    bad_arguments_are_errors,
    ; f64:
    fixtures_f64,
    gradcheck_activations,
    gradcheck_norms,
    gradcheck_similarity_and_kl,
    gradcheck_einsum,
);

fn t64(dev: Device, v: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape.to_vec())
        .unwrap()
        .to_device(dev)
        .unwrap()
}

/// f64 values as a `dtype` tensor on `dev`, converted on the host (a GPU holds no f64).
fn tt(dev: Device, v: &[f64], shape: &[usize], dtype: DType) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape.to_vec())
        .and_then(|t| t.to_dtype(dtype))
        .and_then(|t| t.to_device(dev))
        .unwrap()
}

fn floats(v: &Value) -> Vec<Option<f64>> {
    v.as_array().unwrap().iter().map(|x| x.as_f64()).collect()
}

fn dense(v: &Value) -> Vec<f64> {
    floats(v).into_iter().map(|x| x.unwrap()).collect()
}

fn shape(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as usize)
        .collect()
}

fn fixture() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/extra_ops.json"
    );
    let text = std::fs::read_to_string(path).expect("read extra_ops.json");
    serde_json::from_str(&text).expect("parse extra_ops.json")
}

fn close(what: &str, got: &[f64], want: &[Option<f64>], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let Some(w) = w else { continue };
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "{what}[{i}]: got {g}, want {w}"
        );
    }
}

fn kl_reduction(s: &str) -> KlDivReduction {
    match s {
        "none" => KlDivReduction::None,
        "sum" => KlDivReduction::Sum,
        "mean" => KlDivReduction::Mean,
        _ => KlDivReduction::BatchMean,
    }
}

/// The op a fixture case names, applied to `x`.
fn apply(case: &Value, x: &[Tensor]) -> Result<Tensor> {
    let a = &case["args"];
    let f = |k: &str| a[k].as_f64().unwrap();
    let opt = |i: usize| x.get(i);
    match case["op"].as_str().unwrap() {
        "leaky_relu" => x[0].leaky_relu(f("negative_slope")),
        "elu" => x[0].elu(f("alpha")),
        "selu" => x[0].selu(),
        "celu" => x[0].celu(f("alpha")),
        "hardtanh" => x[0].hardtanh(f("min_val"), f("max_val")),
        "relu6" => x[0].relu6(),
        "hardsigmoid" => x[0].hardsigmoid(),
        "hardswish" => x[0].hardswish(),
        "mish" => x[0].mish(),
        "softsign" => x[0].softsign(),
        "logsigmoid" => x[0].logsigmoid(),
        "gelu" => x[0].gelu(),
        "group_norm" => {
            let g = a["num_groups"].as_u64().unwrap() as usize;
            x[0].group_norm(g, opt(1), opt(2), f("eps"))
        }
        "instance_norm" => x[0].instance_norm(opt(1), opt(2), f("eps")),
        "cosine_similarity" => {
            x[0].cosine_similarity(&x[1], a["dim"].as_i64().unwrap() as isize, f("eps"))
        }
        "kl_div" => x[0].kl_div(
            &x[1],
            kl_reduction(a["reduction"].as_str().unwrap()),
            a["log_target"].as_bool().unwrap(),
        ),
        "einsum" => {
            let refs: Vec<&Tensor> = x.iter().collect();
            Tensor::einsum(a["equation"].as_str().unwrap(), &refs)
        }
        op => panic!("unknown op {op}"),
    }
}

fn run_fixtures(dev: Device, dtype: DType, tol: f64) -> Result<()> {
    let json = fixture();
    let cases = json["cases"].as_array().unwrap();
    assert!(cases.len() >= 40);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let shapes = case["shapes"].as_array().unwrap();
        let xs: Vec<Tensor> = shapes
            .iter()
            .zip(case["inputs"].as_array().unwrap())
            .map(|(s, v)| tt(dev, &dense(v), &shape(s), dtype).with_requires_grad())
            .collect();
        let y = apply(case, &xs)?;
        assert_eq!(y.dims(), shape(&case["y_shape"]), "{name}: shape");
        close(
            &format!("{name} y"),
            &y.to_f64_vec(),
            &floats(&case["y"]),
            tol,
        );
        let gy = tt(dev, &dense(&case["gy"]), y.dims(), dtype);
        y.mul(&gy)?.sum_all()?.backward()?;
        for (i, (x, want)) in xs.iter().zip(case["grads"].as_array().unwrap()).enumerate() {
            let got = x.grad().expect("a gradient");
            close(
                &format!("{name} grad {i}"),
                &got.to_f64_vec(),
                &floats(want),
                tol,
            );
        }
    }
    Ok(())
}

fn fixtures_f32(dev: Device) -> Result<()> {
    run_fixtures(dev, DType::F32, 2e-4)
}

fn fixtures_f64(dev: Device) -> Result<()> {
    run_fixtures(dev, DType::F64, 1e-7)
}

/// Gradient of `f` at each of `xs`, one element at a time.
fn grads_at(dev: Device, xs: &[f64], f: impl Fn(&Tensor) -> Result<Tensor>) -> Result<Vec<f32>> {
    let x = Tensor::from_vec(xs.iter().map(|&v| v as f32).collect(), [xs.len()])?
        .to_device(dev)?
        .with_requires_grad();
    f(&x)?.sum_all()?.backward()?;
    x.grad().unwrap().to_vec::<f32>()
}

fn kink_gradients_by_hand(dev: Device) -> Result<()> {
    // PyTorch's gradient exactly at each kink
    assert_eq!(grads_at(dev, &[0.0], |x| x.leaky_relu(0.2))?, [0.2]);
    assert_eq!(grads_at(dev, &[0.0], |x| x.elu(1.5))?, [1.5]);
    assert_eq!(grads_at(dev, &[0.0], |x| x.celu(0.5))?, [1.0]);
    let selu = grads_at(dev, &[0.0], |x| x.selu())?[0];
    assert!((selu - 1.758_099_3).abs() < 1e-6, "{selu}");
    assert_eq!(
        grads_at(dev, &[-1.0, 1.0, 0.5], |x| x.hardtanh(-1.0, 1.0))?,
        [0.0, 0.0, 1.0]
    );
    assert_eq!(
        grads_at(dev, &[0.0, 6.0, 3.0], |x| x.relu6())?,
        [0.0, 0.0, 1.0]
    );
    let hs = grads_at(dev, &[-3.0, 3.0, 0.0], |x| x.hardsigmoid())?;
    assert_eq!(hs[..2], [0.0, 0.0]);
    assert!((hs[2] - 1.0 / 6.0).abs() < 1e-7);
    assert_eq!(
        grads_at(dev, &[-3.0, 3.0, 0.0, 1.5], |x| x.hardswish())?,
        [0.0, 1.0, 0.5, 1.0]
    );
    assert_eq!(grads_at(dev, &[0.0], |x| x.softsign())?, [1.0]);
    Ok(())
}

fn vals(dev: Device, xs: &[f32], f: impl Fn(&Tensor) -> Result<Tensor>) -> Result<Vec<f32>> {
    let x = Tensor::from_vec(xs.to_vec(), [xs.len()])?.to_device(dev)?;
    f(&x)?.to_vec::<f32>()
}

fn activation_values_by_hand(dev: Device) -> Result<()> {
    let near = |got: Vec<f32>, want: &[f64]| {
        for (g, w) in got.iter().zip(want) {
            assert!(
                (*g as f64 - w).abs() < 1e-6 * (1.0 + w.abs()),
                "{got:?} vs {want:?}"
            );
        }
    };
    let x = [-2.0, 0.0, 1.5];
    near(vals(dev, &x, |t| t.leaky_relu(0.1))?, &[-0.2, 0.0, 1.5]);
    let e2 = (-2f64).exp() - 1.0;
    near(vals(dev, &x, |t| t.elu(2.0))?, &[2.0 * e2, 0.0, 1.5]);
    near(
        vals(dev, &x, |t| t.selu())?,
        &[
            1.050_700_987_355_480_5 * 1.673_263_242_354_377_3 * e2,
            0.0,
            1.576_051_481,
        ],
    );
    near(
        vals(dev, &x, |t| t.celu(2.0))?,
        &[2.0 * ((-1f64).exp() - 1.0), 0.0, 1.5],
    );
    near(vals(dev, &x, |t| t.hardtanh(-1.0, 1.0))?, &[-1.0, 0.0, 1.0]);
    near(
        vals(dev, &[-1.0, 3.0, 7.0], |t| t.relu6())?,
        &[0.0, 3.0, 6.0],
    );
    near(
        vals(dev, &[-4.0, 0.0, 1.5, 4.0], |t| t.hardsigmoid())?,
        &[0.0, 0.5, 0.75, 1.0],
    );
    near(
        vals(dev, &[-4.0, 0.0, 1.5, 4.0], |t| t.hardswish())?,
        &[0.0, 0.0, 1.125, 4.0],
    );
    near(vals(dev, &[-3.0, 1.0], |t| t.softsign())?, &[-0.75, 0.5]);
    // mish(1) = tanh(ln(1 + e)); logsigmoid(0) = -ln 2
    let m1 = (1f64.exp().ln_1p()).tanh();
    near(vals(dev, &[0.0, 1.0], |t| t.mish())?, &[0.0, m1]);
    near(
        vals(dev, &[0.0, 2.0], |t| t.logsigmoid())?,
        &[-(2f64.ln()), -((-2f64).exp().ln_1p())],
    );
    Ok(())
}

fn large_inputs_stay_finite(dev: Device) -> Result<()> {
    let xs = [-200.0, -90.0, 90.0, 200.0];
    for f in [
        (|t: &Tensor| t.elu(1.0)) as Act,
        |t| t.selu(),
        |t| t.celu(0.5),
        |t| t.mish(),
        |t| t.logsigmoid(),
        |t| t.softsign(),
    ] {
        let v = vals(dev, &xs, f)?;
        assert!(v.iter().all(|x| x.is_finite()), "{v:?}");
        let g = grads_at(dev, &xs.map(f64::from), f)?;
        assert!(g.iter().all(|x| x.is_finite()), "{g:?}");
    }
    Ok(())
}

fn einsum_by_hand(dev: Device) -> Result<()> {
    let a = Tensor::from_vec(vec![1f32, 2., 3., 4.], [2, 2])?.to_device(dev)?;
    let b = Tensor::from_vec(vec![5f32, 6., 7., 8.], [2, 2])?.to_device(dev)?;
    let ab = Tensor::einsum("ij,jk->ik", &[&a, &b])?;
    assert_eq!(ab.to_vec::<f32>()?, [19., 22., 43., 50.]);
    assert_eq!(Tensor::einsum("ii", &[&a])?.to_vec::<f32>()?, [5.]);
    assert_eq!(Tensor::einsum("ii->i", &[&a])?.to_vec::<f32>()?, [1., 4.]);
    assert_eq!(
        Tensor::einsum("ij->ji", &[&a])?.to_vec::<f32>()?,
        [1., 3., 2., 4.]
    );
    // implicit output: letters used once, in order, so "ba" transposes
    assert_eq!(
        Tensor::einsum("ba", &[&a])?.to_vec::<f32>()?,
        [1., 3., 2., 4.]
    );
    assert_eq!(Tensor::einsum("ij,ij", &[&a, &b])?.to_vec::<f32>()?, [70.]);
    let t = Tensor::einsum("i,j", &[&a.select(0, 0)?, &b.select(0, 1)?])?;
    assert_eq!(t.to_vec::<f32>()?, [7., 8., 14., 16.]);
    // a missing operand's label is summed: row sums of a times column sums of b
    let s = Tensor::einsum("ij,kl->ik", &[&a, &b])?;
    assert_eq!(s.to_vec::<f32>()?, [33., 45., 77., 105.]);
    // empty dims: an empty contraction gives zeros, a size-1 label broadcasts to 0
    let e = Tensor::zeros_on([2, 0], DType::F32, dev)?;
    let f = Tensor::zeros_on([0, 3], DType::F32, dev)?;
    let z = Tensor::einsum("ij,jk->ik", &[&e, &f])?;
    assert_eq!(
        (z.dims(), z.to_vec::<f32>()?),
        (&[2usize, 3][..], vec![0.; 6])
    );
    let one = Tensor::ones_on([1, 3], DType::F32, dev)?;
    assert_eq!(Tensor::einsum("ij,ij->ij", &[&one, &f])?.dims(), [0, 3]);
    Ok(())
}

fn modules(dev: Device) -> Result<()> {
    let x = Tensor::from_vec(vec![-4f32, -0.5, 0.0, 0.5, 4.0, 7.0], [1, 6])?.to_device(dev)?;
    let net = Sequential::new()
        .add(LeakyReLU::default())
        .add(ELU::new(0.5))
        .add(Hardtanh::new(-2.0, 5.0))
        .add(ReLU6)
        .add(SELU)
        .add(CELU::default())
        .add(Mish)
        .add(Hardswish)
        .add(Hardsigmoid);
    let want = x
        .leaky_relu(0.01)?
        .elu(0.5)?
        .hardtanh(-2.0, 5.0)?
        .relu6()?
        .selu()?
        .celu(1.0)?
        .mish()?
        .hardswish()?
        .hardsigmoid()?;
    assert_eq!(net.forward(&x)?.to_vec::<f32>()?, want.to_vec::<f32>()?);
    assert_eq!(net.num_parameters(), 0);

    let gn = GroupNorm::new(2, 4)?;
    let names: Vec<String> = gn.named_parameters().into_iter().map(|p| p.0).collect();
    assert_eq!(names, ["weight", "bias"]);
    gn.to_device(dev)?;
    let x = Tensor::randn([2, 4, 3], DType::F32)?.to_device(dev)?;
    let y = gn.forward(&x)?;
    let want = x.group_norm(2, None, None, 1e-5)?;
    for (a, b) in y.to_vec::<f32>()?.iter().zip(want.to_vec::<f32>()?) {
        assert!((a - b).abs() < 1e-6);
    }
    assert!(GroupNorm::with_config(2, 4, 1e-5, false)?
        .named_parameters()
        .is_empty());

    let inorm = InstanceNorm2d::with_config(3, 1e-5, 0.1, true, false)?;
    assert_eq!(inorm.named_parameters().len(), 2);
    assert!(inorm.named_buffers().is_empty());
    inorm.to_device(dev)?;
    let x = Tensor::randn([2, 3, 4, 4], DType::F32)?.to_device(dev)?;
    let y = inorm.forward(&x)?;
    // each (sample, channel) plane has mean 0 and variance 1
    let m = y.mean_dims(&[2, 3], false)?.to_vec::<f32>()?;
    let v = y.var_dims(&[2, 3], 0, false)?.to_vec::<f32>()?;
    assert!(m.iter().all(|m| m.abs() < 1e-5), "{m:?}");
    assert!(v.iter().all(|v| (v - 1.0).abs() < 1e-3), "{v:?}");
    // unbatched input: the same as a batch of one
    let one = inorm.forward(&x.select(0, 1)?)?;
    assert_eq!(one.dims(), [3, 4, 4]);
    let b = y.select(0, 1)?.to_vec::<f32>()?;
    for (a, b) in one.to_vec::<f32>()?.iter().zip(b) {
        assert!((a - b).abs() < 1e-6);
    }

    let cs = might::nn::CosineSimilarity::default();
    let a = Tensor::from_vec(vec![1f32, 0., 1., 1.], [2, 2])?.to_device(dev)?;
    let b = Tensor::from_vec(vec![0f32, 1., 2., 2.], [2, 2])?.to_device(dev)?;
    let c = cs.forward(&a, &b)?.to_vec::<f32>()?;
    assert!(c[0].abs() < 1e-7 && (c[1] - 1.0).abs() < 1e-6, "{c:?}");
    let kl = might::nn::KLDivLoss::new(KlDivReduction::Sum, false);
    let p = Tensor::from_vec(vec![0.5f32, 0.5], [2])?.to_device(dev)?;
    let l = kl.forward(&p.log()?, &p)?.to_vec::<f32>()?;
    assert!(l[0].abs() < 1e-7);
    let l2 = functional::kl_div(&p.log()?, &p, might::nn::Reduction::Mean, false)?;
    assert!(l2.to_vec::<f32>()?[0].abs() < 1e-7);
    Ok(())
}

fn instance_norm_running_stats(dev: Device) -> Result<()> {
    let json = fixture();
    let r = &json["instance_norm_running"];
    let s = shape(&r["shape"]);
    let mut m = InstanceNorm1d::with_config(3, 1e-5, r["momentum"].as_f64().unwrap(), true, true)?;
    let names: Vec<String> = m.state_dict().into_iter().map(|p| p.0).collect();
    assert_eq!(
        names,
        [
            "weight",
            "bias",
            "running_mean",
            "running_var",
            "num_batches_tracked"
        ]
    );
    {
        let _g = might::no_grad();
        let w = m.weight.clone().unwrap();
        w.copy_(&t64(Device::Cpu, &dense(&r["weight"]), &[3]))?;
        let b = m.bias.clone().unwrap();
        b.copy_(&t64(Device::Cpu, &dense(&r["bias"]), &[3]))?;
    }
    m.to_device(dev)?;
    let x = tt(dev, &dense(&r["x_train"]), &s, DType::F32);
    m.forward(&x)?;
    let (rm, rv, n) = m.running.clone().unwrap();
    let f = |t: &Tensor| t.to_f64_vec();
    close("running_mean", &f(&rm), &floats(&r["running_mean"]), 1e-5);
    close("running_var", &f(&rv), &floats(&r["running_var"]), 1e-5);
    assert_eq!(n.to_scalar::<i64>()?, 1);
    m.eval();
    let x = tt(dev, &dense(&r["x_eval"]), &s, DType::F32);
    close("eval", &f(&m.forward(&x)?), &floats(&r["y_eval"]), 1e-5);
    Ok(())
}

fn err_names(r: Result<Tensor>, op: &str, kind: ErrorKind) {
    let e = r.expect_err("an error");
    assert_eq!(e.kind, kind, "{e}");
    assert!(e.to_string().starts_with(&format!("{op}:")), "{e}");
}

fn bad_arguments_are_errors(dev: Device) -> Result<()> {
    let x = Tensor::randn([2, 6, 3], DType::F32)?.to_device(dev)?;
    let ints = Tensor::from_vec(vec![1i64, 2], [2])?.to_device(dev)?;
    err_names(ints.leaky_relu(0.1), "leaky_relu", ErrorKind::DType);
    err_names(ints.hardswish(), "hardswish", ErrorKind::DType);
    err_names(x.celu(0.0), "celu", ErrorKind::Invalid);
    err_names(x.hardtanh(1.0, -1.0), "hardtanh", ErrorKind::Invalid);
    err_names(x.elu(f64::NAN), "elu", ErrorKind::Invalid);
    err_names(
        x.group_norm(4, None, None, 1e-5),
        "group_norm",
        ErrorKind::Invalid,
    );
    err_names(
        x.group_norm(0, None, None, 1e-5),
        "group_norm",
        ErrorKind::Invalid,
    );
    let w = Tensor::ones_on([5], DType::F32, dev)?;
    err_names(
        x.group_norm(3, Some(&w), None, 1e-5),
        "group_norm",
        ErrorKind::Shape,
    );
    err_names(
        x.select(0, 0)?
            .select(0, 0)?
            .instance_norm(None, None, 1e-5),
        "instance_norm",
        ErrorKind::Shape,
    );
    err_names(
        functional::instance_norm(&x.narrow(2, 0, 1)?, None, None, None, None, true, 0.1, 1e-5),
        "instance_norm",
        ErrorKind::Invalid,
    );
    err_names(
        functional::instance_norm(&x, None, None, None, None, false, 0.1, 1e-5),
        "instance_norm",
        ErrorKind::Invalid,
    );
    let y = Tensor::randn([4, 3], DType::F32)?.to_device(dev)?;
    err_names(
        x.cosine_similarity(&y, 1, 1e-8),
        "cosine_similarity",
        ErrorKind::Shape,
    );
    err_names(
        x.cosine_similarity(&x, 3, 1e-8),
        "cosine_similarity",
        ErrorKind::Index,
    );
    let x64 = x.to_dtype(DType::I64)?;
    err_names(
        x.cosine_similarity(&x64, 1, 1e-8),
        "cosine_similarity",
        ErrorKind::DType,
    );
    err_names(
        x.kl_div(&y, KlDivReduction::Sum, false),
        "kl_div",
        ErrorKind::Shape,
    );
    let a = Tensor::randn([2, 3], DType::F32)?.to_device(dev)?;
    let b = Tensor::randn([4, 5], DType::F32)?.to_device(dev)?;
    err_names(
        Tensor::einsum("ij,jk->ik", &[&a, &b]),
        "einsum",
        ErrorKind::Shape,
    );
    err_names(Tensor::einsum("ij,jk", &[&a]), "einsum", ErrorKind::Invalid);
    err_names(Tensor::einsum("ij", &[]), "einsum", ErrorKind::Invalid);
    err_names(Tensor::einsum("ijk", &[&a]), "einsum", ErrorKind::Shape);
    err_names(Tensor::einsum("i1", &[&a]), "einsum", ErrorKind::Invalid);
    err_names(Tensor::einsum("i..j", &[&a]), "einsum", ErrorKind::Invalid);
    err_names(
        Tensor::einsum("...i...", &[&a]),
        "einsum",
        ErrorKind::Invalid,
    );
    err_names(
        Tensor::einsum("ij->jj", &[&a]),
        "einsum",
        ErrorKind::Invalid,
    );
    err_names(Tensor::einsum("ij->k", &[&a]), "einsum", ErrorKind::Invalid);
    err_names(Tensor::einsum("ii", &[&a]), "einsum", ErrorKind::Shape);
    err_names(
        Tensor::einsum("ij,ij", &[&a, &a.to_dtype(DType::I64)?]),
        "einsum",
        ErrorKind::DType,
    );
    assert!(GroupNorm::new(3, 4).is_err());
    let gn = GroupNorm::new(2, 4)?;
    assert!(gn.forward(&x).is_err());
    let inorm = InstanceNorm1d::new(6)?;
    assert!(inorm.forward(&Tensor::randn([2, 6], DType::F32)?).is_err());
    assert!(inorm
        .forward(&Tensor::randn([2, 5, 4], DType::F32)?)
        .is_err());
    Ok(())
}

/// Points away from every kink (0, ±1.5, ±3, 6), so finite differences are smooth there.
fn smooth_points(dev: Device) -> Tensor {
    t64(
        dev,
        &[
            -7.1, -3.4, -2.6, -1.7, -1.2, -0.4, -0.05, 0.07, 0.6, 1.3, 2.2, 2.9, 3.3, 5.8, 6.4,
        ],
        &[15],
    )
}

type Act = fn(&Tensor) -> Result<Tensor>;

fn gradcheck_activations(dev: Device) -> Result<()> {
    let x = smooth_points(dev);
    let ops: Vec<(&str, Act)> = vec![
        ("leaky_relu", |t| t.leaky_relu(0.07)),
        ("elu", |t| t.elu(1.3)),
        ("selu", |t| t.selu()),
        ("celu", |t| t.celu(0.6)),
        ("hardtanh", |t| t.hardtanh(-1.5, 2.0)),
        ("relu6", |t| t.relu6()),
        ("hardsigmoid", |t| t.hardsigmoid()),
        ("hardswish", |t| t.hardswish()),
        ("mish", |t| t.mish()),
        ("softsign", |t| t.softsign()),
        ("logsigmoid", |t| t.logsigmoid()),
    ];
    for (name, f) in ops {
        gradcheck(|v| f(&v[0]), std::slice::from_ref(&x), GradCheck::default())
            .map_err(|e| might::Error::invalid(name, e.to_string()))?;
    }
    Ok(())
}

fn randn(dev: Device, shape: &[usize]) -> Tensor {
    Tensor::randn(shape.to_vec(), DType::F64)
        .unwrap()
        .to_device(dev)
        .unwrap()
}

fn gradcheck_norms(dev: Device) -> Result<()> {
    might::manual_seed(11);
    let (x, w, b) = (randn(dev, &[2, 4, 3]), randn(dev, &[4]), randn(dev, &[4]));
    gradcheck(
        |v| v[0].group_norm(2, Some(&v[1]), Some(&v[2]), 1e-5),
        &[x.clone(), w.clone(), b.clone()],
        GradCheck::default(),
    )?;
    gradcheck(
        |v| v[0].instance_norm(Some(&v[1]), Some(&v[2]), 1e-5),
        &[x.clone(), w, b],
        GradCheck::default(),
    )?;
    gradcheck(
        |v| v[0].group_norm(1, None, None, 1e-3),
        &[randn(dev, &[2, 3, 2, 2])],
        GradCheck::default(),
    )?;
    let mut gn = GroupNorm::new(2, 4)?;
    gn.set_affine(Some(randn(dev, &[4])), Some(randn(dev, &[4])))?;
    gradcheck(|v| gn.forward(&v[0]), &[x], GradCheck::default())?;
    Ok(())
}

fn gradcheck_similarity_and_kl(dev: Device) -> Result<()> {
    might::manual_seed(12);
    gradcheck(
        |v| v[0].cosine_similarity(&v[1], 1, 1e-8),
        &[randn(dev, &[3, 4]), randn(dev, &[3, 4])],
        GradCheck::default(),
    )?;
    gradcheck(
        |v| v[0].cosine_similarity(&v[1], -1, 1e-8),
        &[randn(dev, &[2, 1, 3]), randn(dev, &[4, 3])],
        GradCheck::default(),
    )?;
    // (a norm below eps is not finite-difference checked: PyTorch's clamp acts on the value
    // only, so its gradient is not the derivative there; the fixture `cos_dim0_eps` checks it)
    let logp = randn(dev, &[3, 4]).log_softmax(1)?;
    let p = randn(dev, &[3, 4]).softmax(1)?;
    for red in [
        KlDivReduction::None,
        KlDivReduction::Sum,
        KlDivReduction::Mean,
        KlDivReduction::BatchMean,
    ] {
        gradcheck(
            |v| v[0].kl_div(&v[1], red, false),
            &[logp.clone(), p.clone()],
            GradCheck::default(),
        )?;
    }
    gradcheck(
        |v| v[0].kl_div(&v[1], KlDivReduction::BatchMean, true),
        &[logp.clone(), p.log()?],
        GradCheck::default(),
    )?;
    Ok(())
}

fn gradcheck_einsum(dev: Device) -> Result<()> {
    might::manual_seed(13);
    let cases: &[(&str, &[&[usize]])] = &[
        ("ij,jk->ik", &[&[2, 3], &[3, 2]]),
        ("ii->i", &[&[3, 3]]),
        ("ii", &[&[3, 3]]),
        ("bij,bjk->bik", &[&[2, 2, 3], &[2, 3, 2]]),
        ("...ij,...jk", &[&[2, 1, 2, 3], &[3, 3, 2]]),
        ("bn,anm,bm->ba", &[&[2, 3], &[2, 3, 2], &[2, 2]]),
        ("iij,jii->j", &[&[2, 2, 3], &[3, 2, 2]]),
        ("ij,ij->ij", &[&[1, 3], &[2, 3]]),
        ("ab,bc,cd->ad", &[&[2, 3], &[3, 2], &[2, 2]]),
    ];
    for (eq, shapes) in cases {
        let xs: Vec<Tensor> = shapes.iter().map(|s| randn(dev, s)).collect();
        gradcheck(
            |v| Tensor::einsum(eq, &v.iter().collect::<Vec<_>>()),
            &xs,
            GradCheck::default(),
        )
        .map_err(|e| might::Error::invalid("einsum", format!("{eq}: {e}")))?;
    }
    Ok(())
}
