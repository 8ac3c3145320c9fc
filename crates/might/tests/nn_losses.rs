//! Losses of `might::nn::functional`: hand-computed values, gradient checks and the fused
//! cross-entropy kernel's gradient (`softmax - onehot`).

use might::autograd::{gradcheck, GradCheck};
use might::nn::functional::{
    binary_cross_entropy_with_logits, cross_entropy, huber_loss, l1_loss, mse_loss, nll_loss,
    CrossEntropyOptions, Reduction,
};
use might::{manual_seed, DType, Device, ErrorKind, Result, Tensor};

mod common;

device_tests!(
    ; f64:
    cross_entropy_hand_values,
    cross_entropy_backward_is_softmax_minus_onehot,
    cross_entropy_ignore_index_and_errors,
    cross_entropy_gradcheck_all_variants,
    cross_entropy_class_weights_values_and_gradcheck,
    cross_entropy_spatial_matches_flattened_rows,
    nll_loss_matches_cross_entropy_and_gradchecks,
    regression_losses_hand_values_and_gradcheck,
    bce_with_logits_is_stable_and_gradchecks,
);

fn t64(dev: Device, v: &[f64], s: &[usize]) -> Tensor {
    Tensor::from_slice(v, s).unwrap().to_device(dev).unwrap()
}

