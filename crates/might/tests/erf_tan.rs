//! `erf` and `tan`, the unary ops the ONNX runner needed: values by hand (Abramowitz & Stegun
//! tables), gradients by finite differences, on every device.

use might::autograd::{gradcheck, GradCheck};
use might::{DType, Device, Result, Tensor};

mod common;

device_tests!(
    erf_and_tan_by_hand,
    ; f64:
    gradcheck_erf_and_tan,
);

fn erf_and_tan_by_hand(dev: Device) -> Result<()> {
    let x = Tensor::from_vec(vec![0f32, 0.5, -1.0, 2.0, 1e-3, -4.0], [6])?.to_device(dev)?;
    let want = [
        0.0,
        0.520_499_9,
        -0.842_700_8,
        0.995_322_3,
        1.128_379e-3,
        -0.999_999_98,
    ];
    for (a, b) in x.erf()?.to_vec::<f32>()?.iter().zip(want) {
        assert!(
            (*a as f64 - b).abs() <= 2e-7 + 2e-6 * b.abs(),
            "erf: {a} vs {b}"
        );
    }
    let want = [
        0.0,
        0.546_302_5,
        -1.557_407_7,
        -2.185_039_9,
        1.000_000_3e-3,
        -1.157_821_3,
    ];
    for (a, b) in x.tan()?.to_vec::<f32>()?.iter().zip(want) {
        assert!(
            (*a as f64 - b).abs() <= 1e-6 * (1.0 + b.abs()),
            "tan: {a} vs {b}"
        );
    }
    Ok(())
}

fn gradcheck_erf_and_tan(dev: Device) -> Result<()> {
    let x = Tensor::from_vec(vec![-2.5, -0.7, -1e-3, 0.0, 0.3, 1.1, 2.2], [7])?.to_device(dev)?;
    gradcheck(
        |v| v[0].erf(),
        std::slice::from_ref(&x),
        GradCheck::default(),
    )?;
    let x = x.mul_scalar(0.5)?;
    gradcheck(
        |v| v[0].tan(),
        &[x.to_dtype(DType::F64)?],
        GradCheck::default(),
    )?;
    Ok(())
}
