//! Convolution and pooling: hand-computed values, gradchecks, PyTorch fixtures, errors.

use might::autograd::{gradcheck, GradCheck};
use might::{DType, Device, ErrorKind, Result, Tensor};

mod common;

device_tests!(
    conv2d_2x2_kernel_by_hand,
    conv2d_stride_padding_dilation_by_hand,
    conv2d_channels_sum_and_groups_separate,
    conv1d_by_hand,
    max_pool2d_values_and_indices_by_hand,
    avg_pool2d_counts_padding_by_hand,
    adaptive_avg_pool2d_windows_by_hand,
    conv2d_channel_mismatch_names_the_shapes,
    pool_argument_errors,
    ; f64:
    conv2d_accepts_unbatched_and_strided_inputs,
    gradcheck_conv2d_variants,
    gradcheck_conv1d,
    gradcheck_pools,
    conv_then_pool_backward_chain,
    matches_pytorch_fixture,
    conv_argument_errors,
    conv2d_relu_matches_conv2d_then_relu,
    gradcheck_conv2d_relu,
    depthwise_conv2d_matches_per_channel_convs,
);

fn t(dev: Device, v: &[f32], s: &[usize]) -> Tensor {
    Tensor::from_slice(v, s).unwrap().to_device(dev).unwrap()
}

