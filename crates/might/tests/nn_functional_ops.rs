//! Padding, resizing, transposed convolution and the extra pools (composite ops):
//! hand-computed values, gradchecks, PyTorch fixtures (tests/fixtures/gen_nn_ops.py), errors,
//! and the nn layers over them.

use might::autograd::{gradcheck, GradCheck};
use might::nn::{
    AdaptiveMaxPool2d, ConvTranspose1d, ConvTranspose2d, ConvTransposeConfig, MaxPool1d, Module,
    ReflectionPad2d, ReplicationPad2d, Upsample, ZeroPad2d,
};
use might::{DType, Device, ErrorKind, Result, Tensor};

mod common;

device_tests!(
    pad_modes_by_hand,
    pad_2d_and_crop_by_hand,
    interpolate_nearest_and_linear_by_hand,
    conv_transpose_by_hand,
    pools_by_hand,
    layers_forward,
    bad_arguments_are_errors,
    ; f64:
    gradcheck_pad,
    gradcheck_interpolate,
    gradcheck_conv_transpose,
    gradcheck_pools,
    matches_pytorch_fixture,
    conv_transpose_is_conv2d_input_gradient,
);

fn t(dev: Device, v: &[f32], s: &[usize]) -> Tensor {
    Tensor::from_slice(v, s).unwrap().to_device(dev).unwrap()
}

fn t64(dev: Device, v: &[f64], s: &[usize]) -> Tensor {
    Tensor::from_slice(v, s).unwrap().to_device(dev).unwrap()
}

fn randn(dev: Device, shape: &[usize]) -> Tensor {
    Tensor::randn(shape, DType::F64)
        .unwrap()
        .to_device(dev)
        .unwrap()
}

fn f32s(x: &Tensor) -> Vec<f32> {
    x.to_vec::<f32>().unwrap()
}

fn assert_close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!(
            (a - b).abs() <= tol * (1.0 + b.abs()),
            "{what}[{i}]: got {a}, want {b}"
        );
    }
}

// ---------------------------------------------------------------- hand-computed forward values

fn pad_modes_by_hand(dev: Device) -> Result<()> {
    let x = t(dev, &[1., 2., 3.], &[1, 1, 3]);
    let p = |mode: &str, pads: &[i64]| f32s(&x.pad(pads, mode, 9.0).unwrap());
    assert_eq!(p("constant", &[2, 1]), [9., 9., 1., 2., 3., 9.]);
    assert_eq!(p("reflect", &[2, 2]), [3., 2., 1., 2., 3., 2., 1.]);
    assert_eq!(p("replicate", &[2, 1]), [1., 1., 1., 2., 3., 3.]);
    assert_eq!(p("circular", &[2, 3]), [2., 3., 1., 2., 3., 1., 2., 3.]);
    // negative pads crop; reflect folds about the original edges, circular wraps what is left
    assert_eq!(p("constant", &[-1, 1]), [2., 3., 9.]);
    assert_eq!(p("reflect", &[-1, 2]), [2., 3., 2., 1.]);
    assert_eq!(p("circular", &[2, -1]), [1., 2., 1., 2.]);
    // no pads: the input itself
    assert_eq!(p("reflect", &[]), [1., 2., 3.]);
    Ok(())
}

fn pad_2d_and_crop_by_hand(dev: Device) -> Result<()> {
    // [[1, 2], [3, 4]]: [left, right, top, bottom] = [1, 0, 0, 1]
    let x = t(dev, &[1., 2., 3., 4.], &[2, 2]);
    let y = x.pad(&[1, 0, 0, 1], "constant", 0.0)?;
    assert_eq!(y.dims(), &[3, 3]);
    assert_eq!(f32s(&y), [0., 1., 2., 0., 3., 4., 0., 0., 0.]);
    let y = x.pad(&[1, 1, 1, 0], "replicate", 0.0)?;
    assert_eq!(f32s(&y), [1., 1., 2., 2., 1., 1., 2., 2., 3., 3., 4., 4.]);
    // crop everything along one dim: an empty tensor, not an error
    let y = x.pad(&[0, 0, -1, -1], "constant", 0.0)?;
    assert_eq!(y.dims(), &[0, 2]);
    Ok(())
}

