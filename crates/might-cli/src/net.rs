//! The models the CLI trains. Until `might::nn` lands they are built from core ops; the
//! `Net` trait mirrors `might::nn::Module` so either can stand behind it.

use might::nn::{prefixed, BatchNorm2d, Module};
use might::{DType, Result, Tensor};

/// A trainable model (same shape as `might::nn::Module`).
pub trait Net: Send + Sync {
    fn forward(&self, x: &Tensor) -> Result<Tensor>;
    fn named_parameters(&self) -> Vec<(String, Tensor)>;
    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        vec![]
    }
    fn train(&mut self, _mode: bool) {}
    fn parameters(&self) -> Vec<Tensor> {
        self.named_parameters()
            .into_iter()
            .map(|(_, t)| t)
            .collect()
    }
    fn num_parameters(&self) -> usize {
        self.parameters().iter().map(|t| t.numel()).sum()
    }
    fn state_dict(&self) -> Vec<(String, Tensor)> {
        let mut s = self.named_parameters();
        s.extend(self.named_buffers());
        s
    }
}

/// A fully connected layer with PyTorch's default init: weight and bias uniform in
/// `±1/sqrt(fan_in)`.
pub struct Dense {
    pub weight: Tensor,
    pub bias: Tensor,
}

impl Dense {
    pub fn new(fan_in: usize, fan_out: usize) -> Result<Dense> {
        let b = 1.0 / (fan_in as f64).sqrt();
        Ok(Dense {
            weight: Tensor::uniform([fan_out, fan_in], -b, b, DType::F32)?.with_requires_grad(),
            bias: Tensor::uniform([fan_out], -b, b, DType::F32)?.with_requires_grad(),
        })
    }
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.matmul(&self.weight.t()?)?.add(&self.bias)
    }
}

/// `flatten → Linear(in, hidden) → ReLU → Linear(hidden, classes)`; parameter names match a
/// PyTorch `nn.Sequential(Flatten, Linear, ReLU, Linear)`.
pub struct Mlp {
    fc1: Dense,
    fc2: Dense,
}

impl Mlp {
    pub fn new(inputs: usize, hidden: usize, classes: usize) -> Result<Mlp> {
        Ok(Mlp {
            fc1: Dense::new(inputs, hidden)?,
            fc2: Dense::new(hidden, classes)?,
        })
    }
}

impl Net for Mlp {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = x.reshape([x.dims()[0], self.fc1.weight.dims()[1]])?;
        self.fc2.forward(&self.fc1.forward(&x)?.relu()?)
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        vec![
            ("1.weight".into(), self.fc1.weight.clone()),
            ("1.bias".into(), self.fc1.bias.clone()),
            ("3.weight".into(), self.fc2.weight.clone()),
            ("3.bias".into(), self.fc2.bias.clone()),
        ]
    }
}

/// Mean cross-entropy of `logits [b, c]` against class ids `targets [b]` (i64), and the number
/// of correct argmax predictions.
pub fn cross_entropy(logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
    logits
        .log_softmax(-1)?
        .gather(1, &targets.unsqueeze(1)?)?
        .mean_all()?
        .neg()
}

/// Number of rows of `logits` whose argmax equals the target.
pub fn correct(logits: &Tensor, targets: &Tensor) -> Result<usize> {
    let pred = logits.argmax(-1, false)?.to_vec::<i64>()?;
    let t = targets.to_vec::<i64>()?;
    Ok(pred.iter().zip(&t).filter(|(a, b)| a == b).count())
}

/// A 3x3 convolution, stride 1, padding 1, with PyTorch's default init (uniform
/// `±1/sqrt(c_in·9)` for weight and bias).
pub struct Conv3x3 {
    pub weight: Tensor,
    pub bias: Tensor,
}

impl Conv3x3 {
    pub fn new(c_in: usize, c_out: usize) -> Result<Conv3x3> {
        let b = 1.0 / ((c_in * 9) as f64).sqrt();
        Ok(Conv3x3 {
            weight: Tensor::uniform([c_out, c_in, 3, 3], -b, b, DType::F32)?.with_requires_grad(),
            bias: Tensor::uniform([c_out], -b, b, DType::F32)?.with_requires_grad(),
        })
    }
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.conv2d(&self.weight, Some(&self.bias), [1, 1], [1, 1], [1, 1], 1)
    }
    fn named(&self, prefix: &str) -> Vec<(String, Tensor)> {
        vec![
            (format!("{prefix}.weight"), self.weight.clone()),
            (format!("{prefix}.bias"), self.bias.clone()),
        ]
    }
}