fn t64(dev: Device, v: &[f64], s: &[usize]) -> Tensor {
    Tensor::from_slice(v, s).unwrap().to_device(dev).unwrap()
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

/// 1..=9 as a [1, 1, 3, 3] image.
fn img3(dev: Device) -> Tensor {
    t(dev, &[1., 2., 3., 4., 5., 6., 7., 8., 9.], &[1, 1, 3, 3])
}

// ---------------------------------------------------------------- hand-computed forward values

fn conv2d_2x2_kernel_by_hand(dev: Device) -> Result<()> {
    // [[1,2,3],[4,5,6],[7,8,9]] * [[1,2],[3,4]]: e.g. top-left 1*1 + 2*2 + 4*3 + 5*4 = 37
    let w = t(dev, &[1., 2., 3., 4.], &[1, 1, 2, 2]);
    let b = t(dev, &[0.5], &[1]);
    let y = img3(dev).conv2d(&w, Some(&b), [1, 1], [0, 0], [1, 1], 1)?;
    assert_eq!(y.dims(), &[1, 1, 2, 2]);
    assert_eq!(y.to_vec::<f32>()?, vec![37.5, 47.5, 67.5, 77.5]);
    Ok(())
}

fn conv2d_stride_padding_dilation_by_hand(dev: Device) -> Result<()> {
    let ones = Tensor::ones([1, 1, 2, 2], DType::F32)?.to_device(dev)?;
    // stride 2, padding 1: windows over the zero-padded 5x5 image start at (0,0), (0,2), ...
    let y = img3(dev).conv2d(&ones, None, [2, 2], [1, 1], [1, 1], 1)?;
    assert_eq!(y.dims(), &[1, 1, 2, 2]);
    assert_eq!(y.to_vec::<f32>()?, vec![1., 5., 11., 28.]);
    // dilation 2: the 2x2 kernel touches the four corners
    let y = img3(dev).conv2d(&ones, None, [1, 1], [0, 0], [2, 2], 1)?;
    assert_eq!(y.to_vec::<f32>()?, vec![20.]);
    // asymmetric: stride [1, 2], padding [0, 1] -> height 2, width 2
    let y = img3(dev).conv2d(&ones, None, [1, 2], [0, 1], [1, 1], 1)?;
    assert_eq!(y.dims(), &[1, 1, 2, 2]);
    // columns read: padded cols 0-1 (input col 0) and 2-3 (input cols 1, 2)
    assert_eq!(y.to_vec::<f32>()?, vec![5., 16., 11., 28.]);
    Ok(())
}

fn conv2d_channels_sum_and_groups_separate(dev: Device) -> Result<()> {
    // two channels: [1,2,3,4] and [5,6,7,8]
    let x = t(dev, &[1., 2., 3., 4., 5., 6., 7., 8.], &[1, 2, 2, 2]);
    // groups 1, 1x1 kernel: out = 2*ch0 - ch1 and ch0 + ch1
    let w = t(dev, &[2., -1., 1., 1.], &[2, 2, 1, 1]);
    let y = x.conv2d(&w, None, [1, 1], [0, 0], [1, 1], 1)?;
    assert_eq!(
        y.to_vec::<f32>()?,
        vec![-3., -2., -1., 0., 6., 8., 10., 12.]
    );
    // groups 2: out0 = 2*ch0, out1 = -ch1 (each output sees only its own channel)
    let w = t(dev, &[2., -1.], &[2, 1, 1, 1]);
    let b = t(dev, &[1., 0.], &[2]);
    let y = x.conv2d(&w, Some(&b), [1, 1], [0, 0], [1, 1], 2)?;
    assert_eq!(y.to_vec::<f32>()?, vec![3., 5., 7., 9., -5., -6., -7., -8.]);
    Ok(())
}

fn conv2d_accepts_unbatched_and_strided_inputs(dev: Device) -> Result<()> {
    let x = Tensor::randn([2, 3, 5, 4], DType::F64)?.to_device(dev)?;
    let w = Tensor::randn([4, 3, 3, 2], DType::F64)?.to_device(dev)?;
    let y = x.conv2d(&w, None, [1, 1], [1, 0], [1, 1], 1)?;
    // unbatched: [C, H, W] in, [O, OH, OW] out
    let y1 = x
        .select(0, 1)?
        .conv2d(&w, None, [1, 1], [1, 0], [1, 1], 1)?;
    assert_eq!(y1.dims(), &[4, 5, 3]);
    assert_close(
        &y1.to_f64_vec(),
        &y.select(0, 1)?.to_f64_vec(),
        1e-12,
        "unbatched",
    );
    // a transposed (non-contiguous) input gives the same result as its contiguous copy
    let xt = x.transpose(2, 3)?.contiguous()?.transpose(2, 3)?;
    assert!(!xt.is_contiguous());
    let yt = xt.conv2d(&w, None, [1, 1], [1, 0], [1, 1], 1)?;
    assert_close(&yt.to_f64_vec(), &y.to_f64_vec(), 1e-12, "strided");
    Ok(())
}

#[test]
fn conv2d_batch_split_across_threads_matches_per_sample() -> Result<()> {
    // large enough to take the parallel path; each sample must equal its own conv
    let x = Tensor::randn([7, 3, 12, 11], DType::F32)?;
    let w = Tensor::randn([8, 3, 3, 3], DType::F32)?;
    let b = Tensor::randn([8], DType::F32)?;
    let y = x.conv2d(&w, Some(&b), [1, 1], [1, 1], [1, 1], 1)?;
    for n in 0..7 {
        let yn = x
            .narrow(0, n, 1)?
            .conv2d(&w, Some(&b), [1, 1], [1, 1], [1, 1], 1)?;
        assert_close(
            &yn.to_f64_vec(),
            &y.narrow(0, n, 1)?.to_f64_vec(),
            1e-5,
            "sample",
        );
    }
    Ok(())
}

/// Gradients of `(conv2d(x, w, b) * r).sum()` for (x, w, b) as leaves.
fn conv_grads(
    x: &Tensor,
    w: &Tensor,
    b: &Tensor,
    r: &Tensor,
    x_grad: bool,
) -> Result<Vec<Option<Vec<f64>>>> {
    let x = x.detach();
    x.requires_grad_(x_grad);
    let (w, b) = (
        w.detach().with_requires_grad(),
        b.detach().with_requires_grad(),
    );
    let y = x.conv2d(&w, Some(&b), [2, 1], [1, 1], [1, 1], 1)?;
    y.mul(r)?.sum_all()?.backward()?;
    Ok([x, w, b]
        .iter()
        .map(|t| t.grad().map(|g| g.to_f64_vec()))
        .collect())
}

#[test]
fn conv2d_backward_split_across_threads_matches_per_sample() -> Result<()> {
    // a batch large enough for the parallel backward: grad_input per sample must equal that
    // sample's own gradient, and grad_weight / grad_bias the sum over samples
    let (n, shape) = (7, [7, 3, 12, 11]);
    let x = Tensor::randn(shape, DType::F64)?;
    let w = Tensor::randn([8, 3, 3, 3], DType::F64)?;
    let b = Tensor::randn([8], DType::F64)?;
    let r = Tensor::randn([7, 8, 6, 11], DType::F64)?;
    for x_grad in [true, false] {
        let all = conv_grads(&x, &w, &b, &r, x_grad)?;
        let mut gx = vec![];
        let mut gw = vec![0.0; 8 * 27];
        let mut gb = vec![0.0; 8];
        for i in 0..n {
            let one = conv_grads(&x.narrow(0, i, 1)?, &w, &b, &r.narrow(0, i, 1)?, x_grad)?;
            if x_grad {
                gx.extend(one[0].clone().unwrap());
            }
            let (ow, ob) = (one[1].as_ref().unwrap(), one[2].as_ref().unwrap());
            gw.iter_mut().zip(ow).for_each(|(a, b)| *a += b);
            gb.iter_mut().zip(ob).for_each(|(a, b)| *a += b);
        }
        if x_grad {
            assert_close(all[0].as_ref().unwrap(), &gx, 1e-10, "grad_input");
        } else {
            assert!(all[0].is_none());
        }
        assert_close(all[1].as_ref().unwrap(), &gw, 1e-10, "grad_weight");
        assert_close(all[2].as_ref().unwrap(), &gb, 1e-10, "grad_bias");
    }
    Ok(())
}

fn conv1d_by_hand(dev: Device) -> Result<()> {
    // [1,0,-1] with padding 1: y[i] = x[i-1] - x[i+1]
    let x = t(dev, &[1., 2., 3., 4., 5.], &[1, 1, 5]);
    let w = t(dev, &[1., 0., -1.], &[1, 1, 3]);
    let y = x.conv1d(&w, None, 1, 1, 1, 1)?;
    assert_eq!(y.dims(), &[1, 1, 5]);
    assert_eq!(y.to_vec::<f32>()?, vec![-2., -2., -2., -2., 4.]);
    // stride 2, dilation 2, bias 1: windows (0,2,4) -> 1 - 5 + 1
    let b = t(dev, &[1.], &[1]);
    let y = x.conv1d(&w, Some(&b), 2, 0, 2, 1)?;
    assert_eq!(y.to_vec::<f32>()?, vec![-3.]);
    // unbatched [C, L]
    let y = x.squeeze(0)?.conv1d(&w, None, 1, 1, 1, 1)?;
    assert_eq!(y.dims(), &[1, 5]);
    Ok(())
}

fn max_pool2d_values_and_indices_by_hand(dev: Device) -> Result<()> {
    let x = t(
        dev,
        &[
            1., 5., 2., 0., 3., 4., 8., 1., 0., 9., 2., 2., 7., 1., 3., 6.,
        ],
        &[1, 1, 4, 4],
    )
    .with_requires_grad();
    let (y, idx) = x.max_pool2d_with_indices([2, 2], [2, 2], [0, 0])?;
    assert_eq!(y.to_vec::<f32>()?, vec![5., 8., 9., 6.]);
    assert_eq!(idx.dtype(), DType::I64);
    assert_eq!(idx.to_vec::<i64>()?, vec![1, 6, 9, 15]);
    y.sum_all()?.backward()?;
    let mut want = vec![0f32; 16];
    for i in [1, 6, 9, 15] {
        want[i] = 1.0;
    }
    assert_eq!(x.grad().unwrap().to_vec::<f32>()?, want);
    // padding reads as -inf: every 3x3 window around a 2x2 image holds the whole image
    let x = t(dev, &[1., -2., 4., 3.], &[1, 1, 2, 2]);
    let (y, idx) = x.max_pool2d_with_indices([3, 3], [1, 1], [1, 1])?;
    assert_eq!(y.to_vec::<f32>()?, vec![4.; 4]);
    assert_eq!(idx.to_vec::<i64>()?, vec![2; 4]);
    // overlapping windows add their gradients at the shared maximum
    let x = x.with_requires_grad();
    x.max_pool2d([3, 3], [1, 1], [1, 1])?
        .sum_all()?
        .backward()?;
    assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![0., 0., 4., 0.]);
    Ok(())
}