fn interpolate_nearest_and_linear_by_hand(dev: Device) -> Result<()> {
    let x = t(dev, &[1., 2., 4.], &[1, 1, 3]);
    let up = |mode: &str, n: usize, ac: Option<bool>| {
        f32s(&x.interpolate(Some(&[n]), None, mode, ac).unwrap())
    };
    assert_eq!(up("nearest", 6, None), [1., 1., 2., 2., 4., 4.]);
    // 3 -> 5: nearest takes floor(o * 0.6) = 0,0,1,1,2; nearest-exact floor((o + .5) * .6)
    assert_eq!(up("nearest", 5, None), [1., 1., 2., 2., 4.]);
    assert_eq!(up("nearest-exact", 5, None), [1., 1., 2., 4., 4.]);
    // align_corners: the ends line up, 3 -> 5 lands on the midpoints
    assert_eq!(up("linear", 5, Some(true)), [1., 1.5, 2., 3., 4.]);
    // half-pixel: 3 -> 6 reads at (o + .5) / 2 - .5 = -.25 (clamped), .25, .75, ...
    assert_eq!(up("linear", 6, None), [1., 1.25, 1.75, 2.5, 3.5, 4.]);
    // a 2-D bilinear upsample by 2 of [[0, 4], [8, 12]] with align_corners
    let x = t(dev, &[0., 4., 8., 12.], &[1, 1, 2, 2]);
    let y = x.interpolate(None, Some(&[1.5]), "bilinear", Some(true))?;
    assert_eq!(y.dims(), &[1, 1, 3, 3]);
    assert_eq!(f32s(&y), [0., 2., 4., 4., 6., 8., 8., 10., 12.]);
    // bicubic of a constant is the constant (the weights sum to one)
    let c = Tensor::full([1, 2, 3, 4], 2.5, DType::F32)?.to_device(dev)?;
    let y = c.interpolate(Some(&[5, 7]), None, "bicubic", None)?;
    assert!(f32s(&y).iter().all(|v| (v - 2.5).abs() < 1e-5));
    Ok(())
}

fn conv_transpose_by_hand(dev: Device) -> Result<()> {
    // 1-D, stride 2: each input stamps the kernel [1, 10] at 2 * i
    let x = t(dev, &[1., 2., 3.], &[1, 1, 3]);
    let w = t(dev, &[1., 10.], &[1, 1, 2]);
    let y = x.conv_transpose1d(&w, None, 2, 0, 0, 1, 1)?;
    assert_eq!(f32s(&y), [1., 10., 2., 20., 3., 30.]);
    // kernel 3 at stride 2 overlaps; padding 1 drops one output at each end
    let w = t(dev, &[1., 1., 1.], &[1, 1, 3]);
    let y = x.conv_transpose1d(&w, None, 2, 0, 0, 1, 1)?;
    assert_eq!(f32s(&y), [1., 1., 3., 2., 5., 3., 3.]);
    let y = x.conv_transpose1d(&w, None, 2, 1, 1, 1, 1)?;
    assert_eq!(f32s(&y), [1., 3., 2., 5., 3., 3.]);
    // 2-D, two output channels, bias: a 1x1 input stamps each channel's kernel plus bias
    let x = t(dev, &[2.], &[1, 1, 1, 1]);
    let w = t(dev, &[1., 2., 3., 4., 5., 6., 7., 8.], &[1, 2, 2, 2]);
    let b = t(dev, &[0.5, -1.], &[2]);
    let y = x.conv_transpose2d(&w, Some(&b), [1, 1], [0, 0], [0, 0], 1, [1, 1])?;
    assert_eq!(y.dims(), &[1, 2, 2, 2]);
    assert_eq!(f32s(&y), [2.5, 4.5, 6.5, 8.5, 9., 11., 13., 15.]);
    // unbatched input
    let y = x
        .squeeze(0)?
        .conv_transpose2d(&w, None, [1, 1], [0, 0], [0, 0], 1, [1, 1])?;
    assert_eq!(y.dims(), &[2, 2, 2]);
    Ok(())
}