fn ids(dev: Device, v: &[i64], s: &[usize]) -> Tensor {
    Tensor::from_slice(v, s).unwrap().to_device(dev).unwrap()
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

fn opts(ls: f64, reduction: Reduction) -> CrossEntropyOptions {
    CrossEntropyOptions {
        label_smoothing: ls,
        reduction,
        ..Default::default()
    }
}

fn lse(r: &[f64]) -> f64 {
    let m = r.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    m + r.iter().map(|v| (v - m).exp()).sum::<f64>().ln()
}

fn cross_entropy_hand_values(dev: Device) -> Result<()> {
    let x = [1., 2., 3., 0.5, -1., 2.];
    let logits = t64(dev, &x, &[2, 3]);
    let t = ids(dev, &[2, 0], &[2]);
    let l0 = lse(&x[..3]) - 3.0;
    let l1 = lse(&x[3..]) - 0.5;
    let none = cross_entropy(&logits, &t, &opts(0.0, Reduction::None))?;
    assert_eq!(none.dims(), &[2]);
    close(&none.to_vec::<f64>()?, &[l0, l1], 1e-12);
    let mean = cross_entropy(&logits, &t, &CrossEntropyOptions::default())?;
    close(&[mean.item()?], &[(l0 + l1) / 2.0], 1e-12);
    let sum = cross_entropy(&logits, &t, &opts(0.0, Reduction::Sum))?;
    close(&[sum.item()?], &[l0 + l1], 1e-12);
    // label smoothing 0.3: (1 - 0.3)·nll + 0.3·mean_c(lse - x_c)
    let s0 = 0.7 * l0 + 0.3 * (lse(&x[..3]) - 2.0);
    let sm = cross_entropy(&logits, &t, &opts(0.3, Reduction::None))?;
    close(&sm.to_vec::<f64>()?[..1], &[s0], 1e-12);
    // f32 logits: same numbers within f32 precision, result stays f32
    let l32 = cross_entropy(
        &logits.to_dtype(DType::F32)?,
        &t,
        &CrossEntropyOptions::default(),
    )?;
    assert_eq!(l32.dtype(), DType::F32);
    close(&[l32.item()?], &[(l0 + l1) / 2.0], 1e-6);
    // unbatched [C] logits with a 0-d target
    let u = cross_entropy(
        &t64(dev, &x[..3], &[3]),
        &Tensor::scalar(2i64).to_device(dev).unwrap(),
        &opts(0.0, Reduction::Mean),
    )?;
    close(&[u.item()?], &[l0], 1e-12);
    Ok(())
}

fn cross_entropy_backward_is_softmax_minus_onehot(dev: Device) -> Result<()> {
    let x = [1., 2., 3., 0.5, -1., 2.];
    let logits = t64(dev, &x, &[2, 3]).with_requires_grad();
    let t = ids(dev, &[2, 0], &[2]);
    let loss = cross_entropy(&logits, &t, &CrossEntropyOptions::default())?;
    if dev == Device::Cpu {
        // the fused kernel (a backend without it composes the loss: same gradient below)
        assert_eq!(loss.grad_fn(), Some("CrossEntropyBackward"));
    }
    loss.backward()?;
    let g = logits.grad().unwrap().to_vec::<f64>()?;
    let mut want = vec![];
    for (r, &k) in [2usize, 0].iter().enumerate() {
        let row = &x[r * 3..r * 3 + 3];
        let l = lse(row);
        for (j, &v) in row.iter().enumerate() {
            let oh = if j == k { 1.0 } else { 0.0 };
            want.push(((v - l).exp() - oh) / 2.0);
        }
    }
    close(&g, &want, 1e-12);
    Ok(())
}

fn cross_entropy_ignore_index_and_errors(dev: Device) -> Result<()> {
    let x = [1., 2., 3., 0.5, -1., 2., 0., 0., 1.];
    let logits = t64(dev, &x, &[3, 3]).with_requires_grad();
    let t = ids(dev, &[2, -100, 1], &[3]);
    let loss = cross_entropy(&logits, &t, &CrossEntropyOptions::default())?;
    let want = ((lse(&x[..3]) - 3.0) + (lse(&x[6..]) - 0.0)) / 2.0;
    close(&[loss.item()?], &[want], 1e-12);
    loss.backward()?;
    let g = logits.grad().unwrap().to_vec::<f64>()?;
    assert_eq!(&g[3..6], &[0.0, 0.0, 0.0], "ignored row gets no gradient");
    let none = cross_entropy(&logits, &t, &opts(0.0, Reduction::None))?;
    assert_eq!(none.to_vec::<f64>()?[1], 0.0);
    // custom ignore index
    let o = CrossEntropyOptions {
        ignore_index: 2,
        ..Default::default()
    };
    let l = cross_entropy(&logits, &ids(dev, &[2, 2, 1], &[3]), &o)?;
    close(&[l.item()?], &[lse(&x[6..])], 1e-12);
    // all ignored: mean is 0/0 = NaN, as in PyTorch
    let l = cross_entropy(
        &logits,
        &ids(dev, &[-100; 3], &[3]),
        &CrossEntropyOptions::default(),
    )?;
    assert!(l.item()?.is_nan());
    let e = cross_entropy(
        &logits,
        &ids(dev, &[3, 0, 0], &[3]),
        &CrossEntropyOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Index);
    assert!(e.to_string().contains("target 3"), "{e}");
    let e = cross_entropy(
        &logits,
        &ids(dev, &[0, 0], &[2]),
        &CrossEntropyOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Shape);
    let e = cross_entropy(
        &logits,
        &Tensor::zeros([3], DType::U8)?.to_device(dev)?,
        &CrossEntropyOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::DType);
    Ok(())
}

fn cross_entropy_gradcheck_all_variants(dev: Device) -> Result<()> {
    manual_seed(1);
    let gc = GradCheck::default();
    let x = Tensor::randn([4, 5], DType::F64)?.to_device(dev)?;
    let t = ids(dev, &[4, -100, 0, 2], &[4]);
    for r in [Reduction::Mean, Reduction::Sum, Reduction::None] {
        for ls in [0.0, 0.2] {
            gradcheck(
                |i| cross_entropy(&i[0], &t, &opts(ls, r)),
                std::slice::from_ref(&x),
                gc,
            )?;
        }
    }
    // [N, C, d1, d2] layout: class dim 1
    let x4 = Tensor::randn([2, 3, 2, 2], DType::F64)?.to_device(dev)?;
    let t4 = ids(dev, &[0, 1, 2, 1, 2, 2, 0, -100], &[2, 2, 2]);
    for r in [Reduction::Mean, Reduction::None] {
        gradcheck(
            |i| cross_entropy(&i[0], &t4, &opts(0.1, r)),
            std::slice::from_ref(&x4),
            gc,
        )?;
    }
    // probability targets: gradient w.r.t. logits and target
    let p = Tensor::rand([3, 4], DType::F64)?.to_device(dev)?;
    let xs = Tensor::randn([3, 4], DType::F64)?.to_device(dev)?;
    for r in [Reduction::Mean, Reduction::None] {
        gradcheck(
            |i| cross_entropy(&i[0], &i[1], &opts(0.25, r)),
            &[xs.clone(), p.clone()],
            gc,
        )?;
    }
    Ok(())
}

fn cross_entropy_class_weights_values_and_gradcheck(dev: Device) -> Result<()> {
    let x = [1., 2., 3., 0.5, -1., 2., 0., 0., 1.];
    let logits = t64(dev, &x, &[3, 3]);
    let t = ids(dev, &[2, -100, 0], &[3]);
    let w = t64(dev, &[0.5, 1.0, 2.0], &[3]);
    let o = CrossEntropyOptions {
        weight: Some(w.clone()),
        ..Default::default()
    };
    // weighted mean: Σ w_y·nll / Σ w_y over the non-ignored rows
    let l0 = lse(&x[..3]) - 3.0;
    let l2 = lse(&x[6..]) - 0.0;
    let want = (2.0 * l0 + 0.5 * l2) / 2.5;
    close(&[cross_entropy(&logits, &t, &o)?.item()?], &[want], 1e-12);
    let bad = CrossEntropyOptions {
        weight: Some(t64(dev, &[1., 1.], &[2])),
        ..Default::default()
    };
    assert_eq!(
        cross_entropy(&logits, &t, &bad).unwrap_err().kind,
        ErrorKind::Shape
    );
    let gc = GradCheck::default();
    for r in [Reduction::Mean, Reduction::Sum, Reduction::None] {
        let o = CrossEntropyOptions {
            weight: Some(w.clone()),
            label_smoothing: 0.2,
            reduction: r,
            ..Default::default()
        };
        gradcheck(
            |i| cross_entropy(&i[0], &t, &o),
            std::slice::from_ref(&logits),
            gc,
        )?;
        let p = Tensor::rand([3, 3], DType::F64)?.to_device(dev)?;
        gradcheck(
            |i| cross_entropy(&i[0], &i[1], &o),
            &[logits.clone(), p],
            gc,
        )?;
    }
    Ok(())
}

fn cross_entropy_spatial_matches_flattened_rows(dev: Device) -> Result<()> {
    manual_seed(2);
    let x = Tensor::randn([2, 3, 4], DType::F64)?.to_device(dev)?;
    let t = Tensor::rand_int(0, 3, [2, 4])?.to_device(dev)?;
    let a = cross_entropy(&x, &t, &opts(0.0, Reduction::None))?;
    assert_eq!(a.dims(), &[2, 4]);
    let rows = x.transpose(1, 2)?.reshape([8, 3])?;
    let b = cross_entropy(&rows, &t.reshape([8])?, &opts(0.0, Reduction::None))?;
    close(&a.to_vec::<f64>()?, &b.to_vec::<f64>()?, 1e-12);
    // a probability target equal to the one-hot gives the index loss
    let oh = t.reshape([8])?.one_hot(3)?.to_dtype(DType::F64)?;
    let c = cross_entropy(&rows, &oh, &opts(0.1, Reduction::None))?;
    let d = cross_entropy(&rows, &t.reshape([8])?, &opts(0.1, Reduction::None))?;
    close(&c.to_vec::<f64>()?, &d.to_vec::<f64>()?, 1e-12);
    Ok(())
}

fn nll_loss_matches_cross_entropy_and_gradchecks(dev: Device) -> Result<()> {
    manual_seed(3);
    let x = Tensor::randn([4, 3], DType::F64)?.to_device(dev)?;
    let t = ids(dev, &[0, 2, -100, 1], &[4]);
    let a = nll_loss(&x.log_softmax(1)?, &t, Reduction::Mean, -100)?;
    let b = cross_entropy(&x, &t, &CrossEntropyOptions::default())?;
    close(&[a.item()?], &[b.item()?], 1e-12);
    let v = nll_loss(
        &t64(dev, &[-1., -2., -3., -4.], &[2, 2]),
        &ids(dev, &[1, 0], &[2]),
        Reduction::None,
        -100,
    )?;
    assert_eq!(v.to_vec::<f64>()?, vec![2., 3.]);
    let gc = GradCheck::default();
    for r in [Reduction::Mean, Reduction::Sum, Reduction::None] {
        gradcheck(
            |i| nll_loss(&i[0], &t, r, -100),
            std::slice::from_ref(&x),
            gc,
        )?;
    }
    assert_eq!(
        nll_loss(&x, &ids(dev, &[0, 3, 0, 0], &[4]), Reduction::Mean, -100)
            .unwrap_err()
            .kind,
        ErrorKind::Index
    );
    Ok(())
}

fn regression_losses_hand_values_and_gradcheck(dev: Device) -> Result<()> {
    let a = t64(dev, &[1., 2., 3., -1.], &[2, 2]);
    let b = t64(dev, &[0., 2., 5., 0.5], &[2, 2]);
    // d = [1, 0, -2, -1.5]
    close(
        &[mse_loss(&a, &b, Reduction::Mean)?.item()?],
        &[(1. + 4. + 2.25) / 4.],
        1e-12,
    );
    close(&[l1_loss(&a, &b, Reduction::Sum)?.item()?], &[4.5], 1e-12);
    let h = huber_loss(&a, &b, 1.0, Reduction::None)?.to_vec::<f64>()?;
    close(&h, &[0.5, 0.0, 1.5, 1.0], 1e-12);
    let h = huber_loss(&a, &b, 2.0, Reduction::None)?.to_vec::<f64>()?;
    close(&h, &[0.5, 0.0, 2.0, 1.125], 1e-12);
    assert!(huber_loss(&a, &b, 0.0, Reduction::Mean).is_err());
    assert_eq!(
        mse_loss(&a, &t64(dev, &[1., 2.], &[2]), Reduction::Mean)
            .unwrap_err()
            .kind,
        ErrorKind::Shape
    );
    manual_seed(4);
    let x = Tensor::randn([3, 4], DType::F64)?.to_device(dev)?;
    let y = Tensor::randn([3, 4], DType::F64)?.to_device(dev)?;
    let gc = GradCheck::default();
    for r in [Reduction::Mean, Reduction::Sum, Reduction::None] {
        gradcheck(|i| mse_loss(&i[0], &i[1], r), &[x.clone(), y.clone()], gc)?;
        gradcheck(|i| l1_loss(&i[0], &i[1], r), &[x.clone(), y.clone()], gc)?;
        gradcheck(
            |i| huber_loss(&i[0], &i[1], 0.8, r),
            &[x.clone(), y.clone()],
            gc,
        )?;
    }
    Ok(())
}

fn bce_with_logits_is_stable_and_gradchecks(dev: Device) -> Result<()> {
    let x = t64(dev, &[0., 100., -100., 2.], &[4]);
    let y = t64(dev, &[1., 0., 0., 0.25], &[4]);
    let l = binary_cross_entropy_with_logits(&x, &y, Reduction::None)?.to_vec::<f64>()?;
    let want4 = 0.25 * (1.0 + (-2.0f64).exp()).ln() + 0.75 * (1.0 + 2.0f64.exp()).ln();
    close(&l, &[2f64.ln(), 100.0, 0.0, want4], 1e-12);
    let l32 = binary_cross_entropy_with_logits(
        &x.to_dtype(DType::F32)?,
        &y.to_dtype(DType::F32)?,
        Reduction::Sum,
    )?;
    assert!(l32.item()?.is_finite());
    manual_seed(5);
    let x = Tensor::randn([3, 4], DType::F64)?
        .to_device(dev)?
        .mul_scalar(3.0)?;
    let y = Tensor::rand([3, 4], DType::F64)?.to_device(dev)?;
    for r in [Reduction::Mean, Reduction::None] {
        gradcheck(
            |i| binary_cross_entropy_with_logits(&i[0], &i[1], r),
            &[x.clone(), y.clone()],
            GradCheck::default(),
        )?;
    }
    // gradient at 0 is sigmoid(0) - y exactly (no kink from |x|)
    let z = t64(dev, &[0.0], &[1]).with_requires_grad();
    binary_cross_entropy_with_logits(&z, &t64(dev, &[1.0], &[1]), Reduction::Sum)?.backward()?;
    assert_eq!(z.grad().unwrap().to_vec::<f64>()?, vec![-0.5]);
    Ok(())
}