fn avg_pool2d_counts_padding_by_hand(dev: Device) -> Result<()> {
    // kernel 2, stride 2, padding 1 over 1..9: window sums 1, 5, 11, 28, each divided by 4
    let x = img3(dev).with_requires_grad();
    let y = x.avg_pool2d([2, 2], [2, 2], [1, 1])?;
    assert_eq!(y.to_vec::<f32>()?, vec![0.25, 1.25, 2.75, 7.0]);
    y.sum_all()?.backward()?;
    assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![0.25; 9]);
    Ok(())
}

fn adaptive_avg_pool2d_windows_by_hand(dev: Device) -> Result<()> {
    // 3 -> 2: rows [0, 2) and [1, 3), same for columns (overlapping windows)
    let x = img3(dev).with_requires_grad();
    let y = x.adaptive_avg_pool2d([2, 2])?;
    assert_eq!(y.to_vec::<f32>()?, vec![3., 4., 6., 7.]);
    y.sum_all()?.backward()?;
    assert_eq!(
        x.grad().unwrap().to_vec::<f32>()?,
        vec![0.25, 0.5, 0.25, 0.5, 1.0, 0.5, 0.25, 0.5, 0.25]
    );
    // [1, 1] is the global mean; unbatched input keeps its rank
    let y = img3(dev).squeeze(0)?.adaptive_avg_pool2d([1, 1])?;
    assert_eq!(y.dims(), &[1, 1, 1]);
    assert_eq!(y.to_vec::<f32>()?, vec![5.]);
    Ok(())
}

// ----------------------------------------------------------------------------------- gradcheck

fn randn(dev: Device, shape: &[usize]) -> Tensor {
    Tensor::randn(shape, DType::F64)
        .unwrap()
        .to_device(dev)
        .unwrap()
}