fn pools_by_hand(dev: Device) -> Result<()> {
    let x = t(dev, &[3., 1., 4., 1., 5., 9., 2.], &[1, 1, 7]);
    // window 2, stride 2: floor mode drops the lone 2, ceil mode keeps it
    let (y, i) = x.max_pool1d_with_indices(2, 2, 0, 1, false)?;
    assert_eq!(f32s(&y), [3., 4., 9.]);
    assert_eq!(i.to_vec::<i64>()?, [0, 2, 5]);
    assert_eq!(f32s(&x.max_pool1d(2, 2, 0, 1, true)?), [3., 4., 9., 2.]);
    // dilation 3 reads positions o, o + 3
    assert_eq!(f32s(&x.max_pool1d(2, 1, 0, 3, false)?), [3., 5., 9., 2.]);
    // adaptive to 3: windows [0, 3), [2, 5), [4, 7)
    let (y, i) = x.adaptive_max_pool1d(3)?;
    assert_eq!(f32s(&y), [4., 5., 9.]);
    assert_eq!(i.to_vec::<i64>()?, [2, 4, 5]);
    // avg, padding 1, ceil: windows [-1, 2), [1, 4), [3, 6), [5, 8)
    let y = x.avg_pool1d(3, 2, 1, true, false)?;
    assert_close(
        &y.to_f64_vec(),
        &[2., 2., 5., 5.5],
        1e-6,
        "avg no pad count",
    );
    let y = x.avg_pool1d(3, 2, 1, true, true)?;
    // the last window ends at 7 + 1 (padding), so it counts 3 - 0 = 3 ... clipped at L + pad
    assert_close(
        &y.to_f64_vec(),
        &[4. / 3., 2., 5., 11. / 3.],
        1e-6,
        "avg pad count",
    );
    // 2-D adaptive max of [[1, 2], [3, 4]] to 1x1: 4 at flat index 3
    let x = t(dev, &[1., 2., 3., 4.], &[1, 1, 2, 2]);
    let (y, i) = x.adaptive_max_pool2d([1, 1])?;
    assert_eq!((f32s(&y), i.to_vec::<i64>()?), (vec![4.], vec![3]));
    let y = x.max_pool2d_ext([2, 2], [1, 1], [1, 1], [1, 1], false)?;
    assert_eq!(f32s(&y), [1., 2., 2., 3., 4., 4., 3., 4., 4.]);
    Ok(())
}

fn layers_forward(dev: Device) -> Result<()> {
    let x = t(dev, &[1., 2., 3., 4.], &[1, 1, 2, 2]);
    let up = Upsample::scale(2.0, "nearest");
    assert_eq!(up.forward(&x)?.dims(), &[1, 1, 4, 4]);
    let up = Upsample::size(&[3, 3], "bilinear").align_corners(true);
    assert_eq!(f32s(&up.forward(&x)?)[4], 2.5);
    assert_eq!(ZeroPad2d::new(1).forward(&x)?.dims(), &[1, 1, 4, 4]);
    let r = ReflectionPad2d::with_sides([1, 0, 0, 0]).forward(&x)?;
    assert_eq!(f32s(&r), [2., 1., 2., 4., 3., 4.]);
    let r = ReplicationPad2d::new(1).forward(&x)?;
    assert_eq!(f32s(&r)[..4], [1., 1., 2., 2.]);
    assert_eq!(f32s(&AdaptiveMaxPool2d::new([1, 2]).forward(&x)?), [3., 4.]);
    let x1 = t(dev, &[1., 5., 2., 0.], &[1, 1, 4]);
    assert_eq!(f32s(&MaxPool1d::new(2).forward(&x1)?), [5., 2.]);
    // ConvTranspose layers: PyTorch names and layout, init within 1/sqrt(fan_in)
    let cfg = ConvTransposeConfig {
        stride: 2,
        padding: 1,
        output_padding: 1,
        groups: 2,
        ..Default::default()
    };
    let m = ConvTranspose2d::new(4, 6, 3, cfg)?;
    let names: Vec<String> = m.named_parameters().into_iter().map(|p| p.0).collect();
    assert_eq!(names, ["weight", "bias"]);
    assert_eq!(m.weight.dims(), &[4, 3, 3, 3]);
    let bound = 1.0 / 27f64.sqrt();
    assert!(m.weight.to_f64_vec().iter().all(|v| v.abs() <= bound));
    let x = Tensor::randn([2, 4, 5, 5], DType::F32)?.to_device(dev)?;
    let m = ConvTranspose2d::from_weights(m.weight.to_device(dev)?, None, cfg)?;
    assert_eq!(m.forward(&x)?.dims(), &[2, 6, 10, 10]);
    let m = ConvTranspose1d::new(4, 2, 3, ConvTransposeConfig::default())?;
    assert_eq!(m.weight.dims(), &[4, 2, 3]);
    let m = ConvTranspose1d::from_weights(m.weight.to_device(dev)?, None, m.cfg)?;
    let x = Tensor::randn([1, 4, 5], DType::F32)?.to_device(dev)?;
    assert_eq!(m.forward(&x)?.dims(), &[1, 2, 7]);
    Ok(())
}