fn pool2(x: &Tensor) -> Result<Tensor> {
    x.max_pool2d([2, 2], [2, 2], [0, 0])
}

/// The MNIST CNN: two conv(3x3, pad 1) → ReLU → maxpool(2) stages (32 and 64 channels),
/// then Linear(64·H/4·W/4, 128) → ReLU → Linear(128, classes).
pub struct SmallCnn {
    conv1: Conv3x3,
    conv2: Conv3x3,
    fc1: Dense,
    fc2: Dense,
}

impl SmallCnn {
    pub fn new([c, h, w]: [usize; 3], classes: usize) -> Result<SmallCnn> {
        Ok(SmallCnn {
            conv1: Conv3x3::new(c, 32)?,
            conv2: Conv3x3::new(32, 64)?,
            fc1: Dense::new(64 * (h / 4) * (w / 4), 128)?,
            fc2: Dense::new(128, classes)?,
        })
    }
}

impl Net for SmallCnn {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = pool2(&self.conv1.forward(x)?.relu()?)?;
        let x = pool2(&self.conv2.forward(&x)?.relu()?)?;
        let x = x.flatten(1, -1)?;
        self.fc2.forward(&self.fc1.forward(&x)?.relu()?)
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        let mut v = self.conv1.named("conv1");
        v.extend(self.conv2.named("conv2"));
        v.push(("fc1.weight".into(), self.fc1.weight.clone()));
        v.push(("fc1.bias".into(), self.fc1.bias.clone()));
        v.push(("fc2.weight".into(), self.fc2.weight.clone()));
        v.push(("fc2.bias".into(), self.fc2.bias.clone()));
        v
    }
}

/// The CIFAR CNN: [conv → BatchNorm → ReLU] ×2 → pool (32 ch), ×2 → pool (64 ch),
/// ×1 → pool (128 ch), then Linear(128·H/8·W/8, classes). About 160k parameters.
pub struct BnCnn {
    convs: Vec<(Conv3x3, BatchNorm2d)>,
    fc: Dense,
}

const BN_PLAN: [(usize, bool); 5] = [
    (32, false),
    (32, true),
    (64, false),
    (64, true),
    (128, true),
];

impl BnCnn {
    pub fn new([c, h, w]: [usize; 3], classes: usize) -> Result<BnCnn> {
        let mut convs = Vec::new();
        let mut cin = c;
        for (cout, _) in BN_PLAN {
            convs.push((Conv3x3::new(cin, cout)?, BatchNorm2d::new(cout)));
            cin = cout;
        }
        Ok(BnCnn {
            convs,
            fc: Dense::new(cin * (h / 8) * (w / 8), classes)?,
        })
    }
}

impl Net for BnCnn {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut x = x.clone();
        for ((conv, bn), (_, pool)) in self.convs.iter().zip(BN_PLAN) {
            x = bn.forward(&conv.forward(&x)?)?.relu()?;
            if pool {
                x = pool2(&x)?;
            }
        }
        self.fc.forward(&x.flatten(1, -1)?)
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        let mut v = Vec::new();
        for (i, (conv, bn)) in self.convs.iter().enumerate() {
            v.extend(conv.named(&format!("conv{}", i + 1)));
            v.extend(prefixed(&format!("bn{}", i + 1), bn.named_parameters()));
        }
        v.push(("fc.weight".into(), self.fc.weight.clone()));
        v.push(("fc.bias".into(), self.fc.bias.clone()));
        v
    }
    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        let mut v = Vec::new();
        for (i, (_, bn)) in self.convs.iter().enumerate() {
            v.extend(prefixed(&format!("bn{}", i + 1), bn.named_buffers()));
        }
        v
    }
    fn train(&mut self, mode: bool) {
        for (_, bn) in &mut self.convs {
            Module::train(bn, mode);
        }
    }
}

/// The convolutional model for a dataset: the plain CNN for 1-channel inputs (MNIST,
/// Fashion-MNIST), the BatchNorm CNN for RGB (CIFAR-10).
pub fn cnn(
    chw: [usize; 3],
    classes: usize,
) -> std::result::Result<Box<dyn Net>, crate::train::CliError> {
    let min = if chw[0] == 1 { 4 } else { 8 };
    if chw[1] < min || chw[2] < min {
        return Err(crate::train::CliError(format!(
            "model cnn needs images of at least {min}x{min}, got {chw:?}"
        )));
    }
    Ok(if chw[0] == 1 {
        Box::new(SmallCnn::new(chw, classes)?)
    } else {
        Box::new(BnCnn::new(chw, classes)?)
    })
}