#[allow(clippy::too_many_arguments)]
fn check_conv2d(
    dev: Device,
    x: &[usize],
    w: &[usize],
    bias: bool,
    stride: [usize; 2],
    padding: [usize; 2],
    dilation: [usize; 2],
    groups: usize,
) {
    let mut inputs = vec![randn(dev, x), randn(dev, w)];
    if bias {
        inputs.push(randn(dev, &[w[0]]));
    }
    gradcheck(
        |v| v[0].conv2d(&v[1], v.get(2), stride, padding, dilation, groups),
        &inputs,
        GradCheck::default(),
    )
    .unwrap_or_else(|e| panic!("{stride:?} {padding:?} {dilation:?} g{groups}: {e}"));
}

fn gradcheck_conv2d_variants(dev: Device) -> Result<()> {
    check_conv2d(
        dev,
        &[2, 3, 5, 4],
        &[4, 3, 3, 2],
        true,
        [1, 1],
        [0, 0],
        [1, 1],
        1,
    );
    check_conv2d(
        dev,
        &[2, 4, 5, 5],
        &[6, 2, 3, 3],
        true,
        [1, 1],
        [1, 1],
        [1, 1],
        2,
    );
    check_conv2d(
        dev,
        &[1, 2, 7, 6],
        &[3, 2, 3, 3],
        false,
        [2, 2],
        [0, 0],
        [1, 1],
        1,
    );
    check_conv2d(
        dev,
        &[2, 2, 5, 5],
        &[2, 2, 2, 3],
        true,
        [1, 2],
        [1, 1],
        [1, 1],
        1,
    );
    check_conv2d(
        dev,
        &[1, 2, 7, 7],
        &[2, 2, 3, 2],
        false,
        [1, 1],
        [1, 0],
        [2, 3],
        1,
    );
    check_conv2d(
        dev,
        &[2, 3, 4, 4],
        &[5, 3, 1, 1],
        true,
        [1, 1],
        [0, 0],
        [1, 1],
        1,
    );
    check_conv2d(
        dev,
        &[1, 3, 6, 6],
        &[3, 1, 3, 3],
        true,
        [2, 2],
        [1, 1],
        [1, 1],
        3,
    );
    Ok(())
}

fn gradcheck_conv1d(dev: Device) -> Result<()> {
    let inputs = [
        randn(dev, &[2, 4, 9]),
        randn(dev, &[6, 2, 3]),
        randn(dev, &[6]),
    ];
    gradcheck(
        |v| v[0].conv1d(&v[1], Some(&v[2]), 2, 1, 2, 2),
        &inputs,
        GradCheck::default(),
    )
}

fn gradcheck_pools(dev: Device) -> Result<()> {
    // random values: ties (where max_pool2d is not differentiable) have probability zero
    let x = [randn(dev, &[2, 2, 7, 6])];
    gradcheck(
        |v| v[0].max_pool2d([3, 2], [2, 2], [1, 1]),
        &x,
        GradCheck::default(),
    )?;
    gradcheck(
        |v| v[0].avg_pool2d([3, 3], [2, 1], [1, 1]),
        &x,
        GradCheck::default(),
    )?;
    gradcheck(
        |v| v[0].adaptive_avg_pool2d([3, 4]),
        &x,
        GradCheck::default(),
    )?;
    gradcheck(
        |v| v[0].adaptive_avg_pool2d([9, 7]),
        &x,
        GradCheck::default(),
    )
}

fn conv_then_pool_backward_chain(dev: Device) -> Result<()> {
    // a tiny CNN body: conv -> relu -> max_pool -> mean; check gradients end to end
    let inputs = [
        randn(dev, &[2, 1, 8, 8]),
        randn(dev, &[4, 1, 3, 3]),
        randn(dev, &[4]),
    ];
    gradcheck(
        |v| {
            v[0].conv2d(&v[1], Some(&v[2]), [1, 1], [1, 1], [1, 1], 1)?
                .tanh()?
                .max_pool2d([2, 2], [2, 2], [0, 0])
        },
        &inputs,
        GradCheck::default(),
    )
}

// ---------------------------------------------------------------------------------- PyTorch

/// Flat f64 list of a JSON field.
fn field(case: &serde_json::Value, key: &str) -> Vec<f64> {
    case[key]
        .as_array()
        .unwrap_or_else(|| panic!("missing {key}"))
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect()
}

fn dims(case: &serde_json::Value, key: &str) -> Vec<usize> {
    field(case, key).iter().map(|&v| v as usize).collect()
}

fn pair(case: &serde_json::Value, key: &str) -> [usize; 2] {
    let v = dims(case, key);
    [v[0], v[1]]
}