// ----------------------------------------------------------------------------------- gradients

fn gradcheck_pad(dev: Device) -> Result<()> {
    let x = [randn(dev, &[2, 3, 4, 5])];
    for mode in ["constant", "reflect", "replicate", "circular"] {
        gradcheck(
            |v| v[0].pad(&[2, -1, 3, 1], mode, 0.7),
            &x,
            GradCheck::default(),
        )?;
    }
    Ok(())
}

fn gradcheck_interpolate(dev: Device) -> Result<()> {
    let x2 = [randn(dev, &[1, 2, 4, 5])];
    let x1 = [randn(dev, &[2, 2, 5])];
    let g = GradCheck::default();
    gradcheck(
        |v| v[0].interpolate(Some(&[7, 3]), None, "nearest", None),
        &x2,
        g,
    )?;
    gradcheck(
        |v| v[0].interpolate(None, Some(&[0.7]), "nearest-exact", None),
        &x2,
        g,
    )?;
    gradcheck(
        |v| v[0].interpolate(Some(&[8]), None, "linear", None),
        &x1,
        g,
    )?;
    gradcheck(
        |v| v[0].interpolate(Some(&[3]), None, "linear", Some(true)),
        &x1,
        g,
    )?;
    gradcheck(
        |v| v[0].interpolate(Some(&[6, 7]), None, "bilinear", None),
        &x2,
        g,
    )?;
    gradcheck(
        |v| v[0].interpolate(None, Some(&[1.5]), "bicubic", Some(true)),
        &x2,
        g,
    )?;
    gradcheck(
        |v| v[0].interpolate(Some(&[3, 9]), None, "bicubic", None),
        &x2,
        g,
    )
}

fn gradcheck_conv_transpose(dev: Device) -> Result<()> {
    let g = GradCheck::default();
    let inputs = [
        randn(dev, &[2, 4, 3, 3]),
        randn(dev, &[4, 3, 3, 2]),
        randn(dev, &[6]),
    ];
    gradcheck(
        |v| v[0].conv_transpose2d(&v[1], Some(&v[2]), [2, 1], [1, 1], [1, 0], 2, [1, 2]),
        &inputs,
        g,
    )?;
    let inputs = [randn(dev, &[2, 2, 5]), randn(dev, &[2, 3, 3])];
    gradcheck(
        |v| v[0].conv_transpose1d(&v[1], None, 3, 2, 2, 1, 1),
        &inputs,
        g,
    )
}

