//! `conv2d_add`: a convolution, a residual and a ReLU as one op (ResNet's block ending).
//! Hand-computed values, the same values and gradients as the composed ops on every CPU
//! kernel path, gradchecks, and the residual's shape check.

use might::autograd::{gradcheck, GradCheck};
use might::{DType, Device, ErrorKind, Result, Tensor};

mod common;

device_tests!(
    conv2d_add_by_hand,
    ; f64:
    conv2d_add_matches_conv2d_then_add,
    gradcheck_conv2d_add,
    conv2d_add_checks_the_residual,
);

fn t(dev: Device, v: &[f32], s: &[usize]) -> Result<Tensor> {
    Tensor::from_slice(v, s)?.to_device(dev)
}

/// 1..=9 as a `[1, 1, 3, 3]` image through the 2x2 identity-diagonal filter (`x[i][j] +
/// x[i+1][j+1]`: 6, 8, 12, 14), bias -10, plus a residual; with and without the ReLU.
fn conv2d_add_by_hand(dev: Device) -> Result<()> {
    let x = t(dev, &[1., 2., 3., 4., 5., 6., 7., 8., 9.], &[1, 1, 3, 3])?;
    let w = t(dev, &[1., 0., 0., 1.], &[1, 1, 2, 2])?;
    let b = t(dev, &[-10.], &[1])?;
    let r = t(dev, &[1., 3., -5., 0.5], &[1, 1, 2, 2])?;
    let y = x.conv2d_add(&w, Some(&b), &r, [1, 1], [0, 0], [1, 1], 1, false)?;
    assert_eq!(y.dims(), &[1, 1, 2, 2]);
    assert_eq!(y.to_f64_vec(), vec![-3.0, 1.0, -3.0, 4.5]);
    let y = x.conv2d_add(&w, Some(&b), &r, [1, 1], [0, 0], [1, 1], 1, true)?;
    assert_eq!(y.to_f64_vec(), vec![0.0, 1.0, 0.0, 4.5]);
    // unbatched input and residual
    let (x3, r3) = (x.squeeze(0)?, r.squeeze(0)?);
    let y = x3.conv2d_add(&w, None, &r3, [1, 1], [0, 0], [1, 1], 1, true)?;
    assert_eq!(y.dims(), &[1, 2, 2]);
    assert_eq!(y.to_f64_vec(), vec![7.0, 11.0, 7.0, 14.5]);
    Ok(())
}