/// Run one fixture case in `dtype`, comparing outputs and gradients within `tol`.
fn run_case(dev: Device, case: &serde_json::Value, dtype: DType, tol: f64) -> Result<()> {
    let name = case["name"].as_str().unwrap();
    let op = case["op"].as_str().unwrap();
    let leaf = |key: &str, shape: &[usize]| -> Result<Tensor> {
        Ok(t64(dev, &field(case, key), shape)
            .to_dtype(dtype)?
            .with_requires_grad())
    };
    let x = leaf("x", &dims(case, "x_shape"))?;
    let mut params = vec![];
    let y = match op {
        "conv2d" | "conv1d" => {
            let ws = dims(case, "w_shape");
            let w = leaf("w", &ws)?;
            let b = case.get("b").map(|_| leaf("b", &[ws[0]])).transpose()?;
            let groups = case["groups"].as_u64().unwrap() as usize;
            let y = if op == "conv2d" {
                let (s, p) = (pair(case, "stride"), pair(case, "padding"));
                let d = pair(case, "dilation");
                x.conv2d(&w, b.as_ref(), s, p, d, groups)?
            } else {
                let g = |k: &str| case[k].as_u64().unwrap() as usize;
                x.conv1d(
                    &w,
                    b.as_ref(),
                    g("stride"),
                    g("padding"),
                    g("dilation"),
                    groups,
                )?
            };
            params.push(("gw", w));
            params.extend(b.map(|b| ("gb", b)));
            y
        }
        "max_pool2d" => {
            let (k, s, p) = (
                pair(case, "kernel"),
                pair(case, "stride"),
                pair(case, "padding"),
            );
            let (y, idx) = x.max_pool2d_with_indices(k, s, p)?;
            let want: Vec<i64> = field(case, "indices").iter().map(|&v| v as i64).collect();
            assert_eq!(idx.to_vec::<i64>()?, want, "{name}: indices");
            y
        }
        "avg_pool2d" => {
            let (k, s, p) = (
                pair(case, "kernel"),
                pair(case, "stride"),
                pair(case, "padding"),
            );
            x.avg_pool2d(k, s, p)?
        }
        "adaptive_avg_pool2d" => x.adaptive_avg_pool2d(pair(case, "output"))?,
        other => panic!("unknown op {other}"),
    };
    assert_eq!(y.dims(), dims(case, "y_shape").as_slice(), "{name}: shape");
    assert_close(
        &y.to_f64_vec(),
        &field(case, "y"),
        tol,
        &format!("{name} y"),
    );
    let gy = t64(dev, &field(case, "gy"), y.dims()).to_dtype(dtype)?;
    y.backward_with_grad(&gy)?;
    params.insert(0, ("gx", x));
    for (key, p) in params {
        let g = p.grad().expect("gradient");
        assert_eq!(g.dtype(), dtype);
        assert_close(
            &g.to_f64_vec(),
            &field(case, key),
            tol,
            &format!("{name} {key}"),
        );
    }
    Ok(())
}

fn matches_pytorch_fixture(dev: Device) -> Result<()> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/conv.json"
    );
    let text = std::fs::read_to_string(path).expect("read conv.json");
    let json: serde_json::Value = serde_json::from_str(&text).expect("parse conv.json");
    let cases = json["cases"].as_array().unwrap();
    assert!(cases.len() >= 10);
    for case in cases {
        run_case(dev, case, DType::F64, 1e-7)?;
        run_case(dev, case, DType::F32, 1e-4)?;
    }
    Ok(())
}

// ------------------------------------------------------------------------------------- errors

fn conv2d_channel_mismatch_names_the_shapes(dev: Device) -> Result<()> {
    let x = Tensor::zeros([2, 4, 5, 5], DType::F32)
        .unwrap()
        .to_device(dev)
        .unwrap();
    let w = Tensor::zeros([8, 3, 3, 3], DType::F32)
        .unwrap()
        .to_device(dev)
        .unwrap();
    let e = x.conv2d(&w, None, [1, 1], [0, 0], [1, 1], 1).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Shape);
    assert!(
        e.to_string().starts_with(
            "conv2d: expected input with 3 channels (weight [8, 3, 3, 3], groups 1), got input \
             [2, 4, 5, 5] (at "
        ),
        "{e}"
    );
    // the location is the caller's line, in this file
    assert!(e.to_string().contains("tests/conv.rs"), "{e}");
    Ok(())
}