fn gradcheck_pools(dev: Device) -> Result<()> {
    // random values: ties (where max pooling is not differentiable) have probability zero
    let x = [randn(dev, &[2, 2, 7, 6])];
    let x1 = [randn(dev, &[2, 3, 9])];
    let g = GradCheck::default();
    gradcheck(
        |v| v[0].max_pool2d_ext([3, 2], [2, 2], [1, 1], [2, 1], true),
        &x,
        g,
    )?;
    gradcheck(|v| v[0].max_pool1d(3, 2, 1, 2, true), &x1, g)?;
    gradcheck(|v| Ok(v[0].adaptive_max_pool2d([3, 4])?.0), &x, g)?;
    gradcheck(|v| Ok(v[0].adaptive_max_pool2d([9, 7])?.0), &x, g)?;
    gradcheck(|v| Ok(v[0].adaptive_max_pool1d(4)?.0), &x1, g)?;
    gradcheck(
        |v| v[0].avg_pool2d_ext([3, 3], [2, 2], [1, 1], true, false, None),
        &x,
        g,
    )?;
    gradcheck(
        |v| v[0].avg_pool2d_ext([2, 3], [2, 1], [1, 1], true, true, Some(5)),
        &x,
        g,
    )?;
    gradcheck(|v| v[0].avg_pool1d(3, 2, 1, true, false), &x1, g)
}