/// `conv2d_add` against `conv2d(..).add(r)` (then `.relu()`): values and the gradients of
/// input, weight, bias and residual, with a random output gradient. The shapes pick each of
/// the CPU's paths: Winograd (3x3, 16+ channels, 24x24), the channel-blocked kernel (its
/// 14-wide row tiles, its 7-wide scattered tiles with a partial channel block, stride 2),
/// the direct kernel, the one-sample GEMM, the batched GEMM over small planes, depthwise.
fn conv2d_add_matches_conv2d_then_add(dev: Device) -> Result<()> {
    type Case = ([usize; 4], [usize; 4], usize, usize, usize);
    // (input, weight, stride, padding, groups)
    let cases: [Case; 8] = [
        ([1, 16, 24, 24], [16, 16, 3, 3], 1, 1, 1),
        ([1, 16, 14, 14], [32, 16, 3, 3], 1, 1, 1),
        ([2, 16, 12, 12], [40, 16, 3, 3], 1, 1, 1),
        ([1, 16, 28, 28], [32, 16, 3, 3], 2, 1, 1),
        ([2, 3, 9, 9], [4, 3, 3, 3], 1, 0, 1),
        ([1, 72, 6, 6], [8, 72, 3, 3], 1, 1, 1),
        ([3, 72, 2, 2], [8, 72, 3, 3], 1, 1, 1),
        ([2, 8, 7, 7], [8, 1, 3, 3], 1, 1, 8),
    ];
    for dt in [DType::F32, DType::F64] {
        for (xs, ws, s, p, groups) in cases {
            for (relu, bias) in [(true, true), (false, true), (true, false)] {
                let leaf = |sh: &[usize]| -> Result<Tensor> {
                    Ok(Tensor::randn(sh, dt)?.to_device(dev)?.with_requires_grad())
                };
                let (x, w, b) = (leaf(&xs)?, leaf(&ws)?, leaf(&[ws[0]])?);
                let bias = bias.then_some(&b);
                let plain = x.conv2d(&w, bias, [s, s], [p, p], [1, 1], groups)?;
                let r = leaf(plain.dims())?;
                let plain = plain.add(&r)?;
                let plain = if relu { plain.relu()? } else { plain };
                let fused = x.conv2d_add(&w, bias, &r, [s, s], [p, p], [1, 1], groups, relu)?;
                let gy = Tensor::randn(fused.dims(), dt)?.to_device(dev)?;
                let params = [&x, &w, &b, &r];
                let grads = |y: &Tensor| -> Result<Vec<Vec<f64>>> {
                    params.iter().for_each(|p| p.zero_grad());
                    y.mul(&gy)?.sum_all()?.backward()?;
                    Ok(params
                        .iter()
                        .map(|p| p.grad().map_or(vec![], |g| g.to_f64_vec()))
                        .collect())
                };
                let what = format!("{dt:?} {xs:?} {ws:?} stride {s} relu {relu} bias {bias:?}");
                let tol = if dt == DType::F64 { 1e-12 } else { 2e-5 };
                let (got, want) = (fused.to_f64_vec(), plain.to_f64_vec());
                assert_close(&got, &want, tol, &what);
                assert_eq!(relu, got.contains(&0.0), "{what}: the ReLU cuts some");
                let (gf, gp) = (grads(&fused)?, grads(&plain)?);
                for (name, (a, b)) in ["x", "w", "b", "r"].iter().zip(gf.iter().zip(&gp)) {
                    assert_close(a, b, tol, &format!("{what}: grad {name}"));
                }
            }
        }
    }
    Ok(())
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

/// Finite differences through input, weight, bias and residual (the inputs are random, so
/// no pre-activation sits within the probe step of the ReLU's kink).
fn gradcheck_conv2d_add(dev: Device) -> Result<()> {
    let randn = |s: &[usize]| -> Result<Tensor> { Tensor::randn(s, DType::F64)?.to_device(dev) };
    let inputs = [
        randn(&[2, 3, 6, 5])?,
        randn(&[4, 3, 3, 3])?,
        randn(&[4])?,
        randn(&[2, 4, 6, 5])?,
    ];
    for relu in [false, true] {
        gradcheck(
            |v| v[0].conv2d_add(&v[1], Some(&v[2]), &v[3], [1, 1], [1, 1], [1, 1], 1, relu),
            &inputs,
            GradCheck::default(),
        )?;
    }
    // stride 2, no bias: the output [2, 4, 2, 3]
    let r = randn(&[2, 4, 2, 3])?;
    gradcheck(
        |v| v[0].conv2d_add(&v[1], None, &v[2], [2, 2], [0, 1], [1, 1], 1, true),
        &[inputs[0].clone(), inputs[1].clone(), r],
        GradCheck::default(),
    )
}

/// A residual that is not the output's shape or dtype is an error naming the op and both.
fn conv2d_add_checks_the_residual(dev: Device) -> Result<()> {
    let x = Tensor::randn([1, 3, 8, 8], DType::F64)?.to_device(dev)?;
    let w = Tensor::randn([4, 3, 3, 3], DType::F64)?.to_device(dev)?;
    for (shape, dt) in [
        (vec![1, 4, 6, 7], DType::F64),
        (vec![4, 6, 6], DType::F64),
        (vec![1, 4, 6, 6], DType::F32),
    ] {
        let r = Tensor::zeros(shape.as_slice(), dt)?.to_device(dev)?;
        let e = x
            .conv2d_add(&w, None, &r, [1, 1], [0, 0], [1, 1], 1, true)
            .expect_err("a residual unlike the output");
        let msg = e.to_string();
        assert_eq!(e.kind, ErrorKind::Shape, "{msg}");
        assert!(
            msg.contains("conv2d_add") && msg.contains("[1, 4, 6, 6]"),
            "{msg}"
        );
    }
    Ok(())
}