fn conv_argument_errors(dev: Device) -> Result<()> {
    let z = |s: &[usize]| {
        Tensor::zeros(s, DType::F32)
            .unwrap()
            .to_device(dev)
            .unwrap()
    };
    let x = z(&[1, 4, 5, 5]);
    let w = z(&[6, 2, 3, 3]);
    let conv = |x: &Tensor, w: &Tensor, s, p, d, g| x.conv2d(w, None, s, p, d, g).unwrap_err();
    // wrong rank of input and weight
    let e = conv(&z(&[4, 5]), &w, [1, 1], [0, 0], [1, 1], 2);
    assert_eq!(e.kind, ErrorKind::Shape);
    assert!(e.msg.contains("[4, 5]"), "{e}");
    let e = conv(&x, &z(&[6, 2, 3]), [1, 1], [0, 0], [1, 1], 2);
    assert!(e.msg.contains("weight must have 4 dims"), "{e}");
    // groups 2 with 6 outputs fits; 4 outputs in 3 groups does not
    assert!(x.conv2d(&w, None, [1, 1], [0, 0], [1, 1], 2).is_ok());
    let e = conv(
        &z(&[1, 3, 5, 5]),
        &z(&[4, 1, 3, 3]),
        [1, 1],
        [0, 0],
        [1, 1],
        3,
    );
    assert!(e.msg.contains("groups 3 must divide"), "{e}");
    let e = conv(&x, &w, [1, 1], [0, 0], [1, 1], 0);
    assert_eq!(e.kind, ErrorKind::Invalid);
    // kernel larger than the padded input (dilation counts)
    let e = conv(&z(&[1, 4, 2, 2]), &w, [1, 1], [0, 0], [1, 1], 2);
    assert!(e.msg.contains("does not fit the padded input"), "{e}");
    assert!(z(&[1, 4, 2, 2])
        .conv2d(&w, None, [1, 1], [1, 1], [1, 1], 2)
        .is_ok());
    let e = conv(&x, &w, [1, 1], [0, 0], [3, 1], 2);
    assert!(e.msg.contains("does not fit the padded input"), "{e}");
    // zero stride / dilation
    let e = conv(&x, &w, [0, 1], [0, 0], [1, 1], 2);
    assert_eq!(e.kind, ErrorKind::Invalid);
    assert!(e.msg.contains("stride"), "{e}");
    let e = conv(&x, &w, [1, 1], [0, 0], [1, 0], 2);
    assert!(e.msg.contains("dilation"), "{e}");
    // bias shape and dtypes
    let e = x
        .conv2d(&w, Some(&z(&[5])), [1, 1], [0, 0], [1, 1], 2)
        .unwrap_err();
    assert!(e.msg.contains("bias must have shape [6]"), "{e}");
    let xi = Tensor::zeros([1, 4, 5, 5], DType::I64)
        .unwrap()
        .to_device(dev)
        .unwrap();
    let e = conv(&xi, &w, [1, 1], [0, 0], [1, 1], 2);
    assert_eq!(e.kind, ErrorKind::DType);
    let e = conv(
        &x.to_dtype(DType::F64).unwrap(),
        &w,
        [1, 1],
        [0, 0],
        [1, 1],
        2,
    );
    assert_eq!(e.kind, ErrorKind::DType);
    // conv1d names itself
    let e = z(&[1, 3, 5])
        .conv1d(&z(&[2, 2, 3]), None, 1, 0, 1, 1)
        .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("conv1d: expected input with 2 channels"),
        "{e}"
    );
    let e = z(&[1, 2, 2])
        .conv1d(&z(&[2, 2, 3]), None, 1, 0, 1, 1)
        .unwrap_err();
    assert!(e.msg.contains("does not fit the padded input"), "{e}");
    let e = z(&[1, 2, 5])
        .conv1d(&z(&[2, 2, 3]), None, 0, 0, 1, 1)
        .unwrap_err();
    assert!(e.msg.contains("stride"), "{e}");
    Ok(())
}

fn pool_argument_errors(dev: Device) -> Result<()> {
    let x = Tensor::zeros([1, 2, 4, 4], DType::F32)
        .unwrap()
        .to_device(dev)
        .unwrap();
    let e = x.max_pool2d([2, 2], [0, 2], [0, 0]).unwrap_err();
    assert!(e.msg.contains("stride"), "{e}");
    let e = x.avg_pool2d([2, 2], [1, 1], [2, 0]).unwrap_err();
    assert!(e.msg.contains("at most half"), "{e}");
    let e = x.max_pool2d([5, 2], [1, 1], [0, 0]).unwrap_err();
    assert!(e.msg.contains("larger than the padded input"), "{e}");
    let e = x.avg_pool2d([0, 2], [1, 1], [0, 0]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid);
    let e = x
        .reshape([2, 16])
        .unwrap()
        .max_pool2d([2, 2], [2, 2], [0, 0]);
    assert_eq!(e.unwrap_err().kind, ErrorKind::Shape);
    let e = x.adaptive_avg_pool2d([0, 2]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid);
    let xi = Tensor::zeros([1, 2, 4, 4], DType::U8)
        .unwrap()
        .to_device(dev)
        .unwrap();
    assert_eq!(
        xi.max_pool2d([2, 2], [2, 2], [0, 0]).unwrap_err().kind,
        ErrorKind::DType
    );
    assert_eq!(
        xi.adaptive_avg_pool2d([2, 2]).unwrap_err().kind,
        ErrorKind::DType
    );
    Ok(())
}