fn conv_transpose_is_conv2d_input_gradient(dev: Device) -> Result<()> {
    // <conv2d(x, w), y> = <x, conv_transpose2d(y, w)>: the adjoint identity, any settings
    let (s, p, d, g) = ([2, 3], [1, 2], [2, 1], 2);
    let x = randn(dev, &[2, 4, 9, 10]);
    let w = randn(dev, &[6, 2, 3, 3]);
    let cx = x.conv2d(&w, None, s, p, d, g)?;
    let y = randn(dev, cx.dims());
    // output_padding recovers the input size lost to the stride's floor
    let op = [
        9 - ((cx.dims()[2] - 1) * s[0] - 2 * p[0] + d[0] * 2 + 1),
        10 - ((cx.dims()[3] - 1) * s[1] - 2 * p[1] + d[1] * 2 + 1),
    ];
    let ty = y.conv_transpose2d(&w, None, s, p, op, g, d)?;
    assert_eq!(ty.dims(), x.dims());
    let lhs = cx.mul(&y)?.sum_all()?.item()?;
    let rhs = x.mul(&ty)?.sum_all()?.item()?;
    assert!(
        (lhs - rhs).abs() < 1e-9 * (1.0 + lhs.abs()),
        "{lhs} vs {rhs}"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------- PyTorch

fn flat(v: &serde_json::Value) -> Vec<f64> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

fn usizes(v: &serde_json::Value) -> Vec<usize> {
    flat(v).iter().map(|&x| x as usize).collect()
}

/// A setting that PyTorch takes as an int or a list, as a pair.
fn pair(v: &serde_json::Value) -> [usize; 2] {
    match v.as_u64() {
        Some(n) => [n as usize; 2],
        None => {
            let u = usizes(v);
            [u[0], u[1]]
        }
    }
}

fn int(v: &serde_json::Value) -> usize {
    v.as_u64().expect("int") as usize
}

/// Run one fixture case in `dtype`, comparing outputs, indices and gradients within `tol`.
fn run_case(dev: Device, case: &serde_json::Value, dtype: DType, tol: f64) -> Result<()> {
    let name = case["name"].as_str().unwrap();
    let op = case["op"].as_str().unwrap();
    let a = &case["args"];
    let mut inputs = vec![];
    for (k, v) in case["inputs"].as_object().unwrap() {
        let x = t64(dev, &flat(&v["data"]), &usizes(&v["shape"]))
            .to_dtype(dtype)?
            .with_requires_grad();
        inputs.push((k.clone(), x));
    }
    let get = |k: &str| inputs.iter().find(|(n, _)| n == k).map(|(_, t)| t);
    let x = get("x").unwrap();
    let mut indices = None;
    let b = get("b");
    let y = match op {
        "pad" => {
            let pads: Vec<i64> = flat(&a["pads"]).iter().map(|&v| v as i64).collect();
            x.pad(
                &pads,
                a["mode"].as_str().unwrap(),
                a["value"].as_f64().unwrap(),
            )?
        }
        "interpolate" => {
            let size = a["size"].as_array().map(|_| usizes(&a["size"]));
            let scale = a["scale_factor"]
                .as_array()
                .map(|_| flat(&a["scale_factor"]));
            x.interpolate(
                size.as_deref(),
                scale.as_deref(),
                a["mode"].as_str().unwrap(),
                a["align_corners"].as_bool(),
            )?
        }
        "conv_transpose2d" => x.conv_transpose2d(
            get("w").unwrap(),
            b,
            pair(&a["stride"]),
            pair(&a["padding"]),
            pair(&a["output_padding"]),
            int(&a["groups"]),
            pair(&a["dilation"]),
        )?,
        "conv_transpose1d" => x.conv_transpose1d(
            get("w").unwrap(),
            b,
            int(&a["stride"]),
            int(&a["padding"]),
            int(&a["output_padding"]),
            int(&a["groups"]),
            int(&a["dilation"]),
        )?,
        "max_pool2d" => {
            let (y, i) = x.max_pool2d_ext_with_indices(
                pair(&a["kernel"]),
                pair(&a["stride"]),
                pair(&a["padding"]),
                pair(&a["dilation"]),
                a["ceil_mode"].as_bool().unwrap(),
            )?;
            indices = Some(i);
            y
        }
        "max_pool1d" => {
            let (y, i) = x.max_pool1d_with_indices(
                int(&a["kernel"]),
                int(&a["stride"]),
                int(&a["padding"]),
                int(&a["dilation"]),
                a["ceil_mode"].as_bool().unwrap(),
            )?;
            indices = Some(i);
            y
        }
        "adaptive_max_pool2d" => {
            let (y, i) = x.adaptive_max_pool2d(pair(&a["output"]))?;
            indices = Some(i);
            y
        }
        "adaptive_max_pool1d" => {
            let (y, i) = x.adaptive_max_pool1d(int(&a["output"]))?;
            indices = Some(i);
            y
        }
        "avg_pool2d" => x.avg_pool2d_ext(
            pair(&a["kernel"]),
            pair(&a["stride"]),
            pair(&a["padding"]),
            a["ceil_mode"].as_bool().unwrap(),
            a["count_include_pad"].as_bool().unwrap(),
            a["divisor_override"].as_u64().map(|v| v as usize),
        )?,
        "avg_pool1d" => x.avg_pool1d(
            int(&a["kernel"]),
            int(&a["stride"]),
            int(&a["padding"]),
            a["ceil_mode"].as_bool().unwrap(),
            a["count_include_pad"].as_bool().unwrap(),
        )?,
        other => panic!("unknown op {other}"),
    };
    assert_eq!(
        y.dims(),
        usizes(&case["y_shape"]).as_slice(),
        "{name}: shape"
    );
    assert_close(
        &y.to_f64_vec(),
        &flat(&case["y"]),
        tol,
        &format!("{name} y"),
    );
    if let Some(i) = indices {
        let want: Vec<i64> = flat(&case["indices"]).iter().map(|&v| v as i64).collect();
        assert_eq!(i.to_vec::<i64>()?, want, "{name}: indices");
    }
    let gy = t64(dev, &flat(&case["gy"]), y.dims()).to_dtype(dtype)?;
    y.backward_with_grad(&gy)?;
    for (k, p) in &inputs {
        let g = p.grad().expect("gradient");
        assert_eq!(g.dtype(), dtype);
        let want = flat(&case["grads"][k.as_str()]);
        assert_close(&g.to_f64_vec(), &want, tol, &format!("{name} d{k}"));
    }
    Ok(())
}

fn matches_pytorch_fixture(dev: Device) -> Result<()> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/nn_ops.json"
    );
    let text = std::fs::read_to_string(path).expect("read nn_ops.json");
    let json: serde_json::Value = serde_json::from_str(&text).expect("parse nn_ops.json");
    let cases = json["cases"].as_array().unwrap();
    assert!(cases.len() >= 40);
    for case in cases {
        run_case(dev, case, DType::F64, 1e-7)?;
        run_case(dev, case, DType::F32, 1e-4)?;
    }
    Ok(())
}

