//! The image classifiers `might train` builds (MNIST / Fashion-MNIST / CIFAR-10), as plain
//! `nn::Sequential` stacks. Parameter names are those of the equivalent PyTorch
//! `nn.Sequential`, so checkpoints map one to one; they live here, not in the CLI, so that
//! anything that loads a `might train` checkpoint (the CLI, the browser demo) builds the same
//! network.

use crate::nn::{
    BatchNorm2d, Conv2d, Conv2dConfig, Dropout, Flatten, Linear, MaxPool2d, ReLU, Sequential,
};
use crate::Result;

/// `Flatten → Linear(in, hidden) → ReLU → Linear(hidden, classes)`: the classic MNIST MLP.
pub fn mlp(inputs: usize, hidden: usize, classes: usize) -> Result<Sequential> {
    Ok(Sequential::new()
        .add(Flatten::new())
        .add(Linear::new(inputs, hidden, true)?)
        .add(ReLU)
        .add(Linear::new(hidden, classes, true)?))
}

/// `a * b * c` for a layer's input size, or an error naming the layer where it overflows
/// (sizes can come from a checkpoint's metadata).
fn product(layer: &str, dims: &[usize]) -> Result<usize> {
    dims.iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| crate::Error::invalid(layer, format!("input size {dims:?} overflows")))
}

/// `Conv2d(cin, cout, 3, padding 1) → BatchNorm2d → ReLU` appended to `net`. The conv has no
/// bias: the BatchNorm that follows subtracts any per-channel offset anyway.
fn conv_bn_relu(net: Sequential, cin: usize, cout: usize) -> Result<Sequential> {
    let cfg = Conv2dConfig {
        padding: 1,
        bias: false,
        ..Default::default()
    };
    Ok(net
        .add(Conv2d::new(cin, cout, 3, cfg)?)
        .add(BatchNorm2d::new(cout)?)
        .add(ReLU))
}

/// The MNIST / Fashion-MNIST CNN: [conv3x3 → BN → ReLU → maxpool 2] with 32 then 64 channels,
/// then Dropout(0.25) → Linear(64·H/4·W/4, 128) → ReLU → Dropout(0.25) → Linear(128, classes).
/// About 420k parameters (mostly the first Linear), ~4 M multiply-adds per 28x28 image.
pub fn gray_cnn([c, h, w]: [usize; 3], classes: usize) -> Result<Sequential> {
    let net = conv_bn_relu(Sequential::new(), c, 32)?.add(MaxPool2d::new(2));
    let net = conv_bn_relu(net, 32, 64)?.add(MaxPool2d::new(2));
    Ok(net
        .add(Flatten::new())
        .add(Dropout::new(0.25))
        .add(Linear::new(
            product("Linear", &[64, h / 4, w / 4])?,
            128,
            true,
        )?)
        .add(ReLU)
        .add(Dropout::new(0.25))
        .add(Linear::new(128, classes, true)?))
}

/// Channels of the CIFAR CNN's conv layers and whether a 2x2 max pool follows each.
const RGB_PLAN: [(usize, bool); 4] = [(32, true), (64, true), (128, true), (256, false)];

/// The CIFAR-10 CNN (a small VGG sized for a CPU): [conv3x3 → BN → ReLU → maxpool 2] at 32, 64
/// and 128 channels, conv3x3 → BN → ReLU at 256 channels on the 4x4 map, then Flatten →
/// Dropout(0.25) → Linear(256·H/8·W/8, classes). About 430k parameters, ~15 M multiply-adds
/// per 32x32 image.
pub fn rgb_cnn([c, h, w]: [usize; 3], classes: usize) -> Result<Sequential> {
    let mut net = Sequential::new();
    let mut cin = c;
    for (cout, pool) in RGB_PLAN {
        net = conv_bn_relu(net, cin, cout)?;
        if pool {
            net = net.add(MaxPool2d::new(2));
        }
        cin = cout;
    }
    Ok(net
        .add(Flatten::new())
        .add(Dropout::new(0.25))
        .add(Linear::new(
            product("Linear", &[cin, h / 8, w / 8])?,
            classes,
            true,
        )?))
}

/// The benchmark's small CNN (`../shared/bench/cnn_mnist.py`): Conv2d(c, 8, 3) → ReLU →
/// MaxPool 2 → Conv2d(8, 16, 3) → ReLU → MaxPool 2 → Flatten → Linear(16·S·S, classes), where
/// S = ((H - 2) / 2 - 2) / 2 (5 on 28x28 inputs); ~5k parameters. Needs H, W >= 10.
pub fn small_cnn([c, h, w]: [usize; 3], classes: usize) -> Result<Sequential> {
    if h < 10 || w < 10 {
        return Err(crate::Error::invalid(
            "small_cnn",
            format!("needs images of at least 10x10, got {h}x{w}"),
        ));
    }
    let side = |n: usize| ((n - 2) / 2 - 2) / 2;
    let cfg = Conv2dConfig::default;
    Ok(Sequential::new()
        .add(Conv2d::new(c, 8, 3, cfg())?)
        .add(ReLU)
        .add(MaxPool2d::new(2))
        .add(Conv2d::new(8, 16, 3, cfg())?)
        .add(ReLU)
        .add(MaxPool2d::new(2))
        .add(Flatten::new())
        .add(Linear::new(
            product("Linear", &[16, side(h), side(w)])?,
            classes,
            true,
        )?))
}