// ---------------------------------------------------------------- fused conv2d + ReLU

/// `conv2d_relu` against `conv2d(..).relu()`: the same values and the same gradients for
/// input, weight and bias, on the direct path (stride 1: a small-CNN layer, a padded one,
/// groups) and the GEMM path (stride 2), in f32 and f64. The output gradient is random, so
/// rows the ReLU cuts and rows it passes both count.
fn conv2d_relu_matches_conv2d_then_relu(dev: Device) -> Result<()> {
    type Case = ([usize; 4], [usize; 4], [usize; 2], [usize; 2], usize);
    let cases: [Case; 5] = [
        ([3, 1, 28, 28], [8, 1, 3, 3], [1, 1], [0, 0], 1),
        ([2, 8, 13, 13], [16, 8, 3, 3], [1, 1], [1, 1], 1),
        // output rows shorter than the 8-element steps of the row copies
        ([2, 2, 10, 7], [3, 2, 3, 2], [1, 1], [0, 0], 1),
        ([2, 4, 9, 7], [6, 2, 3, 2], [1, 1], [0, 1], 2),
        ([2, 3, 9, 9], [4, 3, 3, 3], [2, 2], [1, 1], 1),
    ];
    for dt in [DType::F64, DType::F32] {
        for (xs, ws, stride, padding, groups) in cases {
            let leaf = |s: &[usize]| -> Result<Tensor> {
                Ok(Tensor::randn(s, dt)?.to_device(dev)?.with_requires_grad())
            };
            let (x, w, b) = (leaf(&xs)?, leaf(&ws)?, leaf(&[ws[0]])?);
            let fused = x.conv2d_relu(&w, Some(&b), stride, padding, [1, 1], groups)?;
            let gy = Tensor::randn(fused.dims(), dt)?.to_device(dev)?;
            let grads = |y: &Tensor| -> Result<Vec<Vec<f64>>> {
                for p in [&x, &w, &b] {
                    p.zero_grad();
                }
                y.mul(&gy)?.sum_all()?.backward()?;
                Ok([&x, &w, &b]
                    .iter()
                    .map(|p| p.grad().expect("a gradient").to_f64_vec())
                    .collect())
            };
            let got = grads(&fused)?;
            let plain = x
                .conv2d(&w, Some(&b), stride, padding, [1, 1], groups)?
                .relu()?;
            let want = grads(&plain)?;
            let what = format!("{dt:?} {xs:?} {ws:?} {stride:?}");
            let tol = if dt == DType::F64 { 1e-12 } else { 1e-5 };
            assert_close(&fused.to_f64_vec(), &plain.to_f64_vec(), tol, &what);
            assert!(
                fused.to_f64_vec().contains(&0.0),
                "{what}: some outputs cut"
            );
            for (g, (a, b)) in ["x", "w", "b"].iter().zip(got.iter().zip(&want)) {
                assert_close(a, b, tol, &format!("{what} grad {g}"));
            }
        }
    }
    Ok(())
}

fn gradcheck_conv2d_relu(dev: Device) -> Result<()> {
    // away from the kink: inputs where no pre-activation sits within the probe step of 0
    let inputs = [
        randn(dev, &[2, 3, 6, 5]),
        randn(dev, &[4, 3, 3, 3]),
        randn(dev, &[4]),
    ];
    gradcheck(
        |v| v[0].conv2d_relu(&v[1], Some(&v[2]), [1, 1], [1, 1], [1, 1], 1),
        &inputs,
        GradCheck::default(),
    )?;
    gradcheck(
        |v| v[0].conv2d_relu(&v[1], None, [2, 1], [0, 1], [1, 1], 1),
        &inputs[..2],
        GradCheck::default(),
    )
}

#[test]
fn sequential_fuses_conv_and_relu() -> Result<()> {
    use might::nn::{Conv2d, Conv2dConfig, MaxPool2d, Module, ReLU, Sequential};
    might::manual_seed(3);
    let conv = || Conv2d::new(2, 5, 3, Conv2dConfig::default());
    let (c1, c2) = (conv()?, conv()?);
    let (w, b) = (c1.weight.clone(), c1.bias.clone().expect("a bias"));
    let x = Tensor::randn([2, 2, 10, 10], DType::F32)?;
    // a conv followed by a ReLU runs as the fused op; one without stays a plain conv
    let pair = Sequential::new().add(c2).add(ReLU);
    assert_eq!(pair.forward(&x)?.grad_fn(), Some("ConvolutionReluBackward"));
    let lone = Sequential::new()
        .add(conv()?)
        .add(MaxPool2d::new(2))
        .add(ReLU);
    let h = lone.get(0).unwrap().forward(&x)?;
    assert_eq!(h.grad_fn(), Some("ConvolutionBackward"));
    // same values and gradients as the plain chain
    let net = Sequential::new().add(c1).add(ReLU).add(MaxPool2d::new(2));
    let y = net.forward(&x)?;
    let plain = x
        .conv2d(&w, Some(&b), [1, 1], [0, 0], [1, 1], 1)?
        .relu()?
        .max_pool2d([2, 2], [2, 2], [0, 0])?;
    assert_close(&y.to_f64_vec(), &plain.to_f64_vec(), 1e-6, "sequential");
    y.sum_all()?.backward()?;
    let g_fused = w.grad().expect("a gradient").to_f64_vec();
    w.zero_grad();
    plain.sum_all()?.backward()?;
    assert_close(
        &g_fused,
        &w.grad().unwrap().to_f64_vec(),
        1e-5,
        "weight grad",
    );
    Ok(())
}