// ------------------------------------------------------------------------------------- errors

/// `r` is an error of `kind` whose message starts with `op: ` and contains `needle`.
fn expect_err<T: std::fmt::Debug>(r: Result<T>, kind: ErrorKind, op: &str, needle: &str) {
    let e = r.expect_err("expected an error");
    assert_eq!(e.kind, kind, "{e}");
    let s = e.to_string();
    assert!(s.starts_with(&format!("{op}: ")), "{s}");
    assert!(s.contains(needle), "{needle:?} not in {s}");
}

fn bad_arguments_are_errors(dev: Device) -> Result<()> {
    use ErrorKind::{DType as Dt, Invalid, Shape};
    let x = Tensor::zeros([1, 2, 3, 4], DType::F32)?.to_device(dev)?;
    let x1 = Tensor::zeros([1, 2, 5], DType::F32)?.to_device(dev)?;
    // pad
    expect_err(x.pad(&[1], "constant", 0.0), Shape, "pad", "pairs");
    expect_err(
        x.pad(&[1; 10], "constant", 0.0),
        Shape,
        "pad",
        "[1, 2, 3, 4]",
    );
    expect_err(x.pad(&[1, 1], "mirror", 0.0), Invalid, "pad", "mirror");
    expect_err(x.pad(&[4, 0], "reflect", 0.0), Invalid, "pad", "less than");
    expect_err(x.pad(&[5, 0], "circular", 0.0), Invalid, "pad", "once");
    expect_err(
        x.pad(&[-3, -2], "constant", 0.0),
        Invalid,
        "pad",
        "negative",
    );
    let empty = Tensor::zeros([2, 0], DType::F32)?.to_device(dev)?;
    expect_err(
        empty.pad(&[1, 1], "replicate", 0.0),
        Invalid,
        "pad",
        "empty",
    );
    assert_eq!(empty.pad(&[1, 1], "constant", 0.0)?.dims(), &[2, 2]);
    // interpolate
    let i = |x: &Tensor, s: Option<&[usize]>, f: Option<&[f64]>, m: &str, ac| {
        x.interpolate(s, f, m, ac)
    };
    expect_err(
        i(&x, None, None, "nearest", None),
        Invalid,
        "interpolate",
        "exactly one",
    );
    expect_err(
        i(&x, Some(&[2, 2]), Some(&[2.]), "nearest", None),
        Invalid,
        "interpolate",
        "exactly one",
    );
    expect_err(
        i(&x, Some(&[2]), None, "area", None),
        Invalid,
        "interpolate",
        "area",
    );
    expect_err(
        i(&x, Some(&[2]), None, "linear", None),
        Shape,
        "interpolate",
        "3-D",
    );
    expect_err(
        i(&x1, Some(&[2]), None, "bicubic", None),
        Shape,
        "interpolate",
        "4-D",
    );
    expect_err(
        i(&x, Some(&[2, 3, 4]), None, "nearest", None),
        Shape,
        "interpolate",
        "3 values",
    );
    expect_err(
        i(&x, Some(&[0, 3]), None, "nearest", None),
        Shape,
        "interpolate",
        "positive",
    );
    expect_err(
        i(&x, None, Some(&[-1.]), "bilinear", None),
        Invalid,
        "interpolate",
        "positive",
    );
    expect_err(
        i(&x, None, Some(&[0.1]), "bilinear", None),
        Shape,
        "interpolate",
        "positive",
    );
    expect_err(
        i(&x, Some(&[2]), None, "nearest", Some(true)),
        Invalid,
        "interpolate",
        "align_corners",
    );
    let xi = Tensor::zeros([1, 1, 2, 2], DType::I64)?.to_device(dev)?;
    expect_err(
        i(&xi, Some(&[4]), None, "nearest", None),
        Dt,
        "interpolate",
        "float",
    );
    // conv_transpose
    let w = Tensor::zeros([2, 3, 3, 3], DType::F32)?.to_device(dev)?;
    let ct = |x: &Tensor, w: &Tensor, b: Option<&Tensor>, s, p, op, g, d| {
        x.conv_transpose2d(w, b, s, p, op, g, d)
    };
    let ct2 = "conv_transpose2d";
    expect_err(
        ct(&x1, &w, None, [1, 1], [0, 0], [0, 0], 1, [1, 1]),
        Shape,
        ct2,
        "[1, 2, 5]",
    );
    let w3 = Tensor::zeros([3, 3, 3, 3], DType::F32)?.to_device(dev)?;
    expect_err(
        ct(&x, &w3, None, [1, 1], [0, 0], [0, 0], 1, [1, 1]),
        Shape,
        ct2,
        "channels",
    );
    expect_err(
        ct(&x, &w, None, [1, 1], [0, 0], [0, 0], 3, [1, 1]),
        Shape,
        ct2,
        "groups 3",
    );
    expect_err(
        ct(&x, &w, None, [0, 1], [0, 0], [0, 0], 1, [1, 1]),
        Invalid,
        ct2,
        "stride",
    );
    expect_err(
        ct(&x, &w, None, [2, 2], [0, 0], [2, 0], 1, [1, 1]),
        Invalid,
        ct2,
        "output_padding",
    );
    expect_err(
        ct(&x, &w, None, [1, 1], [3, 0], [0, 0], 1, [1, 1]),
        Shape,
        ct2,
        "output size",
    );
    let b = Tensor::zeros([4], DType::F32)?.to_device(dev)?;
    expect_err(
        ct(&x, &w, Some(&b), [1, 1], [0, 0], [0, 0], 1, [1, 1]),
        Shape,
        ct2,
        "bias",
    );
    expect_err(
        x1.conv_transpose1d(&w, None, 1, 0, 0, 1, 1),
        Shape,
        "conv_transpose1d",
        "weight must be 3-D",
    );
    // pools
    let mp = "max_pool2d";
    expect_err(
        x.max_pool2d_ext([3, 3], [1, 1], [2, 0], [1, 1], false),
        Invalid,
        mp,
        "half",
    );
    expect_err(
        x.max_pool2d_ext([0, 3], [1, 1], [0, 0], [1, 1], false),
        Invalid,
        mp,
        "positive",
    );
    expect_err(
        x.max_pool2d_ext([3, 3], [1, 1], [0, 0], [2, 1], false),
        Shape,
        mp,
        "too small",
    );
    let flat2 = Tensor::zeros([2, 5], DType::F32)?.to_device(dev)?;
    expect_err(
        flat2.max_pool2d_ext([1, 1], [1, 1], [0, 0], [1, 1], false),
        Shape,
        mp,
        "[C, H, W]",
    );
    expect_err(
        xi.max_pool2d_ext([1, 1], [1, 1], [0, 0], [1, 1], false),
        Dt,
        mp,
        "float",
    );
    expect_err(
        x.max_pool1d(2, 1, 0, 1, false),
        Shape,
        "max_pool1d",
        "[N, C, L]",
    );
    expect_err(
        x.adaptive_max_pool2d([0, 2]),
        Invalid,
        "adaptive_max_pool2d",
        "output",
    );
    expect_err(
        x1.adaptive_max_pool1d(0),
        Invalid,
        "adaptive_max_pool1d",
        "output",
    );
    let ap = "avg_pool2d";
    expect_err(
        x.avg_pool2d_ext([2, 2], [1, 1], [0, 0], false, true, Some(0)),
        Invalid,
        ap,
        "divisor",
    );
    expect_err(
        x.avg_pool2d_ext([5, 2], [1, 1], [0, 0], false, true, None),
        Shape,
        ap,
        "too small",
    );
    expect_err(
        x1.avg_pool1d(2, 0, 0, false, true),
        Invalid,
        "avg_pool1d",
        "stride",
    );
    Ok(())
}
