//! Convolution and pooling layers of `might::nn`: construction, naming, init bounds, and
//! gradient checks through the layer structs (input and parameters, in f64).

use might::autograd::{gradcheck, GradCheck};
use might::nn::{
    AdaptiveAvgPool2d, AvgPool2d, Conv1d, Conv1dConfig, Conv2d, Conv2dConfig, Flatten, Linear,
    MaxPool2d, Module, ReLU, Sequential,
};
use might::{manual_seed, DType, Result, Tensor};

#[test]
fn conv2d_layer_shapes_init_and_names() -> Result<()> {
    manual_seed(1);
    let c = Conv2d::new(
        3,
        8,
        3,
        Conv2dConfig {
            padding: 1,
            ..Default::default()
        },
    )?;
    assert_eq!(c.weight.dims(), &[8, 3, 3, 3]);
    let bound = 1.0 / 27f64.sqrt();
    assert!(c.weight.to_f64_vec().iter().all(|v| v.abs() <= bound));
    assert!(c
        .bias
        .as_ref()
        .unwrap()
        .to_f64_vec()
        .iter()
        .all(|v| v.abs() <= bound));
    let y = c.forward(&Tensor::randn([2, 3, 5, 5], DType::F32)?)?;
    assert_eq!(y.dims(), &[2, 8, 5, 5]);
    let g = Conv2d::new(
        4,
        6,
        2,
        Conv2dConfig {
            groups: 2,
            bias: false,
            ..Default::default()
        },
    )?;
    assert_eq!(g.weight.dims(), &[6, 2, 2, 2]);
    assert_eq!(g.named_parameters().len(), 1);
    assert!(Conv2d::new(
        3,
        4,
        3,
        Conv2dConfig {
            groups: 2,
            ..Default::default()
        }
    )
    .is_err());
    let net = Sequential::new()
        .add(c)
        .add(ReLU)
        .add(MaxPool2d::new(2))
        .add(Flatten::new())
        .add(Linear::new(8 * 2 * 2, 10, true).unwrap());
    let names: Vec<String> = net.named_parameters().into_iter().map(|p| p.0).collect();
    assert_eq!(names, ["0.weight", "0.bias", "4.weight", "4.bias"]);
    assert_eq!(
        net.forward(&Tensor::randn([1, 3, 5, 5], DType::F32)?)?
            .dims(),
        &[1, 10]
    );
    Ok(())
}

#[test]
fn conv_layers_gradcheck_input_and_params() -> Result<()> {
    manual_seed(2);
    let gc = GradCheck::default();
    let x = Tensor::randn([2, 4, 5, 4], DType::F64)?;
    let w = Tensor::randn([6, 2, 2, 3], DType::F64)?;
    let b = Tensor::randn([6], DType::F64)?;
    gradcheck(
        |i| {
            Conv2d::from_weights(i[1].clone(), Some(i[2].clone()), [2, 1], [1, 0], [1, 1], 2)?
                .forward(&i[0])
        },
        &[x, w, b],
        gc,
    )?;
    let x1 = Tensor::randn([2, 3, 7], DType::F64)?;
    let w1 = Tensor::randn([2, 3, 3], DType::F64)?;
    let b1 = Tensor::randn([2], DType::F64)?;
    let cfg = Conv1dConfig {
        stride: 2,
        padding: 1,
        dilation: 1,
        groups: 1,
        bias: true,
    };
    gradcheck(
        |i| Conv1d::from_weights(i[1].clone(), Some(i[2].clone()), cfg)?.forward(&i[0]),
        &[x1, w1, b1],
        gc,
    )
}

#[test]
fn pooling_layers_values_and_gradcheck() -> Result<()> {
    let x = Tensor::arange(0.0, 16.0, 1.0, DType::F64)?.reshape([1, 1, 4, 4])?;
    let m = MaxPool2d::new(2).forward(&x)?;
    assert_eq!(m.to_vec::<f64>()?, vec![5., 7., 13., 15.]);
    let a = AvgPool2d::new(2).forward(&x)?;
    assert_eq!(a.to_vec::<f64>()?, vec![2.5, 4.5, 10.5, 12.5]);
    let g = AdaptiveAvgPool2d::new([1, 1]).forward(&x)?;
    assert_eq!(g.to_vec::<f64>()?, vec![7.5]);
    manual_seed(3);
    let x = Tensor::randn([2, 2, 5, 5], DType::F64)?;
    let gc = GradCheck::default();
    gradcheck(
        |i| MaxPool2d::with_config(3, 2, 1).forward(&i[0]),
        std::slice::from_ref(&x),
        gc,
    )?;
    gradcheck(
        |i| AvgPool2d::with_config(3, 2, 1).forward(&i[0]),
        std::slice::from_ref(&x),
        gc,
    )?;
    gradcheck(|i| AdaptiveAvgPool2d::new([2, 3]).forward(&i[0]), &[x], gc)
}