/// Depthwise convolutions (groups = channels = outputs) have their own CPU kernel: each
/// channel must equal a plain convolution of that channel alone, for strides, padding,
/// dilation and kernels wider than the padding; and the gradients must check.
fn depthwise_conv2d_matches_per_channel_convs(dev: Device) -> Result<()> {
    for (k, stride, padding, dilation, relu) in [
        (3, [1, 1], [1, 1], [1, 1], false),
        (3, [2, 2], [1, 1], [1, 1], true),
        (5, [2, 1], [2, 0], [1, 1], false),
        (3, [1, 2], [2, 1], [2, 1], false),
    ] {
        let x = randn(dev, &[2, 5, 9, 8]);
        let w = randn(dev, &[5, 1, k, k]);
        let b = randn(dev, &[5]);
        let y = if relu {
            x.conv2d_relu(&w, Some(&b), stride, padding, dilation, 5)?
        } else {
            x.conv2d(&w, Some(&b), stride, padding, dilation, 5)?
        };
        for c in 0..5 {
            let yc = x.narrow(1, c, 1)?.conv2d(
                &w.narrow(0, c, 1)?,
                Some(&b.narrow(0, c, 1)?),
                stride,
                padding,
                dilation,
                1,
            )?;
            let yc = if relu { yc.relu()? } else { yc };
            let got = y.narrow(1, c, 1)?.contiguous()?.to_vec::<f64>()?;
            for (a, e) in got.iter().zip(yc.to_vec::<f64>()?) {
                assert!(
                    (a - e).abs() < 1e-12,
                    "k{k} {stride:?} {padding:?} {dilation:?}: {a} vs {e}"
                );
            }
        }
    }
    check_conv2d(
        dev,
        &[2, 4, 7, 6],
        &[4, 1, 3, 3],
        true,
        [2, 2],
        [1, 1],
        [1, 1],
        4,
    );
    Ok(())
}

/// Packed weights the CPU backend keeps between calls (Winograd's banks, the channel-blocked
/// kernel's packing) follow the weights: after an in-place update, and after the weights are
/// dropped and new ones made (whose buffer may reuse the old one's memory), every conv gives
/// what the f64 path (which keeps nothing) gives.
#[test]
fn kept_packings_follow_in_place_updates_and_new_weights() -> Result<()> {
    // a 3x3 layer on Winograd (64 tiles), one on the blocked kernel (400 positions), the
    // 7x7/2 stem shape
    for (x_shape, w_shape, stride, pad) in [
        ([1, 16, 32, 32], [16, 16, 3, 3], 1, 1),
        ([1, 16, 20, 20], [32, 16, 3, 3], 1, 1),
        ([1, 3, 40, 40], [32, 3, 7, 7], 2, 3),
    ] {
        let x = Tensor::randn(x_shape, DType::F32)?;
        let check = |w: &Tensor| -> Result<()> {
            for _ in 0..4 {
                let got = x.conv2d(w, None, [stride; 2], [pad; 2], [1, 1], 1)?;
                let want = x.to_dtype(DType::F64)?.conv2d(
                    &w.to_dtype(DType::F64)?,
                    None,
                    [stride; 2],
                    [pad; 2],
                    [1, 1],
                    1,
                )?;
                let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
                let err = g
                    .iter()
                    .zip(&w)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0.0, f64::max);
                assert!(err < 1e-3, "{x_shape:?} * {w_shape:?}: off by {err}");
            }
            Ok(())
        };
        let w = Tensor::randn(w_shape, DType::F32)?;
        check(&w)?;
        // an optimizer-like step, in place
        w.add_(&Tensor::randn(w_shape, DType::F32)?)?;
        check(&w)?;
        w.copy_(&Tensor::randn(w_shape, DType::F32)?)?;
        check(&w)?;
        // new weights, maybe in the old buffer's memory
        drop(w);
        for _ in 0..3 {
            let w = Tensor::randn(w_shape, DType::F32)?;
            check(&w)?;
        }
    }
    Ok(())
}
